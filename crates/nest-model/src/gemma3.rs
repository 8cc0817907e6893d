//! Gemma 3 text model (Gemma Team 2025, "Gemma 3 Technical Report", arXiv:2503.19786) as
//! EmbeddingGemma uses it ("EmbeddingGemma: Powerful and Lightweight Text Representations",
//! arXiv:2509.20354): token embeddings scaled by `sqrt(hidden)`, RMSNorms of the `1 + w` form
//! before and after both attention and feed-forward, grouped-query attention with RMSNorm on each
//! head's queries and keys and the scale `query_pre_attn_scalar^-1/2`, rotary embeddings with
//! one base for sliding layers and one for full layers, GeGLU (tanh GELU) feed-forward, no
//! biases; bidirectional when `use_bidirectional_attention` (EmbeddingGemma), else causal.
//! Weight names as Hugging Face `Gemma3TextModel` (`transformers/models/gemma3/
//! modeling_gemma3.py`: `Gemma3Attention.forward`, `Gemma3DecoderLayer.forward`,
//! `Gemma3TextModel.forward`).
//!
//! Sliding layers see keys at `|i - j| < w` (bidirectional) or `0 <= i - j < w` (causal), with
//! `w` the window transformers uses after loading the config: for a bidirectional model it
//! re-applies `sliding_window // 2 + 1` to the stored value on every load, and Nest does the same
//! so that the vectors match what sentence-transformers computes from the same folder.
//!
//! Early exit: the exit at layer `l` is the final norm of the stream after `l` layers.

use serde::Deserialize;
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::blocks::{
    additive, convert_linears, full_and_sliding, pre_norm_exits, rotate, RmsNorm, Rope, Window,
};
use crate::config::ModelConfig;
use crate::dtype::Dtype;
use crate::io::{ClsAttention, EncoderInput, EncoderOutput, Exits};
use crate::linear::Linear;
use crate::packing::Packing;

/// Gemma 3's own keys of `config.json` (the common ones are in [`ModelConfig`]).
#[derive(Debug, Clone, Deserialize)]
pub struct Gemma3Config {
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    #[serde(default)]
    pub head_dim: Option<usize>,
    #[serde(default = "default_eps")]
    pub rms_norm_eps: f64,
    #[serde(default)]
    pub query_pre_attn_scalar: Option<f64>,
    #[serde(default)]
    pub sliding_window: Option<usize>,
    #[serde(default)]
    pub layer_types: Vec<String>,
    /// transformers 4's pattern: every n-th layer is full.
    #[serde(default = "default_pattern")]
    pub sliding_window_pattern: usize,
    #[serde(default)]
    pub use_bidirectional_attention: bool,
    /// transformers 4: `rope_theta` (full layers) and `rope_local_base_freq` (sliding).
    #[serde(default)]
    pub rope_theta: Option<f64>,
    #[serde(default)]
    pub rope_local_base_freq: Option<f64>,
    /// transformers 5: `{full_attention: {rope_theta, rope_type}, sliding_attention: {...}}`.
    #[serde(default)]
    pub rope_parameters: Option<serde_json::Value>,
    #[serde(default)]
    pub rope_scaling: Option<serde_json::Value>,
    #[serde(default)]
    pub attn_logit_softcapping: Option<f64>,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub attention_dropout: f64,
    #[serde(default = "default_act")]
    pub hidden_activation: String,
}

fn default_eps() -> f64 {
    1e-6
}
fn default_pattern() -> usize {
    6
}
fn default_act() -> String {
    "gelu_pytorch_tanh".into()
}

impl Gemma3Config {
    /// Parses and checks Gemma 3's keys; the error names the key at fault.
    pub fn from_model(c: &ModelConfig) -> std::result::Result<Self, String> {
        let g: Gemma3Config = c.parse_extra()?;
        if g.hidden_activation != "gelu_pytorch_tanh" {
            return Err(format!(
                "hidden_activation '{}' is not supported for gemma3 (supported: gelu_pytorch_tanh)",
                g.hidden_activation
            ));
        }
        if g.attn_logit_softcapping.is_some() {
            return Err("attn_logit_softcapping is not supported (expected null)".into());
        }
        if g.rope_scaling.as_ref().is_some_and(|v| !v.is_null()) {
            return Err("rope_scaling is not supported (expected null)".into());
        }
        if let Some(p) = g.rope_parameters.as_ref().and_then(|p| p.as_object()) {
            for (kind, v) in p.iter().filter(|(_, v)| v.is_object()) {
                let t = v
                    .get("rope_type")
                    .and_then(|t| t.as_str())
                    .unwrap_or("default");
                if t != "default" {
                    return Err(format!(
                        "rope_parameters.{kind}.rope_type '{t}' is not supported (supported: default)"
                    ));
                }
            }
        }
        let kv = g.num_key_value_heads.unwrap_or(c.num_attention_heads);
        if kv == 0 || !c.num_attention_heads.is_multiple_of(kv) {
            return Err(format!(
                "num_key_value_heads {kv} does not divide num_attention_heads {}",
                c.num_attention_heads
            ));
        }
        if let Some(t) = g
            .layer_types
            .iter()
            .find(|t| !matches!(t.as_str(), "full_attention" | "sliding_attention"))
        {
            return Err(format!(
                "layer_types has '{t}' (supported: full_attention, sliding_attention)"
            ));
        }
        Ok(g)
    }

