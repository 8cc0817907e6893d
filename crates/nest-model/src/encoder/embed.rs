//! Embedding texts: length-sorted batches, one forward pass per batch to the deepest requested
//! layer, pooled vectors back in input order.

use nest_core::output::Matrix;
use nest_core::ElasticSpec;
use tch::{Device, Kind, Tensor};

use super::{ElasticEncoder, EncodeOptions};
use crate::pooling::to_vec_f32;
use crate::{Error, Result};

/// What every batch of one [`ElasticEncoder::embed_layers`] call computes.
struct BatchJob<'a> {
    layers: &'a [usize],
    deepest: usize,
    /// Leading tokens left out of the pooling (a prompt's).
    skip: usize,
}

/// The encoder, shared with [`ElasticEncoder::embed_streams`]'s threads for forward passes.
struct ReadOnly<'a>(&'a ElasticEncoder);

// SAFETY: `tch::Tensor` is not `Sync` because libtorch does not make concurrent *writes* to a
// tensor safe. The stream threads only read the encoder's tensors (weights, buffers; no
// in-place op touches them in an inference forward pass: `Linear::forward` and the layers
// allocate their outputs) through a shared borrow that lasts the whole scope, so nothing can
// write them meanwhile; reads of one tensor from several threads are safe in libtorch (its
// reference counts are atomic, and PyTorch itself serves one module from many threads). The
// rest of the encoder is plain data, the tokenizer (`Sync`) and an atomic counter.
#[allow(unsafe_code)]
unsafe impl Sync for ReadOnly<'_> {}

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
        let ids = self.tokenizer.encode(texts)?;
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(ids[i].len()));
        let batches: Vec<Vec<&[i64]>> = order
            .chunks(opts.batch_size.max(1))
            .map(|chunk| chunk.iter().map(|&i| ids[i].as_slice()).collect())
            .collect();
        let job = BatchJob {
            layers,
            deepest: layers.iter().copied().max().unwrap_or(self.num_layers()),
            skip,
        };
        let streams = opts.streams.clamp(1, batches.len());
        let pooled = match streams {
            1 => {
                let mut done = 0;
                let mut out = Vec::with_capacity(batches.len());
                for b in &batches {
                    out.push(self.embed_batch(b, &job));
                    done += b.len();
                    progress(done);
                }
                out
            }
            n => self.embed_streams(&batches, &job, n, progress),
        };
        let mut per_layer: Vec<Vec<Tensor>> = (0..layers.len()).map(|_| Vec::new()).collect();
        for batch in pooled {
            for (k, t) in batch.into_iter().enumerate() {
                per_layer[k].push(t);
            }
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

    /// One batch's pooled vectors at each requested layer, on the CPU in float32.
    fn embed_batch(&self, seqs: &[&[i64]], job: &BatchJob) -> Vec<Tensor> {
        let _guard = tch::no_grad_guard();
        let input = self.make_input(seqs);
        let out = self.forward(&input, job.deepest, false);
        let pool_mask = match job.skip {
            0 => input.mask.shallow_clone(),
            k => {
                let m = input.mask.copy();
                let _ = m.narrow(1, 0, (k as i64).min(m.size()[1])).fill_(0);
                m
            }
        };
        job.layers
            .iter()
            .map(|&l| {
                self.embed_pooled(&out.hidden_states[l], &pool_mask)
                    .to_device(Device::Cpu)
                    .to_kind(Kind::Float)
            })
            .collect()
    }

    /// [`Self::embed_batch`] over `batches` on `streams` threads at once, each with an equal
    /// share of libtorch's intra-op threads; the batches are handed out in order as streams
    /// free up, and come back in order. Each batch's result is the one-stream result up to the
    /// kernels' float reordering across thread counts.
    ///
    /// Why: with 2 threads on one batch, every operation forks and joins the thread team, and
    /// the small ones (under libtorch's grain size) run on one thread while the other waits;
    /// two batches at once on one thread each keep both cores busy. Measured on a 2-vCPU AMD
    /// EPYC (Zen 5, AVX512-BF16), all-MiniLM-L6-v2 on STS-B test in bf16, interleaved:
    /// 1.04-1.06x the throughput of one stream (BENCHMARKS.md, "Again on a newer AVX512-BF16
    /// EPYC").
    fn embed_streams(
        &self,
        batches: &[Vec<&[i64]>],
        job: &BatchJob,
        streams: usize,
        progress: &mut dyn FnMut(usize),
    ) -> Vec<Vec<Tensor>> {
        let threads = tch::get_num_threads().max(1);
        let per_stream = crate::threads_each(streams);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let shared = ReadOnly(self);
        let (tx, rx) = std::sync::mpsc::channel();
        let mut results: Vec<Option<Vec<Tensor>>> = (0..batches.len()).map(|_| None).collect();
        std::thread::scope(|scope| {
            for _ in 0..streams {
                let (tx, next, shared) = (tx.clone(), &next, &shared);
                scope.spawn(move || {
                    // this thread's OpenMP team size (libtorch and oneDNN read it per thread)
                    tch::set_num_threads(per_stream);
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(batch) = batches.get(i) else { break };
                        if tx.send((i, shared.0.embed_batch(batch, job))).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            let mut done = 0;
            for (i, pooled) in rx {
                done += batches[i].len();
                results[i] = Some(pooled);
                progress(done);
            }
        });
        // MKL's thread count is process-wide: the streams set theirs, this restores it
        tch::set_num_threads(threads);
        results
            .into_iter()
            .map(|r| r.expect("every batch is encoded once"))
            .collect()
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
