//! BERT encoder (Devlin et al. 2019), weight names as in Hugging Face `BertModel` without the
//! `bert.` prefix. Returns every layer's hidden states and stops after the requested layer.

use tch::nn::{self, Module};
use tch::Tensor;

use crate::config::ModelConfig;
use crate::dtype::Dtype;
use crate::io::{ClsAttention, EncoderInput, EncoderOutput, Exits};
use crate::layer::{
    additive_mask, layer_norm, run_layers, set_stack_dtype, Layer, LayerNames, LayerSettings,
};

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

    /// Every dropout probability of the stack set to `p` (a recipe's `dropout` key).
    pub(crate) fn set_dropout(&mut self, p: f64) {
        (self.settings.dropout, self.settings.attn_dropout) = (p, p);
    }

    /// Sets the arithmetic of the forward pass; with `convert`, also converts the linear
    /// weights for inference (see [`crate::dtype`]).
    pub(crate) fn set_dtype(&mut self, dtype: Dtype, convert: bool, rest: Dtype) {
        set_stack_dtype(&mut self.settings, &mut self.layers, dtype, convert, rest);
    }

    /// Runs the embeddings and the first `exits.depth()` layers (early exit: the rest are not
    /// computed), keeping the states `exits` asks for.
    ///
    /// # Shapes
    /// - `input.ids`, `input.mask`: `[batch, seq]` int64
    /// - output `hidden_states`: the kept states `[batch, seq, hidden]` (index 0 = embeddings;
    ///   [`Exits`]); `cls_attention` as [`run_layers`] says
    pub fn forward(
        &self,
        input: &EncoderInput,
        exits: Exits<'_>,
        train: bool,
        capture: ClsAttention,
    ) -> EncoderOutput {
        let (_, s) = input.ids.size2().expect("ids are [batch, seq]");
        // positions 0..s are the table's first s rows: a view, not a lookup (on a GPU each
        // operator of a small batch's pass costs about a kernel launch)
        let pos = self.position.ws.narrow(0, 0, s);
        self.embed_and_run(input, pos, exits, train, capture)
    }

    /// [`Bert::forward`] with the position ids given (`[batch or 1, seq]` int64): RoBERTa-family
    /// models count positions differently and share everything else ([`crate::xlm_roberta`]).
    pub(crate) fn forward_at(
        &self,
        input: &EncoderInput,
        pos: &Tensor,
        exits: Exits<'_>,
        train: bool,
        capture: ClsAttention,
    ) -> EncoderOutput {
        let pos = self.position.forward(pos);
        self.embed_and_run(input, pos, exits, train, capture)
    }

    /// The embeddings (words, then `pos`, the position embeddings broadcastable to `[batch,
    /// seq, hidden]`, then token type 0's row, added in that order as Hugging Face adds them)
    /// and the layers.
    fn embed_and_run(
        &self,
        input: &EncoderInput,
        pos: Tensor,
        exits: Exits<'_>,
        train: bool,
        capture: ClsAttention,
    ) -> EncoderOutput {
        // every token is of type 0: the table's first row, broadcast (a view, not a lookup)
        let x = (self.word.forward(&input.ids) + pos + self.token_type.ws.get(0))
            .apply(&self.emb_norm)
            .dropout(self.settings.dropout, train);
        let mask = additive_mask(&input.mask, x.kind());
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
