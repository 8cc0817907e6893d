//! `nest distill`: IBKD's two stages (`IBKD.md` section 3.3) as one resumable run.
//!
//! 1. Distillation: the student learns the teacher's vectors of unlabeled texts (a `distill`
//!    component, InfoNCE through `W`, plus `beta1 * HSIC(X, S)`). The teacher's vectors come
//!    from the [`cache::TeacherCache`], so the teacher encodes each text once, ever.
//! 2. Fine-tuning: the stage-1 student on labeled triplets (supervised InfoNCE with hard
//!    negatives plus `beta2 * HSIC(X, S)`, eq. 9-10), or the student as given when stage 1 is
//!    skipped (the "no teacher" baseline).
//!
//! Each stage is an ordinary trainer run in `RUN/stage1` and `RUN/stage2`, with the trainer's
//! exact resume. A finished stage (its `final/`) is never rerun, so a run cut anywhere
//! continues where it stopped, across the stage boundary too.
//!
//! The recipe of the two stages is [`DistillRecipe`] (`distill/recipe.rs`); the teacher's
//! vectors through the cache are [`teacher_vectors`] (`distill/teacher.rs`).

pub mod cache;
mod recipe;
mod teacher;

use std::path::{Path, PathBuf};
use std::rc::Rc;

use nest_model::ElasticEncoder;

use crate::recipe::{Overrides, Recipe};
use crate::trainer::{self, Event, Summary, TrainOptions};
use crate::{Error, Result};
pub use recipe::DistillRecipe;
use teacher::teacher_table;
pub use teacher::{teacher_vectors, TeacherSpec};

/// Which stages to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stages {
    Both,
    First,
    Second,
}

/// What a distillation run produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub stages: Vec<Summary>,
    /// The student to use: the last stage's `final/`.
    pub final_dir: PathBuf,
    pub cache: Option<cache::CacheStats>,
}

/// Runs the stages under `run_dir` (`stage1/`, `stage2/`), resuming a cut stage when `resume`.
///
/// Both stages' recipes and the student are checked before anything is written, and the run
/// folder has one writer (its `.lock`, held by rank 0 of a data-parallel run): a second
/// `nest distill` on it is refused at once. A failed start leaves no folder behind.
pub fn run(
    d: &DistillRecipe,
    overrides: (&Overrides, &Overrides),
    run_dir: &Path,
    stages: Stages,
    base: &TrainOptions,
    events: &mut dyn FnMut(Event),
) -> Result<Outcome> {
    if base.resume && base.overwrite {
        return Err(Error::Run {
            path: run_dir.to_path_buf(),
            message: "--resume and --overwrite contradict each other: pass one".into(),
        });
    }
    if base.resume && !run_dir.exists() {
        // (it started a new run from scratch, silently: a mistyped --run-dir; helper trial E).
        // A folder a killed start left, whatever it holds, resumes: the start is redone.
        return Err(Error::Run {
            path: run_dir.to_path_buf(),
            message: "no run to resume here (no such folder): a new run leaves out --resume".into(),
        });
    }
    let student = nest_model::hub::resolve(&d.student)?;
    if stages != Stages::First && d.stage2.is_some() {
        // stage 2 starts from stage 1's result: its keys are checked now, with the student
        let r = d.stage(2, &student, overrides.1)?;
        // and a projection the student's own head forbids (stage 2 refused it only after
        // stage 1 had trained: hours on the real budget; helper trial E)
        check_projection(&student, r.projection, "stage2")?;
    }
    let rank0 = nest_dist::Launch::from_env().map_err(nest_dist::DistError::from)?;
    let lock = match rank0.is_none_or(|l| l.rank == 0) {
        true => Some(nest_core::lock::FolderLock::take(run_dir)?),
        false => None,
    };
    let result = run_stages(d, overrides, run_dir, stages, base, &student, events);
    if result.is_err() {
        // removes the lock file and the folder only when this start made them and left them empty
        if let Some(l) = lock {
            l.discard();
        }
    }
    result
}

/// A stage's `projection` (`key`'s stage) over a student that already has a Dense head of
/// another width: refused, as adding it would be at the stage's start.
fn check_projection(student: &Path, projection: usize, key: &str) -> Result<()> {
    let modules = student.join("modules.json");
    let Ok(text) = std::fs::read_to_string(&modules) else {
        return Ok(());
    };
    let mods: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
    let last_dense = mods.iter().rev().find_map(|m| {
        let dense = m["type"].as_str().is_some_and(|t| t.ends_with("Dense"));
        dense.then(|| m["path"].as_str()).flatten()
    });
    let Some(folder) = last_dense else {
        return Ok(());
    };
    let (head, _) = nest_model::dense::Dense::read_config(student, folder)?;
    if projection == 0 || projection == head.out_features {
        return Ok(());
    }
    Err(Error::Recipe {
        source_name: format!("[{key}]"),
        message: format!(
            "projection = {projection}: the student {} already has a Dense head ({} -> {}), \
             and a projection is added only to a model without one; leave out \
             --{key}.projection (or distil a student without a head)",
            student.display(),
            head.in_features,
            head.out_features
        ),
    })
}

