//! Adaptive Dimension Selection (SMEC, arXiv:2510.12474, section 3.3, eq. 6; Gumbel-softmax:
//! Jang et al. 2017, arXiv:1611.01144): learnable importance logits over the
//! dims of a representation; in training, `z = softmax((logits + G) / tau)` with Gumbel noise
//! `G ~ Gumbel(0, 1)` and the top-k dims of `z` kept; at inference, the top-k of the logits.
//!
//! The paper does not say how the top-k choice passes gradient to the logits. Nest's default is
//! the straight-through estimator: the kept coordinates are multiplied by `z_i / stop_grad(z_i)`
//! (value 1, gradient that of `z_i`), so the forward value is exactly the selected dims and the
//! logits learn which dims the loss prefers. `soft = true` ([`Ads::soft`]) multiplies them by
//! `z_i` itself (the Gumbel-softmax path of eq. 6 carried into the forward value), the reading
//! of an independent paper-only reference (`tests/reference/paper/smec_paper.py`).

use tch::{Kind, Tensor};

/// One selection of `k` dims out of `allowed` (a nested chain restricts each level to the dims
/// its parent kept).
#[derive(Debug)]
pub struct Ads {
    /// `[base]` importance logits; a leaf with gradient.
    pub logits: Tensor,
    pub k: usize,
    pub tau: f64,
    /// Weight the kept dims by their Gumbel-softmax probabilities (`z_i`) instead of the
    /// straight-through `z_i / stop_grad(z_i)`.
    pub soft: bool,
}

impl Ads {
    pub fn new(base: usize, k: usize, tau: f64) -> Self {
        Ads {
            logits: Tensor::zeros([base as i64], (Kind::Float, tch::Device::Cpu))
                .set_requires_grad(true),
            k,
            tau,
            soft: false,
        }
    }

    fn masked(&self, allowed: Option<&Tensor>) -> Tensor {
        match allowed {
            None => self.logits.shallow_clone(),
            Some(idx) => {
                let mask = Tensor::full(
                    [self.logits.size()[0]],
                    f64::NEG_INFINITY,
                    (Kind::Float, tch::Device::Cpu),
                )
                .index_fill(0, idx, 0.0);
                &self.logits + mask
            }
        }
    }

    /// A training draw: the kept dims (increasing) and their straight-through weights `[k]`.
    /// The noise comes from libtorch's global generator (the caller seeds it per step).
    pub fn sample(&self, allowed: Option<&Tensor>) -> (Tensor, Tensor) {
        let u = Tensor::rand([self.logits.size()[0]], (Kind::Float, tch::Device::Cpu))
            .clamp(1e-10, 1.0 - 1e-7);
        let g = -(-u.log()).log();
        let z = ((self.masked(allowed) + g) / self.tau).softmax(0, Kind::Float);
        let idx = z.topk(self.k as i64, 0, true, false).1.sort(0, false).0;
        let zk = z.index_select(0, &idx);
        let w = match self.soft {
            true => zk,
            false => &zk / zk.detach(),
        };
        (idx, w)
    }

    /// The inference choice: the `k` largest logits among `allowed`, increasing.
    pub fn select(&self, allowed: Option<&Tensor>) -> Tensor {
        tch::no_grad(|| {
            self.masked(allowed)
                .topk(self.k as i64, 0, true, false)
                .1
                .sort(0, false)
                .0
        })
    }
}

/// WARE (SMEC eq. 10) of each dim of `a`, `b` (`[M, d]`, pairs row by row): the mean over pairs
/// of `|cos_without_i - cos| / |cos|`, where `cos_without_i` leaves dim `i` out. `[d]`.
pub fn ware(a: &Tensor, b: &Tensor) -> Tensor {
    let (a, b) = (a.to_kind(Kind::Double), b.to_kind(Kind::Double));
    let dot = (&a * &b).sum_dim_intlist([1i64].as_slice(), true, Kind::Double);
    let na = (&a * &a).sum_dim_intlist([1i64].as_slice(), true, Kind::Double);
    let nb = (&b * &b).sum_dim_intlist([1i64].as_slice(), true, Kind::Double);
    let y = &dot / (&na * &nb).sqrt();
    let y_hat = (&dot - &a * &b) / ((&na - &a * &a) * (&nb - &b * &b)).clamp_min(1e-30).sqrt();
    ((y_hat - &y).abs() / y.abs().clamp_min(1e-12)).mean_dim([0i64].as_slice(), false, Kind::Double)
}

/// The share of `chosen` dims that are among the `chosen.len()` dims of largest WARE (SMEC
/// Table 2's achievement rate).
pub fn achievement_rate(ware: &Tensor, chosen: &[i64]) -> f64 {
    let k = chosen.len() as i64;
    let top: Vec<i64> = Vec::try_from(ware.topk(k, 0, true, false).1).unwrap_or_default();
    chosen.iter().filter(|c| top.contains(c)).count() as f64 / k.max(1) as f64
}
