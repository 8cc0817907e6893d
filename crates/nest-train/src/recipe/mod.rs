//! Training recipes: a TOML file whose every key can also be set from outside it ([`Overrides`]:
//! `nest train --key value`, `nest.train(overrides=...)`).
//!
//! Unknown keys are refused with the list of valid ones (serde's `deny_unknown_fields`), and
//! [`Recipe::validate`] checks values before anything is loaded.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

mod mine;
mod objective;

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

fn one() -> f64 {
    1.0
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
    /// Learning rate of the objective's own parameters (MIPIC's `P_i` and `phi_i`, and any
    /// other head an objective trains beside the encoder): a second AdamW parameter group, as
    /// Hugging Face's Trainer users set one for heads. Unset = `lr`.
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
    /// Layers evaluated ("" = the last only); e.g. "1-6".
    #[serde(default)]
    pub(crate) eval_layers: String,
    /// Dims evaluated ("" = the Matryoshka dims, or the full dim).
    #[serde(default)]
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
    /// CPU fake (for tests), `off`. Applies when the objective's terms are fixed (MRL), with no
    /// accumulation, GradCache or data parallelism.
    #[serde(default, skip_serializing_if = "crate::trainer::GraphMode::is_default")]
    pub(crate) cuda_graph: crate::trainer::GraphMode,
}

fn d_dtype() -> nest_model::DtypeChoice {
    nest_model::DtypeChoice::Fixed(nest_model::Dtype::Float32)
}

fn d_scale() -> f64 {
    20.0
}
fn d_epochs() -> usize {
    1
}
fn d_batch() -> usize {
    32
}
fn d_accum() -> usize {
    1
}
fn d_lr() -> f64 {
    2e-5
}
fn d_wd() -> f64 {
    0.01
}
fn d_warmup() -> f64 {
    0.1
}
fn d_decay() -> Decay {
    Decay::Linear
}
fn d_clip() -> f64 {
    1.0
}
fn d_seed() -> u64 {
    42
}
fn d_true() -> bool {
    true
}
fn d_save() -> u64 {
    500
}
fn d_keep() -> usize {
    3
}

/// Keys whose change does not alter the run's trajectory so far: a resume may change them.
pub(crate) const RESUMABLE_KEYS: [&str; 6] = [
    "epochs",
    "max_steps",
    "eval_every",
    "save_every",
    "keep_last",
    "eval_layers",
];

impl Recipe {
    /// The keys of GradCache and deterministic runs.
    fn validate_scale(&self) -> std::result::Result<(), String> {
        if let Some(p) = self.dropout {
            if !(0.0..1.0).contains(&p) {
                return Err(format!("dropout must be in [0, 1), got {p}"));
            }
        }
        if self.mini_batch_size > 0 && self.mini_batch_size >= self.batch_size {
            return Err(format!(
                "mini_batch_size {} must be below batch_size {} (0 turns GradCache off)",
                self.mini_batch_size, self.batch_size
            ));
        }
        Ok(())
    }

    /// `quantization` and `quantization_weight`.
    fn validate_quantization(&self) -> std::result::Result<(), String> {
        let q = &self.quantization;
        if let Some(p) = q.iter().find(|p| q.iter().filter(|x| x == p).count() > 1) {
            return Err(format!("quantization lists {} twice", p.name()));
        }
        let binary = q.contains(&QuantPrecision::Binary);
        for (key, v) in [
            ("quantization_binary_scale", self.quantization_binary_scale),
            ("quantization_spread", self.quantization_spread),
        ] {
            match v {
                Some(_) if !binary => {
                    return Err(format!(
                        "{key} is set but quantization does not list \"binary\" (e.g. quantization = [\"binary\"])"
                    ))
                }
                Some(x) if !(x > 0.0 && x.is_finite()) => {
                    return Err(format!("{key} must be > 0, got {x}"))
                }
                _ => {}
            }
        }
        match self.quantization_weight {
            Some(_) if q.is_empty() => Err(
                "quantization_weight is set but quantization is empty (e.g. quantization = [\"int8\", \"binary\"])"
                    .into(),
            ),
            Some(w) if !(w > 0.0 && w.is_finite()) => {
                Err(format!("quantization_weight must be > 0, got {w}"))
            }
            _ if !q.is_empty() && self.loss == LossKind::None => Err(
                "quantization scores the task loss, but the recipe's loss is \"none\"".into(),
            ),
            _ => Ok(()),
        }
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

    /// Value checks that need no model (the dims are checked against the model later).
    /// The data sources: at least one, positive weights, formats the loss can read.
    fn validate_data(&self) -> std::result::Result<(), String> {
        if self.data.is_empty() && self.mine.is_none() {
            return Err(
                "data: at least one data source is needed (or a [mine] table that mines it)".into(),
            );
        }
        if let Some(m) = &self.mine {
            m.validate()?;
            if !matches!(
                self.loss,
                LossKind::Mnrl | LossKind::MnrlSymmetric | LossKind::None
            ) {
                return Err(format!(
                    "mine: the mined tuples are triplets, which loss {} cannot use (use \"mnrl\" or \"mnrl-symmetric\")",
                    toml::Value::try_from(self.loss).map(|v| v.to_string()).unwrap_or_default()
                ));
            }
        }
        for d in &self.data {
            if !(d.weight > 0.0 && d.weight.is_finite()) {
                return Err(format!("data: weight of {} must be > 0", d.path.display()));
            }
            let (ok, takes) = match self.loss {
                LossKind::Mnrl | LossKind::MnrlSymmetric => (
                    matches!(d.format, DataFormat::Pairs | DataFormat::Triplets),
                    "pairs or triplets",
                ),
                LossKind::Cosent => (d.format == DataFormat::Scored, "scored"),
                LossKind::Simcse => (d.format == DataFormat::Single, "single"),
                LossKind::None => (true, "any"),
            };
            if !ok {
                // the names a recipe spells (serde's), not the Rust ones
                fn name<T: serde::Serialize + std::fmt::Debug>(x: &T) -> String {
                    toml::Value::try_from(x)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| format!("{x:?}"))
                }
                return Err(format!(
                    "data: {} is format {}, which loss {} cannot use (loss {} takes {takes})",
                    d.path.display(),
                    name(&d.format),
                    name(&self.loss),
                    name(&self.loss),
                ));
            }
        }
        Ok(())
    }

