//! A step that fails inside libtorch (out of memory on the GPU or the host, a kernel's error)
//! ends the run as an error, not a panic: the step, libtorch's message and, for an allocation
//! that failed, the batch's shape and the settings that lower a step's memory. The run folder
//! keeps its last checkpoint (nothing of the failed step is written) and is settled as for any
//! failed run (a run it was to replace is put back).

use nest_core::caught;

use super::Run;
use crate::{Error, Result};

/// The shape of the batch a step failed on.
struct Shape {
    rows: usize,
    texts: usize,
    tokens: usize,
}

impl Run<'_> {
    /// Runs one piece of the step at `at` (the forward and backward of a micro-batch, or the
    /// update); a panic in it (libtorch's error through `tch`), or an error that says an
    /// allocation failed, becomes [`Error::StepFailed`].
    pub(super) fn guarded<T>(
        &mut self,
        at: (u64, usize, u64),
        work: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let ran = caught::catch(std::panic::AssertUnwindSafe(|| work(self)));
        let cause = match ran {
            // an error that carries libtorch's (a failed recording's) keeps its own words
            Ok(Err(e)) if caught::out_of_memory(&e.to_string()) => {
                caught::without_frames(&e.to_string()).to_string()
            }
            Ok(done) => return done,
            Err(c) => c.describe(),
        };
        let (epoch, batch, step) = at;
        let out_of_memory = caught::out_of_memory(&cause);
        let advice = match out_of_memory {
            true => self.memory_advice(&self.shape(epoch as usize, batch)),
            false => String::new(),
        };
        Err(Error::StepFailed {
            step: step + 1,
            cause,
            advice,
            last_checkpoint: self.last_ck.clone(),
        })
    }

    fn shape(&self, epoch: usize, batch: usize) -> Shape {
        let b = &self.plan.epochs[epoch][batch];
        let ids = &self.sources[b.source].ids;
        let texts = b.examples.first().map_or(0, |&i| ids[i].len());
        let tokens = b.examples.iter().flat_map(|&i| ids[i].iter().map(Vec::len));
        Shape {
            rows: b.examples.len(),
            texts,
            tokens: tokens.max().unwrap_or(0),
        }
    }

    /// The settings that lower a step's memory, for this run's recipe.
    fn memory_advice(&self, s: &Shape) -> String {
        let r = self.r;
        let mut levers = vec![format!("lower `batch_size` ({})", r.batch_size)];
        match r.mini_batch_size {
            // GradCache needs chunks smaller than the batch
            0 if r.batch_size < 2 => {}
            0 => levers.push(format!(
                "keep it and set `mini_batch_size` (e.g. {}; GradCache: the same batch's loss and \
                 gradients, computed that many rows at a time)",
                (r.batch_size / 4).max(1)
            )),
            m => levers.push(format!("lower `mini_batch_size` ({m})")),
        }
        levers.push(format!(
            "lower `max_length` (the batch's longest text: {} tokens)",
            s.tokens
        ));
        let recorded = self.graphed.recorded() > 0 || self.graphed.failure().is_some();
        if recorded {
            levers.push(
                "set `cuda_graph = \"off\"` (each recorded step shape holds memory of its own)"
                    .into(),
            );
        }
        format!(
            " (out of memory: a batch of {} rows of {} texts each, at most {} tokens a text); to \
             fit: {}. A new batch_size, mini_batch_size or max_length is a new run (`--overwrite`, \
             or another `--run-dir`){}",
            s.rows,
            s.texts,
            s.tokens,
            levers.join(", or "),
            match recorded {
                true => "; a new cuda_graph resumes this one (`--resume`)",
                false => "",
            }
        )
    }
}
