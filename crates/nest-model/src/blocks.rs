//! Pieces the rotary architectures share ([`crate::modernbert`], [`crate::qwen3`],
//! [`crate::gemma3`]) and nothing more: RMSNorm, rotary tables and rotation, attention masks.
//! BERT-family blocks are in [`crate::layer`].

use tch::nn;
use tch::{Device, Kind, Tensor};

use crate::dtype::Dtype;
use crate::io::{EncoderOutput, Exits};
use crate::length_cache::LengthCache;
use crate::linear::Linear;
use crate::packing::Packing;

/// RMSNorm (Zhang & Sennrich 2019, arXiv:1910.07467): `x / sqrt(mean(x^2) + eps) * w`, in
/// float32; Gemma's form scales by `1 + w` (its weights start at 0).
#[derive(Debug)]
pub(crate) struct RmsNorm {
    weight: Tensor,
    eps: f64,
    unit_offset: bool,
}

impl RmsNorm {
    /// `unit_offset`: Gemma's `(1 + w)` scale (weights initialised at 0) instead of `w` (at 1).
    pub(crate) fn new(p: nn::Path, dim: usize, eps: f64, unit_offset: bool) -> Self {
        let init = if unit_offset { 0.0 } else { 1.0 };
        RmsNorm {
            weight: p.var("weight", &[dim as i64], nn::Init::Const(init)),
            eps,
            unit_offset,
        }
    }

    /// # Shapes
    /// - `x`: `[..., dim]`; returns the same shape, in `x`'s kind
    pub(crate) fn forward(&self, x: &Tensor) -> Tensor {
        let xf = x.to_kind(Kind::Float);
        let var = xf.square().mean_dim([-1i64].as_slice(), true, Kind::Float);
        let normed = xf * (var + self.eps).rsqrt();
        let y = match self.unit_offset {
            true => normed * (&self.weight + 1.0),
            false => normed * &self.weight,
        };
        y.to_kind(x.kind())
    }
}

/// The explicit loop over a pre-norm stack with early exit: `x` through the first
/// `exits.depth()` of `layers` (`step`), recording the embeddings and, after each layer
/// `exits` keeps, the model's final norm of the stream (`norm`), so every exit is on the scale
/// of the last one. The layers run on the
/// real tokens only where the batch has padding (`step` gets the [`Packing`]; the recorded
/// states are padded again, zeros at the padding).
///
/// # Shapes
/// - `x`: `[batch, seq, hidden]`; `tokens`: `[batch, seq]` (nonzero = real token); returns
///   the kept states `[batch, seq, hidden]` (all `n + 1` for [`Exits::UpTo`]), no attention
///   rows
pub(crate) fn pre_norm_exits<L>(
    x: Tensor,
    tokens: &Tensor,
    (layers, exits): (&[L], Exits<'_>),
    step: impl Fn(&L, &Tensor, Option<&Packing>) -> Tensor,
    norm: impl Fn(&Tensor) -> Tensor,
) -> EncoderOutput {
    let packing = Packing::new(tokens);
    let mut stream = Packing::packed(packing.as_ref(), x.shallow_clone());
    let mut hidden_states = Vec::with_capacity(exits.depth() + 1);
    // the embeddings, unless kept, are freed once the first layer has run
    match exits.keeps(0) {
        true => hidden_states.push(x),
        false => drop(x),
    }
    for (i, layer) in layers.iter().take(exits.depth()).enumerate() {
        stream = step(layer, &stream, packing.as_ref());
        if exits.keeps(i + 1) {
            hidden_states.push(Packing::padded(packing.as_ref(), norm(&stream)));
        }
    }
    EncoderOutput {
        hidden_states,
        cls_attention: Vec::new(),
    }
}

/// Converts every given linear layer's weights for inference in `dtype` (the rotary
/// architectures keep norms and the stream in float32).
pub(crate) fn convert_linears<'a>(linears: impl IntoIterator<Item = &'a mut Linear>, dtype: Dtype) {
    for lin in linears {
        lin.convert(dtype);
    }
}

