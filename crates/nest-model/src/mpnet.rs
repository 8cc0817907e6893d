//! MPNet encoder (Song et al. 2020), weight names as in Hugging Face `MPNetModel` without the
//! `mpnet.` prefix. Differences from BERT: no token types; position ids count from
//! `pad_id + 1` over non-padding tokens (RoBERTa style); a learned relative-position bias
//! (T5-style buckets) is added to every layer's attention scores.

use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

use crate::config::ModelConfig;
use crate::dtype::Dtype;
use crate::io::{ClsAttention, EncoderInput, EncoderOutput, Exits};
use crate::layer::{
    additive_mask, layer_norm, run_layers, set_stack_dtype, Layer, LayerNames, LayerSettings,
};
use crate::length_cache::LengthCache;

/// The MPNet model: embeddings, relative-position bias and a stack of layers.
#[derive(Debug)]
pub struct Mpnet {
    word: nn::Embedding,
    position: nn::Embedding,
    emb_norm: nn::LayerNorm,
    relative_bias: nn::Embedding,
    layers: Vec<Layer>,
    settings: LayerSettings,
    buckets: i64,
    pad_id: i64,
    /// Relative-position buckets per device: they depend on position differences only, so a
    /// pass's are the top-left corner of those of a longer one ([`LengthCache`]).
    bucket_cache: LengthCache<Device>,
}

/// HF `MPNetEncoder.relative_position_bucket` with `max_distance = 128`, computed with the same
/// float32 operations so that boundary cases round the same way.
///
/// # Shapes
/// - `relative`: any int64 tensor (memory position - query position); returns the same shape
fn relative_position_bucket(relative: &Tensor, num_buckets: i64, max_distance: i64) -> Tensor {
    let half = num_buckets / 2;
    let n = -relative;
    let mut ret = n.lt(0).to_kind(Kind::Int64) * half;
    let n = n.abs();
    let max_exact = half / 2;
    let is_small = n.lt(max_exact);
    let large = (n.to_kind(Kind::Float) / max_exact as f64).log()
        / ((max_distance as f64) / (max_exact as f64)).ln()
        * (half - max_exact) as f64;
    let large = (large.to_kind(Kind::Int64) + max_exact).clamp_max(half - 1);
    ret += n.where_self(&is_small, &large);
    ret
}

const MPNET_NAMES: LayerNames = LayerNames {
    q: "attention.attn.q",
    k: "attention.attn.k",
    v: "attention.attn.v",
    o: "attention.attn.o",
    attn_norm: "attention.LayerNorm",
};

impl Mpnet {
    /// Registers the weights under `p` (names as in HF `MPNetModel`).
    pub fn new(p: nn::Path, c: &ModelConfig) -> Self {
        let h = c.hidden_size as i64;
        let emb = &p / "embeddings";
        let ecfg = Default::default();
        Mpnet {
            word: nn::embedding(&emb / "word_embeddings", c.vocab_size as i64, h, ecfg),
            position: nn::embedding(
                &emb / "position_embeddings",
                c.max_position_embeddings as i64,
                h,
                ecfg,
            ),
            emb_norm: layer_norm(&emb / "LayerNorm", c.hidden_size, c.layer_norm_eps),
            relative_bias: nn::embedding(
                &p / "encoder" / "relative_attention_bias",
                c.relative_attention_num_buckets as i64,
                c.num_attention_heads as i64,
                ecfg,
            ),
            layers: (0..c.num_hidden_layers)
                .map(|i| Layer::new(&p / "encoder" / "layer" / i, c, &MPNET_NAMES))
                .collect(),
            settings: LayerSettings::from(c),
            buckets: c.relative_attention_num_buckets as i64,
            pad_id: c.pad_id(),
            bucket_cache: LengthCache::default(),
        }
    }

    /// The relative-position buckets of an `s`-token pass on `dev` (a view of the cached ones).
    ///
    /// # Shapes
    /// - returns `[s, s]` int64: entry (query i, memory j) is the bucket of `j - i`
    fn relative_buckets(&self, s: i64, dev: Device) -> Tensor {
        let all = self.bucket_cache.at_least(dev, s, |n| {
            let ctx = Tensor::arange(n, (Kind::Int64, dev));
            let rel = ctx.unsqueeze(0) - ctx.unsqueeze(1); // memory - query
            vec![relative_position_bucket(&rel, self.buckets, 128)]
        });
        all[0].narrow(0, 0, s).narrow(1, 0, s)
    }

    pub fn num_layers(&self) -> usize {
        self.layers.len()
    }

    /// Every dropout probability of the stack set to `p` (a recipe's `dropout` key).
    pub(crate) fn set_dropout(&mut self, p: f64) {
        (self.settings.dropout, self.settings.attn_dropout) = (p, p);
    }

    /// Sets the arithmetic of the forward pass; with `convert`, also converts the linear
    /// weights for inference (see [`crate::dtype`]).
    pub(crate) fn set_dtype(&mut self, dtype: Dtype, convert: bool, rest: Dtype) {
        set_stack_dtype(&mut self.settings, &mut self.layers, dtype, convert, rest);
    }

    /// Runs the embeddings and the first `exits.depth()` layers (early exit), keeping the states
    /// `exits` asks for.
    ///
    /// # Shapes
    /// - `input.ids`, `input.mask`: `[batch, seq]` int64
    /// - output `hidden_states`: the kept states `[batch, seq, hidden]` (index 0 = embeddings;
    ///   [`Exits`]); `cls_attention` as [`run_layers`] says (the relative bias is part of the
    ///   scores)
    pub fn forward(
        &self,
        input: &EncoderInput,
        exits: Exits<'_>,
        train: bool,
        capture: ClsAttention,
    ) -> EncoderOutput {
        let (_, s) = input.ids.size2().expect("ids are [batch, seq]");
        let dev = input.ids.device();
        // position ids as RoBERTa counts them: pad_id + 1, ... over the non-pad tokens
        let pos = crate::xlm_roberta::position_ids(&input.ids, self.pad_id);
        let x = (self.word.forward(&input.ids) + self.position.forward(&pos))
            .apply(&self.emb_norm)
            .dropout(self.settings.dropout, train);
        // relative position bias [1, heads, s, s] plus the padding mask [b, 1, 1, s]
        let bucket = self.relative_buckets(s, dev);
        let bias = self
            .relative_bias
            .forward(&bucket)
            .permute([2, 0, 1])
            .unsqueeze(0);
        let mask = bias.to_kind(x.kind()) + additive_mask(&input.mask, x.kind());
        run_layers(
            &self.layers,
            x,
            (&mask, &input.mask),
            self.settings,
            exits,
            train,
            capture,
        )
    }
}
