//! ModernBERT (Warner et al. 2024, "Smarter, Better, Faster, Longer: A Modern Bidirectional
//! Encoder for Fast, Memory Efficient, and Long Context Finetuning and Inference",
//! arXiv:2412.13663), the backbone of gte-modernbert and modernbert-embed: pre-norm layers with
//! LayerNorms without bias, rotary position embeddings, GeGLU feed-forward, no biases, and
//! attention that alternates between global (every `global_attn_every_n_layers`-th layer, from
//! layer 0) and a local sliding window (`|i - j| <= local_attention / 2`), each with its own
//! rotary base. Weight names as Hugging Face `ModernBertModel`
//! (`transformers/models/modernbert/modeling_modernbert.py`: `ModernBertAttention.forward`,
//! `ModernBertEncoderLayer.forward`, `ModernBertModel.forward`).
//!
//! Early exit: the exit at layer `l` is `final_norm` of the stream after `l` layers (at the last
//! layer exactly transformers' `last_hidden_state`).

use serde::Deserialize;
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::blocks::{
    additive, convert_linears, full_and_sliding, pre_norm_exits, rotate, Rope, Window,
};
use crate::config::ModelConfig;
use crate::dtype::Dtype;
use crate::io::{ClsAttention, EncoderInput, EncoderOutput, Exits};
use crate::linear::Linear;
use crate::packing::Packing;

/// ModernBERT's own keys of `config.json` (the common ones are in [`ModelConfig`]).
#[derive(Debug, Clone, Deserialize)]
pub struct ModernBertConfig {
    #[serde(default = "default_eps")]
    pub norm_eps: f64,
    #[serde(default)]
    pub norm_bias: bool,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub mlp_bias: bool,
    #[serde(default = "default_act")]
    pub hidden_activation: String,
    /// Width of the local window (a token sees `local_attention / 2` on each side).
    #[serde(default = "default_local")]
    pub local_attention: usize,
    #[serde(default = "default_every")]
    pub global_attn_every_n_layers: usize,
    /// transformers 4's rotary bases; transformers 5 writes `rope_parameters` per layer type.
    #[serde(default)]
    pub global_rope_theta: Option<f64>,
    #[serde(default)]
    pub local_rope_theta: Option<f64>,
    #[serde(default)]
    pub rope_parameters: Option<serde_json::Value>,
    /// transformers 5: `full_attention` / `sliding_attention` per layer.
    #[serde(default)]
    pub layer_types: Vec<String>,
    #[serde(default)]
    pub attention_dropout: f64,
    #[serde(default)]
    pub embedding_dropout: f64,
    #[serde(default)]
    pub mlp_dropout: f64,
}

fn default_eps() -> f64 {
    1e-5
}
fn default_act() -> String {
    "gelu".into()
}
fn default_local() -> usize {
    128
}
fn default_every() -> usize {
    3
}

impl ModernBertConfig {
    /// Parses and checks ModernBERT's keys; the error names the key at fault.
    pub fn from_model(c: &ModelConfig) -> std::result::Result<Self, String> {
        let m: ModernBertConfig = c.parse_extra()?;
        if m.hidden_activation != "gelu" {
            return Err(format!(
                "hidden_activation '{}' is not supported for modernbert (supported: gelu)",
                m.hidden_activation
            ));
        }
        if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                c.hidden_size, c.num_attention_heads
            ));
        }
        if m.global_attn_every_n_layers == 0 {
            return Err("global_attn_every_n_layers must be >= 1".into());
        }
        if !m.layer_types.is_empty() && m.layer_types.len() != c.num_hidden_layers {
            return Err(format!(
                "layer_types has {} entries for {} layers",
                m.layer_types.len(),
                c.num_hidden_layers
            ));
        }
        if let Some(t) = m
            .layer_types
            .iter()
            .find(|t| !matches!(t.as_str(), "full_attention" | "sliding_attention"))
        {
            return Err(format!(
                "layer_types has '{t}' (supported: full_attention, sliding_attention)"
            ));
        }
        Ok(m)
    }

    /// Whether layer `i` (from 0) attends globally.
    fn global(&self, i: usize) -> bool {
        match self.layer_types.get(i) {
            Some(t) => t == "full_attention",
            None => i.is_multiple_of(self.global_attn_every_n_layers),
        }
    }

    fn theta(&self, global: bool) -> f64 {
        let (own, kind, fallback) = match global {
            true => (self.global_rope_theta, "full_attention", 160000.0),
            false => (self.local_rope_theta, "sliding_attention", 10000.0),
        };
        own.or_else(|| {
            self.rope_parameters
                .as_ref()
                .and_then(|p| p.get(kind))
                .and_then(|p| p.get("rope_theta"))
                .and_then(serde_json::Value::as_f64)
        })
        .unwrap_or(fallback)
    }
}

