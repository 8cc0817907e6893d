//! The run directory: `--resume` / `--overwrite` checks, the recipe's identity hash, and the
//! metrics log trimmed back to a resumed checkpoint.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Event, TrainOptions};
use crate::checkpoint::{self, State};
use crate::recipe::{Recipe, RESUMABLE_KEYS};
use crate::{Error, Result};

/// sha256 of the recipe's identity: its TOML without the keys a resume may change.
pub(crate) fn identity_hash(r: &Recipe) -> String {
    let mut v = toml::Value::try_from(r).unwrap_or(toml::Value::Boolean(false));
    if let Some(t) = v.as_table_mut() {
        for k in RESUMABLE_KEYS {
            t.remove(k);
        }
        // keys added later hash as before when they keep their default, so that runs started
        // before they existed still resume
        if t.get("mini_batch_size") == Some(&toml::Value::Integer(0)) {
            t.remove("mini_batch_size");
        }
    }
    format!("{:x}", Sha256::digest(v.to_string().as_bytes()))
}

pub(crate) fn run_err(path: &Path, message: impl Into<String>) -> Error {
    Error::Run {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// [`prepare_run_dir`] on rank 0 of a data-parallel run (or the only process); the other ranks
/// wait for it, then resume from the newest checkpoint when asked to (the run directory is
/// shared: the same path on every machine).
pub(crate) fn start_run_dir(
    r: &Recipe,
    o: &TrainOptions,
    group: Option<&nest_dist::Group>,
) -> Result<Option<PathBuf>> {
    let Some(g) = group else {
        return prepare_run_dir(r, o);
    };
    let mine = if g.rank() == 0 {
        prepare_run_dir(r, o)?
    } else {
        None
    };
    g.barrier()?;
    if g.rank() == 0 || !o.resume {
        return Ok(mine);
    }
    Ok(checkpoint::list(&o.run_dir).pop().map(|(_, ck)| ck))
}

/// The seconds a collective may wait for another rank before failing: `NEST_DIST_TIMEOUT_S`,
/// 300 by default.
pub(crate) fn dist_timeout() -> Result<std::time::Duration> {
    let secs = match std::env::var("NEST_DIST_TIMEOUT_S") {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| {
                nest_dist::DistError::from(nest_dist::LaunchError::Invalid {
                    var: "NEST_DIST_TIMEOUT_S",
                    value: v.clone(),
                    expected: "a whole number of seconds >= 1",
                })
            })?,
        Err(_) => 300,
    };
    Ok(std::time::Duration::from_secs(secs))
}

/// Checks the run directory against `--resume` / `--overwrite`; returns the checkpoint to resume.
fn prepare_run_dir(r: &Recipe, o: &TrainOptions) -> Result<Option<PathBuf>> {
    let dir = &o.run_dir;
    let saved = dir.join("recipe.toml");
    if saved.is_file() {
        if o.overwrite {
            std::fs::remove_dir_all(dir).map_err(|e| nest_core::Error::io(dir, e))?;
        } else if o.resume {
            let old = Recipe::load(Some(&saved), &[])?;
            let diff = old.differences(r);
            if !diff.is_empty() {
                return Err(run_err(
                    dir,
                    format!(
                        "cannot resume: the recipe differs from the run's ({})",
                        diff.join("; ")
                    ),
                ));
            }
            let Some((_, ck)) = checkpoint::list(dir).pop() else {
                return Ok(None); // nothing saved yet: start over in the same folder
            };
            return Ok(Some(ck));
        } else {
            return Err(run_err(
                dir,
                "holds a run already: pass --resume to continue it or --overwrite to replace it",
            ));
        }
    } else if o.resume {
        return Err(run_err(dir, "no run to resume here (no recipe.toml)"));
    } else if !o.overwrite && holds_more_than_a_killed_start(dir) {
        return Err(run_err(
            dir,
            "exists and is not empty: choose another --run-dir or pass --overwrite",
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| nest_core::Error::io(dir, e))?;
    for leftover in killed_start_leftovers(dir) {
        let _ = std::fs::remove_file(leftover);
    }
    nest_core::fsutil::write_atomic(&saved, r.to_toml().as_bytes())?;
    Ok(None)
}

/// The half-written recipes (`write_atomic`'s `.recipe.toml.tmp<pid>`) of starts killed before
/// their recipe was in place: a run that never started, which a new start may take over.
fn killed_start_leftovers(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(".recipe.toml.tmp")
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `dir` holds anything besides [`killed_start_leftovers`].
fn holds_more_than_a_killed_start(dir: &Path) -> bool {
    let leftovers = killed_start_leftovers(dir).len();
    std::fs::read_dir(dir).is_ok_and(|d| d.count() > leftovers)
}

/// Keeps the metrics log consistent with a resumed checkpoint: drops lines after `step` and any
/// half-written last line.
pub(crate) fn trim_log(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["step"].as_u64())
                .is_some_and(|s| s <= step)
        })
        .collect();
    let mut out = kept.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    nest_core::fsutil::write_atomic(path, out.as_bytes())?;
    Ok(())
}

/// Whether the checkpoint `ck` (its `state`) may be resumed by this run: the same recipe
/// identity and model (else an error), the same world size (else an error unless
/// `--allow-world-change`) and libtorch threads (else a warning: not bit-exact).
pub(crate) fn check_checkpoint(
    ck: &Path,
    state: &State,
    recipe_sha: &str,
    model: &str,
    world: usize,
    o: &TrainOptions,
    events: &mut dyn FnMut(Event),
) -> Result<()> {
    if state.recipe_sha256 != recipe_sha {
        return Err(run_err(
            ck,
            "checkpoint was written by another recipe (its identity hash differs)",
        ));
    }
    if state.world_size != world {
        if !o.allow_world_change {
            return Err(run_err(
                ck,
                format!(
                    "checkpoint was written by {} process(es), this run has {world}: pass \
                     --allow-world-change to resume anyway (not bit-exact then)",
                    state.world_size
                ),
            ));
        }
        events(Event::Message(format!(
            "resuming a {}-process checkpoint with {world}: the global batches stay the \
             same, dropout masks and summation order change, so the run is no longer bit-exact",
            state.world_size
        )));
    }
    let threads = tch::get_num_threads().max(1) as usize;
    if let Some(t) = state.threads.filter(|&t| t != threads) {
        events(Event::Message(format!(
            "warning: the checkpoint was written with {t} libtorch thread(s), this process \
             has {threads}: matrix products may sum in another order, so the resumed run \
             is not bit-exact (pass --threads {t} to keep it so)"
        )));
    }
    if state.model != model {
        return Err(run_err(
            ck,
            format!(
                "checkpoint is of model '{}', the recipe names '{model}'",
                state.model
            ),
        ));
    }
    Ok(())
}
