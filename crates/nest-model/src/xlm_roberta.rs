//! XLM-RoBERTa (Conneau et al. 2020, "Unsupervised Cross-lingual Representation Learning at
//! Scale", arXiv:1911.02116) and RoBERTa (Liu et al. 2019, arXiv:1907.11692): BERT's embeddings
//! and layers with RoBERTa's position ids, as Hugging Face `XLMRobertaModel` / `RobertaModel`
//! (weight names without the `roberta.` prefix). The backbone of bge-m3, multilingual-e5 and
//! jina-embeddings-v3.
//!
//! The one difference that matters at inference: positions are counted from `pad_token_id + 1`
//! over the non-padding tokens, and padding sits at position `pad_token_id`
//! (`create_position_ids_from_input_ids` in transformers'
//! `models/xlm_roberta/modeling_xlm_roberta.py`). The tokenizer (SentencePiece Unigram for
//! XLM-R, byte-level BPE for RoBERTa) comes from `tokenizer.json` like every other model's.

use tch::nn;
use tch::{Kind, Tensor};

use crate::bert::Bert;
use crate::config::ModelConfig;
use crate::dtype::Dtype;
use crate::io::{ClsAttention, EncoderInput, EncoderOutput, Exits};

/// An XLM-RoBERTa (or RoBERTa) encoder: BERT's stack with RoBERTa's positions.
#[derive(Debug)]
pub struct XlmRoberta {
    bert: Bert,
    pad_id: i64,
}

impl XlmRoberta {
    /// Registers the weights under `p` (names as in HF `XLMRobertaModel`).
    pub fn new(p: nn::Path, c: &ModelConfig) -> Self {
        XlmRoberta {
            bert: Bert::new(p, c),
            pad_id: c.pad_id(),
        }
    }

    pub fn num_layers(&self) -> usize {
        self.bert.num_layers()
    }

    /// Every dropout probability of the stack set to `p` (a recipe's `dropout` key).
    pub(crate) fn set_dropout(&mut self, p: f64) {
        self.bert.set_dropout(p);
    }

    pub(crate) fn set_dtype(&mut self, dtype: Dtype, convert: bool, rest: Dtype) {
        self.bert.set_dtype(dtype, convert, rest);
    }

    /// Runs the embeddings and the first `exits.depth()` layers, keeping what `exits` asks for.
    ///
    /// # Shapes
    /// - `input.ids`, `input.mask`: `[batch, seq]` int64
    /// - output: as [`Bert::forward`]
    pub fn forward(
        &self,
        input: &EncoderInput,
        exits: Exits<'_>,
        train: bool,
        capture: ClsAttention,
    ) -> EncoderOutput {
        let pos = position_ids(&input.ids, self.pad_id);
        self.bert.forward_at(input, &pos, exits, train, capture)
    }
}

/// RoBERTa's position ids: `pad_id + 1, pad_id + 2, ...` over the non-padding tokens, `pad_id` on
/// padding (whichever side it is on).
///
/// # Shapes
/// - `ids`: `[batch, seq]` int64; returns `[batch, seq]` int64
pub fn position_ids(ids: &Tensor, pad_id: i64) -> Tensor {
    if let Some(made) = crate::host_made::host_positions_for(ids, pad_id) {
        return made; // an encode batch's host made them (`host_made.rs`)
    }
    let real = ids.ne(pad_id).to_kind(Kind::Int64);
    real.cumsum(1, Kind::Int64) * &real + pad_id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_skip_padding_on_either_side() {
        let ids = Tensor::from_slice2(&[[0i64, 7, 8, 2, 1, 1], [1, 1, 0, 9, 2, 1]]);
        let got: Vec<Vec<i64>> = Vec::<Vec<i64>>::try_from(position_ids(&ids, 1)).unwrap();
        assert_eq!(got, vec![vec![2, 3, 4, 5, 1, 1], vec![1, 1, 2, 3, 4, 1]]);
    }
}
