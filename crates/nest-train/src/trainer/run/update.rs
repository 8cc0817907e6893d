//! One optimizer step of a [`Run`]: the micro-batch's forward and backward (eager, the whole
//! step through a recorded CUDA graph, or an accumulated micro-batch through one), then the
//! update over the accumulated gradients and its line in the run log.

use serde_json::json;

use super::Run;
use crate::objective::{Objective, StepContext};
use crate::recipe::Recipe;
use crate::schedule::group_lrs;
use crate::trainer::graphed::StepSpec;
use crate::trainer::plan::{Accum, Progress};
use crate::trainer::run_log::RunLog;
use crate::trainer::spread::spread_micro_step;
use crate::trainer::step::{apply_update, MicroResult};
use crate::trainer::sync;
use crate::trainer::types::Event;
use crate::{Error, Result};

impl Run<'_> {
    /// The whole step at `at` through a recorded CUDA graph when one applies (the recipe's
    /// `cuda_graph`, no accumulation, GradCache or data parallelism): its loss and terms, and
    /// the gradient norm of the update it applied; `None` for the eager path. A non-finite loss
    /// or norm stops the run with the weights untouched.
    pub(super) fn graphed_step(&mut self, at: &Progress) -> Result<Option<(MicroResult, f64)>> {
        let r = self.r;
        if r.grad_accum != 1 || self.group.is_some() || self.spread.chunk.is_some() {
            return Ok(None);
        }
        let lrs = group_lrs(r, at.step, self.plan.total);
        let micro_batch = self.plan.offsets[at.epoch as usize] + at.next_batch as u64;
        let spec = step_spec(self.objective.as_ref(), r, at.step, micro_batch, &lrs);
        let b = &self.plan.epochs[at.epoch as usize][at.next_batch];
        let src = &self.sources[b.source];
        let Some((res, norm)) = self.graphed.step(&self.enc, &mut self.opt, src, b, &spec)? else {
            return Ok(None);
        };
        for (what, value) in [("loss", res.loss), ("gradient norm", norm)] {
            if !value.is_finite() {
                return Err(Error::NonFinite {
                    what,
                    step: at.step + 1,
                    value,
                    last_checkpoint: self.last_ck.clone(),
                });
            }
        }
        Ok(Some((res, norm)))
    }

    /// The micro-batch at `at`, forward and backward: through its shape's recorded graph when
    /// the step accumulates (`grad_accum` > 1, one process, no GradCache) and the recipe's
    /// `cuda_graph` applies, else eagerly (GradCache's chunks through recorded graphs when it
    /// applies); a non-finite loss stops the run.
    pub(super) fn micro_step(&mut self, at: &Progress) -> Result<MicroResult> {
        let (r, e) = (self.r, at.epoch as usize);
        let b = &self.plan.epochs[e][at.next_batch];
        let micro_batch = self.plan.offsets[e] + at.next_batch as u64;
        let spec = step_spec(self.objective.as_ref(), r, at.step, micro_batch, &[]);
        let src = &self.sources[b.source];
        let accumulates = r.grad_accum > 1 && self.group.is_none() && self.spread.chunk.is_none();
        let recorded = match accumulates {
            true => self.graphed.micro(&self.enc, src, b, &spec, r.grad_accum)?,
            false => None,
        };
        let ctx = spec.ctx;
        let res = match recorded {
            Some(res) => res,
            None => spread_micro_step(
                &self.enc,
                self.objective.as_ref(),
                src,
                b,
                r.loss,
                &ctx,
                r.grad_accum,
                &self.spread,
                spec.train,
                Some(&mut self.graphed.chunks),
            )?,
        };
        if !res.loss.is_finite() {
            return Err(Error::NonFinite {
                what: "loss",
                step: at.step + 1,
                value: res.loss,
                last_checkpoint: self.last_ck.clone(),
            });
        }
        Ok(res)
    }

    /// One optimizer step over the accumulated gradients (averaged over the processes first),
    /// logged; a non-finite gradient norm stops the run before the weights change. `applied`:
    /// a recorded step already updated, with this gradient norm.
    pub(super) fn update(
        &mut self,
        at: &mut Progress,
        acc: &mut Accum,
        applied: Option<f64>,
        log: &mut RunLog,
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let r = self.r;
        if let Some(g) = self.group {
            sync::sync_gradients(g, &self.opt)?;
        }
        let lrs = group_lrs(r, at.step, self.plan.total);
        let lr = lrs[0];
        let grad_norm = match applied {
            Some(norm) => norm,
            None => apply_update(&mut self.opt, r.max_grad_norm, &lrs, |value| {
                Error::NonFinite {
                    what: "gradient norm",
                    step: at.step + 1,
                    value,
                    last_checkpoint: self.last_ck.clone(),
                }
            })?,
        };
        at.step += 1;
        let (loss, terms) = acc.take(r.grad_accum);
        at.last_loss = loss;
        let mut line = json!({"step": at.step, "epoch": at.epoch, "loss": loss, "lr": lr, "grad_norm": grad_norm, "terms": terms, "seconds": self.start.elapsed().as_secs_f64()});
        if r.head_lr.is_some() || r.head_warmup_ratio.is_some() {
            line["head_lr"] = json!(lrs[1]);
        }
        if let Some(g) = self.group {
            // this run's collectives (the group may have served an earlier stage)
            let (t, t0) = (g.traffic(), self.traffic_start);
            line["rank"] = json!(g.rank());
            line["comm_seconds"] = json!(t.seconds - t0.seconds);
            line["comm_bytes"] = json!(t.bytes - t0.bytes);
        }
        log.step(&line)?;
        events(Event::Step {
            step: at.step,
            loss,
            lr,
        });
        Ok(())
    }
}

/// What the step `step` runs on its micro-batch `micro_batch` (the run's count), at the rates
/// `lrs`.
fn step_spec<'s>(
    objective: &'s dyn Objective,
    r: &Recipe,
    step: u64,
    micro_batch: u64,
    lrs: &'s [f64],
) -> StepSpec<'s> {
    StepSpec {
        objective,
        loss: r.loss,
        ctx: StepContext {
            step,
            micro_batch,
            seed: r.seed,
        },
        max_grad_norm: r.max_grad_norm,
        lrs,
        train: r.dropout != Some(0.0),
    }
}
