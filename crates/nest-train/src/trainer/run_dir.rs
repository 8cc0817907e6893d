//! The run directory: `--resume` / `--overwrite` checks, the recipe's identity hash, and a
//! replaced run moved aside until the new one ends.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Event, TrainOptions};
use crate::checkpoint::{self, State};
use crate::recipe::{Recipe, RESUMABLE_KEYS};
use crate::{Error, Result};

/// sha256 of the recipe's identity: its TOML without the keys a resume may change.
pub(crate) fn identity_hash(r: &Recipe) -> String {
    identity_hash_keeping(r, &[])
}

/// The identity hash of runs started before `cuda_graph` became resumable (2026-11-29), which
/// hashed it when it was set: a checkpoint of theirs still resumes with the same value.
pub(crate) fn legacy_identity_hash(r: &Recipe) -> String {
    identity_hash_keeping(r, &["cuda_graph"])
}

fn identity_hash_keeping(r: &Recipe, keep: &[&str]) -> String {
    let mut v = toml::Value::try_from(r).unwrap_or(toml::Value::Boolean(false));
    if let Some(t) = v.as_table_mut() {
        for k in RESUMABLE_KEYS.iter().filter(|k| !keep.contains(k)) {
            t.remove(*k);
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

/// What a start does to its run folder: decided by [`check_run_dir`] before anything is
/// written, done by [`claim_run_dir`] once the model, data and evaluation grid were read.
#[derive(Debug, Clone)]
pub(crate) enum Claim {
    /// A new run (the folder is missing or empty, or `--overwrite` of a folder without a run).
    Fresh,
    /// `--resume`: the newest checkpoint, or none when the run saved nothing yet.
    Resume(Option<PathBuf>),
    /// `--overwrite` of a run: its files move to [`REPLACED`] when the new run starts, and are
    /// deleted only once the new run finished (put back when it fails).
    Replace,
}

/// Where `--overwrite` keeps the run it replaces until the new one finished.
pub(crate) const REPLACED: &str = ".replaced";

/// Checks the run directory against `--resume` / `--overwrite` without writing anything.
pub(crate) fn check_run_dir(r: &Recipe, o: &TrainOptions) -> Result<Claim> {
    let dir = &o.run_dir;
    if o.resume && o.overwrite {
        return Err(run_err(
            dir,
            "--resume and --overwrite contradict each other: --resume continues the run, \
             --overwrite replaces it; pass one",
        ));
    }
    let saved = dir.join("recipe.toml");
    if !saved.is_file() {
        if o.resume {
            return Err(run_err(dir, "no run to resume here (no recipe.toml)"));
        }
        if !o.overwrite && holds_more_than_a_killed_start(dir) {
            return Err(run_err(
                dir,
                "exists and is not empty: choose another --run-dir or pass --overwrite",
            ));
        }
        return Ok(Claim::Fresh);
    }
    if o.overwrite {
        // the replaced run is deleted once the new one finishes: with its inputs, were they in it
        let inputs = r.input_paths();
        let inputs: Vec<_> = inputs.iter().map(|(k, p)| (*k, p.as_path())).collect();
        nest_core::fsutil::check_output_spares_inputs("--run-dir", dir, &inputs)?;
        return Ok(Claim::Replace);
    }
    if !o.resume {
        return Err(run_err(
            dir,
            "holds a run already: pass --resume to continue it or --overwrite to replace it",
        ));
    }
    let old = Recipe::load(Some(&saved), &Default::default())?;
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
    // nothing saved yet: start over in the same folder
    Ok(Claim::Resume(checkpoint::list(dir).pop().map(|(_, ck)| ck)))
}

/// What a resume that changes `cuda_graph` (resumable: [`RESUMABLE_KEYS`]) costs: the steps
/// from its checkpoint on are recorded where they were eager or the other way round, the same
/// operations on the same draws, equal up to float reordering rather than bit for bit.
pub(crate) fn resume_note(r: &Recipe, o: &TrainOptions) -> Option<String> {
    let saved = o.run_dir.join("recipe.toml");
    let old = o
        .resume
        .then(|| Recipe::load(Some(&saved), &Default::default()).ok())??;
    let (was, now) = (old.cuda_graph, r.cuda_graph);
    (was.resolve(o.device) != now.resolve(o.device)).then(|| {
        let name = |m: crate::trainer::GraphMode| format!("{m:?}").to_lowercase();
        format!(
            "cuda_graph {} -> {}: the steps from the checkpoint on are {}; the run goes on equal \
             up to float reordering, not bit for bit",
            name(was),
            name(now),
            match now.resolve(o.device) {
                true => "recorded",
                false => "eager",
            }
        )
    })
}

/// For `--resume`: the recipe with its paths spelled as the run recorded them (absolute
/// since paths resolve against the recipe file; relative to the folder it was started from
/// before), read on every rank; `None` otherwise.
pub(crate) fn recorded_recipe(r: &Recipe, o: &TrainOptions) -> Option<Recipe> {
    if !o.resume {
        return None;
    }
    let saved = Recipe::load_verbatim(&o.run_dir.join("recipe.toml")).ok()?;
    Some(r.with_recorded_paths(&saved))
}

/// The first write of a start: a new run's folder and recipe, or the replaced run moved aside;
/// returns the checkpoint to resume.
pub(crate) fn claim_run_dir(
    r: &Recipe,
    o: &TrainOptions,
    claim: &Claim,
) -> Result<Option<PathBuf>> {
    let dir = &o.run_dir;
    match claim {
        Claim::Resume(ck) => {
            record_resumed_keys(r, dir)?;
            return Ok(ck.clone());
        }
        Claim::Replace => move_aside(dir)?,
        Claim::Fresh => {}
    }
    std::fs::create_dir_all(dir).map_err(|e| nest_core::Error::io(dir, e))?;
    for leftover in killed_start_leftovers(dir) {
        let _ = std::fs::remove_file(leftover);
    }
    nest_core::fsutil::write_atomic(&dir.join("recipe.toml"), r.to_toml().as_bytes())?;
    Ok(None)
}

/// A resume may change the keys of [`RESUMABLE_KEYS`] (`--max-steps 500` on a run of 100):
/// the run's recipe.toml records them, so that the next bare `--resume` goes on to the same
/// end. Before, it read the first values back: a run cut on its way to 500 resumed with
/// max_steps 100 and was exported at its checkpoint as finished.
fn record_resumed_keys(r: &Recipe, dir: &Path) -> Result<()> {
    let path = dir.join("recipe.toml");
    let saved = Recipe::load_verbatim(&path)?;
    if saved.to_toml() != r.to_toml() {
        nest_core::fsutil::write_atomic(&path, r.to_toml().as_bytes())?;
    }
    Ok(())
}

/// [`claim_run_dir`] on rank 0 of a data-parallel run (or the only process, which passes its
/// claim); the other ranks wait for it, then resume from the newest checkpoint when asked to
/// (the run directory is shared: the same path on every machine).
pub(crate) fn start_run_dir(
    r: &Recipe,
    o: &TrainOptions,
    group: Option<&nest_dist::Group>,
    claim: Option<&Claim>,
) -> Result<Option<PathBuf>> {
    let mine = match claim {
        Some(c) => claim_run_dir(r, o, c)?,
        None => None,
    };
    let Some(g) = group else {
        return Ok(mine);
    };
    g.barrier()?;
    if g.rank() == 0 || !o.resume {
        return Ok(mine);
    }
    Ok(checkpoint::list(&o.run_dir).pop().map(|(_, ck)| ck))
}

/// The entries of a run folder that belong to the run (all but the lock and [`REPLACED`]).
fn run_entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let n = e.file_name();
                    n != nest_core::lock::LOCK_FILE && n != REPLACED
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Moves the run in `dir` into `dir/.replaced/`. When that holds a run already (an earlier
/// `--overwrite` was killed before its new run finished), it is the last complete run and is
/// kept: the unfinished replacement in `dir` is deleted instead.
fn move_aside(dir: &Path) -> Result<()> {
    let aside = dir.join(REPLACED);
    let io = |p: &Path, e| Error::Core(nest_core::Error::io(p, e));
    if aside.join("recipe.toml").is_file() {
        for p in run_entries(dir) {
            remove_path(&p).map_err(|e| io(&p, e))?;
        }
        return Ok(());
    }
    std::fs::create_dir_all(&aside).map_err(|e| io(&aside, e))?;
    for p in run_entries(dir) {
        let to = aside.join(p.file_name().unwrap_or_default());
        std::fs::rename(&p, &to).map_err(|e| io(&p, e))?;
    }
    Ok(())
}

fn remove_path(p: &Path) -> std::io::Result<()> {
    match p.is_dir() {
        true => std::fs::remove_dir_all(p),
        false => std::fs::remove_file(p),
    }
}

/// How a claimed run ended, for [`settle`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Trained to its last step and exported.
    Finished,
    /// Stopped early (`stop_after_steps`): resumable.
    Stopped,
    Failed,
}

/// After a run: a finished run deletes the run it replaced; a failed `--overwrite` puts the
/// replaced run back in place of the new run's files (an interrupted one, `stop_after_steps`
/// or a kill, keeps both: the replaced run stays in `.replaced/` until the new one finishes).
pub(crate) fn settle(dir: &Path, claim: &Claim, ending: Ending, events: &mut dyn FnMut(Event)) {
    let aside = dir.join(REPLACED);
    if !aside.exists() {
        return;
    }
    match ending {
        Ending::Finished => {
            let _ = std::fs::remove_dir_all(&aside);
        }
        Ending::Failed if matches!(claim, Claim::Replace) => {
            let restored = run_entries(dir)
                .iter()
                .try_for_each(|p| remove_path(p))
                .and_then(|_| {
                    run_entries(&aside).iter().try_for_each(|p| {
                        std::fs::rename(p, dir.join(p.file_name().unwrap_or_default()))
                    })
                });
            let _ = std::fs::remove_dir(&aside);
            events(Event::Message(match restored {
                Ok(()) => format!("{}: the new run failed; the run it was to replace is back in place", dir.display()),
                Err(e) => format!("{}: the new run failed and the replaced run could not be put back ({e}); it is in {}", dir.display(), aside.display()),
            }));
        }
        // (a stopped run's checkpoint resumes it; the replaced run waits for its end)
        Ending::Stopped => events(Event::Message(format!(
            "{}: the run this one replaces is kept in {} until this one finishes (`--resume` \
             continues this one; to go back, put that folder's contents in place of this run's)",
            dir.display(),
            aside.display()
        ))),
        _ => {}
    }
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

/// Whether `dir` holds anything besides [`killed_start_leftovers`] and the lock file.
fn holds_more_than_a_killed_start(dir: &Path) -> bool {
    let leftovers = killed_start_leftovers(dir).len();
    std::fs::read_dir(dir).is_ok_and(|d| {
        d.flatten()
            .filter(|e| e.file_name() != nest_core::lock::LOCK_FILE)
            .count()
            > leftovers
    })
}

/// Whether the checkpoint `ck` (its `state`) may be resumed by this run: the same recipe
/// identity and model (else an error), the same world size (else an error unless
/// `--allow-world-change`) and libtorch threads (else a warning: not bit-exact).
pub(crate) fn check_checkpoint(
    ck: &Path,
    state: &State,
    recipe_sha: (&str, &str),
    model: &str,
    world: usize,
    o: &TrainOptions,
    events: &mut dyn FnMut(Event),
) -> Result<()> {
    if state.recipe_sha256 != recipe_sha.0 && state.recipe_sha256 != recipe_sha.1 {
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