    fn head_dim(&self, c: &ModelConfig) -> usize {
        self.head_dim
            .unwrap_or(c.hidden_size / c.num_attention_heads.max(1))
    }

    /// Whether layer `i` (from 0) attends over the whole input.
    fn full(&self, i: usize) -> bool {
        match self.layer_types.get(i) {
            Some(t) => t == "full_attention",
            None => (i + 1).is_multiple_of(self.sliding_window_pattern.max(1)),
        }
    }

    /// The sliding window as transformers applies it after loading (see the module docs).
    fn window(&self) -> i64 {
        let w = self.sliding_window.unwrap_or(4096);
        match self.use_bidirectional_attention {
            true => (w / 2 + 1) as i64,
            false => w as i64,
        }
    }

    fn theta(&self, full: bool) -> f64 {
        let (own, kind, fallback) = match full {
            true => (self.rope_theta, "full_attention", 1_000_000.0),
            false => (self.rope_local_base_freq, "sliding_attention", 10_000.0),
        };
        self.rope_parameters
            .as_ref()
            .and_then(|p| p.get(kind))
            .and_then(|p| p.get("rope_theta"))
            .and_then(serde_json::Value::as_f64)
            .or(own)
            .unwrap_or(fallback)
    }
}

/// One decoder layer.
#[derive(Debug)]
struct Gemma3Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: RmsNorm,
    k_norm: RmsNorm,
    gate: Linear,
    up: Linear,
    down: Linear,
    norms: [RmsNorm; 4],
    full: bool,
}

/// What every layer of one forward pass shares.
struct Shared {
    heads: (i64, i64, i64),
    scale: f64,
    compute: Kind,
    rope_full: (Tensor, Tensor),
    rope_sliding: (Tensor, Tensor),
    mask_full: Tensor,
    mask_sliding: Tensor,
    dropout: f64,
}

