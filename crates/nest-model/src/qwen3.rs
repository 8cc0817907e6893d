//! Qwen3 (Qwen Team 2025, "Qwen3 Technical Report", arXiv:2505.09388) as Qwen3-Embedding uses
//! it ("Qwen3 Embedding", arXiv:2506.05176): a decoder with RMSNorm before attention and
//! feed-forward, rotary position embeddings, grouped-query attention with RMSNorm on each
//! head's queries and keys, SwiGLU, causal attention, no biases; pooled by its last token (EOS,
//! which the tokenizer's template appends). Weight names as Hugging Face `Qwen3Model`
//! (`transformers/models/qwen3/modeling_qwen3.py`: `Qwen3Attention.forward`,
//! `Qwen3DecoderLayer.forward`, `Qwen3Model.forward`).
//!
//! Early exit: the exit at layer `l` is the final RMSNorm of the residual stream after `l`
//! layers (at the last layer exactly transformers' `last_hidden_state`), so every exit sits on
//! the scale the pooling and the trained head expect.
//!
//! Padding: Nest pads on the right. With causal attention a real token never sees padding, the
//! last-token pooling finds the last real token on either side, and rotary attention depends
//! only on position differences, so the vectors equal those of Qwen3-Embedding's left padding
//! (up to float rounding; the parity test runs the reference left-padded).

use serde::Deserialize;
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::blocks::{additive, causal, convert_linears, pre_norm_exits, rotate, RmsNorm, Rope};
use crate::config::ModelConfig;
use crate::dtype::Dtype;
use crate::io::{ClsAttention, EncoderInput, EncoderOutput, Exits};
use crate::linear::Linear;
use crate::packing::Packing;

/// Qwen3's own keys of `config.json` (the common ones are in [`ModelConfig`]).
#[derive(Debug, Clone, Deserialize)]
pub struct Qwen3Config {
    /// Key/value heads of grouped-query attention (default: every head).
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    /// Per-head width (default `hidden_size / num_attention_heads`).
    #[serde(default)]
    pub head_dim: Option<usize>,
    #[serde(default = "default_rms_eps")]
    pub rms_norm_eps: f64,
    /// transformers 4 writes `rope_theta`, 5 `rope_parameters.rope_theta`.
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub rope_parameters: Option<serde_json::Value>,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub attention_dropout: f64,
    #[serde(default)]
    pub use_sliding_window: bool,
    #[serde(default)]
    pub layer_types: Vec<String>,
    #[serde(default = "default_act")]
    pub hidden_act: String,
}

fn default_rms_eps() -> f64 {
    1e-6
}
fn default_act() -> String {
    "silu".into()
}

impl Qwen3Config {
    /// Parses and checks Qwen3's keys; the error names the key at fault.
    pub fn from_model(c: &ModelConfig) -> std::result::Result<Self, String> {
        let q: Qwen3Config = c.parse_extra()?;
        if q.hidden_act != "silu" {
            return Err(format!(
                "hidden_act '{}' is not supported for qwen3 (supported: silu)",
                q.hidden_act
            ));
        }
        let kv = q.kv_heads(c);
        if kv == 0 || !c.num_attention_heads.is_multiple_of(kv) {
            return Err(format!(
                "num_key_value_heads {kv} does not divide num_attention_heads {}",
                c.num_attention_heads
            ));
        }
        let d = q.head_dim(c);
        if d == 0 || !d.is_multiple_of(2) {
            // rotary embeddings rotate coordinate pairs
            return Err(format!("head_dim {d} must be even and >= 2"));
        }
        if q.use_sliding_window {
            return Err(
                "use_sliding_window = true is not supported (sliding-window attention)".into(),
            );
        }
        if let Some(t) = q.layer_types.iter().find(|t| *t != "full_attention") {
            return Err(format!(
                "layer_types has '{t}'; only full_attention layers are supported"
            ));
        }
        Ok(q)
    }

    fn kv_heads(&self, c: &ModelConfig) -> usize {
        self.num_key_value_heads.unwrap_or(c.num_attention_heads)
    }

