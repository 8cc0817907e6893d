//! Model directory layout and configuration (Hugging Face `config.json` plus the
//! sentence-transformers files), validated when the model is loaded.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::pooling::Pooling;
use crate::{Error, Result};

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

/// `sentence_bert_config.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SbertConfig {
    pub max_seq_length: Option<usize>,
    #[serde(default)]
    pub do_lower_case: bool,
}

/// `1_Pooling/config.json` (sentence-transformers). Two formats: up to v5, one boolean per mode
/// (`pooling_mode_mean_tokens`, ...); from v6, a string `pooling_mode` (`"mean"`, ...).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PoolingConfig {
    /// sentence-transformers 6: `"mean"`, `"cls"`, `"max"`, `"mean_sqrt_len_tokens"`, ...
    #[serde(default)]
    pub pooling_mode: Option<String>,
    #[serde(default)]
    pub word_embedding_dimension: Option<usize>,
    #[serde(default)]
    pub pooling_mode_cls_token: bool,
    #[serde(default)]
    pub pooling_mode_mean_tokens: bool,
    #[serde(default)]
    pub pooling_mode_max_tokens: bool,
    #[serde(default)]
    pub pooling_mode_mean_sqrt_len_tokens: bool,
    /// The last real token (decoder embedding models such as Qwen3-Embedding).
    #[serde(default)]
    pub pooling_mode_lasttoken: bool,
    /// Whether the prompt's tokens count in the pooled vector (sentence-transformers' default:
    /// yes; INSTRUCTOR-style models: no).
    #[serde(default = "yes")]
    pub include_prompt: bool,
    /// Keys Nest does not read; a `pooling_mode_*` among them that is on is refused (a pooling
    /// Nest does not have, e.g. weighted mean), anything else is ignored.
    #[serde(flatten, skip_serializing)]
    pub other: std::collections::BTreeMap<String, serde_json::Value>,
}

fn yes() -> bool {
    true
}

impl PoolingConfig {
    pub fn pooling(&self, path: &Path) -> Result<Pooling> {
        let unknown_on: Vec<&str> = self
            .other
            .iter()
            .filter(|(k, v)| k.starts_with("pooling_mode_") && v.as_bool() == Some(true))
            .map(|(k, _)| k.as_str())
            .collect();
        if !unknown_on.is_empty() {
            return Err(Error::Config {
                path: path.to_path_buf(),
                message: format!(
                    "{} is true, a pooling Nest does not have (supported: cls, mean, max, \
                     mean_sqrt_len, lasttoken)",
                    unknown_on.join(", ")
                ),
            });
        }
        if let Some(mode) = &self.pooling_mode {
            return match mode.as_str() {
                "mean" | "mean_tokens" => Ok(Pooling::Mean),
                "cls" | "cls_token" => Ok(Pooling::Cls),
                "max" | "max_tokens" => Ok(Pooling::Max),
                "mean_sqrt_len_tokens" | "mean_sqrt_len" => Ok(Pooling::MeanSqrtLen),
                "lasttoken" | "last_token" => Ok(Pooling::LastToken),
                other => Err(Error::Config {
                    path: path.to_path_buf(),
                    message: format!("pooling_mode '{other}' is not supported (supported: mean, cls, max, mean_sqrt_len_tokens, lasttoken)"),
                }),
            };
        }
        let modes = [
            (self.pooling_mode_cls_token, Pooling::Cls),
            (self.pooling_mode_mean_tokens, Pooling::Mean),
            (self.pooling_mode_max_tokens, Pooling::Max),
            (self.pooling_mode_mean_sqrt_len_tokens, Pooling::MeanSqrtLen),
            (self.pooling_mode_lasttoken, Pooling::LastToken),
        ];
        let on: Vec<Pooling> = modes.iter().filter(|(b, _)| *b).map(|(_, p)| *p).collect();
        match on.as_slice() {
            [p] => Ok(*p),
            [] => Err(Error::Config {
                path: path.to_path_buf(),
                message: "no pooling_mode_* is true (expected exactly one)".into(),
            }),
            _ => Err(Error::Config {
                path: path.to_path_buf(),
                message: "several pooling_mode_* are true; Nest supports exactly one".into(),
            }),
        }
    }
}