/// A rotary embedding: its inverse frequencies ([`inv_freq`]) and its tables cached by length
/// ([`LengthCache`]: computed once, not in every pass).
#[derive(Debug)]
pub(crate) struct Rope {
    inv: Tensor,
    tables: LengthCache<(Device, Kind)>,
}

impl Rope {
    pub(crate) fn new(theta: f64, head_dim: i64, dev: Device) -> Rope {
        Rope {
            inv: inv_freq(theta, head_dim, dev),
            tables: LengthCache::default(),
        }
    }

    /// [`rope_table`] of positions `0..n` on `dev` in `kind`: rows of the cached table (views).
    ///
    /// # Shapes
    /// - returns two `[n, head_dim]`
    pub(crate) fn table(&self, n: i64, dev: Device, kind: Kind) -> (Tensor, Tensor) {
        let t = self.tables.at_least((dev, kind), n, |len| {
            let (cos, sin) = rope_table(&self.inv.to_device(dev), len, kind);
            vec![cos, sin]
        });
        (t[0].narrow(0, 0, n), t[1].narrow(0, 0, n))
    }
}

/// Rotary inverse frequencies `theta^(-2i/d)` for `i < d/2` (RoFormer, Su et al. 2021,
/// arXiv:2104.09864; transformers' default rope).
///
/// # Shapes
/// - returns `[head_dim / 2]` float32
pub(crate) fn inv_freq(theta: f64, head_dim: i64, dev: Device) -> Tensor {
    (Tensor::arange(head_dim / 2, (Kind::Double, dev)) * (-2.0 / head_dim as f64) * theta.ln())
        .exp()
        .to_kind(Kind::Float)
}

/// (cos, signed sin) of positions `0..n` in transformers' layout (the frequencies repeated
/// twice), in `kind` (the queries' and keys', so that no layer converts them: on a GPU each
/// conversion is a kernel). The sin carries `rotate_half`'s minus sign on its first half, so
/// that [`rotate`] needs no negation: `(-b) sin = b (-sin)` bit for bit, and rounding to `kind`
/// is symmetric in the sign.
///
/// # Shapes
/// - `inv`: `[head_dim / 2]`; returns two `[n, head_dim]`
pub(crate) fn rope_table(inv: &Tensor, n: i64, kind: Kind) -> (Tensor, Tensor) {
    let pos = Tensor::arange(n, (Kind::Float, inv.device()));
    let f = pos.unsqueeze(1) * inv.unsqueeze(0);
    let (cos, sin) = (f.cos(), f.sin());
    (
        Tensor::cat(&[&cos, &cos], 1).to_kind(kind),
        Tensor::cat(&[&sin.neg(), &sin], 1).to_kind(kind),
    )
}

/// Rotary embedding in transformers' layout: `x cos + rotate_half(x) sin`,
/// `rotate_half([a, b]) = [-b, a]`, with the sign in the table ([`rope_table`]): `x cos + [b, a]
/// sin'`.
///
/// # Shapes
/// - `x`: `[batch, heads, seq, head_dim]`; `cos`, `sin`: `[seq, head_dim]` (from [`rope_table`])
pub(crate) fn rotate(x: &Tensor, (cos, sin): &(Tensor, Tensor)) -> Tensor {
    let half = x.size()[3] / 2;
    let (a, b) = (x.narrow(3, 0, half), x.narrow(3, half, half));
    let rot = Tensor::cat(&[b, a], 3);
    let kind = |t: &Tensor| match t.kind() == x.kind() {
        true => t.shallow_clone(),
        false => t.to_kind(x.kind()),
    };
    x * kind(cos) + rot * kind(sin)
}

