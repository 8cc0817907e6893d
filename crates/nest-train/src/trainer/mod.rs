//! The training loop.
//!
//! Exact resume: the data plan of an epoch is a function of `(seed, epoch)`; libtorch's RNG (for
//! dropout) is re-seeded with `seed + micro-batch index` before every forward pass; checkpoints
//! hold the weights, the AdamW moments and step, and the data position. A run resumed from any
//! checkpoint therefore replays the uninterrupted run bit for bit on CPU (same thread count).
//! libtorch's RNG is global to the process: two trainings in one process must not run at once.

mod board;
mod eval;
mod export;
mod graphed;
mod graphed_body;
mod graphed_chunks;
mod graphed_inputs;
mod mining;
mod model;
mod plan;
mod run;
mod run_dir;
mod run_log;
mod spread;
mod step;
pub mod stop;
mod sync;
mod timer;
mod types;

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use nest_dist::Group;

use crate::recipe::Recipe;
use crate::{Error, Result};
pub use export::{export_checkpoint, find_checkpoint, Exported};
pub use graphed::{GraphMode, GraphedStep, StepSpec};
pub use mining::round_file;
use nest_core::lock::FolderLock;
use plan::Progress;
use run::Run;
use run_dir::{check_run_dir, recorded_recipe, settle, start_run_dir, Ending};
use run_log::RunLog;
pub use step::{batch_output, micro_step, MicroResult};
pub use timer::StepTimer;
pub(crate) use types::recipe_objective;
pub use types::{Event, ObjectiveBuilder, Summary, TrainOptions};

/// The texts (first column) of the examples a run of `r` on `model_dir`'s tokenizer will
/// train on, when `r`'s `max_steps` cuts it short of its epochs: the same plan the run makes.
/// `None` when it takes every example (or mines its data as it goes).
pub fn taken_texts(r: &Recipe) -> Result<Option<Vec<String>>> {
    if r.max_steps == 0 || r.mine.is_some() {
        return Ok(None);
    }
    let dir = nest_model::hub::resolve(&r.model)?;
    let max_len = (r.max_length > 0).then_some(r.max_length);
    let enc = nest_model::ElasticEncoder::load(&dir, tch::Device::Cpu, max_len)?;
    let tokenize = |t: &[&str]| Ok(enc.tokenizer.encode(t)?);
    let sources = crate::data::load_sources(&r.data, &tokenize, enc.include_prompt)?;
    let plan = plan::Plan::new(r, &sources)?;
    let all: usize = plan.epochs.iter().map(|e| e.len()).sum();
    let taken = plan.taken(r.grad_accum);
    if taken.len() >= all {
        return Ok(None);
    }
    let texts = taken
        .iter()
        .flat_map(|b| b.examples.iter().map(|&i| &sources[b.source].texts[i]))
        .filter_map(|row| row.first().cloned())
        .collect();
    Ok(Some(texts))
}

/// Trains as the recipe says; see the module docs for the resume guarantees.
pub fn train(r: &Recipe, o: &TrainOptions, events: &mut dyn FnMut(Event)) -> Result<Summary> {
    train_with(r, o, &recipe_objective, events)
}

/// [`train`] with an objective of the caller's (e.g. one with parameters of its own).
///
/// The phases, in order: join the process group (a bad launch fails before any model is
/// loaded), lock the run directory (one writer: a folder in use is refused at once), check it
/// against `--resume` / `--overwrite` (nothing written yet), `Run::prepare` (model, objective,
/// data, plan, evaluation grid: every input read and checked), claim the run directory (the
/// first write: a failed start before it leaves the disk as it was), resume from the newest
/// checkpoint if asked, the `[mine]` rounds up to there and the plan (`trainer/mining.rs`; the
/// plan of a recipe without `[mine]` is made in `Run::prepare`), `Run::steps`, then
/// `Run::finish` (final checkpoint, evaluation, export), and last [`run_dir::settle`] (a replaced run is deleted only now).
pub fn train_with(
    r: &Recipe,
    o: &TrainOptions,
    build: &ObjectiveBuilder,
    events: &mut dyn FnMut(Event),
) -> Result<Summary> {
    let start = Instant::now();
    stop::clear();
    let group = process_group(o.device)?;
    let group = group.as_deref();
    let main = group.is_none_or(|g| g.rank() == 0);
    let events = &mut |e: Event| {
        if main {
            events(e)
        }
    };
    // rank 0 holds the lock and decides for a data-parallel run
    let lock = main.then(|| FolderLock::take(&o.run_dir)).transpose()?;
    let checked = match main {
        true => check_run_dir(r, o).map(Some),
        false => Ok(None),
    };
    // a resumed run keeps its recorded spelling of the paths (its checkpoints hash it)
    let recorded = recorded_recipe(r, o);
    let r = recorded.as_ref().unwrap_or(r);
    let prepared = checked.and_then(|c| Ok((c, Run::prepare(r, o, build, group, start, events)?)));
    let (claim, run) = match prepared {
        Ok(x) => x,
        Err(e) => {
            if let Some(l) = lock {
                l.discard();
            }
            return Err(e);
        }
    };
    if let Some(note) = run_dir::resume_note(r, o) {
        events(Event::Message(note));
    }
    let resume_from = start_run_dir(r, o, group, claim.as_ref())?;
    // a panic (libtorch's error through tch) outside a step still settles the run folder
    let result = nest_core::caught::catch(std::panic::AssertUnwindSafe(|| {
        train_claimed(run, o, group, resume_from.as_deref(), events)
    }))
    .unwrap_or_else(|c| Err(Error::Stopped(c.describe())));
    if let Some(c) = &claim {
        let ending = match &result {
            Ok(s) if s.final_dir.as_os_str().is_empty() => Ending::Stopped,
            Ok(_) => Ending::Finished,
            Err(_) => Ending::Failed,
        };
        settle(&o.run_dir, c, ending, events);
    }
    drop(lock);
    result
}

