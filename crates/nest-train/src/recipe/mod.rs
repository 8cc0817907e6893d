//! Training recipes: a TOML file whose every key can also be set from outside it ([`Overrides`]:
//! `nest train --key value`, `nest.train(overrides=...)`).
//!
//! Unknown keys are refused with the list of valid ones (serde's `deny_unknown_fields`), and
//! [`Recipe::validate`] checks values before anything is loaded.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod defaults;
mod diff;
mod mine;
mod objective;
mod validate;

use defaults::{
    d_accum, d_batch, d_clip, d_decay, d_dtype, d_epochs, d_keep, d_lr, d_save, d_scale, d_seed,
    d_true, d_warmup, d_wd, one,
};
pub(crate) use diff::RESUMABLE_KEYS;

pub use crate::objective::quant::QuantPrecision;
pub use crate::objective::LossKind;
pub(crate) use crate::objective::ObjectiveSpec;
pub use mine::MineSpec;

/// How a data file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataFormat {
    /// `sentence1 sentence2 score` (STS layout): for CoSENT / AnglE.
    Scored,
    /// `anchor positive negative`: MNRL with a hard negative.
    Triplets,
    /// Positive pairs: `sentence1 sentence2 [label]` (rows with label 0 dropped) or NLI
    /// `premise hypothesis label` (entailment rows kept): MNRL.
    Pairs,
    /// One sentence per row (`text` column, or the first column): unsupervised SimCSE.
    Single,
}

/// One training file in the mixture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSource {
    pub path: PathBuf,
    pub format: DataFormat,
    /// Sampling weight in the mixture (batches are drawn from sources in proportion).
    #[serde(default = "one")]
    pub weight: f64,
    /// The command that makes the file when a script does (named in the error when the file
    /// is missing). Not part of the run's identity.
    #[serde(default, skip_serializing)]
    pub made_by: Option<String>,
    /// Prompts prepended to the texts, as sentence-transformers' training `prompts`: one for
    /// every column, or one per column (e.g. `["query: ", "passage: ", "passage: "]` for
    /// triplets); empty = none. With the model's `include_prompt = false` the prompt's tokens
    /// are left out of the pooling, as at inference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<String>,
}

/// Learning-rate decay after warm-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Decay {
    Linear,
    Cosine,
    Constant,
}

