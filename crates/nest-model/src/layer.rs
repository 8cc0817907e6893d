//! The post-LayerNorm transformer block that BERT and MPNet share (they differ only in weight
//! names, given by [`LayerNames`], and in the attention bias MPNet adds), and the explicit loop
//! over layers that both models run ([`run_layers`]), with early exit and optional [CLS]-row
//! attention probabilities.

use tch::nn;
use tch::{Kind, Tensor};

use crate::config::ModelConfig;
use crate::dtype::Dtype;
pub(crate) use crate::host_made::additive_mask;
use crate::io::{ClsAttention, EncoderOutput, Exits};
use crate::linear::Linear;
use crate::packing::Packing;

/// One transformer layer: self-attention, residual + LayerNorm, feed-forward, residual +
/// LayerNorm (Vaswani et al. 2017, post-norm as in BERT).
///
/// In bf16 training (mixed precision) the products (linear layers, attention) run in bfloat16
/// while the residual stream and the LayerNorms stay float32: a bf16 linear output added to the
/// float32 residual promotes to float32, as `torch.autocast` keeps `layer_norm` in float32. An
/// encoder converted to bf16 for inference runs the stream in bf16 too (no casts per layer).
#[derive(Debug)]
pub(crate) struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: nn::LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: nn::LayerNorm,
    /// After a conversion for inference: q, k and v fused into one product (bf16), or q and k
    /// (int8, where v stays float32); `None` in float32 and in training.
    fused: Option<Fused>,
}

/// Projections fused into one linear layer, and how many (2: q, k; 3: q, k, v).
#[derive(Debug)]
struct Fused {
    linear: Linear,
    parts: usize,
}

/// Weight paths of one layer, relative to the layer's own path.
pub(crate) struct LayerNames {
    pub q: &'static str,
    pub k: &'static str,
    pub v: &'static str,
    pub o: &'static str,
    pub attn_norm: &'static str,
}

/// Head count, dropout rates and the arithmetic a layer needs in its forward pass.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LayerSettings {
    pub heads: i64,
    pub dropout: f64,
    pub attn_dropout: f64,
    /// The kind of the unquantised products (float32, or bf16 under [`Dtype::Bf16`]).
    pub compute: Kind,
    /// The kind of the residual stream: float32, except for an encoder converted to bf16 for
    /// inference, which runs every op in bf16 as sentence-transformers' bf16 does (LayerNorm
    /// still accumulates in float32 inside libtorch's kernel).
    pub stream: Kind,
}

impl From<&ModelConfig> for LayerSettings {
    fn from(c: &ModelConfig) -> Self {
        LayerSettings {
            heads: c.num_attention_heads as i64,
            dropout: c.hidden_dropout_prob,
            attn_dropout: c.attention_probs_dropout_prob,
            compute: Kind::Float,
            stream: Kind::Float,
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

pub(crate) fn linear(p: nn::Path, i: usize, o: usize) -> Linear {
    Linear::new(p, i, o)
}

/// Splits `[batch, seq, hidden]` into heads: `[batch, heads, seq, hidden / heads]`.
fn split_heads(t: &Tensor, heads: i64) -> Tensor {
    let (b, s, h) = t.size3().expect("attention input is [batch, seq, hidden]");
    t.view([b, s, heads, h / heads]).transpose(1, 2)
}

/// Multi-head self-attention with an additive float mask ([`crate::attention::attend`]).
///
/// # Shapes
/// - `q`, `k`, `v`: `[batch, heads, seq, head_dim]`; `mask`: broadcastable to
///   `[batch, heads, seq, seq]`
/// - returns `[batch, seq, heads * head_dim]`
fn attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor, dropout: f64) -> Tensor {
    let (b, heads, s, dh) = q.size4().expect("q is [batch, heads, seq, head_dim]");
    let ctx = crate::attention::attend(q, k, v, mask, dropout, None);
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
    // float32 whatever the products' kind: these are softmax statistics that losses read
    let q0 = q.narrow(2, 0, 1).to_kind(Kind::Float); // [b, h, 1, dh]
    let kt = k.transpose(2, 3).to_kind(Kind::Float);
    let scores = q0.matmul(&kt) / dh.sqrt(); // [b, h, 1, s]
    let m0 = mask.narrow(2, 0, 1).to_kind(Kind::Float); // [b|1, 1|h, 1, s]
    (scores + m0).softmax(-1, Kind::Float).squeeze_dim(2)
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
            fused: None,
        }
    }

