//! The post-LayerNorm transformer block that BERT and MPNet share (they differ only in weight
//! names, given by [`LayerNames`], and in the attention bias MPNet adds), and the explicit loop
//! over layers that both models run ([`run_layers`]), with early exit and optional [CLS]-row
//! attention probabilities.

use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::config::ModelConfig;
use crate::encoder::{ClsAttention, EncoderOutput};

/// One transformer layer: self-attention, residual + LayerNorm, feed-forward, residual +
/// LayerNorm (Vaswani et al. 2017, post-norm as in BERT).
#[derive(Debug)]
pub(crate) struct Layer {
    query: nn::Linear,
    key: nn::Linear,
    value: nn::Linear,
    attn_out: nn::Linear,
    attn_norm: nn::LayerNorm,
    intermediate: nn::Linear,
    output: nn::Linear,
    out_norm: nn::LayerNorm,
}

/// Weight paths of one layer, relative to the layer's own path.
pub(crate) struct LayerNames {
    pub q: &'static str,
    pub k: &'static str,
    pub v: &'static str,
    pub o: &'static str,
    pub attn_norm: &'static str,
}

/// Head count and dropout rates a layer needs in its forward pass.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayerSettings {
    pub heads: i64,
    pub dropout: f64,
    pub attn_dropout: f64,
}

impl From<&ModelConfig> for LayerSettings {
    fn from(c: &ModelConfig) -> Self {
        LayerSettings {
            heads: c.num_attention_heads as i64,
            dropout: c.hidden_dropout_prob,
            attn_dropout: c.attention_probs_dropout_prob,
        }
    }
}

pub(crate) fn layer_norm(p: nn::Path, dim: usize, eps: f64) -> nn::LayerNorm {
    nn::layer_norm(
        p,
        vec![dim as i64],
        nn::LayerNormConfig {
            eps,
            ..Default::default()
        },
    )
}

pub(crate) fn linear(p: nn::Path, i: usize, o: usize) -> nn::Linear {
    nn::linear(p, i as i64, o as i64, Default::default())
}

/// Splits `[batch, seq, hidden]` into heads: `[batch, heads, seq, hidden / heads]`.
fn split_heads(t: &Tensor, heads: i64) -> Tensor {
    let (b, s, h) = t.size3().expect("attention input is [batch, seq, hidden]");
    t.view([b, s, heads, h / heads]).transpose(1, 2)
}

/// Multi-head self-attention with an additive float mask through libtorch's fused
/// `scaled_dot_product_attention`.
///
/// # Shapes
/// - `q`, `k`, `v`: `[batch, heads, seq, head_dim]`; `mask`: broadcastable to
///   `[batch, heads, seq, seq]`
/// - returns `[batch, seq, heads * head_dim]`
fn attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor, dropout: f64) -> Tensor {
    let (b, heads, s, dh) = q.size4().expect("q is [batch, heads, seq, head_dim]");
    let ctx =
        Tensor::scaled_dot_product_attention(q, k, v, Some(mask), dropout, false, None, false);
    ctx.transpose(1, 2).reshape([b, s, heads * dh])
}

/// The attention probabilities of the first query row ([CLS]) only, before attention dropout:
/// `softmax(q_0 k^T / sqrt(head_dim) + mask_0)`. Computed beside the fused kernel (which does
/// not return probabilities), at `O(batch * heads * seq * head_dim)` extra cost.
///
/// # Shapes
/// - `q`, `k`: `[batch, heads, seq, head_dim]`; `mask`: broadcastable to `[batch, heads, seq, seq]`
/// - returns `[batch, heads, seq]`
fn cls_attention(q: &Tensor, k: &Tensor, mask: &Tensor) -> Tensor {
    let dh = q.size()[3] as f64;
    let q0 = q.narrow(2, 0, 1); // [b, h, 1, dh]
    let scores = q0.matmul(&k.transpose(2, 3)) / dh.sqrt(); // [b, h, 1, s]
    let m0 = mask.narrow(2, 0, 1); // [b|1, 1|h, 1, s]
    (scores + m0).softmax(-1, q.kind()).squeeze_dim(2)
}