/// A training recipe. Every field is a TOML key and a `--flag` (dashes or underscores).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Model directory (or hub id) to start from.
    pub(crate) model: String,
    /// Training files; may be empty when `[mine]` makes the data.
    #[serde(default)]
    pub(crate) data: Vec<DataSource>,
    /// Mine hard negatives with the model being trained and train on them (`[mine]`,
    /// [`MineSpec`]); unset = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mine: Option<MineSpec>,
    pub(crate) loss: LossKind,
    /// Scale (inverse temperature) of the similarity logits: 20 (SimCSE's 0.05 temperature).
    #[serde(default = "d_scale")]
    scale: f64,
    /// Weight of AnglE's angle loss added to CoSENT (0 = off).
    #[serde(default)]
    angle_weight: f64,
    /// Quantization-aware training: every task loss is also scored on the prefix vectors
    /// quantised to these stored precisions (`int8`, `binary`), with a straight-through
    /// gradient ([`crate::objective::quant`]); empty = off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    quantization: Vec<QuantPrecision>,
    /// Weight of each quantised task loss beside the float one; unset = 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quantization_weight: Option<f64>,
    /// The binary term's scale (inverse temperature); unset = `scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quantization_binary_scale: Option<f64>,
    /// Weight of the spread-out term on every prefix the binary term scores; unset = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    quantization_spread: Option<f64>,
    /// Matryoshka prefix dims (increasing); empty = the full dimension only.
    #[serde(default)]
    matryoshka_dims: Vec<usize>,
    /// One weight per dim; empty = all 1.
    #[serde(default)]
    matryoshka_weights: Vec<f64>,
    /// The objective's components (`[[objective]]` tables); empty = MRL over `matryoshka_dims`.
    #[serde(default)]
    objective: Vec<ObjectiveSpec>,
    #[serde(default = "d_epochs")]
    pub(crate) epochs: usize,
    /// Stop after this many optimizer steps (0 = run all epochs).
    #[serde(default)]
    pub(crate) max_steps: u64,
    #[serde(default = "d_batch")]
    pub(crate) batch_size: usize,
    #[serde(default = "d_accum")]
    pub(crate) grad_accum: usize,
    #[serde(default = "d_lr")]
    pub(crate) lr: f64,
    #[serde(default = "d_wd")]
    pub(crate) weight_decay: f64,
    /// Fraction of the optimizer steps spent in linear warm-up.
    #[serde(default = "d_warmup")]
    pub(crate) warmup_ratio: f64,
    /// Learning rate of the heads: the objective's own parameters (MIPIC's `P_i` and `phi_i`,
    /// and any other head an objective trains beside the encoder) and the model's Dense
    /// modules after pooling (`projection`, IBKD's `W` with `map = "identity"`): a second AdamW
    /// parameter group, as Hugging Face's Trainer users set one for heads. Unset = `lr`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) head_lr: Option<f64>,
    /// Warm-up fraction of those parameters' schedule (same decay as the encoder's); unset =
    /// `warmup_ratio`. `head_warmup_ratio = 0` with `warmup_ratio > 0` fits the heads to the
    /// model as it is before the encoder starts to move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) head_warmup_ratio: Option<f64>,
    #[serde(default = "d_decay")]
    pub(crate) decay: Decay,
    /// Clip the global gradient norm to this (0 = off).
    #[serde(default = "d_clip")]
    pub(crate) max_grad_norm: f64,
    #[serde(default = "d_seed")]
    pub seed: u64,
    /// Truncate inputs to this many tokens (0 = the model's max_seq_length).
    #[serde(default)]
    pub(crate) max_length: usize,
    /// Group similar lengths into batches to cut padding.
    #[serde(default = "d_true")]
    pub(crate) length_batching: bool,
    /// STS file evaluated over the (layer x dim) grid every `eval_every` steps ("" = none).
    #[serde(default)]
    pub(crate) eval_data: String,
    #[serde(default)]
    pub(crate) eval_every: u64,
    /// Layers evaluated ("" = the last only); e.g. "1-6", 6 or [2, 4, 6].
    #[serde(default, deserialize_with = "defaults::list_text")]
    pub(crate) eval_layers: String,
    /// Dims evaluated ("" = the Matryoshka dims, or the full dim); e.g. "64,384".
    #[serde(default, deserialize_with = "defaults::list_text")]
    pub(crate) eval_dims: String,
    /// Checkpoint every this many optimizer steps (0 = only at the end).
    #[serde(default = "d_save")]
    pub(crate) save_every: u64,
    /// Checkpoints kept.
    #[serde(default = "d_keep")]
    pub(crate) keep_last: usize,
    /// Add IBKD's projection head (section 3.4, eq. 11) to this many dims, trained with the
    /// encoder and exported as a sentence-transformers `Dense` module (0 = none).
    #[serde(default)]
    pub(crate) projection: usize,
    /// The arithmetic: float32 (the default), bf16 (mixed precision: bf16 products, float32
    /// master weights, AdamW state, LayerNorm, softmax statistics and losses) or auto (bf16
    /// where its products measured faster on this machine). int8 is for inference only.
    #[serde(default = "d_dtype")]
    pub dtype: nest_model::DtypeChoice,
    /// GradCache (Gao et al. 2021, arXiv:2101.06983): embed each batch in chunks of this many
    /// examples without a graph, score the whole batch, then replay each chunk with the cached
    /// gradients; the loss and gradients are the plain batch's, the memory a chunk's (0 = off;
    /// sentence-transformers' name for CachedMultipleNegativesRankingLoss's chunk).
    #[serde(default)]
    pub(crate) mini_batch_size: usize,
    /// Override every dropout probability of the model (e.g. 0.0 for runs that must match
    /// bit for bit); unset = the model's own.
    #[serde(default)]
    pub(crate) dropout: Option<f64>,
    /// Record each training step as a CUDA graph per input shape and replay it
    /// ([`crate::trainer::GraphedStep`]): `auto` (the default) on a GPU, `on` also through the
    /// CPU fake (for tests), `off`. Every objective but ESE (whose SVD checks its result on the
    /// host); with `grad_accum`, each micro-batch; under GradCache, the chunk passes; not a
    /// data-parallel step without GradCache.
    #[serde(default, skip_serializing_if = "crate::trainer::GraphMode::is_default")]
    pub(crate) cuda_graph: crate::trainer::GraphMode,
}

impl Recipe {
    /// The run's length as asked: `epochs` and `max_steps` (0: no limit).
    pub fn length(&self) -> (usize, u64) {
        (self.epochs, self.max_steps)
    }

    /// The quantisation of the task loss the recipe asks for (off when `quantization` is empty).
    pub(crate) fn quantization(&self) -> crate::objective::quant::Quantization {
        crate::objective::quant::Quantization {
            binary_scale: self.quantization_binary_scale,
            spread: self.quantization_spread.unwrap_or(0.0),
            ..crate::objective::quant::Quantization::new(
                &self.quantization,
                self.quantization_weight.unwrap_or(1.0),
            )
        }
    }
}

mod load;
pub(crate) mod located;
mod overrides;
pub use overrides::{parse_value, Override, Overrides};
pub(crate) mod paths;
#[cfg(test)]
mod tests;
