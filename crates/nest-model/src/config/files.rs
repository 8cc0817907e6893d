//! The files of a model directory ([`ModelFiles`]), Nest's own `nest.json` ([`NestMeta`]) and
//! the JSON reader every config file goes through ([`read_json`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

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
                // the folder it was looked for in, whatever the current folder
                path: std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()),
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
    use crate::config::PoolingConfig;
    use crate::pooling::Pooling;

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
