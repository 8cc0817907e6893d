//! A batch too large for the memory it runs in is encoded in halves rather than failing: on
//! a GPU a batch size that fits short texts may not fit long ones.

use tch::Tensor;

use super::embed::BatchJob;
use super::ElasticEncoder;

impl ElasticEncoder {
    /// [`Self::embed_batch`]; a batch whose pass libtorch cannot allocate (a GPU's memory,
    /// most often) is encoded as its two halves, each the same way, with a warning once a
    /// process: the same vectors as a smaller batch size gives. One text that does not fit
    /// still fails (the caller's error says what lowers it).
    ///
    /// # Shapes
    /// - returns `job.layers.len()` tensors `[seqs.len(), output_dim]`
    pub(super) fn embed_in_halves(&self, seqs: &[&[i64]], job: &BatchJob) -> Vec<Tensor> {
        if seqs.len() < 2 {
            return self.embed_batch(seqs, job);
        }
        let whole =
            nest_core::caught::catch(std::panic::AssertUnwindSafe(|| self.embed_batch(seqs, job)));
        match whole {
            Ok(pooled) => pooled,
            Err(c) if c.out_of_memory() => {
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    eprintln!(
                        "warning: a batch of {} texts did not fit in memory ({}); encoding it in \
                         halves (a smaller batch size saves the retries)",
                        seqs.len(),
                        c.summary()
                    )
                });
                let (a, b) = seqs.split_at(seqs.len() / 2);
                let (a, b) = (self.embed_in_halves(a, job), self.embed_in_halves(b, job));
                a.iter()
                    .zip(&b)
                    .map(|(x, y)| Tensor::cat(&[x, y], 0))
                    .collect()
            }
            Err(c) => std::panic::resume_unwind(Box::new(c.message)),
        }
    }
}
