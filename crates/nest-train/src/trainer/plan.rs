//! A run's data plan, its position in it, and what a step accumulates.

use serde_json::json;

use super::step::MicroResult;
use crate::data::{epoch_plan, padding, Batch, Padding, Source};
use crate::recipe::{LossKind, Recipe};
use crate::{Error, Result};

/// Where a run stands: optimizer steps taken, the next micro-batch (epoch, index in the epoch's
/// plan) and the loss of the last step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    pub(crate) step: u64,
    pub(crate) epoch: u64,
    pub(crate) next_batch: usize,
    pub(crate) last_loss: f64,
}

impl Default for Progress {
    fn default() -> Self {
        Progress {
            step: 0,
            epoch: 0,
            next_batch: 0,
            last_loss: f64::NAN,
        }
    }
}

/// Every epoch's batches, known in advance, so that the schedule knows its length exactly
/// (with `[mine]`, a round's epochs are planned again on its triplets: [`Plan::replan`]).
#[derive(Default)]
pub(crate) struct Plan {
    pub(crate) epochs: Vec<Vec<Batch>>,
    /// Micro-batches before each epoch: for the per-micro-batch RNG seed.
    pub(crate) offsets: Vec<u64>,
    pub(crate) total: u64,
    pub(crate) padding: Padding,
    pub(crate) padding_unbatched: Padding,
}

impl Plan {
    pub(crate) fn new(r: &Recipe, sources: &[Source]) -> Result<Plan> {
        let no_dup = no_dup(r);
        let epochs: Vec<Vec<Batch>> = (0..r.epochs as u64)
            .map(|e| epoch_plan(sources, r.batch_size, r.seed, e, r.length_batching, no_dup))
            .collect();
        let mut total: u64 = epochs
            .iter()
            .map(|p| p.len().div_ceil(r.grad_accum) as u64)
            .sum();
        if r.max_steps > 0 {
            total = total.min(r.max_steps);
        }
        if total == 0 {
            return Err(Error::Recipe {
                source_name: "data".into(),
                message: no_batch(sources, r.batch_size, no_dup),
            });
        }
        let offsets = offsets(&epochs);
        let unbatched = epoch_plan(sources, r.batch_size, r.seed, 0, false, no_dup);
        Ok(Plan {
            padding: padding(sources, &epochs[0]),
            padding_unbatched: padding(sources, &unbatched),
            epochs,
            offsets,
            total,
        })
    }

    /// The micro-batches a run of this plan takes, in order: `total` optimizer steps of
    /// `grad_accum` micro-batches each (an epoch's last step may take fewer, as
    /// [`super::run::Run::steps`] does).
    pub(crate) fn taken(&self, grad_accum: usize) -> Vec<&Batch> {
        let mut left = self.total;
        let mut out = Vec::new();
        for epoch in &self.epochs {
            let steps = (epoch.len().div_ceil(grad_accum) as u64).min(left);
            let n = epoch.len().min(steps as usize * grad_accum);
            out.extend(&epoch[..n]);
            left -= steps;
        }
        out
    }

    /// The optimizer steps the epochs as now planned hold, at most `total`: fewer when a later
    /// `[mine]` round planned its epochs with fewer batches than round 0's (the run then ends
    /// early).
    pub(crate) fn steps_held(&self, grad_accum: usize) -> u64 {
        let held: u64 = self
            .epochs
            .iter()
            .map(|p| p.len().div_ceil(grad_accum) as u64)
            .sum();
        held.min(self.total)
    }

    /// Plans `epochs` again on `sources` (a new round of mined triplets); the total stays.
    pub(crate) fn replan(
        &mut self,
        r: &Recipe,
        sources: &[Source],
        epochs: std::ops::Range<usize>,
    ) {
        for e in epochs {
            let bs = r.batch_size;
            self.epochs[e] =
                epoch_plan(sources, bs, r.seed, e as u64, r.length_batching, no_dup(r));
        }
        self.offsets = offsets(&self.epochs);
    }
}

/// Whether the loss's in-batch negatives must not hold the same text twice.
/// Why no batch of `batch` examples can be formed from `sources`: too few examples, or (with
/// in-batch negatives) examples that share texts (helper trial E: mined n-tuples whose
/// negatives are the other rows' positives, 4 rows and batch 2, were told "too few").
fn no_batch(sources: &[Source], batch: usize, no_dup: bool) -> String {
    let most = sources.iter().map(Source::len).max().unwrap_or(0);
    if most >= batch && no_dup {
        return format!(
            "no batch of {batch} examples can be formed without a text twice in it: the \
             examples (the largest source has {most}) share texts, and with in-batch negatives \
             a text twice in a batch would be its own negative (this loss never batches so); \
             lower batch_size, or add examples that share fewer texts (mined negatives that \
             are other rows' positives share them: mine from a larger corpus)"
        );
    }
    format!("no batch can be formed: the largest source has {most} examples, batch_size is {batch}")
}

fn no_dup(r: &Recipe) -> bool {
    matches!(
        r.loss,
        LossKind::Mnrl | LossKind::MnrlSymmetric | LossKind::Simcse | LossKind::None
    )
}

/// Micro-batches before each epoch: for the per-micro-batch RNG seed.
fn offsets(epochs: &[Vec<Batch>]) -> Vec<u64> {
    epochs
        .iter()
        .scan(0u64, |acc, p| {
            let o = *acc;
            *acc += p.len() as u64;
            Some(o)
        })
        .collect()
}

/// The summed loss and named terms of the micro-batches since the last optimizer step.
#[derive(Default)]
pub(crate) struct Accum {
    loss: f64,
    terms: Vec<(String, f64)>,
    pub(crate) n: usize,
}

impl Accum {
    pub(crate) fn add(&mut self, res: MicroResult, grad_accum: usize) {
        self.loss += res.loss / grad_accum as f64;
        for (name, v) in res.terms {
            let v = v / grad_accum as f64;
            match self.terms.iter_mut().find(|x| x.0 == name) {
                Some(x) => x.1 += v,
                None => self.terms.push((name, v)),
            }
        }
        self.n += 1;
    }

    /// The step's mean loss and terms (over the micro-batches it had); resets.
    pub(crate) fn take(&mut self, grad_accum: usize) -> (f64, serde_json::Value) {
        let scale = grad_accum as f64 / self.n as f64;
        let terms: serde_json::Map<String, serde_json::Value> = self
            .terms
            .iter()
            .map(|(k, v)| (k.clone(), json!(v * scale)))
            .collect();
        let loss = self.loss * scale;
        *self = Accum::default();
        (loss, terms.into())
    }
}