/// LayerNorm with or without a bias (ModernBERT's have none).
#[derive(Debug)]
struct Norm {
    weight: Tensor,
    bias: Option<Tensor>,
    eps: f64,
}

impl Norm {
    fn new(p: nn::Path, dim: usize, eps: f64, bias: bool) -> Self {
        let d = [dim as i64];
        Norm {
            weight: p.var("weight", &d, nn::Init::Const(1.0)),
            bias: bias.then(|| p.var("bias", &d, nn::Init::Const(0.0))),
            eps,
        }
    }

    /// # Shapes
    /// - `x`: `[..., dim]`; returns the same shape and kind
    fn forward(&self, x: &Tensor) -> Tensor {
        let d = [self.weight.size()[0]];
        x.to_kind(Kind::Float)
            .layer_norm(d, Some(&self.weight), self.bias.as_ref(), self.eps, false)
            .to_kind(x.kind())
    }
}

/// One encoder layer.
#[derive(Debug)]
struct ModernBertLayer {
    /// `None` for layer 0 (transformers' `nn.Identity`: the embeddings are already normed).
    attn_norm: Option<Norm>,
    wqkv: Linear,
    wo: Linear,
    mlp_norm: Norm,
    wi: Linear,
    mlp_wo: Linear,
    global: bool,
}

/// What every layer of one forward pass shares.
struct Shared {
    heads: i64,
    compute: Kind,
    /// (cos, sin) `[seq, head_dim]` for global and for local layers.
    rope_global: (Tensor, Tensor),
    rope_local: (Tensor, Tensor),
    /// Additive `[batch, 1, seq, seq]` masks.
    mask_global: Tensor,
    mask_local: Tensor,
    dropout: (f64, f64),
}

