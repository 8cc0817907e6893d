//! The gradient sync of a data-parallel step (see `spread.rs` for why a sum is right).

use nest_dist::Group;
use tch::Tensor;

use crate::optim::AdamW;
use crate::{Error, Result};

/// Elements per all-reduce bucket of the gradient sync (16 Mi floats = 64 MiB).
const BUCKET: i64 = 1 << 24;

/// Sums the encoder's gradients over the ranks (bucketed all-reduce, in the optimizer's fixed
/// name order) and averages those of the objective's own parameters (named `objective.*`),
/// which every rank computed on the whole batch.
pub(crate) fn sync_gradients(g: &Group, opt: &AdamW) -> Result<()> {
    let _guard = tch::no_grad_guard();
    let grads = opt.named_grads();
    let world = g.world() as f64;
    let mut start = 0;
    while start < grads.len() {
        let mut end = start;
        let mut size = 0;
        while end < grads.len() && (end == start || size + grads[end].1.numel() as i64 <= BUCKET) {
            size += grads[end].1.numel() as i64;
            end += 1;
        }
        let flat: Vec<Tensor> = grads[start..end]
            .iter()
            .map(|(_, t)| t.reshape([-1]))
            .collect();
        let mut bucket = Tensor::cat(&flat, 0);
        g.all_reduce_sum(&mut bucket).map_err(Error::from)?;
        let mut at = 0;
        for (name, t) in &grads[start..end] {
            let len = t.numel() as i64;
            let mut part = bucket.narrow(0, at, len).view_as(t);
            if name.starts_with("objective.") {
                part /= world;
            }
            t.shallow_clone().copy_(&part);
            at += len;
        }
        start = end;
    }
    Ok(())
}
