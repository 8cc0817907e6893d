//! Embedding texts: length-sorted batches, one forward pass per batch to the deepest requested
//! layer, pooled vectors back in input order.

use nest_core::output::Matrix;
use nest_core::ElasticSpec;
use tch::{Device, Kind, Tensor};

use super::{ElasticEncoder, EncodeOptions};
use crate::pooling::to_vec_f32;
use crate::{Error, Result};

impl ElasticEncoder {
    /// Tokenises `texts` and returns, for each requested layer, the pooled (through the Dense
    /// head if any, not normalised) vectors of every text in input order, with the model's
    /// default prompt if it names one ([`Self::embed_prompted`] chooses another). The forward
    /// pass runs once per batch, to the deepest requested layer; batches are formed from
    /// length-sorted texts to cut padding.
    ///
    /// `progress` is called with the number of texts done after each batch.
    ///
    /// # Shapes
    /// - returns `layers.len()` CPU float tensors `[texts.len(), output_dim]`
    pub fn embed_layers(
        &self,
        texts: &[&str],
        layers: &[usize],
        opts: EncodeOptions,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Tensor>> {
        let prompt = self.prompts.default_prompt().map(str::to_string);
        self.embed_prompted(texts, layers, opts, prompt.as_deref(), progress)
    }

    /// [`Self::embed_layers`] with `prompt` (or none) prepended to every text, as
    /// sentence-transformers' `encode(prompt=...)`: when the pooling leaves the prompt out
    /// (`include_prompt = false`), its tokens (the prompt's own tokenisation less its final
    /// special token, sentence-transformers' `prompt_length`) are masked out of the pooling.
    ///
    /// # Shapes
    /// - returns `layers.len()` CPU float tensors `[texts.len(), output_dim]`
    pub fn embed_prompted(
        &self,
        texts: &[&str],
        layers: &[usize],
        opts: EncodeOptions,
        prompt: Option<&str>,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Tensor>> {
        let prompted: Vec<String>;
        let (texts, skip) = match prompt.filter(|p| !p.is_empty()) {
            Some(p) => {
                prompted = texts.iter().map(|t| format!("{p}{t}")).collect();
                let skip = match self.include_prompt {
                    true => 0,
                    false => self.tokenizer.encode(&[p])?[0].len().saturating_sub(1),
                };
                (
                    prompted.iter().map(String::as_str).collect::<Vec<_>>(),
                    skip,
                )
            }
            None => (texts.to_vec(), 0),
        };
        self.embed_tokens(&texts, layers, opts, skip, progress)
    }

    fn embed_tokens(
        &self,
        texts: &[&str],
        layers: &[usize],
        opts: EncodeOptions,
        skip: usize,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<Tensor>> {
        self.check(layers, &[])?;
        if texts.is_empty() {
            return Err(Error::Core(nest_core::Error::value(
                "input",
                "no texts to encode",
            )));
        }
        let deepest = layers.iter().copied().max().unwrap_or(self.num_layers());
        let ids = self.tokenizer.encode(texts)?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let bs = opts.batch_size.max(1);
        let mut per_layer: Vec<Vec<Tensor>> = (0..layers.len()).map(|_| Vec::new()).collect();
        let _guard = tch::no_grad_guard();
        let mut done = 0;
        for chunk in order.chunks(bs) {
            let seqs: Vec<&[i64]> = chunk.iter().map(|&i| ids[i].as_slice()).collect();
            let input = self.make_input(&seqs);
            let out = self.forward(&input, deepest, false);
            let pool_mask = match skip {
                0 => input.mask.shallow_clone(),
                k => {
                    let m = input.mask.copy();
                    let _ = m.narrow(1, 0, (k as i64).min(m.size()[1])).fill_(0);
                    m
                }
            };
            for (k, &l) in layers.iter().enumerate() {
                let pooled = self.embed_pooled(&out.hidden_states[l], &pool_mask);
                per_layer[k].push(pooled.to_device(Device::Cpu).to_kind(Kind::Float));
            }
            done += chunk.len();
            progress(done);
        }
        // undo the length sort
        let inverse = {
            let mut inv = vec![0i64; order.len()];
            for (pos, &i) in order.iter().enumerate() {
                inv[i] = pos as i64;
            }
            Tensor::from_slice(&inv)
        };
        Ok(per_layer
            .into_iter()
            .map(|parts| Tensor::cat(&parts, 0).index_select(0, &inverse))
            .collect())
    }

    /// Embeds `texts` at one operating point: `spec.layer` layers, the first `spec.dim`
    /// coordinates, L2-normalised.
    pub fn embed(
        &self,
        texts: &[&str],
        spec: ElasticSpec,
        opts: EncodeOptions,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Matrix> {
        self.check(&[spec.layer], &[spec.dim])?;
        let pooled = self.embed_layers(texts, &[spec.layer], opts, progress)?;
        let e = crate::point::finish(&pooled[0], spec.dim, None)?;
        Ok(Matrix {
            rows: texts.len(),
            dim: spec.dim,
            data: to_vec_f32(&e),
        })
    }
}
