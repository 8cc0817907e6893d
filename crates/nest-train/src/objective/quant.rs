//! Quantization-aware training (issue 40): the task loss also scored on the quantised truncated
//! vectors that Nest stores and scores, with a straight-through gradient.
//!
//! Straight-through estimator: Bengio, Léonard and Courville 2013, "Estimating or Propagating
//! Gradients Through Stochastic Neurons for Conditional Computation" (arXiv:1308.3432), section
//! 4 (the "straight-through estimator": the backward pass treats the non-differentiable step as
//! the identity); the `y = v + (q(v) - v).detach()` form is the one used by VQ-VAE (van den Oord
//! et al. 2017, arXiv:1711.00937, eq. 3 and section 3.2).
//!
//! The quantisers are the stored formats, not approximations of them:
//! - **int8**: `nest_core::vector::quantize_int8` (symmetric per row, scale `max|x| / 127`,
//!   halves away from zero) through its tensor twin `nest_eval::quantize::int8_rows`, the one
//!   `nest eval --precision int8` scores; the codes are dequantised (`codes * s`).
//! - **binary**: the sign bits `nest index` stores (`x > 0`), as the vector of ±1. Its cosine
//!   with another such vector is `1 - 2 * hamming / d`, an affine map of the Hamming similarity
//!   that the index ranks by, so a loss on these cosines is a loss on Hamming similarities.
//!
//! Both are taken of the L2-normalised prefix (what `point::finish` hands the index) and
//! L2-normalised again, as the task losses score cosines. The straight-through step is the
//! identity from that quantised point back to the normalised prefix, so the gradient of a
//! quantised term is the float gradient of the same loss evaluated at the quantised point
//! (chained through the prefix's normalisation like the float term's).

use serde::{Deserialize, Serialize};
use tch::Tensor;

use super::{BatchOutput, Objective, StepContext, TaskLoss, Term};

/// A stored precision the task loss can also be scored at (float32 is always scored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuantPrecision {
    /// Per-row symmetric int8 (`nest_core::vector::quantize_int8`).
    Int8,
    /// Sign bits, scored by Hamming similarity.
    Binary,
}

impl QuantPrecision {
    pub fn name(self) -> &'static str {
        match self {
            QuantPrecision::Int8 => "int8",
            QuantPrecision::Binary => "binary",
        }
    }
}

/// Which precisions the task loss is also scored at, and the weight of each quantised term
/// (the recipe's `quantization` and `quantization_weight`). Off when both flags are false.
///
/// Two levers against the collapse of the sign bits that the plain binary term causes
/// (tests/reference/QAT_ESTIMATORS_NOTES.md: at CoSENT's scale 20, shrinking the spread of the
/// binary cosines is the cheapest way down the loss, and the bits went to the majority sign):
/// - `binary_scale`: the binary term's own scale (inverse temperature); at a small scale the
///   loss rewards spreading cosines whose order beats chance instead;
/// - `spread`: the weight of the spread-out term ([`crate::losses::spread_out`]) on each column's
///   prefix at every dim the binary term scores, which keeps the bits balanced.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Quantization {
    pub int8: bool,
    pub binary: bool,
    /// Multiplies each quantised task loss (the float one keeps weight 1).
    pub weight: f64,
    /// The binary term's scale; `None`: the task loss's.
    pub binary_scale: Option<f64>,
    /// Weight of the spread-out term on the binary-scored prefixes; 0: off.
    pub spread: f64,
}

impl Quantization {
    /// From the recipe's list (duplicates are refused before this); no binary levers.
    pub fn new(precisions: &[QuantPrecision], weight: f64) -> Self {
        Quantization {
            int8: precisions.contains(&QuantPrecision::Int8),
            binary: precisions.contains(&QuantPrecision::Binary),
            weight,
            binary_scale: None,
            spread: 0.0,
        }
    }

    /// The precisions scored, int8 first.
    pub fn precisions(&self) -> Vec<QuantPrecision> {
        let mut p = Vec::new();
        if self.int8 {
            p.push(QuantPrecision::Int8);
        }
        if self.binary {
            p.push(QuantPrecision::Binary);
        }
        p
    }

    pub fn is_on(&self) -> bool {
        self.int8 || self.binary
    }
}

