//! The sentence-transformers files of a model directory: `sentence_bert_config.json` and
//! `1_Pooling/config.json` (which pooling mode the model was trained with).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::pooling::Pooling;
use crate::{Error, Result};

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
