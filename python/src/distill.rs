//! `nest.distill`: IBKD's two stages in-process, as `nest distill` runs them
//! ([`nest_train::distill::run`]), with the GIL released and Ctrl-C handled as in `nest.train`.

use std::path::PathBuf;

use nest_train::distill::{self, DistillRecipe, Stages};
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;

use crate::train::{on_event, run_options, train_err};

/// One stage's result: `(steps, last_loss, final_dir or "" when stopped early)`.
type StageRan = (u64, f64, PathBuf);

/// Runs `recipe` (an IBKD recipe, see recipes/ibkd.toml) into `run_dir`: `stage` "all", "1" or
/// "2"; `overrides` are the items of a dict of `nest distill`'s keys (`teacher`, `student`,
/// `stage1.KEY`, `stage2.KEY`), typed by [`crate::overrides`]. Returns the student's folder and each stage's result.
#[pyfunction]
#[pyo3(signature = (recipe, run_dir, overrides = Vec::new(), stage = "all".to_string(), resume = false, overwrite = false, progress = true))]
#[allow(clippy::too_many_arguments)] // the Python keywords, one by one
pub fn distill_native(
    py: Python<'_>,
    recipe: PathBuf,
    run_dir: PathBuf,
    overrides: Vec<(String, Bound<'_, PyAny>)>,
    stage: String,
    resume: bool,
    overwrite: bool,
    progress: bool,
) -> PyResult<(PathBuf, Vec<StageRan>)> {
    let stages = match stage.as_str() {
        "all" => Stages::Both,
        "1" => Stages::First,
        "2" => Stages::Second,
        s => {
            return Err(PyValueError::new_err(format!(
                "stage: '{s}' is not one of 'all', '1', '2'"
            )))
        }
    };
    if !recipe.exists() {
        return Err(pyo3::exceptions::PyFileNotFoundError::new_err(format!(
            "{}: no such recipe file",
            recipe.display()
        )));
    }
    let overrides = crate::overrides::from_items(overrides)?;
    let (d, s1, s2) = DistillRecipe::load(&recipe, &overrides).map_err(train_err)?;
    let opts = run_options(&run_dir, resume, overwrite);
    let mut interrupted = false;
    let out = crate::detach(py, || {
        distill::run(
            &d,
            (&s1, &s2),
            &run_dir,
            stages,
            &opts,
            &mut on_event(progress, &mut interrupted),
        )
    })?
    .map_err(train_err)?;
    if interrupted {
        return Err(PyKeyboardInterrupt::new_err(format!(
            "distillation stopped with a checkpoint in {}; nest.distill(..., run_dir={:?}, \
             resume=True) continues it exactly",
            run_dir.display(),
            run_dir.display().to_string()
        )));
    }
    let ran = out
        .stages
        .iter()
        .map(|s| (s.steps, s.last_loss, s.final_dir.clone()))
        .collect();
    Ok((out.final_dir, ran))
}
