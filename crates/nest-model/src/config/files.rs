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
    /// The training run's seed, for information: `nest eval seeds` tells runs of one seed
    /// (not independent) from seeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
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
                    message: format!("file not found in the model directory{}", folder_hint(dir)),
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

/// What a folder that is not a model directory holds, where that is recognisable: model
/// directories one or two levels down (a training run's `final/`, a distillation's
/// `stage2/final/`, the folders of `models/`, a hub cache's `snapshots/<hash>/`), else a
/// training run (its `recipe.toml`) or checkpoint (`state.json`) without a finished model.
/// The newest model is named first.
fn folder_hint(dir: &Path) -> String {
    let is_model =
        |p: &Path| p.join("config.json").is_file() && p.join("model.safetensors").is_file();
    let subdirs = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        v.sort();
        v
    };
    let mut models = Vec::new();
    for sub in subdirs(dir) {
        match is_model(&sub) {
            true => models.push(sub),
            false => models.extend(subdirs(&sub).into_iter().filter(|p| is_model(p))),
        }
    }
    // the newest first: a distillation's student (stage 2) before its stage-1 model
    let written = |p: &PathBuf| {
        std::fs::metadata(p.join("config.json"))
            .and_then(|m| m.modified())
            .ok()
    };
    models.sort_by_key(|p| std::cmp::Reverse(written(p)));
    if let Some(first) = models.first() {
        let more = match models.len() {
            1 => String::new(),
            n if n <= 6 => {
                let rest: Vec<String> = models[1..]
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                format!(" (or {})", rest.join(", "))
            }
            n => format!(" (or one of {} others)", n - 1),
        };
        return format!(
            "; the folder holds a model below it: pass {}{more}",
            first.display()
        );
    }
    if dir.join("recipe.toml").is_file() {
        return format!(
            "; it is a training run's folder without a finished model (final/): `nest train \
             --resume {}` finishes the run",
            dir.display()
        );
    }
    if dir.join("adaptor.json").is_file() {
        let source = std::fs::read(dir.join("adaptor.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["info"]["source"]["model"].as_str().map(str::to_string));
        let model = source.map_or(String::new(), |m| format!(" (it was trained on {m})"));
        return format!(
            "; it is an adaptor (`nest compress`): pass it as --adaptor {} beside the model it \
             was trained on{model}",
            dir.display()
        );
    }
    if dir.join("index.json").is_file() {
        return format!(
            "; it is a search index: `nest search --index {0}`, `nest index info --index {0}`",
            dir.display()
        );
    }
    if dir.join("state.json").is_file() && dir.join("optimizer.safetensors").is_file() {
        return format!(
            "; it is a training checkpoint (weights and optimizer state): `nest export \
             checkpoint {} --out DIR` writes its model as a model folder, and `nest train \
             --resume RUN` continues its run, whose finished model is RUN/final",
            dir.display()
        );
    }
    String::new()
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
    fn a_folder_that_is_not_a_model_says_where_its_model_is() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("run");
        let model = |p: &Path| {
            std::fs::create_dir_all(p).unwrap();
            std::fs::write(p.join("config.json"), "{}").unwrap();
            std::fs::write(p.join("model.safetensors"), "").unwrap();
        };
        let err = |dir: &Path| ModelFiles::locate(dir).unwrap_err().to_string();
        // an unfinished run: its recipe, a checkpoint, no final/
        let ck = run.join("checkpoints/step-00000005");
        std::fs::create_dir_all(&ck).unwrap();
        std::fs::write(run.join("recipe.toml"), "").unwrap();
        let e = err(&run);
        assert!(e.contains("config.json") && e.contains("--resume"), "{e}");
        for f in ["model.safetensors", "optimizer.safetensors", "state.json"] {
            std::fs::write(ck.join(f), "").unwrap();
        }
        let e = err(&ck);
        assert!(
            e.contains("training checkpoint") && e.contains("RUN/final"),
            "{e}"
        );
        // a finished run, a distillation's two stages, a folder of models
        model(&run.join("final"));
        let e = err(&run);
        assert!(
            e.contains(&format!("pass {}", run.join("final").display())),
            "{e}"
        );
        for (stage, second) in [("stage2", 2000), ("stage1", 1000)] {
            let dir = d.path().join("x").join(stage).join("final");
            model(&dir);
            let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(second);
            let config = std::fs::File::options()
                .write(true)
                .open(dir.join("config.json"));
            config.unwrap().set_modified(at).unwrap();
        }
        let e = err(&d.path().join("x"));
        assert!(
            e.contains("stage2/final (or ") && e.contains("stage1/final)"),
            "{e}"
        );
        let empty = d.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(err(&empty).ends_with("file not found in the model directory"));
        // an adaptor (with the model it was trained on) and an index
        let adaptor = d.path().join("adaptor");
        std::fs::create_dir_all(&adaptor).unwrap();
        let record = r#"{"info": {"source": {"model": "models/m"}}}"#;
        std::fs::write(adaptor.join("adaptor.json"), record).unwrap();
        let e = err(&adaptor);
        let want = format!("pass it as --adaptor {}", adaptor.display());
        assert!(
            e.contains(&want) && e.ends_with("(it was trained on models/m)"),
            "{e}"
        );
        std::fs::write(empty.join("index.json"), "{}").unwrap();
        let e = err(&empty);
        assert!(e.contains("search index: `nest search --index"), "{e}");
    }

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
