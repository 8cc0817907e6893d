//! Pooling of token states into one sentence vector, and Matryoshka truncation.

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

/// How token states become a sentence vector (sentence-transformers' `Pooling` modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// Mean over non-padding tokens.
    Mean,
    /// The first token (`[CLS]` / `<s>`).
    Cls,
    /// Element-wise max over non-padding tokens.
    Max,
    /// Sum over non-padding tokens divided by sqrt(length).
    MeanSqrtLen,
    /// The last non-padding token (on either padding side), as sentence-transformers'
    /// `lasttoken` mode.
    #[serde(rename = "lasttoken")]
    LastToken,
}

impl Pooling {
    /// Pools token states.
    ///
    /// # Shapes
    /// - `hidden`: `[batch, seq, hidden]`
    /// - `mask`: `[batch, seq]`, 1 for real tokens, 0 for padding (any numeric kind)
    /// - returns `[batch, hidden]`
    pub fn pool(&self, hidden: &Tensor, mask: &Tensor) -> Tensor {
        let weights = self.weights(mask, hidden.kind());
        self.pool_weighted(hidden, mask, weights.as_ref())
    }

    /// Whether this mode is a mean over the tokens (`Mean`, `MeanSqrtLen`): one batched product
    /// with per-token weights ([`Self::weights`]).
    pub fn is_mean(&self) -> bool {
        matches!(self, Pooling::Mean | Pooling::MeanSqrtLen)
    }

    /// The per-token weights of the means (`Mean`: 1 / length on the real tokens, `MeanSqrtLen`:
    /// 1 / sqrt(length)), so that pooling is one batched product: computed once per mask and
    /// shared by every layer pooled with it ([`Self::pool_weighted`]). `None` for the other
    /// modes. A row without a real token weighs nothing (a zero vector, as the mean gives).
    ///
    /// # Shapes
    /// - `mask`: `[batch, seq]` (any numeric kind); returns `[batch, 1, seq]` of `kind`
    pub fn weights(&self, mask: &Tensor, kind: Kind) -> Option<Tensor> {
        if !self.is_mean() {
            return None;
        }
        let m = mask.to_kind(kind).unsqueeze(1);
        let n = m.sum_dim_intlist(-1, true, kind).clamp_min(1e-9);
        Some(match self {
            Pooling::Mean => m / n,
            _ => m / n.sqrt(),
        })
    }

    /// [`Self::weights`] made on the host (float32) from each row's token count, written into
    /// `out` (zeros, `lengths.len() * len` values: rows of `lengths` real tokens, left-aligned,
    /// padded to `len`), a row's first `skip` tokens left out (a prompt's, as the pass's
    /// pooling mask does). The same values bit for bit: a row's count is exact in float32, and
    /// division and square root round alike on the host and in libtorch's kernels (IEEE).
    /// Returns false (writing nothing) for the modes without weights.
    pub fn host_weights(
        &self,
        lengths: &[usize],
        len: usize,
        skip: usize,
        out: &mut [f32],
    ) -> bool {
        if !self.is_mean() {
            return false;
        }
        for (&n, row) in lengths.iter().zip(out.chunks_exact_mut(len.max(1))) {
            let (from, to) = (skip.min(len), n.min(len));
            // the mask's sum, clamped as `weights` clamps it
            let count = (to.saturating_sub(from) as f32).max(1e-9);
            let w = match self {
                Pooling::Mean => 1.0 / count,
                _ => 1.0 / count.sqrt(),
            };
            if from < to {
                row[from..to].fill(w);
            }
        }
        true
    }

    /// [`Self::pool`] with the means' weights from [`Self::weights`] (for `mask`, in `hidden`'s
    /// kind), which the other modes ignore.
    ///
    /// # Shapes
    /// - `hidden`: `[batch, seq, hidden]`; `mask`: `[batch, seq]`; `weights`: `[batch, 1, seq]`
    /// - returns `[batch, hidden]`
    pub fn pool_weighted(
        &self,
        hidden: &Tensor,
        mask: &Tensor,
        weights: Option<&Tensor>,
    ) -> Tensor {
        match self {
            Pooling::Cls => hidden.select(1, 0),
            Pooling::Mean | Pooling::MeanSqrtLen => {
                let w = match weights {
                    Some(w) => w.shallow_clone(),
                    None => self
                        .weights(mask, hidden.kind())
                        .expect("a mean has weights"),
                };
                w.bmm(hidden).squeeze_dim(1)
            }
            Pooling::LastToken => {
                // the highest position whose mask is set: right or left padding alike
                let s = hidden.size()[1];
                let pos = Tensor::arange(s, (Kind::Int64, hidden.device())).unsqueeze(0);
                let last = (mask.to_kind(Kind::Int64) * (pos + 1)).argmax(1, false); // [b]
                let idx = last
                    .view([-1, 1, 1])
                    .expand([-1, 1, hidden.size()[2]], false);
                hidden.gather(1, &idx, false).squeeze_dim(1)
            }
            Pooling::Max => {
                let m = mask.to_kind(hidden.kind()).unsqueeze(-1); // [b, s, 1]
                let neg: Tensor = (1.0 - &m) * -1e9;
                (hidden + &neg).amax([1i64].as_slice(), false)
            }
        }
    }
}

/// Keeps the first `dim` coordinates and L2-normalises each row (Matryoshka truncation).
///
/// # Shapes
/// - `pooled`: `[batch, hidden]`; returns `[batch, dim]`
pub fn truncate_normalize(pooled: &Tensor, dim: usize) -> Tensor {
    let p = pooled.narrow(1, 0, dim as i64);
    l2_normalize(&p)
}

/// Row-wise L2 normalisation with sentence-transformers' epsilon (1e-12 on the norm): the one
/// tensor normalisation in Nest (the `f32`-slice twin is [`nest_core::vector::l2_normalize`],
/// same epsilon).
///
/// # Shapes
/// - `x`: `[..., d]`; returns the same shape, each last-axis row of unit norm (zero rows stay zero)
pub fn l2_normalize(x: &Tensor) -> Tensor {
    let norm = x
        .norm_scalaropt_dim(2.0, [-1i64].as_slice(), true)
        .clamp_min(f64::from(nest_core::vector::NORM_EPS));
    x / norm
}

/// Converts a float tensor to a `Vec<f32>` (on CPU, contiguous).
pub fn to_vec_f32(t: &Tensor) -> Vec<f32> {
    let t = t
        .to_device(tch::Device::Cpu)
        .to_kind(Kind::Float)
        .contiguous()
        .view([-1]);
    Vec::<f32>::try_from(&t).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_token_on_either_padding_side() {
        // [2, 3, 1]: row 0 right-padded (real 0..=1), row 1 left-padded (real 1..=2)
        let h = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).view([2, 3, 1]);
        let mask = Tensor::from_slice(&[1i64, 1, 0, 0, 1, 1]).view([2, 3]);
        let got = Vec::<f32>::try_from(Pooling::LastToken.pool(&h, &mask).view([-1])).unwrap();
        assert_eq!(got, vec![2.0, 6.0]);
    }
}