/// `nest.json`: what a Nest training run records about the elastic axes it trained. Nest's
/// own file, so an unknown key (a typo in a hand edit) is an error naming it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NestMeta {
    /// Prefix dimensions the model was trained for (Matryoshka dims), if recorded.
    #[serde(default)]
    pub matryoshka_dims: Vec<usize>,
    /// Layers the model was trained to exit at, if recorded.
    #[serde(default)]
    pub trained_layers: Vec<usize>,
    /// The training objective, for information.
    #[serde(default)]
    pub objective: Option<String>,
    /// The dim Nest truncates to when none is asked for (set by `nest slim --dim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_dim: Option<usize>,
    /// The arithmetic the model was trained in (`float32`, or `bf16` mixed precision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_dtype: Option<String>,
}

/// The files of a model directory (Hugging Face / sentence-transformers layout).
#[derive(Debug, Clone)]
pub struct ModelFiles {
    pub dir: PathBuf,
    pub config: PathBuf,
    pub weights: PathBuf,
    pub tokenizer: PathBuf,
    /// Optional sentence-transformers files.
    pub sbert_config: Option<PathBuf>,
    pub pooling_config: Option<PathBuf>,
    pub modules: Option<PathBuf>,
    pub nest_meta: Option<PathBuf>,
    /// `tokenizer_config.json`: sentence-transformers 6 keeps `max_seq_length` there as
    /// `model_max_length`.
    pub tokenizer_config: Option<PathBuf>,
    /// `config_sentence_transformers.json`: the model's prompts ([`crate::prompt`]).
    pub st_config: Option<PathBuf>,
}

impl ModelFiles {
    /// Finds the files in `dir`, with a clear error for what is missing.
    pub fn locate(dir: &Path) -> Result<Self> {
        if !dir.is_dir() {
            return Err(Error::Missing {
                path: dir.to_path_buf(),
                message: "model directory not found (expected a folder with config.json, \
                          model.safetensors and tokenizer.json; run scripts/setup.sh models)"
                    .into(),
            });
        }
        let need = |name: &str| -> Result<PathBuf> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(Error::Missing {
                    path: p,
                    message: "file not found in the model directory".into(),
                })
            }
        };
        let opt = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
        Ok(ModelFiles {
            dir: dir.to_path_buf(),
            config: need("config.json")?,
            weights: need("model.safetensors")?,
            tokenizer: need("tokenizer.json")?,
            sbert_config: opt("sentence_bert_config.json"),
            pooling_config: opt("1_Pooling/config.json"),
            modules: opt("modules.json"),
            nest_meta: opt("nest.json"),
            tokenizer_config: opt("tokenizer_config.json"),
            st_config: opt("config_sentence_transformers.json"),
        })
    }
}

/// Reads a JSON file into `T`, naming the file (and serde's line/column) on failure.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Missing {
        path: path.to_path_buf(),
        message: format!("cannot read: {e}"),
    })?;
    serde_json::from_str(&text).map_err(|e| Error::Config {
        path: path.to_path_buf(),
        message: format!("invalid JSON or missing key: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nest_json_typos_and_unknown_poolings_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("nest.json");
        std::fs::write(&p, r#"{"matryoshka_dims": [8, 16], "trained_layer": [1]}"#).unwrap();
        let e = read_json::<NestMeta>(&p).unwrap_err().to_string();
        assert!(
            e.contains("nest.json")
                && e.contains("unknown field `trained_layer`")
                && e.contains("trained_layers"),
            "{e}"
        );
        let q = d.path().join("config.json");
        std::fs::write(&q, r#"{"word_embedding_dimension": 8, "pooling_mode_mean_tokens": false, "pooling_mode_weightedmean_tokens": true, "pooling_mode_lasttoken": false}"#).unwrap();
        let c: PoolingConfig = read_json(&q).unwrap();
        let e = c.pooling(&q).unwrap_err().to_string();
        assert!(
            e.contains("pooling_mode_weightedmean_tokens is true"),
            "{e}"
        );
        // keys Nest does not read, off or not a mode, are fine
        std::fs::write(&q, r#"{"pooling_mode_mean_tokens": true, "pooling_mode_weightedmean_tokens": false, "something_new": 3}"#).unwrap();
        let c: PoolingConfig = read_json(&q).unwrap();
        assert_eq!(c.pooling(&q).unwrap(), Pooling::Mean);
    }
}
