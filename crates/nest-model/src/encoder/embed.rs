//! Embedding texts: length-sorted batches, one forward pass per batch to the deepest requested
//! layer, pooled vectors back in input order.
//!
//! On a GPU the host must keep ahead of the device: nothing in a batch's eager pass waits for
//! the device (the packing comes from the host's lengths, inputs go up through pinned memory
//! without waiting), the vectors stay on the device until many batches' worth pile up
//! ([`Collected`], with the uploads in `transfer.rs`), with [`GraphMode`](super::GraphMode) a
//! batch is one replay of a recorded pass ([`super::graphed`]), and the next block of texts is
//! tokenised on a worker thread meanwhile ([`EncodeOptions::tokenize_ahead`]).

use nest_core::output::Matrix;
use nest_core::ElasticSpec;
use tch::{Device, Kind, Tensor};

use super::phases::{timed, Phase};
use super::transfer::{pack_batch, unpack_batch, upload, Collected, Extras, Unpacked};
use super::{ElasticEncoder, EncodeOptions};
use crate::pooling::to_vec_f32;
use crate::{Error, Result};

/// What every batch of one [`ElasticEncoder::embed_layers`] call computes.
pub(super) struct BatchJob<'a> {
    pub(super) layers: &'a [usize],
    pub(super) deepest: usize,
    /// Leading tokens left out of the pooling (a prompt's).
    pub(super) skip: usize,
}