/// The additive attention mask: 0 where attended, the float minimum at padding.
///
/// # Shapes
/// - `mask`: `[batch, seq]` (1 = token); returns `[batch, 1, 1, seq]` float
pub(crate) fn additive_mask(mask: &Tensor, kind: Kind) -> Tensor {
    let m = mask.to_kind(kind).unsqueeze(1).unsqueeze(1);
    (1.0 - m) * f64::from(f32::MIN)
}

impl Layer {
    pub(crate) fn new(p: nn::Path, c: &ModelConfig, names: &LayerNames) -> Self {
        let (h, i, eps) = (c.hidden_size, c.intermediate_size, c.layer_norm_eps);
        let sub = |name: &str| name.split('.').fold(p.clone(), |acc, part| &acc / part);
        Layer {
            query: linear(sub(names.q), h, h),
            key: linear(sub(names.k), h, h),
            value: linear(sub(names.v), h, h),
            attn_out: linear(sub(names.o), h, h),
            attn_norm: layer_norm(sub(names.attn_norm), h, eps),
            intermediate: linear(&p / "intermediate" / "dense", h, i),
            output: linear(&p / "output" / "dense", i, h),
            out_norm: layer_norm(&p / "output" / "LayerNorm", h, eps),
        }
    }

    /// One layer; with `want_cls`, also the [CLS]-row attention probabilities.
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, hidden]`; `mask`: additive, broadcastable to `[batch, heads, seq, seq]`
    /// - returns `[batch, seq, hidden]` and, if asked, `[batch, heads, seq]`
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        mask: &Tensor,
        s: LayerSettings,
        train: bool,
        want_cls: bool,
    ) -> (Tensor, Option<Tensor>) {
        let drop = if train { s.attn_dropout } else { 0.0 };
        let q = split_heads(&self.query.forward(x), s.heads);
        let k = split_heads(&self.key.forward(x), s.heads);
        let v = split_heads(&self.value.forward(x), s.heads);
        let cls = want_cls.then(|| cls_attention(&q, &k, mask));
        let ctx = attention(&q, &k, &v, mask, drop);
        let a = (self.attn_out.forward(&ctx).dropout(s.dropout, train) + x).apply(&self.attn_norm);
        let f = self.intermediate.forward(&a).gelu("none");
        let y = (self.output.forward(&f).dropout(s.dropout, train) + a).apply(&self.out_norm);
        (y, cls)
    }
}

/// The explicit loop over the first `layers` layers (early exit: the rest are not computed),
/// collecting every layer's hidden states and, when asked, its [CLS] attention row.
///
/// # Shapes
/// - `x`: `[batch, seq, hidden]` (embedding output); `mask`: additive
/// - output `hidden_states`: `layers + 1` tensors `[batch, seq, hidden]` (index 0 = `x`);
///   `cls_attention`: `layers` tensors `[batch, heads, seq]` (per head) or `[batch, seq]` (mean
///   over heads), empty for [`ClsAttention::None`]
pub(crate) fn run_layers(
    stack: &[Layer],
    x: Tensor,
    mask: &Tensor,
    s: LayerSettings,
    layers: usize,
    train: bool,
    capture: ClsAttention,
) -> EncoderOutput {
    let want = capture != ClsAttention::None;
    let mut hidden_states = Vec::with_capacity(layers + 1);
    let mut cls_attention = Vec::new();
    hidden_states.push(x);
    for layer in stack.iter().take(layers) {
        let (next, cls) = layer.forward(
            hidden_states.last().expect("non-empty"),
            mask,
            s,
            train,
            want,
        );
        hidden_states.push(next);
        if let Some(a) = cls {
            cls_attention.push(match capture {
                ClsAttention::Mean => a.mean_dim(1, false, a.kind()),
                _ => a,
            });
        }
    }
    EncoderOutput {
        hidden_states,
        cls_attention,
    }
}
