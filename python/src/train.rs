//! `nest.train`: a training run in-process, as `nest train` runs it (nest-train's `train`), with
//! the GIL released. Each step re-takes the GIL for a moment to let Python see a pending Ctrl-C;
//! one turns into a stop request ([`nest_train::trainer::stop`]): the run ends after that step
//! with a checkpoint of it, resumable exactly, and `KeyboardInterrupt` is raised once it has.

use std::path::PathBuf;

use nest_train::trainer::{stop, train, Event, TrainOptions};
use nest_train::Recipe;
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyMemoryError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;

/// A nest-train error as the Python exception of its kind: a missing file
/// `FileNotFoundError`, a bad recipe value `ValueError`, anything else `RuntimeError`.
pub(crate) fn train_err(e: nest_train::Error) -> PyErr {
    use nest_train::Error as E;
    match e {
        E::Model(m) => crate::py_err(m),
        E::Core(c) => crate::core_err(c),
        E::Recipe { .. } => PyValueError::new_err(e.to_string()),
        // a run folder that is missing (a resume) or holds something else
        E::Run { ref path, .. } if !path.exists() => PyFileNotFoundError::new_err(e.to_string()),
        E::Run { .. } => PyValueError::new_err(e.to_string()),
        // a step the memory could not hold: Python's exception for a failed allocation
        E::StepFailed { ref cause, .. } if nest_core::caught::out_of_memory(cause) => {
            PyMemoryError::new_err(e.to_string())
        }
        other => PyRuntimeError::new_err(other.to_string()),
    }
}

/// The trainer's events as lines on stderr (when `progress`), and a pending Ctrl-C, seen once
/// per step, as a stop request ([`stop::request`]) after that step; `interrupted` records it.
pub(crate) fn on_event(progress: bool, interrupted: &mut bool) -> impl FnMut(Event) + '_ {
    move |e| {
        if let Event::Step { step, loss, lr } = &e {
            if progress {
                eprintln!("step {step}: loss {loss:.4}, lr {lr:.2e}");
            }
            if !*interrupted && Python::attach(|py| py.check_signals()).is_err() {
                *interrupted = true;
                stop::request();
                eprintln!("interrupted: stopping after step {step} with a checkpoint");
            }
        } else if progress {
            match &e {
                Event::Message(m) => eprintln!("{m}"),
                Event::Checkpoint { step, path } => {
                    eprintln!("step {step}: checkpoint {}", path.display())
                }
                Event::Eval { step, summary } => eprintln!("step {step}: {summary}"),
                _ => {}
            }
        }
    }
}

/// A run's options from Python: this machine's default device, the run as asked.
pub(crate) fn run_options(
    run_dir: &std::path::Path,
    resume: bool,
    overwrite: bool,
) -> TrainOptions {
    TrainOptions {
        resume,
        overwrite,
        ..TrainOptions::new(run_dir, nest_model::default_device())
    }
}

/// What a run left: `(run_dir, final_dir or "", steps, last_loss, stopped)`.
type Ran = (PathBuf, PathBuf, u64, f64, bool);

/// Trains `recipe` (a TOML file, or none) with `overrides` (the items of a dict of recipe keys,
/// typed by [`crate::overrides`]) into `run_dir`; `resume` continues the run there, `overwrite`
/// replaces it once the new run finished. `progress` prints one line per step to stderr.
/// `allow_data_change` resumes on data other than the checkpoint's (`--allow-data-change`).
#[pyfunction]
#[pyo3(signature = (run_dir, recipe = None, overrides = Vec::new(), resume = false, overwrite = false, progress = true, allow_data_change = false))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments, one per option
pub fn train_native(
    py: Python<'_>,
    run_dir: PathBuf,
    recipe: Option<PathBuf>,
    overrides: Vec<(String, Bound<'_, PyAny>)>,
    resume: bool,
    overwrite: bool,
    progress: bool,
    allow_data_change: bool,
) -> PyResult<Ran> {
    if resume && overwrite {
        return Err(PyValueError::new_err(
            "resume and overwrite contradict each other: resume continues a run, overwrite \
             replaces it; pass one",
        ));
    }
    let recipe = match (recipe, resume) {
        (Some(r), _) => Some(r),
        // resuming without a recipe: the run's own resolved recipe
        (None, true) => Some(run_dir.join("recipe.toml")),
        (None, false) => None,
    };
    let overrides = crate::overrides::from_items(overrides)?;
    let r = Recipe::load(recipe.as_deref(), &overrides).map_err(train_err)?;
    let opts = TrainOptions {
        allow_data_change,
        ..run_options(&run_dir, resume, overwrite)
    };
    let mut interrupted = false;
    let summary = crate::detach(py, || {
        train(&r, &opts, &mut on_event(progress, &mut interrupted))
    })?
    .map_err(train_err)?;
    let stopped = summary.final_dir.as_os_str().is_empty();
    if interrupted {
        return Err(PyKeyboardInterrupt::new_err(format!(
            "training stopped after step {} with a checkpoint in {}; nest.train(run_dir={:?}, \
             resume=True) continues it exactly",
            summary.steps,
            run_dir.display(),
            run_dir.display().to_string()
        )));
    }
    Ok((
        run_dir,
        summary.final_dir,
        summary.steps,
        summary.last_loss,
        stopped,
    ))
}

/// Writes checkpoint `checkpoint`'s model (a `RUN/checkpoints/step-N` folder, or a run folder:
/// its newest) to `out` as `nest export checkpoint` does; returns the checkpoint and its step.
/// `overwrite` replaces a model at `out` (never a folder without one).
#[pyfunction]
#[pyo3(signature = (checkpoint, out, overwrite = false, progress = true))]
pub fn export_checkpoint_native(
    py: Python<'_>,
    checkpoint: PathBuf,
    out: PathBuf,
    overwrite: bool,
    progress: bool,
) -> PyResult<(PathBuf, u64)> {
    let ck = nest_train::trainer::find_checkpoint(&checkpoint).map_err(train_err)?;
    nest_model::export::check_out(&out, &ck, overwrite).map_err(PyValueError::new_err)?;
    let mut interrupted = false;
    let done = crate::detach(py, || {
        let device = nest_model::default_device();
        let mut events = on_event(progress, &mut interrupted);
        nest_train::trainer::export_checkpoint(&ck, &out, device, &mut events)
    })?
    .map_err(train_err)?;
    Ok((done.checkpoint, done.step))
}