    fn head_dim(&self, c: &ModelConfig) -> usize {
        self.head_dim
            .unwrap_or(c.hidden_size / c.num_attention_heads.max(1))
    }

    /// The rotary base (transformers' default 10000).
    pub fn rope_theta(&self) -> f64 {
        crate::config::rope_theta(self.rope_theta, self.rope_parameters.as_ref(), None)
    }
}

/// One decoder layer.
#[derive(Debug)]
struct Qwen3Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    gate: Linear,
    up: Linear,
    down: Linear,
    input_norm: RmsNorm,
    post_attn_norm: RmsNorm,
}

/// Shapes of the attention.
#[derive(Debug, Clone, Copy)]
struct Heads {
    q: i64,
    kv: i64,
    dim: i64,
}

/// The Qwen3 model: token embeddings, decoder layers, the final norm (no LM head).
#[derive(Debug)]
pub struct Qwen3 {
    embed: nn::Embedding,
    layers: Vec<Qwen3Layer>,
    norm: RmsNorm,
    heads: Heads,
    /// Rotary inverse frequencies `theta^(-2i/d)`: `[head_dim / 2]`.
    rope: Rope,
    attn_dropout: f64,
    compute: Kind,
}

impl Qwen3Layer {
    fn new(p: nn::Path, c: &ModelConfig, q: &Qwen3Config, h: Heads) -> Self {
        let (d, i, eps) = (c.hidden_size, c.intermediate_size, q.rms_norm_eps);
        let bias = q.attention_bias;
        let a = &p / "self_attn";
        let m = &p / "mlp";
        let (qd, kvd) = ((h.q * h.dim) as usize, (h.kv * h.dim) as usize);
        Qwen3Layer {
            q: Linear::with_bias(&a / "q_proj", d, qd, bias),
            k: Linear::with_bias(&a / "k_proj", d, kvd, bias),
            v: Linear::with_bias(&a / "v_proj", d, kvd, bias),
            o: Linear::with_bias(&a / "o_proj", qd, d, bias),
            q_norm: RmsNorm::new(&a / "q_norm", h.dim as usize, eps, false),
            k_norm: RmsNorm::new(&a / "k_norm", h.dim as usize, eps, false),
            gate: Linear::with_bias(&m / "gate_proj", d, i, false),
            up: Linear::with_bias(&m / "up_proj", d, i, false),
            down: Linear::with_bias(&m / "down_proj", i, d, false),
            input_norm: RmsNorm::new(&p / "input_layernorm", d, eps, false),
            post_attn_norm: RmsNorm::new(&p / "post_attention_layernorm", d, eps, false),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, seq, hidden]` float32, or `[tokens, hidden]` under a packing; `rope`:
    ///   (cos, sin) `[seq, head_dim]`; `mask`: additive `[batch, 1, seq, seq]`; returns the
    ///   shape of `x`
    fn forward(
        &self,
        x: &Tensor,
        (rope, mask): (&(Tensor, Tensor), &Tensor),
        packing: Option<&Packing>,
        s: StepArgs,
    ) -> Tensor {
        let h = self.input_norm.forward(x);
        let q = Packing::padded(packing, self.q.forward(&h, s.compute));
        let (b, n, _) = q.size3().expect("q is [batch, seq, width]");
        let split = |t: Tensor, heads: i64| t.view([b, n, heads, s.heads.dim]);
        let q = self.q_norm.forward(&split(q, s.heads.q));
        let k = Packing::padded(packing, self.k.forward(&h, s.compute));
        let k = self.k_norm.forward(&split(k, s.heads.kv));
        let v = split(
            Packing::padded(packing, self.v.forward(&h, s.compute)),
            s.heads.kv,
        );
        let (q, k) = (
            rotate(&q.transpose(1, 2), rope),
            rotate(&k.transpose(1, 2), rope),
        );
        let rep = s.heads.q / s.heads.kv;
        let (k, v) = (
            k.repeat_interleave_self_int(rep, 1, None),
            v.transpose(1, 2).repeat_interleave_self_int(rep, 1, None),
        );
        let drop = if s.train { s.attn_dropout } else { 0.0 };
        let ctx = crate::attention::attend(&q, &k, &v, mask, drop, None)
            .transpose(1, 2)
            .reshape([b, n, s.heads.q * s.heads.dim]);
        let ctx = Packing::packed(packing, ctx);
        let x = x + self.o.forward(&ctx, s.compute).to_kind(x.kind());
        let h = self.post_attn_norm.forward(&x);
        let act = self.gate.forward(&h, s.compute).silu() * self.up.forward(&h, s.compute);
        &x + self.down.forward(&act, s.compute).to_kind(x.kind())
    }

    fn linears(&mut self) -> [&mut Linear; 7] {
        [
            &mut self.q,
            &mut self.k,
            &mut self.v,
            &mut self.o,
            &mut self.gate,
            &mut self.up,
            &mut self.down,
        ]
    }
}

/// What every layer of one forward pass shares.
#[derive(Debug, Clone, Copy)]
struct StepArgs {
    heads: Heads,
    compute: Kind,
    train: bool,
    attn_dropout: f64,
}

impl Qwen3 {
    /// Registers the weights under `p` (names as in HF `Qwen3Model`); `q` from
    /// [`Qwen3Config::from_model`].
    pub fn new(p: nn::Path, c: &ModelConfig, q: &Qwen3Config) -> Self {
        let heads = Heads {
            q: c.num_attention_heads as i64,
            kv: q.kv_heads(c) as i64,
            dim: q.head_dim(c) as i64,
        };
        let rope = Rope::new(q.rope_theta(), heads.dim, p.device());
        Qwen3 {
            embed: nn::embedding(
                &p / "embed_tokens",
                c.vocab_size as i64,
                c.hidden_size as i64,
                Default::default(),
            ),
            layers: (0..c.num_hidden_layers)
                .map(|i| Qwen3Layer::new(&p / "layers" / i, c, q, heads))
                .collect(),
            norm: RmsNorm::new(&p / "norm", c.hidden_size, q.rms_norm_eps, false),
            heads,
            rope,
            attn_dropout: q.attention_dropout,
            compute: Kind::Float,
        }
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Every dropout probability of the stack set to `p` (a recipe's `dropout` key).
    pub(crate) fn set_dropout(&mut self, p: f64) {
        self.attn_dropout = p;
    }

    /// Sets the arithmetic of the products; with `convert`, also converts the weights of every
    /// linear layer for inference (the norms and the stream stay float32).
    pub(crate) fn set_dtype(&mut self, dtype: Dtype, convert: bool, _rest: Dtype) {
        self.compute = dtype.matmul_kind();
        if convert {
            convert_linears(self.layers.iter_mut().flat_map(|l| l.linears()), dtype);
        }
    }

    /// Runs the embeddings and the first `exits.depth()` layers (early exit), keeping the
    /// states `exits` asks for; `capture` is not supported (a decoder has no [CLS] row) and
    /// returns no attention rows.
    ///
    /// # Shapes
    /// - `input.ids`, `input.mask`: `[batch, seq]` int64 (right padding)
    /// - output `hidden_states`: the kept states `[batch, seq, hidden]` ([`Exits`]): layer 0
    ///   the token embeddings, layer `l` the final RMSNorm of the stream after `l` layers
    pub fn forward(
        &self,
        input: &EncoderInput,
        exits: Exits<'_>,
        train: bool,
        _capture: ClsAttention,
    ) -> EncoderOutput {
        let (_, n) = input.ids.size2().expect("ids are [batch, seq]");
        let dev = input.ids.device();
        let rope = self.rope.table(n, dev, self.compute);
        let mask = additive(&causal(&input.mask));
        let s = StepArgs {
            heads: self.heads,
            compute: self.compute,
            train,
            attn_dropout: self.attn_dropout,
        };
        let x = self.embed.forward(&input.ids);
        pre_norm_exits(
            x,
            &input.mask,
            (&self.layers, exits),
            |l, x, p| l.forward(x, (&rope, &mask), p, s),
            |x| self.norm.forward(x),
        )
    }
}