    /// `eval_layers` / `eval_dims` parse (their ranges need the model: checked after loading).
    fn validate_eval_grid(&self) -> std::result::Result<(), String> {
        if !self.eval_layers.is_empty() {
            nest_core::parse_layers(&self.eval_layers)
                .map_err(|e| e.with_key("eval_layers").to_string())?;
        }
        if !self.eval_dims.is_empty() {
            nest_core::parse_dims(&self.eval_dims)
                .map_err(|e| e.with_key("eval_dims").to_string())?;
        }
        Ok(())
    }

    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.dtype == nest_model::DtypeChoice::Fixed(nest_model::Dtype::Int8) {
            return Err("dtype: int8 is for inference only; train in float32, bf16 or auto".into());
        }
        self.validate_data()?;
        self.validate_eval_grid()?;
        if self.matryoshka_dims.windows(2).any(|w| w[0] >= w[1])
            || self.matryoshka_dims.contains(&0)
        {
            return Err(format!(
                "matryoshka_dims {:?} must be increasing and >= 1",
                self.matryoshka_dims
            ));
        }
        if !self.matryoshka_weights.is_empty()
            && self.matryoshka_weights.len() != self.matryoshka_dims.len()
        {
            return Err(format!(
                "matryoshka_weights has {} values for {} dims",
                self.matryoshka_weights.len(),
                self.matryoshka_dims.len()
            ));
        }
        for (k, v, lo) in [
            ("batch_size", self.batch_size, 2),
            ("grad_accum", self.grad_accum, 1),
            ("epochs", self.epochs, 1),
            ("keep_last", self.keep_last, 1),
        ] {
            if v < lo {
                return Err(format!("{k} must be at least {lo}, got {v}"));
            }
        }
        self.validate_scale()?;
        self.validate_quantization()?;
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return Err(format!("lr must be > 0, got {}", self.lr));
        }
        if !(0.0..1.0).contains(&self.warmup_ratio) {
            return Err(format!(
                "warmup_ratio must be in [0, 1), got {}",
                self.warmup_ratio
            ));
        }
        if let Some(lr) = self.head_lr.filter(|lr| !(*lr >= 0.0 && lr.is_finite())) {
            return Err(format!("head_lr must be >= 0, got {lr}"));
        }
        if let Some(w) = self.head_warmup_ratio.filter(|w| !(0.0..1.0).contains(w)) {
            return Err(format!("head_warmup_ratio must be in [0, 1), got {w}"));
        }
        if self.weight_decay < 0.0
            || self.max_grad_norm < 0.0
            || self.scale <= 0.0
            || self.angle_weight < 0.0
        {
            return Err(
                "weight_decay, max_grad_norm, angle_weight must be >= 0 and scale > 0".into(),
            );
        }
        for (i, o) in self.objective.iter().enumerate() {
            o.validate()
                .map_err(|m| format!("objective[{i}] ({}): {m}", o.kind()))?;
        }
        if self.angle_weight > 0.0 && self.loss != LossKind::Cosent {
            return Err("angle_weight applies to loss = \"cosent\" only".into());
        }
        Ok(())
    }

    /// The recipe as TOML (saved in the run directory).
    pub(crate) fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// Keys whose values differ from `other`, except the resumable ones.
    pub(crate) fn differences(&self, other: &Recipe) -> Vec<String> {
        self.differences_except(other, &RESUMABLE_KEYS)
    }

    /// Keys whose values differ from `other`, the resumable ones too (a finished run's).
    pub(crate) fn all_differences(&self, other: &Recipe) -> Vec<String> {
        self.differences_except(other, &[])
    }

    fn differences_except(&self, other: &Recipe, skip: &[&str]) -> Vec<String> {
        let a = toml::Value::try_from(self).unwrap_or(toml::Value::Boolean(false));
        let b = toml::Value::try_from(other).unwrap_or(toml::Value::Boolean(false));
        let (Some(a), Some(b)) = (a.as_table(), b.as_table()) else {
            return vec!["(unreadable)".into()];
        };
        let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .filter(|k| !skip.contains(&k.as_str()) && a.get(*k) != b.get(*k))
            .map(|k| {
                format!(
                    "{k}: {} -> {}",
                    a.get(k).map(|v| v.to_string()).unwrap_or("-".into()),
                    b.get(k).map(|v| v.to_string()).unwrap_or("-".into())
                )
            })
            .collect()
    }
}

mod load;
pub(crate) mod located;
mod overrides;
pub use overrides::{parse_value, Override, Overrides};
pub(crate) mod paths;
#[cfg(test)]
mod tests;