/// What is odd about a teacher and student pair, said before stage 1 (helper trial E: each ran
/// without a word): the teacher is the student itself, or the student is no smaller.
fn pairing_notes(d: &DistillRecipe, student: &Path) -> Result<Vec<String>> {
    if nest_core::data::same_model(&d.teacher, &student.to_string_lossy()) {
        return Ok(vec![
            "the teacher is the student itself: stage 1 fits the student to its own vectors".into(),
        ]);
    }
    let teacher = nest_model::hub::resolve(&d.teacher)?;
    let read = |dir: &Path| nest_model::ModelConfig::read(&dir.join("config.json")).ok();
    let (Some(t), Some(s)) = (read(&teacher), read(student)) else {
        return Ok(Vec::new());
    };
    if s.hidden_size < t.hidden_size || s.num_hidden_layers < t.num_hidden_layers {
        return Ok(Vec::new());
    }
    Ok(vec![format!(
        "the student ({} layers, width {}) is no smaller than the teacher ({} layers, width \
         {}): distillation usually moves a larger model's knowledge into a smaller one",
        s.num_hidden_layers, s.hidden_size, t.num_hidden_layers, t.hidden_size
    )])
}

/// [`run`]'s stages, in order, under the lock.
fn run_stages(
    d: &DistillRecipe,
    overrides: (&Overrides, &Overrides),
    run_dir: &Path,
    stages: Stages,
    base: &TrainOptions,
    student: &Path,
    events: &mut dyn FnMut(Event),
) -> Result<Outcome> {
    let mut out = Outcome {
        stages: Vec::new(),
        final_dir: PathBuf::new(),
        cache: None,
    };
    let mut model = student.to_path_buf();
    if stages != Stages::Second && d.stage1.is_some() {
        let dir = run_dir.join("stage1");
        let r = d.stage(1, student, overrides.0)?;
        check_projection(student, r.projection, "stage1")?;
        if !finished_stage(1, &dir, &r, base, events)? {
            for note in pairing_notes(d, student)? {
                events(Event::Message(format!("note: {note}")));
            }
            let table = match r.uses_teacher() {
                true => {
                    let (table, stats) = teacher_table(d, &r, run_dir, events)?;
                    out.cache = Some(stats);
                    Some(Rc::new(table))
                }
                false => {
                    // (it loaded and cached the teacher for nothing: helper trial E)
                    events(Event::Message(
                        "note: stage 1's objective has no distill term: the teacher is not \
                         used (its vectors are not computed)"
                            .into(),
                    ));
                    None
                }
            };
            let build = |r: &Recipe,
                         enc: &ElasticEncoder,
                         p: &tch::nn::Path|
             -> Result<Box<dyn crate::objective::Objective>> {
                Ok(Box::new(r.build_objective(
                    enc.output_dim(),
                    enc.num_layers(),
                    p,
                    table.clone(),
                )?))
            };
            events(Event::Message("stage 1: distillation".into()));
            out.stages.push(trainer::train_with(
                &r,
                &stage_opts(base, &dir),
                &build,
                events,
            )?);
        }
        model = dir.join("final");
        out.final_dir = model.clone();
        if !model.join("nest.json").exists() {
            // stopped early (a step limit): stage 2 waits for a finished stage 1
            return Ok(out);
        }
    }
    if stages != Stages::First && d.stage2.is_some() {
        let dir = run_dir.join("stage2");
        let r = d.stage(2, &model, overrides.1)?;
        if !finished_stage(2, &dir, &r, base, events)? {
            events(Event::Message("stage 2: fine-tuning".into()));
            out.stages
                .push(trainer::train(&r, &stage_opts(base, &dir), events)?);
        }
        out.final_dir = dir.join("final");
    }
    Ok(out)
}

/// Whether stage `which` in `dir` is finished and is skipped: with the keys it was trained
/// with it is; with other keys it is refused, the changed keys named (as `nest train --resume`
/// names them), unless `--overwrite` reruns it.
fn finished_stage(
    which: usize,
    dir: &Path,
    r: &Recipe,
    base: &TrainOptions,
    events: &mut dyn FnMut(Event),
) -> Result<bool> {
    if !dir.join("final/nest.json").exists() {
        return Ok(false);
    }
    if base.overwrite {
        events(Event::Message(format!(
            "stage {which} is done ({}): rerun (--overwrite)",
            dir.display()
        )));
        return Ok(false);
    }
    let mut saved = Recipe::load_verbatim(&dir.join("recipe.toml"))?;
    saved.absolutize_paths();
    let diff = saved.all_differences(r);
    if !diff.is_empty() {
        return Err(Error::Run {
            path: dir.to_path_buf(),
            message: format!(
                "stage {which} is done, trained with other keys ({}): pass --overwrite to \
                 rerun it, or drop the changes",
                diff.join("; ")
            ),
        });
    }
    events(Event::Message(format!(
        "stage {which} is done ({}): skipped",
        dir.display()
    )));
    Ok(true)
}

/// A stage's options: its own folder; under `--resume`, a stage with a checkpoint resumes and
/// one without starts afresh in its folder.
fn stage_opts(base: &TrainOptions, dir: &Path) -> TrainOptions {
    let started = !crate::checkpoint::list(dir).is_empty();
    TrainOptions {
        run_dir: dir.to_path_buf(),
        resume: base.resume && started,
        overwrite: if base.resume {
            !started
        } else {
            base.overwrite
        },
        ..base.clone()
    }
}