/// The quantised point of L2-normalised rows `v` `[n, d]`: dequantised codes (int8) or ±1
/// (binary), L2-normalised; no gradient. Same kind as `v`.
pub fn quantize(v: &Tensor, p: QuantPrecision) -> Tensor {
    tch::no_grad(|| {
        let v = v.detach();
        let q = match p {
            QuantPrecision::Int8 => {
                let (codes, scales) = nest_eval::quantize::int8_rows(&v);
                codes * scales
            }
            QuantPrecision::Binary => v.gt(0.0).to_kind(tch::Kind::Float) * 2.0 - 1.0,
        };
        nest_model::pooling::l2_normalize(&q.to_kind(v.kind()))
    })
}

/// Straight-through quantisation of L2-normalised rows `v`: the value of [`quantize`], the
/// gradient of the identity (`v + (q(v) - v).detach()`).
pub fn straight_through(v: &Tensor, p: QuantPrecision) -> Tensor {
    v + (quantize(v, p) - v).detach()
}

/// The quantised-term inputs of a task loss: each column's (already cut) rows normalised, then
/// quantised straight-through.
pub(super) fn columns(cols: &[Tensor], p: QuantPrecision) -> Vec<Tensor> {
    cols.iter()
        .map(|c| straight_through(&nest_model::pooling::l2_normalize(c), p))
        .collect()
}

/// The per-precision loss columns of `metrics.jsonl` (`diag/quantization/<precision>@<dim>`):
/// the task loss at the last layer at each trained dim, in float32 and at each quantised
/// precision, without gradient. A component with no terms of its own: the quantised terms are
/// inside each component's task loss ([`TaskLoss`] with a [`Quantization`]).
pub(crate) struct QuantReport {
    /// The task loss without quantisation.
    pub(crate) task: TaskLoss,
    pub(crate) quantization: Quantization,
    pub(crate) dims: Vec<usize>,
}

impl Objective for QuantReport {
    fn describe(&self) -> String {
        let p: Vec<&str> = self
            .quantization
            .precisions()
            .iter()
            .map(|p| p.name())
            .collect();
        let q = self.quantization;
        let mut levers = String::new();
        if let Some(s) = q.binary_scale {
            levers.push_str(&format!(", binary at scale {s}"));
        }
        if q.spread > 0.0 {
            levers.push_str(&format!(
                ", spread-out x {} on the binary prefixes",
                q.spread
            ));
        }
        format!(
            "quantization({}) x {} of every task loss, straight-through{levers}",
            p.join(", "),
            q.weight
        )
    }

    fn terms(&self, _out: &BatchOutput, _ctx: &StepContext) -> Vec<Term> {
        Vec::new()
    }

    fn trained_dims(&self) -> Vec<usize> {
        Vec::new()
    }

    fn trained_layers(&self, _num_layers: usize) -> Vec<usize> {
        Vec::new()
    }

    fn diagnostics(&self, out: &BatchOutput) -> Vec<(String, Tensor)> {
        let last = out.pooled(out.layers);
        let scores = out.scores.as_ref();
        let mut d = Vec::new();
        for &dim in &self.dims {
            let cut: Vec<Tensor> = last.iter().map(|t| t.narrow(1, 0, dim as i64)).collect();
            d.push((format!("float32@{dim}"), self.task.apply(&cut, scores)));
            for p in self.quantization.precisions() {
                let scale = match (p, self.quantization.binary_scale) {
                    (QuantPrecision::Binary, Some(s)) => s,
                    _ => self.task.scale,
                };
                let v = self.task.apply_at_scale(&columns(&cut, p), scores, scale);
                d.push((format!("{}@{dim}", p.name()), v));
            }
            if self.quantization.binary {
                d.push((format!("bits@{dim}"), bit_entropy(&cut[0])));
            }
        }
        d
    }
}

/// The entropy of the sign bits over the batch, summed over the coordinates (bits; `d` at
/// most): how much the binary code can still tell rows apart. A collapse shows as a fall.
///
/// # Shapes
/// - `x`: `[B, d]`; returns a float64 scalar `[]`, where `x` is
pub(crate) fn bit_entropy(x: &Tensor) -> Tensor {
    let p = x
        .gt(0.0)
        .to_kind(tch::Kind::Double)
        .mean_dim(0, false, None);
    // -q ln q (0 at q = 0) for both values of each bit, in bits
    let nats = p.special_entr() + (-&p + 1.0).special_entr();
    nats.sum(tch::Kind::Double) / std::f64::consts::LN_2
}

#[cfg(test)]
mod tests;
