//! What an objective reads of a batch: each encoded [`Column`] (all layers' hidden states, or
//! vectors pooled before the objective ran) and the whole [`BatchOutput`], with the pooling
//! every method shares.

use nest_model::{Head, Pooling};
use tch::Tensor;

/// One encoded column of a batch (anchors, positives, negatives, or a SimCSE view).
#[derive(Debug)]
pub struct Column {
    /// Index 0 = embeddings, `l` = output of layer `l`: `[B, seq, hidden]` each.
    pub hidden: Vec<Tensor>,
    /// `[B, seq]`, 1 = token.
    pub mask: Tensor,
    pub pooling: Pooling,
    /// The model's Dense modules (IBKD's projection, section 3.4), applied after pooling.
    pub head: Head,
    /// Index `l - 1` = layer `l`'s \[CLS\]-row attention probabilities, when the objective asked
    /// for them ([`super::Objective::attention`]); empty otherwise.
    pub cls_attention: Vec<Tensor>,
    /// Sentence vectors pooled before the objective ran (GradCache chunks, or gathered from
    /// every process of a data-parallel run), index `l` = layer `l`; `hidden` and `mask` are
    /// then empty. Empty: pooled from `hidden` on demand.
    pub pooled: Vec<PooledLayer>,
}

/// One layer's sentence vectors of a whole (possibly global) batch.
#[derive(Debug)]
pub struct PooledLayer {
    /// Pooled token states: `[B, hidden]`.
    pub(crate) raw: Tensor,
    /// Through the Dense head when the model has one (else `raw` again): `[B, output_dim]`.
    pub(crate) out: Tensor,
}

impl Column {
    /// Sentence vectors at `layer`: pooled, through the Dense head if the model has one, not
    /// normalised: `[B, output_dim]`.
    pub fn pooled(&self, layer: usize) -> Tensor {
        if let Some(p) = self.pooled.get(layer) {
            return p.out.shallow_clone();
        }
        self.head.forward(&self.pooled_raw(layer))
    }

    /// Pooled token states at `layer`, without the Dense head: `[B, hidden]`.
    pub(crate) fn pooled_raw(&self, layer: usize) -> Tensor {
        if let Some(p) = self.pooled.get(layer) {
            return p.raw.shallow_clone();
        }
        self.pooling.pool(&self.hidden[layer], &self.mask)
    }
}

/// What an objective sees for one batch.
#[derive(Debug)]
pub struct BatchOutput {
    pub columns: Vec<Column>,
    /// Gold scores of scored pairs: `[B]`.
    pub scores: Option<Tensor>,
    /// Layers the encoder ran (the last index of `hidden`).
    pub layers: usize,
    /// Whether the model's pipeline ends with `Normalize` (what its users receive).
    pub normalize: bool,
    /// Each row's [`Objective::targets`](super::Objective::targets) on the device (a teacher's
    /// vectors of the first column's texts), when the objective reads some: `[B, width]`.
    pub targets: Option<Tensor>,
}

impl BatchOutput {
    /// Every column's pooled vectors at `layer`.
    pub(super) fn pooled(&self, layer: usize) -> Vec<Tensor> {
        self.columns.iter().map(|c| c.pooled(layer)).collect()
    }

    /// The embedding the model's users get at `layer` (pooled, L2-normalised when the model
    /// ends with `Normalize`), every column stacked: `[columns * B, hidden]`.
    pub(super) fn output_embeddings(&self, layer: usize) -> Tensor {
        let all = Tensor::cat(&self.pooled(layer), 0);
        if self.normalize {
            nest_model::pooling::l2_normalize(&all)
        } else {
            all
        }
    }
}