/// A claimed run from its resume to its end.
fn train_claimed(
    mut run: Run,
    o: &TrainOptions,
    group: Option<&Group>,
    resume_from: Option<&std::path::Path>,
    events: &mut dyn FnMut(Event),
) -> Result<Summary> {
    let mut at = Progress::default();
    if let Some(ck) = resume_from {
        at = run.resume(ck, events)?;
    }
    match run.mining.is_some() {
        true => run.plan_mined(&at, events)?,
        false => run.plan_message(events),
    }
    let resumed_from = resume_from.is_some().then_some(at.step);
    let main = group.is_none_or(|g| g.rank() == 0);
    let finished = o.run_dir.join("final").join("nest.json").is_file();
    if let (true, true, Some(from)) = (main, finished, resumed_from) {
        if run.plan.total > from {
            // `--resume RUN --epochs 4` on a finished run: both said, not found out afterwards
            events(Event::Message(format!(
                "extending a finished run from step {from} to {}: the learning-rate schedule \
                 is planned over the {} steps (the rate rises again from where the old plan \
                 had decayed it), and final/ is replaced at the end (the step-{from} model \
                 stays in checkpoints/ until keep_last drops it)",
                run.plan.total, run.plan.total
            )));
        }
    }
    let rank = group.map(Group::rank);
    let mut log = RunLog::open(&o.run_dir, rank, main, resumed_from)?;
    events(Event::Start {
        total_steps: run.plan.total,
        resumed_from,
    });
    if !run.steps(&mut at, &mut log, events)? {
        let train_seconds = run.train_start.elapsed().as_secs_f64();
        return Ok(run.summary(&at, PathBuf::new(), train_seconds, resumed_from));
    }
    run.finish(&at, &mut log, resumed_from, events)
}

thread_local! {
    /// This process's group, joined by its first training run and kept for the next one (`nest
    /// distill`'s second stage). Joining anew would race: rank 0 serves each group's store on
    /// the same port, and a rank that left the first group's final barrier early could reach
    /// the first store, still up, instead of the second.
    static GROUP: RefCell<Option<(nest_dist::Launch, Rc<Group>)>> = const { RefCell::new(None) };
}

/// The process group of the launch environment (none for a single process), joined once per
/// process.
fn process_group(device: tch::Device) -> Result<Option<Rc<Group>>> {
    let Some(launch) = nest_dist::Launch::from_env().map_err(nest_dist::DistError::from)? else {
        return Ok(None);
    };
    let kept = GROUP.with_borrow(|g| {
        g.as_ref()
            .filter(|(l, _)| *l == launch)
            .map(|(_, g)| g.clone())
    });
    if let Some(g) = kept {
        return Ok(Some(g));
    }
    // NCCL when training on a GPU (cuda build), Gloo on the CPU
    let backend = nest_dist::Backend::for_device(device);
    let g = Rc::new(Group::join_with(&launch, dist_timeout()?, backend)?);
    GROUP.set(Some((launch, g.clone())));
    Ok(Some(g))
}

/// The seconds a collective may wait for another rank before failing: `NEST_DIST_TIMEOUT_S`,
/// 300 by default.
fn dist_timeout() -> Result<std::time::Duration> {
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