impl Gemma3Layer {
    fn new(p: nn::Path, c: &ModelConfig, g: &Gemma3Config, i: usize) -> Self {
        let (d, f, eps) = (c.hidden_size, c.intermediate_size, g.rms_norm_eps);
        let dh = g.head_dim(c);
        let (qd, kvd) = (
            c.num_attention_heads * dh,
            g.num_key_value_heads.unwrap_or(c.num_attention_heads) * dh,
        );
        let (a, m, b) = (&p / "self_attn", &p / "mlp", g.attention_bias);
        let norm = |name: &str| RmsNorm::new(&p / name, d, eps, true);
        Gemma3Layer {
            q: Linear::with_bias(&a / "q_proj", d, qd, b),
            k: Linear::with_bias(&a / "k_proj", d, kvd, b),
            v: Linear::with_bias(&a / "v_proj", d, kvd, b),
            o: Linear::with_bias(&a / "o_proj", qd, d, b),
            q_norm: RmsNorm::new(&a / "q_norm", dh, eps, true),
            k_norm: RmsNorm::new(&a / "k_norm", dh, eps, true),
            gate: Linear::with_bias(&m / "gate_proj", d, f, false),
            up: Linear::with_bias(&m / "up_proj", d, f, false),
            down: Linear::with_bias(&m / "down_proj", f, d, false),
            norms: [
                norm("input_layernorm"),
                norm("post_attention_layernorm"),
                norm("pre_feedforward_layernorm"),
                norm("post_feedforward_layernorm"),
            ],
            full: g.full(i),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, seq, hidden]`, or `[tokens, hidden]` under a packing; returns the same
    fn forward(&self, x: &Tensor, s: &Shared, packing: Option<&Packing>, train: bool) -> Tensor {
        let (hq, hkv, dh) = s.heads;
        let h = self.norms[0].forward(x);
        let q = Packing::padded(packing, self.q.forward(&h, s.compute));
        let (b, n, _) = q.size3().expect("q is [batch, seq, width]");
        let split = |t: Tensor, heads: i64| t.view([b, n, heads, dh]);
        let q = self.q_norm.forward(&split(q, hq));
        let k = Packing::padded(packing, self.k.forward(&h, s.compute));
        let k = self.k_norm.forward(&split(k, hkv));
        let v = Packing::padded(packing, self.v.forward(&h, s.compute));
        let v = split(v, hkv).transpose(1, 2);
        let (rope, mask) = match self.full {
            true => (&s.rope_full, &s.mask_full),
            false => (&s.rope_sliding, &s.mask_sliding),
        };
        let (q, k) = (
            rotate(&q.transpose(1, 2), rope),
            rotate(&k.transpose(1, 2), rope),
        );
        let rep = hq / hkv;
        let (k, v) = (
            k.repeat_interleave_self_int(rep, 1, None),
            v.repeat_interleave_self_int(rep, 1, None),
        );
        let drop = if train { s.dropout } else { 0.0 };
        let ctx = crate::attention::attend(&q, &k, &v, mask, drop, Some(s.scale))
            .transpose(1, 2)
            .reshape([b, n, hq * dh]);
        let ctx = Packing::packed(packing, ctx);
        let attn = self.o.forward(&ctx, s.compute).to_kind(x.kind());
        let x = x + self.norms[1].forward(&attn);
        let h = self.norms[2].forward(&x);
        let act = self.gate.forward(&h, s.compute).gelu("tanh") * self.up.forward(&h, s.compute);
        let mlp = self.down.forward(&act, s.compute).to_kind(x.kind());
        &x + self.norms[3].forward(&mlp)
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

/// The Gemma 3 text model: scaled token embeddings, decoder layers, the final norm.
#[derive(Debug)]
pub struct Gemma3 {
    embed: nn::Embedding,
    embed_scale: f64,
    layers: Vec<Gemma3Layer>,
    norm: RmsNorm,
    heads: (i64, i64, i64),
    scale: f64,
    /// Rotary inverse frequencies of full and sliding layers.
    rope: (Rope, Rope),
    /// The sliding layers' window: `|i - j| < w` is `|i - j| <= w - 1`.
    window: Window,
    bidirectional: bool,
    dropout: f64,
    compute: Kind,
}

impl Gemma3 {
    /// Registers the weights under `p` (names as in HF `Gemma3TextModel`); `g` from
    /// [`Gemma3Config::from_model`].
    pub fn new(p: nn::Path, c: &ModelConfig, g: &Gemma3Config) -> Self {
        let dh = g.head_dim(c);
        let dev = p.device();
        let heads = (
            c.num_attention_heads as i64,
            g.num_key_value_heads.unwrap_or(c.num_attention_heads) as i64,
            dh as i64,
        );
        Gemma3 {
            embed: nn::embedding(
                &p / "embed_tokens",
                c.vocab_size as i64,
                c.hidden_size as i64,
                Default::default(),
            ),
            embed_scale: (c.hidden_size as f64).sqrt(),
            layers: (0..c.num_hidden_layers)
                .map(|i| Gemma3Layer::new(&p / "layers" / i, c, g, i))
                .collect(),
            norm: RmsNorm::new(&p / "norm", c.hidden_size, g.rms_norm_eps, true),
            heads,
            scale: g.query_pre_attn_scalar.unwrap_or(dh as f64).powf(-0.5),
            rope: (
                Rope::new(g.theta(true), dh as i64, dev),
                Rope::new(g.theta(false), dh as i64, dev),
            ),
            window: Window::new(g.window() - 1),
            bidirectional: g.use_bidirectional_attention,
            dropout: g.attention_dropout,
            compute: Kind::Float,
        }
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Every dropout probability of the stack set to `p` (a recipe's `dropout` key).
    pub(crate) fn set_dropout(&mut self, p: f64) {
        self.dropout = p;
    }

    /// Sets the arithmetic of the products; with `convert`, also converts every linear layer's
    /// weights for inference (norms and the stream stay float32).
    pub(crate) fn set_dtype(&mut self, dtype: Dtype, convert: bool, _rest: Dtype) {
        self.compute = dtype.matmul_kind();
        if convert {
            convert_linears(self.layers.iter_mut().flat_map(|l| l.linears()), dtype);
        }
    }

    /// Runs the embeddings and the first `exits.depth()` layers (early exit), keeping the
    /// states `exits` asks for; [CLS]-row attention is not captured for this architecture.
    ///
    /// # Shapes
    /// - `input.ids`, `input.mask`: `[batch, seq]` int64 (right padding)
    /// - output `hidden_states`: the kept states `[batch, seq, hidden]` ([`Exits`]): layer 0
    ///   the scaled embeddings, layer `l` the final norm of the stream after `l` layers
    pub fn forward(
        &self,
        input: &EncoderInput,
        exits: Exits<'_>,
        train: bool,
        _capture: ClsAttention,
    ) -> EncoderOutput {
        let (_, n) = input.ids.size2().expect("ids are [batch, seq]");
        let dev = input.ids.device();
        let (full, sliding) = full_and_sliding(&input.mask, self.bidirectional, &self.window);
        let s = Shared {
            heads: self.heads,
            scale: self.scale,
            compute: self.compute,
            rope_full: self.rope.0.table(n, dev, self.compute),
            rope_sliding: self.rope.1.table(n, dev, self.compute),
            mask_full: additive(&full),
            mask_sliding: additive(&sliding),
            dropout: self.dropout,
        };
        let x = self.embed.forward(&input.ids) * self.embed_scale;
        pre_norm_exits(
            x,
            &input.mask,
            (&self.layers, exits),
            |l, x, p| l.forward(x, &s, p, train),
            |x| self.norm.forward(x),
        )
    }
}
