//! Checkpoints: `run/checkpoints/step-00000100/` holding `model.safetensors`,
//! `objective.safetensors` (the objective's own parameters, when it has any),
//! `optimizer.safetensors` (AdamW moments) and `state.json` (step, data position, hashes).
//! Written into a temporary folder, synced, then renamed: a checkpoint folder is complete or
//! absent, whenever the process dies. The last `keep_last` are kept.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::{nn::VarStore, Tensor};

use crate::optim::AdamW;
use crate::{Error, Result};

/// Where training stands.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct State {
    /// Optimizer steps done.
    pub step: u64,
    /// The epoch and the index of the next micro-batch in its plan.
    pub(crate) epoch: u64,
    pub(crate) next_batch: usize,
    /// sha256 of the recipe's identity (its TOML without the resumable keys).
    pub(crate) recipe_sha256: String,
    pub(crate) model: String,
    pub(crate) last_loss: f64,
    /// Processes of the data-parallel run that wrote it (1: one process).
    #[serde(default = "one")]
    pub(crate) world_size: usize,
    /// libtorch intra-op threads of the process that wrote it (absent in older checkpoints).
    #[serde(default)]
    pub(crate) threads: Option<usize>,
    /// sha256 of the recipe's `[[data]]` examples as read ([`crate::data::fingerprint`];
    /// absent in checkpoints before 2026-11-29).
    #[serde(default)]
    pub(crate) data_sha256: Option<String>,
}

impl State {
    /// Whether this run's data (`data_sha256`, its fingerprint) is the data the checkpoint `ck`
    /// was trained on: an error when it is not, unless `allow` (`--allow-data-change`), which
    /// says what changes.
    pub(crate) fn check_data(
        &self,
        ck: &Path,
        data_sha256: &str,
        allow: bool,
    ) -> Result<Option<String>> {
        let Some(then) = self.data_sha256.as_deref().filter(|t| *t != data_sha256) else {
            return Ok(None);
        };
        let (now, then) = (&data_sha256[..12], &then[..12.min(then.len())]);
        if allow {
            return Ok(Some(format!(
                "resuming on other training data (sha256 {now}..., the run so far {then}...): \
                 the batches from here on follow the new data's plan"
            )));
        }
        Err(Error::Run {
            path: ck.to_path_buf(),
            message: format!(
                "the training data changed since this checkpoint (the recipe's [[data]] examples \
                 as read: sha256 {now}..., the run so far trained on {then}...), so the resumed \
                 run would train on other batches: put the data back, start a new run \
                 (--overwrite, or another --run-dir), or pass --allow-data-change (Python: \
                 allow_data_change=True) to continue on the new data"
            ),
        })
    }
}

fn one() -> usize {
    1
}

fn io(p: &Path, e: std::io::Error) -> Error {
    nest_core::Error::io(p, e).into()
}

/// Writes a checkpoint atomically and prunes old ones; returns its folder.
pub(crate) fn save(
    run: &Path,
    vs: &VarStore,
    objective: &VarStore,
    opt: &AdamW,
    state: &State,
    keep_last: usize,
) -> Result<PathBuf> {
    let root = run.join("checkpoints");
    std::fs::create_dir_all(&root).map_err(|e| io(&root, e))?;
    let name = format!("step-{:08}", state.step);
    let dir = root.join(&name);
    let tmp = root.join(format!(".tmp-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| io(&tmp, e))?;
    vs.save(tmp.join("model.safetensors"))?;
    let mut files = vec!["model.safetensors", "optimizer.safetensors"];
    if !objective.variables().is_empty() {
        objective.save(tmp.join("objective.safetensors"))?;
        files.push("objective.safetensors");
    }
    Tensor::write_safetensors(&opt.state(), tmp.join("optimizer.safetensors"))?;
    let json = serde_json::to_string_pretty(state).map_err(|e| Error::Run {
        path: tmp.clone(),
        message: e.to_string(),
    })?;
    nest_core::fsutil::write_atomic(&tmp.join("state.json"), json.as_bytes())?;
    for f in files {
        let p = tmp.join(f);
        std::fs::File::open(&p)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(&p, e))?;
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| io(&dir, e))?;
    }
    std::fs::rename(&tmp, &dir).map_err(|e| io(&dir, e))?;
    if let Ok(d) = std::fs::File::open(&root) {
        let _ = d.sync_all();
    }
    let mut all = list(run);
    while all.len() > keep_last {
        let old = all.remove(0);
        let _ = std::fs::remove_dir_all(old.1);
    }
    Ok(dir)
}

/// Complete checkpoints, oldest first: `(step, folder)`.
pub fn list(run: &Path) -> Vec<(u64, PathBuf)> {
    let root = run.join("checkpoints");
    let mut v: Vec<(u64, PathBuf)> = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let step = name.strip_prefix("step-")?.parse().ok()?;
            e.path()
                .join("state.json")
                .is_file()
                .then(|| (step, e.path()))
        })
        .collect();
    v.sort();
    v
}

/// Reads a checkpoint's state and optimizer tensors.
pub fn load(dir: &Path) -> Result<(State, HashMap<String, Tensor>)> {
    let p = dir.join("state.json");
    let text = std::fs::read_to_string(&p).map_err(|e| io(&p, e))?;
    let state: State = serde_json::from_str(&text).map_err(|e| Error::Run {
        path: p.clone(),
        message: format!("unreadable checkpoint state: {e}"),
    })?;
    let opt = Tensor::read_safetensors(dir.join("optimizer.safetensors"))?
        .into_iter()
        .collect();
    Ok((state, opt))
}

/// Restores the objective's parameters from a checkpoint (nothing to do when it has none), with
/// a clear error when the checkpoint lacks one or holds another shape.
pub(crate) fn load_objective(dir: &Path, objective: &mut VarStore) -> Result<()> {
    let vars = objective.variables();
    if vars.is_empty() {
        return Ok(());
    }
    let p = dir.join("objective.safetensors");
    let saved: HashMap<String, Tensor> = Tensor::read_safetensors(&p)
        .map_err(|e| Error::Run {
            path: p.clone(),
            message: format!("the objective has parameters but they cannot be read: {e}"),
        })?
        .into_iter()
        .collect();
    let _g = tch::no_grad_guard();
    for (name, mut var) in vars {
        let t = saved.get(&name).ok_or_else(|| Error::Run {
            path: p.clone(),
            message: format!("no tensor '{name}' (the objective's parameter)"),
        })?;
        if t.size() != var.size() {
            return Err(Error::Run {
                path: p.clone(),
                message: format!(
                    "'{name}' has shape {:?}, expected {:?}",
                    t.size(),
                    var.size()
                ),
            });
        }
        var.copy_(t);
    }
    Ok(())
}
