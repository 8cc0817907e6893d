//! Batches encoded at once on several threads ([`EncodeOptions::streams`](super::EncodeOptions)),
//! each with its share of libtorch's intra-op threads.

use tch::Tensor;

use super::embed::BatchJob;
use super::ElasticEncoder;

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
    pub(super) fn embed_streams(
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
}
