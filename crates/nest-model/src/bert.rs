//! BERT encoder (Devlin et al. 2019), weight names as in Hugging Face `BertModel` without the
//! `bert.` prefix. Returns every layer's hidden states and stops after the requested layer.

use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use crate::config::ModelConfig;
use crate::encoder::{EncoderInput, EncoderOutput};

/// One post-LayerNorm transformer layer, shared by BERT and MPNet (they differ only in weight
/// names, given by [`LayerNames`]).
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

/// The BERT model: embeddings and a stack of layers (no pooler: Nest pools itself).
#[derive(Debug)]
pub struct Bert {
    word: nn::Embedding,
    position: nn::Embedding,
    token_type: nn::Embedding,
    emb_norm: nn::LayerNorm,
    layers: Vec<Layer>,
    settings: LayerSettings,
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

/// Multi-head self-attention with an additive float mask through libtorch's fused
/// `scaled_dot_product_attention`.
///
/// # Shapes
/// - `q`, `k`, `v`: `[batch, seq, hidden]`; `mask`: broadcastable to `[batch, heads, seq, seq]`
/// - returns `[batch, seq, hidden]`
pub(crate) fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &Tensor,
    heads: i64,
    dropout: f64,
) -> Tensor {
    let (b, s, h) = q.size3().expect("attention input is [batch, seq, hidden]");
    let split = |t: &Tensor| t.view([b, s, heads, h / heads]).transpose(1, 2);
    let ctx = Tensor::scaled_dot_product_attention(
        &split(q),
        &split(k),
        &split(v),
        Some(mask),
        dropout,
        false,
        None,
        false,
    );
    ctx.transpose(1, 2).reshape([b, s, h])
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

    /// # Shapes
    /// - `x`: `[batch, seq, hidden]`; `mask`: additive, broadcastable to `[batch, heads, seq, seq]`
    /// - returns `[batch, seq, hidden]`
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        mask: &Tensor,
        s: LayerSettings,
        train: bool,
    ) -> Tensor {
        let drop = if train { s.attn_dropout } else { 0.0 };
        let ctx = attention(
            &self.query.forward(x),
            &self.key.forward(x),
            &self.value.forward(x),
            mask,
            s.heads,
            drop,
        );
        let a = (self.attn_out.forward(&ctx).dropout(s.dropout, train) + x).apply(&self.attn_norm);
        let f = self.intermediate.forward(&a).gelu("none");
        (self.output.forward(&f).dropout(s.dropout, train) + a).apply(&self.out_norm)
    }
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

const BERT_NAMES: LayerNames = LayerNames {
    q: "attention.self.query",
    k: "attention.self.key",
    v: "attention.self.value",
    o: "attention.output.dense",
    attn_norm: "attention.output.LayerNorm",
};

impl Bert {
    /// Registers the weights under `p` (names as in HF `BertModel`).
    pub fn new(p: nn::Path, c: &ModelConfig) -> Self {
        let h = c.hidden_size as i64;
        let emb = &p / "embeddings";
        let ecfg = Default::default();
        Bert {
            word: nn::embedding(&emb / "word_embeddings", c.vocab_size as i64, h, ecfg),
            position: nn::embedding(
                &emb / "position_embeddings",
                c.max_position_embeddings as i64,
                h,
                ecfg,
            ),
            token_type: nn::embedding(
                &emb / "token_type_embeddings",
                c.type_vocab_size as i64,
                h,
                ecfg,
            ),
            emb_norm: layer_norm(&emb / "LayerNorm", c.hidden_size, c.layer_norm_eps),
            layers: (0..c.num_hidden_layers)
                .map(|i| Layer::new(&p / "encoder" / "layer" / i, c, &BERT_NAMES))
                .collect(),
            settings: LayerSettings::from(c),
        }
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Runs the embeddings and the first `layers` layers (early exit: the rest are not computed).
    ///
    /// # Shapes
    /// - `input.ids`, `input.mask`: `[batch, seq]` int64
    /// - output `hidden_states`: `layers + 1` tensors `[batch, seq, hidden]` (index 0 = embeddings)
    pub fn forward(&self, input: &EncoderInput, layers: usize, train: bool) -> EncoderOutput {
        let (_, s) = input.ids.size2().expect("ids are [batch, seq]");
        let pos = Tensor::arange(s, (Kind::Int64, input.ids.device())).unsqueeze(0);
        let types = input.ids.zeros_like();
        let x = (self.word.forward(&input.ids)
            + self.position.forward(&pos)
            + self.token_type.forward(&types))
        .apply(&self.emb_norm)
        .dropout(self.settings.dropout, train);
        let mask = additive_mask(&input.mask, x.kind());
        let mut hidden_states = Vec::with_capacity(layers + 1);
        hidden_states.push(x);
        for layer in self.layers.iter().take(layers) {
            let next = layer.forward(
                hidden_states.last().expect("non-empty"),
                &mask,
                self.settings,
                train,
            );
            hidden_states.push(next);
        }
        EncoderOutput { hidden_states }
    }
}