/// Length-sorted texts (`order`: longest first) into batches of `opts.batch_size`, each also
/// within `opts.max_tokens` padded tokens when that is set (rows x its first, longest text; at
/// least one text a batch).
pub(super) fn batches<'a>(
    order: &[usize],
    ids: &'a [Vec<i64>],
    opts: EncodeOptions,
) -> Vec<Vec<&'a [i64]>> {
    let size = opts.batch_size.max(1);
    let mut out: Vec<Vec<&[i64]>> = Vec::new();
    let mut longest = 0;
    for &i in order {
        let t = ids[i].as_slice();
        let fits = out.last().is_some_and(|b| {
            b.len() < size && (opts.max_tokens == 0 || (b.len() + 1) * longest <= opts.max_tokens)
        });
        match (fits, out.last_mut()) {
            (true, Some(b)) => b.push(t),
            _ => {
                longest = t.len().max(1);
                out.push(vec![t]);
            }
        }
    }
    out
}

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
        let on_device = self.embed_on_device(texts, layers, opts, prompt, progress)?;
        Ok(on_device
            .into_iter()
            .map(|t| t.to_device(Device::Cpu))
            .collect())
    }

    /// [`Self::embed_prompted`], the vectors left where they were computed (a GPU's: what
    /// follows there, such as [`Self::embed`]'s normalising, runs there too).
    fn embed_on_device(
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
        let job = BatchJob {
            layers,
            deepest: layers.iter().copied().max().unwrap_or(self.num_layers()),
            skip,
        };
        let mut collected = Collected::new(layers.len());
        let order = match self.tokenize_ahead(opts) && texts.len() > opts.batch_size.max(1) {
            true => self.embed_ahead(texts, &job, opts, &mut collected, progress)?,
            false => {
                let ids = timed(Phase::Tokens, || self.tokenizer.encode(texts))?;
                self.embed_ids(&ids, &job, opts, &mut collected, progress)?
            }
        };
        Ok(timed(Phase::Finish, || collected.finish(&order)))
    }

    /// Tokenised texts in length-sorted batches through the forward pass, their vectors pushed
    /// to `collected`; returns the order they went in (`order[pos]` = the index in `ids` of
    /// the `pos`-th vector).
    pub(super) fn embed_ids(
        &self,
        ids: &[Vec<i64>],
        job: &BatchJob,
        opts: EncodeOptions,
        collected: &mut Collected,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Vec<usize>> {
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let batches = batches(&order, ids, opts);
        match opts.streams.clamp(1, batches.len()) {
            1 => {
                // the first batch is the largest: its row count is every batch's bucket (with a
                // token budget the rows vary: each batch's rounded up to a power of two)
                let graphs = opts.graphs.resolve(self.device());
                let mut done = 0;
                for b in &batches {
                    let rows = match opts.max_tokens {
                        0 => batches[0].len(),
                        _ => b.len().next_power_of_two(),
                    };
                    let rows = graphs.then_some(rows);
                    collected.push(timed(Phase::Batches(1), || self.embed_one(b, job, rows)));
                    done += b.len();
                    progress(done);
                    super::stop::check()?; // a host's Ctrl-C (`stop.rs`), between batches
                }
            }
            n => {
                let all = Phase::Batches(batches.len());
                for pooled in timed(all, || self.embed_streams(&batches, job, n, progress)) {
                    collected.push(pooled);
                }
                super::stop::check()?;
            }
        }
        Ok(order)
    }

    /// One batch of token ids, pooled at each of `layers` (a prompt's first `skip` tokens left
    /// out of the pooling), float32 on the host: the path every batch of
    /// [`Self::embed_layers`] takes, for callers that batch their own inputs (the server's
    /// engine). With `graphs` resolving on (a GPU under `Auto`), the batch replays its shape's
    /// recorded pass, rows rounded up to a power of two so that a few shapes serve every batch
    /// size; else the eager pass. Not normalised, not cut to a dim ([`crate::point::finish`]
    /// does both).
    ///
    /// # Shapes
    /// - returns `layers.len()` tensors `[seqs.len(), output_dim]`
    pub fn pool_batch(
        &self,
        seqs: &[&[i64]],
        layers: &[usize],
        skip: usize,
        graphs: crate::graph::GraphMode,
    ) -> Result<Vec<Tensor>> {
        self.check(layers, &[])?;
        let job = BatchJob {
            layers,
            deepest: layers.iter().copied().max().unwrap_or(self.num_layers()),
            skip,
        };
        let rows = graphs
            .resolve(self.device())
            .then(|| seqs.len().next_power_of_two());
        Ok(self
            .embed_one(seqs, &job, rows)
            .into_iter()
            .map(|t| t.to_device(Device::Cpu))
            .collect())
    }

    /// One batch through its recorded pass when `graphs` gives the bucket's rows (and the shape
    /// can be recorded), else eagerly ([`Self::embed_in_halves`]).
    fn embed_one(&self, seqs: &[&[i64]], job: &BatchJob, graphs: Option<usize>) -> Vec<Tensor> {
        graphs
            .and_then(|rows| self.embed_graphed(seqs, job, rows))
            .unwrap_or_else(|| self.embed_in_halves(seqs, job))
    }

    /// One batch's pooled vectors at each requested layer, in float32, left on the device: the
    /// forward pass is queued, not awaited (the packing comes from the host's lengths, and the
    /// inputs go up without waiting), so that on a GPU the host prepares the next batch while
    /// this one runs.
    ///
    /// # Shapes
    /// - returns `job.layers.len()` tensors `[seqs.len(), output_dim]`
    pub(super) fn embed_batch(&self, seqs: &[&[i64]], job: &BatchJob) -> Vec<Tensor> {
        let _guard = tch::no_grad_guard();
        let dev = self.device();
        let (host, layout) = pack_batch(seqs, 0, self.config.pad_id(), self.extras(job.skip));
        let batch = unpack_batch(&upload(&host, dev), &layout);
        let lengths: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
        super::phases::count_tokens(lengths.iter().sum(), layout.rows * layout.len);
        let put = |index: Tensor| upload(&index, dev);
        let pass = || self.pool_layers(&batch, job, None);
        crate::packing::with_host_lengths(&lengths, layout.len, put, pass)
    }

    /// What the host makes for this model's batches ([`Extras`]): the means' weights, the
    /// additive padding mask of the backbones that add one and the position ids of those that
    /// count them as RoBERTa does ([`crate::host_made`]).
    pub(super) fn extras(&self, skip: usize) -> Extras {
        use crate::config::Architecture as A;
        let arch = self.architecture();
        Extras {
            weights: Some(self.pooling),
            skip,
            additive: matches!(arch, A::Bert | A::Mpnet | A::XlmRoberta),
            positions: matches!(arch, A::Mpnet | A::XlmRoberta),
        }
    }

    /// The forward pass of `batch` to the job's deepest layer, pooled (prompt tokens left out)
    /// at each requested layer, in float32 where `batch` lies, written into `into` when given
    /// (a recorded pass's static output, `[layers, rows, output_dim]`): what the eager and the
    /// recorded passes share. What the host made for the batch stands in for what the pass
    /// would make from its ids and mask (the same values).
    ///
    /// # Shapes
    /// - `batch.input`: `[rows, seq]`; returns `job.layers.len()` tensors `[rows, output_dim]`
    pub(super) fn pool_layers(
        &self,
        batch: &Unpacked,
        job: &BatchJob,
        into: Option<&Tensor>,
    ) -> Vec<Tensor> {
        let input = &batch.input;
        let run = || self.forward_exits(input, job.layers);
        let states = match (&batch.additive, &batch.positions) {
            (None, None) => run(),
            (additive, positions) => {
                let pad = self.config.pad_id();
                let made = crate::host_made::Made {
                    ids: input.ids.shallow_clone(),
                    mask: input.mask.shallow_clone(),
                    additive: additive.as_ref().map(Tensor::shallow_clone),
                    positions: positions.as_ref().map(|p| (p.shallow_clone(), pad)),
                };
                crate::host_made::with_host_made(made, run)
            }
        };
        if let Some(w) = &batch.weights {
            return self.embed_pooled_weighted(&states, &input.mask, Some(w), into);
        }
        let pool_mask = match job.skip {
            0 => input.mask.shallow_clone(),
            k => {
                let m = input.mask.copy();
                let _ = m.narrow(1, 0, (k as i64).min(m.size()[1])).fill_(0);
                m
            }
        };
        let weights = self.pooling.weights(&pool_mask, Kind::Float);
        self.embed_pooled_weighted(&states, &pool_mask, weights.as_ref(), into)
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
        let prompt = self.prompts.default_prompt().map(str::to_string);
        let layers = [spec.layer];
        let pooled = self.embed_on_device(texts, &layers, opts, prompt.as_deref(), progress)?;
        // cut and normalised where computed: one copy of the finished vectors down
        let data = timed(Phase::Finish, || {
            crate::point::finish(&pooled[0], spec.dim, None).map(|e| to_vec_f32(&e))
        })?;
        Ok(Matrix {
            rows: texts.len(),
            dim: spec.dim,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Longest first, as `embed_tokens` orders them.
    fn sorted(lens: &[usize]) -> (Vec<usize>, Vec<Vec<i64>>) {
        let ids: Vec<Vec<i64>> = lens.iter().map(|&n| vec![7; n]).collect();
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        (order, ids)
    }

    fn shape(b: &[Vec<&[i64]>]) -> Vec<(usize, usize)> {
        b.iter().map(|b| (b.len(), b[0].len())).collect()
    }

    #[test]
    fn a_token_budget_gives_long_texts_small_batches() {
        let (order, ids) = sorted(&[100, 10, 90, 12, 11, 60, 9, 8]);
        let opts = |max_tokens| EncodeOptions {
            batch_size: 4,
            max_tokens,
            ..EncodeOptions::default()
        };
        // no budget: chunks of 4
        assert_eq!(shape(&batches(&order, &ids, opts(0))), [(4, 100), (4, 11)]);
        // 200 padded tokens: [100, 90], [60, 12, 11] (a fourth row would make 4 x 60), [10, 9, 8]
        let b = batches(&order, &ids, opts(200));
        assert_eq!(shape(&b), [(2, 100), (3, 60), (3, 10)]);
        for batch in &b {
            assert!(batch.len() * batch[0].len() <= 200 && batch.len() <= 4);
        }
        // a text longer than the budget still gets a batch of its own
        assert_eq!(
            shape(&batches(&order, &ids, opts(50))),
            [(1, 100), (1, 90), (1, 60), (4, 12), (1, 8)]
        );
        assert_eq!(
            batches(&order, &ids, opts(50))
                .iter()
                .map(Vec::len)
                .sum::<usize>(),
            8
        );
    }
}
