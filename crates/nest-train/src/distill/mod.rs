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

pub mod cache;

use std::path::{Path, PathBuf};
use std::rc::Rc;

use nest_model::ElasticEncoder;
use serde::Deserialize;

use crate::objective::distill::TeacherTable;
use crate::recipe::{Overrides, Recipe};
use crate::trainer::{self, Event, Summary, TrainOptions};
use crate::{Error, Result};

fn d_teacher_len() -> usize {
    128
}
fn d_cache() -> PathBuf {
    PathBuf::from(".nest-cache/teacher")
}
fn d_batch() -> usize {
    64
}

/// The top-level keys of a distillation recipe (the rest are a stage's).
const TOP_KEYS: [&str; 7] = [
    "teacher",
    "student",
    "teacher_max_length",
    "teacher_batch_size",
    "cache_dir",
    "stage1",
    "stage2",
];

/// A distillation recipe: the two models, the teacher cache, and each stage's trainer recipe
/// (`[stage1]`, `[stage2]`: every key of `nest train`'s recipes except `model`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistillRecipe {
    teacher: String,
    student: String,
    /// Max tokens per text when the teacher encodes.
    #[serde(default = "d_teacher_len")]
    teacher_max_length: usize,
    /// Texts per teacher forward pass when the cache is filled.
    #[serde(default = "d_batch")]
    teacher_batch_size: usize,
    #[serde(default = "d_cache")]
    cache_dir: PathBuf,
    #[serde(default)]
    stage1: Option<toml::Table>,
    #[serde(default)]
    stage2: Option<toml::Table>,
    /// The recipe file's name and text, for the line of a wrong-typed key in a stage.
    #[serde(skip)]
    file: Option<(String, String)>,
}

impl DistillRecipe {
    /// Reads `path` and applies `overrides`: top-level keys (`teacher`, `student`, ...) and
    /// stage keys `stage1.KEY` / `stage2.KEY` (a key as `nest train` takes it), which are
    /// returned, prefix off, for [`run`].
    pub fn load(path: &Path, overrides: &Overrides) -> Result<(Self, Overrides, Overrides)> {
        let name = path.display().to_string();
        let bad = |message: String| Error::Recipe {
            source_name: name.clone(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| nest_core::Error::io(path, e))?;
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| bad(e.to_string()))?;
        resolve_paths(&mut table, path);
        let (s1, rest) = overrides.split_prefix("stage1.");
        let (s2, top) = rest.split_prefix("stage2.");
        if let Some(o) = top.iter().find(|o| !TOP_KEYS.contains(&o.key.as_str())) {
            let key = o.key.replace('_', "-");
            return Err(bad(format!(
                "{}: not a key of a distillation recipe (those are {}); a stage's training key \
                 goes to its stage: --stage1.{key} / --stage2.{key}",
                o.origin,
                TOP_KEYS.join(", ")
            )));
        }
        for o in top.iter() {
            table.insert(o.key.clone(), o.value.clone());
        }
        let mut r: DistillRecipe =
            toml::Value::Table(table.clone())
                .try_into()
                .map_err(|e: toml::de::Error| {
                    let explain = crate::recipe::located::explain::<DistillRecipe>;
                    bad(explain(&table, e.message(), Some(&text), overrides))
                })?;
        if r.stage1.is_none() && r.stage2.is_none() {
            return Err(bad("neither [stage1] nor [stage2]: nothing to run".into()));
        }
        r.file = Some((name, text));
        Ok((r, s1, s2))
    }

    /// A stage's trainer recipe, starting from `model`.
    pub(crate) fn stage(
        &self,
        which: usize,
        model: &Path,
        overrides: &Overrides,
    ) -> Result<Recipe> {
        let table = if which == 1 {
            &self.stage1
        } else {
            &self.stage2
        };
        let source_name = match &self.file {
            Some((name, _)) => format!("{name} [stage{which}]"),
            None => format!("[stage{which}]"),
        };
        let mut table = table.clone().ok_or_else(|| Error::Recipe {
            source_name: source_name.clone(),
            message: "the recipe has no such stage".into(),
        })?;
        if table.contains_key("model") {
            return Err(Error::Recipe {
                source_name,
                message: "`model` is set by nest distill (the student, or stage 1's result)".into(),
            });
        }
        table.insert(
            "model".into(),
            toml::Value::String(model.display().to_string()),
        );
        let section = self.file.as_ref().map(|(_, text)| stage_lines(text, which));
        Recipe::from_table(table, &source_name, overrides, section.as_deref())
    }
}