impl ModernBertLayer {
    fn new(p: nn::Path, c: &ModelConfig, m: &ModernBertConfig, i: usize) -> Self {
        let (d, f, eps) = (c.hidden_size, c.intermediate_size, m.norm_eps);
        let a = &p / "attn";
        let mlp = &p / "mlp";
        ModernBertLayer {
            attn_norm: (i > 0).then(|| Norm::new(&p / "attn_norm", d, eps, m.norm_bias)),
            wqkv: Linear::with_bias(&a / "Wqkv", d, 3 * d, m.attention_bias),
            wo: Linear::with_bias(&a / "Wo", d, d, m.attention_bias),
            mlp_norm: Norm::new(&p / "mlp_norm", d, eps, m.norm_bias),
            wi: Linear::with_bias(&mlp / "Wi", d, 2 * f, m.mlp_bias),
            mlp_wo: Linear::with_bias(&mlp / "Wo", f, d, m.mlp_bias),
            global: m.global(i),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, seq, hidden]`, or `[tokens, hidden]` under a packing; returns the same
    fn forward(&self, x: &Tensor, s: &Shared, packing: Option<&Packing>, train: bool) -> Tensor {
        let h = match &self.attn_norm {
            Some(norm) => norm.forward(x),
            None => x.shallow_clone(),
        };
        let qkv = Packing::padded(packing, self.wqkv.forward(&h, s.compute));
        let (b, n, d3) = qkv.size3().expect("qkv is [batch, seq, 3 hidden]");
        let d = d3 / 3;
        let qkv = qkv.view([b, n, 3, s.heads, d / s.heads]);
        let part = |k: i64| qkv.select(2, k).transpose(1, 2); // [b, heads, n, dh]
        let (rope, mask) = match self.global {
            true => (&s.rope_global, &s.mask_global),
            false => (&s.rope_local, &s.mask_local),
        };
        let (q, k, v) = (rotate(&part(0), rope), rotate(&part(1), rope), part(2));
        let drop = if train { s.dropout.0 } else { 0.0 };
        let ctx = crate::attention::attend(&q, &k, &v, mask, drop, None)
            .transpose(1, 2)
            .reshape([b, n, d]);
        let ctx = Packing::packed(packing, ctx);
        let x = x + self.wo.forward(&ctx, s.compute).to_kind(x.kind());
        let h = self.mlp_norm.forward(&x);
        let gi = self.wi.forward(&h, s.compute);
        let parts = gi.chunk(2, -1);
        let act = (parts[0].gelu("none") * &parts[1]).dropout(s.dropout.1, train);
        &x + self.mlp_wo.forward(&act, s.compute).to_kind(x.kind())
    }

    fn linears(&mut self) -> [&mut Linear; 4] {
        [&mut self.wqkv, &mut self.wo, &mut self.wi, &mut self.mlp_wo]
    }
}

/// The ModernBERT model: embeddings (+ norm), layers, the final norm (no MLM head).
#[derive(Debug)]
pub struct ModernBert {
    embed: nn::Embedding,
    emb_norm: Norm,
    layers: Vec<ModernBertLayer>,
    final_norm: Norm,
    heads: i64,
    /// Rotary inverse frequencies of global and local layers: `[head_dim / 2]` each.
    rope: (Rope, Rope),
    /// The local window: a token sees keys at distance `<= local_attention / 2`.
    window: Window,
    dropout: (f64, f64, f64),
    compute: Kind,
}

impl ModernBert {
    /// Registers the weights under `p` (names as in HF `ModernBertModel`); `m` from
    /// [`ModernBertConfig::from_model`].
    pub fn new(p: nn::Path, c: &ModelConfig, m: &ModernBertConfig) -> Self {
        let heads = c.num_attention_heads as i64;
        let dh = (c.hidden_size / c.num_attention_heads) as i64;
        let dev = p.device();
        ModernBert {
            embed: nn::embedding(
                &p / "embeddings" / "tok_embeddings",
                c.vocab_size as i64,
                c.hidden_size as i64,
                Default::default(),
            ),
            emb_norm: Norm::new(
                &p / "embeddings" / "norm",
                c.hidden_size,
                m.norm_eps,
                m.norm_bias,
            ),
            layers: (0..c.num_hidden_layers)
                .map(|i| ModernBertLayer::new(&p / "layers" / i, c, m, i))
                .collect(),
            final_norm: Norm::new(&p / "final_norm", c.hidden_size, m.norm_eps, m.norm_bias),
            heads,
            rope: (
                Rope::new(m.theta(true), dh, dev),
                Rope::new(m.theta(false), dh, dev),
            ),
            window: Window::new((m.local_attention / 2) as i64),
            dropout: (m.embedding_dropout, m.attention_dropout, m.mlp_dropout),
            compute: Kind::Float,
        }
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Every dropout probability of the stack set to `p` (a recipe's `dropout` key).
    pub(crate) fn set_dropout(&mut self, p: f64) {
        self.dropout = (p, p, p);
    }

    /// Sets the arithmetic of the products; with `convert`, also converts the weights of every
    /// linear layer for inference (norms and the stream stay float32).
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
    /// - `input.ids`, `input.mask`: `[batch, seq]` int64
    /// - output `hidden_states`: the kept states `[batch, seq, hidden]` ([`Exits`]): layer 0
    ///   the normed embeddings, layer `l` `final_norm` of the stream after `l` layers
    pub fn forward(
        &self,
        input: &EncoderInput,
        exits: Exits<'_>,
        train: bool,
        _capture: ClsAttention,
    ) -> EncoderOutput {
        let (_, n) = input.ids.size2().expect("ids are [batch, seq]");
        let dev = input.ids.device();
        let (global, local) = full_and_sliding(&input.mask, true, &self.window);
        let s = Shared {
            heads: self.heads,
            compute: self.compute,
            rope_global: self.rope.0.table(n, dev, self.compute),
            rope_local: self.rope.1.table(n, dev, self.compute),
            mask_global: additive(&global),
            mask_local: additive(&local),
            dropout: (self.dropout.1, self.dropout.2),
        };
        let x = self
            .emb_norm
            .forward(&self.embed.forward(&input.ids))
            .dropout(self.dropout.0, train);
        pre_norm_exits(
            x,
            &input.mask,
            (&self.layers, exits),
            |l, x, p| l.forward(x, &s, p, train),
            |x| self.final_norm.forward(x),
        )
    }
}
