//! The task loss an objective wraps ([`LossKind`]: MNRL, CoSENT, SimCSE, ...), scored on a
//! batch's columns at a prefix dim, and also on quantised vectors when the recipe asks
//! ([`super::quant`]).

use serde::{Deserialize, Serialize};
use tch::Tensor;

use super::quant;
use crate::losses;

/// The task loss wrapped by the objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossKind {
    /// MultipleNegativesRanking / InfoNCE with in-batch negatives (+ hard negatives).
    Mnrl,
    /// MNRL in both directions (anchor -> positive and positive -> anchor), averaged.
    MnrlSymmetric,
    /// CoSENT on scored pairs.
    Cosent,
    /// Unsupervised SimCSE: each sentence twice with different dropout masks, MNRL between them.
    Simcse,
    /// No task loss: the components score the batch themselves (e.g. `distill` + `hsic` on
    /// unlabeled texts, one forward pass per column).
    None,
}

/// A task loss on the embeddings of the batch's columns.
#[derive(Debug, Clone, Copy)]
pub struct TaskLoss {
    pub kind: LossKind,
    pub scale: f64,
    pub angle_weight: f64,
    /// Also score the loss on the quantised vectors (straight-through, [`quant`]); off by
    /// default.
    pub quantization: quant::Quantization,
}

impl TaskLoss {
    /// The loss on the columns as given plus, with [`TaskLoss::quantization`], its weight times
    /// the loss on each precision's straight-through quantised columns.
    ///
    /// # Shapes
    /// - `cols[k]`: `[B, d]` embeddings of column `k`; `scores`: `[B]` for CoSENT
    pub(super) fn apply(&self, cols: &[Tensor], scores: Option<&Tensor>) -> Tensor {
        let q = self.quantization;
        let mut total = self.apply_float(cols, scores);
        for p in q.precisions() {
            let term = self.apply_at_scale(&quant::columns(cols, p), scores, self.scale_at(p));
            // not `+=`: see apply_float
            #[allow(clippy::assign_op_pattern)]
            let sum = total + term * q.weight;
            total = sum;
        }
        if q.binary && q.spread > 0.0 {
            let spread: Vec<Tensor> = cols.iter().map(losses::spread_out).collect();
            let mean = Tensor::stack(&spread, 0).mean(spread[0].kind());
            #[allow(clippy::assign_op_pattern)]
            let sum = total + mean * q.spread;
            total = sum;
        }
        total
    }

    /// The scale the term of precision `p` is scored at.
    fn scale_at(&self, p: quant::QuantPrecision) -> f64 {
        match (p, self.quantization.binary_scale) {
            (quant::QuantPrecision::Binary, Some(s)) => s,
            _ => self.scale,
        }
    }

    /// The loss on the columns as given (no quantisation).
    fn apply_float(&self, cols: &[Tensor], scores: Option<&Tensor>) -> Tensor {
        self.apply_at_scale(cols, scores, self.scale)
    }

    /// The loss on the columns as given, at `scale`.
    pub(super) fn apply_at_scale(
        &self,
        cols: &[Tensor],
        scores: Option<&Tensor>,
        scale: f64,
    ) -> Tensor {
        let me = TaskLoss { scale, ..*self };
        me.apply_plain(cols, scores)
    }

    /// # Shapes
    /// - `cols`: `[anchor, positive, negative_1 .. negative_n]`, each `[B, d]` (n = 0 for
    ///   pairs); the n-tuple's negatives are all candidates, as in sentence-transformers'
    ///   `MultipleNegativesRankingLoss` (the positives, then every `negative_1`, every
    ///   `negative_2`, ...)
    fn apply_plain(&self, cols: &[Tensor], scores: Option<&Tensor>) -> Tensor {
        let negatives = match cols.len() {
            0..=2 => None,
            3 => Some(cols[2].shallow_clone()),
            _ => Some(Tensor::cat(&cols[2..], 0)),
        };
        match self.kind {
            LossKind::Mnrl => losses::mnrl(&cols[0], &cols[1], negatives.as_ref(), self.scale),
            LossKind::MnrlSymmetric => {
                losses::mnrl_symmetric(&cols[0], &cols[1], negatives.as_ref(), self.scale)
            }
            LossKind::Simcse => losses::simcse(&cols[0], &cols[1], self.scale),
            LossKind::None => unreachable!("build refuses task-loss components without a loss"),
            LossKind::Cosent => {
                let gold = scores.expect("scored pairs carry scores");
                let mut l = losses::cosent(&cols[0], &cols[1], gold, self.scale);
                if self.angle_weight > 0.0 {
                    // not `+=`: an in-place add would modify logsumexp's output, which its backward reads
                    #[allow(clippy::assign_op_pattern)]
                    let sum =
                        l + losses::angle(&cols[0], &cols[1], gold, self.scale) * self.angle_weight;
                    l = sum;
                }
                l
            }
        }
    }

    /// The task loss on the first `dim` coordinates of each column.
    ///
    /// # Shapes
    /// - `cols[k]`: `[B, hidden]`; returns a scalar
    pub(super) fn at_dim(&self, cols: &[Tensor], dim: usize, scores: Option<&Tensor>) -> Tensor {
        let cut: Vec<Tensor> = cols.iter().map(|t| t.narrow(1, 0, dim as i64)).collect();
        self.apply(&cut, scores)
    }

    /// The loss's name in term names: e.g. `cosent`, `cosent+angle`, `mnrl+int8+binary`.
    pub(super) fn name(&self) -> String {
        let mut n = self.float_name().to_string();
        for p in self.quantization.precisions() {
            n = format!("{n}+{}", p.name());
        }
        if self.quantization.binary && self.quantization.spread > 0.0 {
            n.push_str("+spread");
        }
        n
    }

    fn float_name(&self) -> &'static str {
        match self.kind {
            LossKind::Mnrl => "mnrl",
            LossKind::MnrlSymmetric => "mnrl-symmetric",
            LossKind::Simcse => "simcse",
            LossKind::Cosent if self.angle_weight > 0.0 => "cosent+angle",
            LossKind::Cosent => "cosent",
            LossKind::None => "none",
        }
    }
}