/// `text` with every line outside `[stageN]` (and its sub-tables) blanked: the stage's keys
/// keep their line numbers, and a key that both stages set is found in the right one.
fn stage_lines(text: &str, which: usize) -> String {
    let own = format!("stage{which}");
    let mut inside = false;
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        // a table header (`[stage1]`, `[[stage1.data]]`), not a line of a multi-line array
        let name = line
            .trim_start()
            .strip_prefix('[')
            .map(|h| h.trim_start_matches('['));
        if let Some(name) = name.filter(|h| h.starts_with(|c: char| c.is_alphabetic())) {
            inside = name.split([']', '.']).next().map(str::trim) == Some(own.as_str());
        }
        if inside {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The relative paths of a distillation recipe file resolve against its folder (as a train
/// recipe's: `crate::recipe::paths`): the models, the cache and each stage's data.
fn resolve_paths(table: &mut toml::Table, path: &Path) {
    use crate::recipe::paths::{resolve_file, resolve_model, resolve_table};
    let base = path.parent().filter(|b| !b.as_os_str().is_empty());
    let base = base.unwrap_or(Path::new("."));
    for (key, model) in [("teacher", true), ("student", true), ("cache_dir", false)] {
        if let Some(toml::Value::String(v)) = table.get_mut(key) {
            *v = match model {
                true => resolve_model(v, base),
                false => resolve_file(v, base),
            };
        }
    }
    for stage in ["stage1", "stage2"] {
        if let Some(toml::Value::Table(t)) = table.get_mut(stage) {
            resolve_table(t, base);
        }
    }
}

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

/// The teacher's vectors of every first-column text of `r`'s data, through the cache.
fn teacher_table(
    d: &DistillRecipe,
    r: &Recipe,
    events: &mut dyn FnMut(Event),
) -> Result<(TeacherTable, cache::CacheStats)> {
    let mut texts: Vec<String> = Vec::new();
    for spec in &r.data {
        let (rows, _) = crate::data::read_source(spec)?;
        texts.extend(rows.into_iter().flat_map(|row| row.into_iter().take(1)));
    }
    let teacher = TeacherSpec {
        model: &d.teacher,
        cache_dir: &d.cache_dir,
        max_length: d.teacher_max_length,
        batch_size: d.teacher_batch_size,
    };
    teacher_vectors(&teacher, texts, events)
}

/// Which teacher encodes, and where its cache lives.
#[derive(Debug, Clone, Copy)]
pub struct TeacherSpec<'a> {
    /// Model directory or hub id.
    pub model: &'a str,
    pub cache_dir: &'a Path,
    pub max_length: usize,
    pub batch_size: usize,
}

/// The teacher's vectors of `texts` (deduplicated), through its cache: the teacher is loaded
/// only when some text is missing.
pub fn teacher_vectors(
    t: &TeacherSpec,
    mut texts: Vec<String>,
    events: &mut dyn FnMut(Event),
) -> Result<(TeacherTable, cache::CacheStats)> {
    texts.sort_unstable();
    texts.dedup();
    let dir = nest_model::hub::resolve(t.model)?;
    let c = cache::TeacherCache::for_teacher(t.cache_dir, &dir, t.max_length)?;
    let mut teacher: Option<ElasticEncoder> = None;
    let mut encode = |chunk: &[&str]| -> Result<tch::Tensor> {
        if teacher.is_none() {
            let device = nest_model::default_device();
            teacher = Some(ElasticEncoder::load(&dir, device, Some(t.max_length))?);
        }
        let t = teacher.as_ref().expect("loaded");
        let _g = tch::no_grad_guard();
        let layers = t.num_layers();
        let opts = nest_model::EncodeOptions::batch(chunk.len());
        let mut v = t.embed_layers(chunk, &[layers], opts, &mut |_| {})?;
        Ok(v.remove(0))
    };
    // the teacher can take minutes: a line every 10 s (and at the end), in logs as on terminals
    let started = std::time::Instant::now();
    let mut said = started;
    let mut progress = |done: usize, total: usize| {
        if done == total || said.elapsed().as_secs_f64() >= 10.0 {
            said = std::time::Instant::now();
            let s = started.elapsed().as_secs_f64();
            let rate = done as f64 / s.max(1e-9);
            events(Event::Message(format!(
                "teacher: {done}/{total} texts encoded ({:.0}%, {rate:.0}/s, {s:.0} s, eta {:.0} s)",
                100.0 * done as f64 / total.max(1) as f64,
                (total - done) as f64 / rate.max(1e-9),
            )));
        }
    };
    let (vectors, stats) = c.embed(&texts, t.batch_size, &mut encode, &mut progress)?;
    if let Some(why) = &stats.discarded {
        events(Event::Message(format!(
            "teacher cache discarded and rebuilt: {why}"
        )));
    }
    events(Event::Message(format!(
        "teacher cache {}: {} texts, {} cached, {} encoded now ({} entries)",
        c.path.display(),
        texts.len(),
        stats.hits,
        stats.misses,
        stats.entries
    )));
    Ok((TeacherTable::new(&texts, vectors), stats))
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
    let student = nest_model::hub::resolve(&d.student)?;
    if stages != Stages::First && d.stage2.is_some() {
        // stage 2 starts from stage 1's result: its keys are checked now, with the student
        d.stage(2, &student, overrides.1)?;
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
        if !finished_stage(1, &dir, &r, base, events)? {
            let (table, stats) = teacher_table(d, &r, events)?;
            out.cache = Some(stats);
            let table = Rc::new(table);
            let build = |r: &Recipe,
                         enc: &ElasticEncoder,
                         p: &tch::nn::Path|
             -> Result<Box<dyn crate::objective::Objective>> {
                Ok(Box::new(r.build_objective(
                    enc.output_dim(),
                    enc.num_layers(),
                    p,
                    Some(table.clone()),
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
