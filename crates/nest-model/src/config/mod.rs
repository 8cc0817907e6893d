//! Model directory layout and configuration (Hugging Face `config.json` plus the
//! sentence-transformers files), validated when the model is loaded.
//!
//! This file holds `config.json` ([`ModelConfig`]); `sbert.rs` the sentence-transformers
//! files, `files.rs` the directory layout, `nest.json` and the JSON reader.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

mod files;
mod sbert;

pub use files::{read_json, ModelFiles, NestMeta};
pub use sbert::{PoolingConfig, SbertConfig};

/// The supported architectures (`model_type` in `config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    Bert,
    Mpnet,
    /// XLM-RoBERTa and RoBERTa (`model_type` `xlm-roberta` or `roberta`).
    #[serde(rename = "xlm-roberta", alias = "roberta")]
    XlmRoberta,
    /// Qwen3 (Qwen3-Embedding), a decoder with last-token pooling.
    Qwen3,
    /// ModernBERT (gte-modernbert, modernbert-embed).
    #[serde(rename = "modernbert")]
    ModernBert,
    /// Gemma 3 text models (EmbeddingGemma: bidirectional).
    #[serde(rename = "gemma3_text")]
    Gemma3,
}

/// The `model_type`s Nest loads, for error messages.
pub const SUPPORTED_MODEL_TYPES: &str =
    "bert, mpnet, xlm-roberta, roberta, modernbert, qwen3, gemma3_text";

/// The fields of `config.json` Nest reads. Unknown fields are ignored (HF configs carry many).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelConfig {
    pub model_type: String,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    #[serde(default = "default_act")]
    pub hidden_act: String,
    #[serde(default = "default_dropout")]
    pub hidden_dropout_prob: f64,
    #[serde(default = "default_dropout")]
    pub attention_probs_dropout_prob: f64,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub pad_token_id: Option<i64>,
    /// MPNet only: number of relative-position buckets.
    #[serde(default = "default_buckets")]
    pub relative_attention_num_buckets: usize,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    /// Every other key of `config.json`: what one architecture alone reads is parsed from here
    /// by that architecture's own config (`qwen3::Qwen3Config`, `modernbert::ModernBertConfig`).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

fn default_act() -> String {
    "gelu".into()
}
fn default_dropout() -> f64 {
    0.1
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_buckets() -> usize {
    32
}

impl ModelConfig {
    /// Reads and validates `config.json`.
    pub fn read(path: &Path) -> Result<Self> {
        let cfg: ModelConfig = read_json(path)?;
        cfg.validate(path)?;
        Ok(cfg)
    }

    pub fn architecture(&self) -> Result<Architecture> {
        match self.model_type.as_str() {
            "bert" => Ok(Architecture::Bert),
            "mpnet" => Ok(Architecture::Mpnet),
            "xlm-roberta" | "roberta" => Ok(Architecture::XlmRoberta),
            "qwen3" => Ok(Architecture::Qwen3),
            "modernbert" => Ok(Architecture::ModernBert),
            "gemma3_text" => Ok(Architecture::Gemma3),
            other => Err(Error::Config {
                path: PathBuf::from("config.json"),
                message: format!(
                    "model_type '{other}' is not supported (supported: {SUPPORTED_MODEL_TYPES})"
                ),
            }),
        }
    }

    /// Checks what the encoders rely on, naming the key at fault.
    pub fn validate(&self, path: &Path) -> Result<()> {
        let bad = |message: String| {
            Err(Error::Config {
                path: path.to_path_buf(),
                message,
            })
        };
        if let Err(Error::Config { message, .. }) = self.architecture() {
            return bad(message);
        }
        if self.hidden_size == 0 || self.num_attention_heads == 0 || self.num_hidden_layers == 0 {
            return bad(
                "hidden_size, num_attention_heads and num_hidden_layers must be >= 1".into(),
            );
        }
        // decoders and ModernBERT check their own keys when their config is parsed
        let family = match self.architecture()? {
            Architecture::Bert | Architecture::Mpnet | Architecture::XlmRoberta => {
                validate_bert_family(self)
            }
            _ => Ok(()),
        };
        if let Err(message) = family {
            return bad(message);
        }
        for (k, v) in [
            ("hidden_dropout_prob", self.hidden_dropout_prob),
            (
                "attention_probs_dropout_prob",
                self.attention_probs_dropout_prob,
            ),
        ] {
            if !(0.0..1.0).contains(&v) {
                return bad(format!("{k} = {v} is outside [0, 1)"));
            }
        }
        Ok(())
    }

    /// The padding token id used for batching (MPNet's position ids depend on it).
    pub fn pad_id(&self) -> i64 {
        self.pad_token_id.unwrap_or(match self.model_type.as_str() {
            "mpnet" | "xlm-roberta" | "roberta" => 1,
            _ => 0,
        })
    }

    /// Longest sequence the position table allows (MPNet/RoBERTa reserve `pad_id + 1` slots).
    pub fn max_positions(&self) -> usize {
        match self.model_type.as_str() {
            "mpnet" | "xlm-roberta" | "roberta" => self
                .max_position_embeddings
                .saturating_sub(self.pad_id() as usize + 1),
            _ => self.max_position_embeddings,
        }
    }

    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads.max(1)
    }

    /// The architecture's own keys, parsed from [`Self::extra`] (and the common keys when the
    /// type repeats them); a wrong type names the key.
    pub fn parse_extra<T: serde::de::DeserializeOwned>(&self) -> std::result::Result<T, String> {
        serde_json::from_value(serde_json::Value::Object(self.extra.clone()))
            .map_err(|e| e.to_string())
    }
}

/// A rotary base from `rope_theta` (transformers 4) or `rope_parameters` (5: `{rope_theta}`, or
/// per layer type `{<layer_type>: {rope_theta}}` when `layer_type` is given); default 10000.
pub(crate) fn rope_theta(
    theta: Option<f64>,
    params: Option<&serde_json::Value>,
    layer_type: Option<&str>,
) -> f64 {
    let from_params = params.and_then(|p| {
        let p = match layer_type {
            Some(t) => p.get(t)?,
            None => p,
        };
        p.get("rope_theta").and_then(serde_json::Value::as_f64)
    });
    theta.or(from_params).unwrap_or(10000.0)
}

/// What BERT, MPNet and XLM-RoBERTa need beyond the common keys, or the key at fault.
fn validate_bert_family(c: &ModelConfig) -> std::result::Result<(), String> {
    if !c.hidden_size.is_multiple_of(c.num_attention_heads) {
        return Err(format!(
            "hidden_size {} is not a multiple of num_attention_heads {}",
            c.hidden_size, c.num_attention_heads
        ));
    }
    if c.hidden_act != "gelu" {
        return Err(format!(
            "hidden_act '{}' is not supported (supported: gelu)",
            c.hidden_act
        ));
    }
    match c.position_embedding_type.as_deref() {
        None | Some("absolute") => Ok(()),
        Some(p) => Err(format!(
            "position_embedding_type '{p}' is not supported (supported: absolute)"
        )),
    }
}