/// Causal attention over the real tokens: query `i` sees keys `j <= i` that are not padding.
/// A padding query (right padding) still sees the real tokens before it, so no row is empty.
///
/// # Shapes
/// - `mask`: `[batch, seq]` (1 real, 0 padding); returns bool `[batch, 1, seq, seq]`
pub(crate) fn causal(mask: &Tensor) -> Tensor {
    let n = mask.size()[1];
    let lower = Tensor::ones([n, n], (Kind::Bool, mask.device())).tril(0); // [q, k]
    keys(mask).logical_and(&lower.unsqueeze(0).unsqueeze(0))
}

/// The real tokens as keys.
///
/// # Shapes
/// - `mask`: `[batch, seq]`; returns bool `[batch, 1, 1, seq]`
pub(crate) fn keys(mask: &Tensor) -> Tensor {
    mask.ne(0).unsqueeze(1).unsqueeze(1)
}

/// A bidirectional window: `|i - j| <= half`.
///
/// # Shapes
/// - returns bool `[1, 1, n, n]`
pub(crate) fn window(n: i64, half: i64, dev: Device) -> Tensor {
    let pos = Tensor::arange(n, (Kind::Int64, dev));
    (pos.unsqueeze(1) - pos.unsqueeze(0))
        .abs()
        .le(half)
        .unsqueeze(0)
        .unsqueeze(0)
}

/// A sliding window's pairs `|i - j| <= reach`, cached by length ([`LengthCache`]: its four
/// operators run once per length and device, not in every pass).
#[derive(Debug)]
pub(crate) struct Window {
    reach: i64,
    made: LengthCache<Device>,
}

impl Window {
    pub(crate) fn new(reach: i64) -> Window {
        Window {
            reach,
            made: LengthCache::default(),
        }
    }

    /// [`window`] of `n` positions on `dev`: the corner of the cached one (a view).
    ///
    /// # Shapes
    /// - returns bool `[1, 1, n, n]`
    pub(crate) fn at(&self, n: i64, dev: Device) -> Tensor {
        let t = self
            .made
            .at_least(dev, n, |len| vec![window(len, self.reach, dev)]);
        t[0].narrow(2, 0, n).narrow(3, 0, n)
    }
}

/// The allowed (query, key) pairs of full-attention and of sliding-window layers: every real key
/// (bidirectional) or every real key up to the query (causal), and of those the keys within
/// `near`'s reach.
///
/// # Shapes
/// - `mask`: `[batch, seq]`; returns two bool `[batch, 1, seq, seq]`
pub(crate) fn full_and_sliding(
    mask: &Tensor,
    bidirectional: bool,
    near: &Window,
) -> (Tensor, Tensor) {
    let n = mask.size()[1];
    let near = near.at(n, mask.device());
    let full = match bidirectional {
        true => keys(mask).expand([-1, 1, n, n], false),
        false => causal(mask),
    };
    let sliding = full.logical_and(&near);
    (full, sliding)
}

/// An additive float mask from an allowed-pairs mask (0 where allowed, float32's minimum
/// elsewhere: finite, so a row with nothing allowed gives uniform weights, never NaN).
///
/// # Shapes
/// - `allowed`: bool, any shape; returns float32 of the same shape
pub(crate) fn additive(allowed: &Tensor) -> Tensor {
    Tensor::where_scalar(allowed, 0.0, f64::from(f32::MIN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causal_mask_hides_future_and_padding() {
        let m = causal(&Tensor::from_slice(&[1i64, 1, 0]).view([1, 3]));
        let v = Vec::<f32>::try_from(m.view([-1]).to_kind(Kind::Float)).unwrap();
        // rows = queries; 1 = visible
        assert_eq!(v, vec![1., 0., 0., 1., 1., 0., 1., 1., 0.]);
        let w = Vec::<f32>::try_from(window(3, 1, Device::Cpu).view([-1]).to_kind(Kind::Float));
        assert_eq!(w.unwrap(), vec![1., 1., 0., 1., 1., 1., 0., 1., 1.]);
    }
}