    /// One layer; with `want_cls`, also the [CLS]-row attention probabilities. With a
    /// `packing`, `x` and the output hold the real tokens only (see [`Packing`]).
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, hidden]`, or `[tokens, hidden]` with a packing; `mask`: additive,
    ///   broadcastable to `[batch, heads, seq, seq]`
    /// - returns the shape of `x` and, if asked, `[batch, heads, seq]`
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        mask: &Tensor,
        packing: Option<&Packing>,
        s: LayerSettings,
        (train, want_cls): (bool, bool),
    ) -> (Tensor, Option<Tensor>) {
        let drop = if train { s.attn_dropout } else { 0.0 };
        let c = s.compute;
        let (q, k, v) = self.project(x, c);
        let heads = |t: Tensor| split_heads(&Packing::padded(packing, t), s.heads);
        let (q, k, v) = (heads(q), heads(k), heads(v));
        let cls = want_cls.then(|| cls_attention(&q, &k, mask));
        let ctx = attention(&q, &k, &v, mask, drop);
        let ctx = Packing::packed(packing, ctx);
        let a =
            (self.attn_out.forward(&ctx, c).dropout(s.dropout, train) + x).apply(&self.attn_norm);
        let f = self.intermediate.forward(&a, c).gelu("none");
        let y = (self.output.forward(&f, c).dropout(s.dropout, train) + a).apply(&self.out_norm);
        (y, cls)
    }

    /// The query, key and value projections, through the fused product where there is one.
    ///
    /// # Shapes
    /// - `x`: `[batch, seq, hidden]`; returns three `[batch, seq, hidden]`
    fn project(&self, x: &Tensor, c: Kind) -> (Tensor, Tensor, Tensor) {
        let Some(f) = &self.fused else {
            if c == Kind::Float {
                return (
                    self.query.forward(x, c),
                    self.key.forward(x, c),
                    self.value.forward(x, c),
                );
            }
            // mixed precision: one product on the float32 master weights concatenated and cast
            // (autograd takes the gradients back through the cast and the concatenation)
            let y = Linear::concat_forward(&[&self.query, &self.key, &self.value], x, c);
            let mut parts = y.chunk(3, -1).into_iter();
            let mut next = || parts.next().expect("three parts");
            return (next(), next(), next());
        };
        let y = f.linear.forward(x, c);
        let h = y.size().last().copied().unwrap_or(0) / f.parts as i64;
        let mut parts = y.split(h, -1).into_iter();
        let (q, k) = (parts.next().expect("q part"), parts.next().expect("k part"));
        let v = match parts.next() {
            Some(v) => v,
            None => self.value.forward(x, c).to_kind(q.kind()),
        };
        (q, k, v)
    }

    /// Converts the layer's linear weights for inference in `dtype` (see [`Linear::convert`]);
    /// under int8, the one projection left unquantised (v) runs in `rest` (float32, or bf16
    /// where this machine's bf16 products measured fast).
    pub(crate) fn convert(&mut self, dtype: Dtype, rest: Dtype) {
        if dtype == Dtype::Bf16 {
            let _g = tch::no_grad_guard();
            for norm in [&mut self.attn_norm, &mut self.out_norm] {
                for t in [&mut norm.ws, &mut norm.bs].into_iter().flatten() {
                    t.set_data(&t.to_kind(Kind::BFloat16));
                }
            }
        }
        // int8 keeps the value projection in float32: chosen on STS-B dev and SICK-R dev
        // (untrained all-MiniLM-L6-v2, layer 6, dims 16..384) over quantising all six, which
        // lost up to 0.30 Spearman there; keeping v lost at most 0.13, and keeping it in bf16 at
        // most 0.12. Re-checked with the per-row offsets (both the untrained and a 2DMSE model,
        // every layer): quantising v too doubled the vectors' error against float32
        // (docs/PRECISION.md).
        // The products that share an input are fused (q, k, v in bf16; q, k in int8)
        match dtype {
            Dtype::Float32 => return,
            Dtype::Bf16 => {
                let mut parts = [&mut self.query, &mut self.key, &mut self.value];
                let linear = Linear::fuse(&mut parts, dtype);
                self.fused = Some(Fused { linear, parts: 3 });
            }
            Dtype::Int8 => {
                let mut parts = [&mut self.query, &mut self.key];
                let linear = Linear::fuse(&mut parts, dtype);
                self.fused = Some(Fused { linear, parts: 2 });
                if rest == Dtype::Bf16 {
                    self.value.convert(Dtype::Bf16);
                }
            }
        }
        for l in [&mut self.attn_out, &mut self.intermediate, &mut self.output] {
            l.convert(dtype);
        }
    }
}

/// Sets a stack's arithmetic: the products' kind and, with `convert` (inference), the stream's
/// kind and every layer's weights (see [`Layer::convert`]). BERT and MPNet share it.
pub(crate) fn set_stack_dtype(
    settings: &mut LayerSettings,
    layers: &mut [Layer],
    dtype: Dtype,
    convert: bool,
    rest: Dtype,
) {
    settings.compute = dtype.matmul_kind();
    if convert {
        if dtype == Dtype::Bf16 {
            settings.stream = Kind::BFloat16;
        }
        layers.iter_mut().for_each(|l| l.convert(dtype, rest));
    }
}

/// The explicit loop over the first `exits.depth()` layers (early exit: the rest are not
/// computed), collecting the hidden states `exits` keeps and, when asked, every layer's [CLS]
/// attention row.
///
/// # Shapes
/// - `x`: `[batch, seq, hidden]` (embedding output); `mask`: additive; `tokens`: `[batch, seq]`
///   (nonzero = real token), which the layers use to skip the padding (see [`Packing`])
/// - output `hidden_states`: the kept states `[batch, seq, hidden]` (all `layers + 1`, index 0
///   = `x`, for [`Exits::UpTo`]);
///   `cls_attention`: `layers` tensors `[batch, heads, seq]` (per head) or `[batch, seq]` (mean
///   over heads), empty for [`ClsAttention::None`]
pub(crate) fn run_layers(
    stack: &[Layer],
    x: Tensor,
    (mask, tokens): (&Tensor, &Tensor),
    s: LayerSettings,
    exits: Exits<'_>,
    train: bool,
    capture: ClsAttention,
) -> EncoderOutput {
    let want = capture != ClsAttention::None;
    // the embeddings in the stream's kind, the other kind's copy freed here
    let x = { x }.to_kind(s.stream);
    let packing = Packing::new(tokens);
    let mut stream = Packing::packed(packing.as_ref(), x.shallow_clone());
    let mut hidden_states = Vec::with_capacity(exits.depth() + 1);
    let mut cls_attention = Vec::new();
    // the embeddings, unless kept, are freed once the first layer has run
    match exits.keeps(0) {
        true => hidden_states.push(x),
        false => drop(x),
    }
    for (i, layer) in stack.iter().take(exits.depth()).enumerate() {
        let (next, cls) = layer.forward(&stream, mask, packing.as_ref(), s, (train, want));
        if exits.keeps(i + 1) {
            hidden_states.push(Packing::padded(packing.as_ref(), next.shallow_clone()));
        }
        stream = next;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Architecture;
    use crate::tiny::{tiny_config, TinySpec};

    /// A layer on packed real tokens gives what the padded layer gives at the real positions,
    /// in the forward pass and in the gradients (float32 reordering only: 1e-5).
    #[test]
    fn packed_layer_matches_the_padded_layer() {
        tch::manual_seed(7);
        let c = tiny_config(&TinySpec::new(Architecture::Bert));
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let names = LayerNames {
            q: "q",
            k: "k",
            v: "v",
            o: "o",
            attn_norm: "n",
        };
        let layer = Layer::new(vs.root(), &c, &names);
        let s = LayerSettings::from(&c);
        let tokens = Tensor::from_slice(&[1i64, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0]).view([3, 4]);
        let x = Tensor::randn(
            [3, 4, c.hidden_size as i64],
            (Kind::Float, tch::Device::Cpu),
        );
        let mask = additive_mask(&tokens, Kind::Float);
        let p = Packing::new(&tokens).expect("the batch has padding");
        let (padded, cls_padded) = layer.forward(&x, &mask, None, s, (false, true));
        let (packed, cls_packed) = layer.forward(&p.pack(&x), &mask, Some(&p), s, (false, true));
        let real = tokens.unsqueeze(-1).to_kind(Kind::Float);
        let diff = ((&padded - p.unpack(&packed)) * &real)
            .abs()
            .max()
            .double_value(&[]);
        assert!(diff < 1e-5, "forward differs by {diff}");
        let (a, b) = (cls_padded.unwrap(), cls_packed.unwrap());
        assert!((a - b).abs().max().double_value(&[]) < 1e-6);
        assert_eq!(p.pack(&x).size()[0], 9);
        // the loss of the real tokens only: the same gradients on every weight
        let grads = |y: &Tensor| {
            for mut v in vs.trainable_variables() {
                v.zero_grad();
            }
            (y * y).sum(Kind::Float).backward();
            vs.trainable_variables()
                .iter()
                .map(|v| v.grad().copy())
                .collect::<Vec<_>>()
        };
        let g1 = grads(&(layer.forward(&x, &mask, None, s, (false, false)).0 * &real));
        let g2 = grads(
            &layer
                .forward(&p.pack(&x), &mask, Some(&p), s, (false, false))
                .0,
        );
        for (a, b) in g1.iter().zip(&g2) {
            let d = (a - b).abs().max().double_value(&[]);
            assert!(
                d < 1e-4 * (1.0 + a.abs().max().double_value(&[])),
                "gradient differs by {d}"
            );
        }
        // no padding: no packing
        assert!(Packing::new(&Tensor::ones([2, 3], (Kind::Int64, tch::Device::Cpu))).is_none());
    }
}
