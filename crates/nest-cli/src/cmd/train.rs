use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use nest_train::recipe::Overrides;
use nest_train::trainer::{train, Event, TrainOptions};
use nest_train::Recipe;

use crate::args::TrainArgs;
use crate::{flags, progress};

/// Once clap meets the first recipe flag, everything after it lands in `overrides`: take the
/// trainer's own flags back out of it; the rest are the recipe's overrides.
fn split_own_flags(mut a: TrainArgs) -> Result<(TrainArgs, Overrides)> {
    let mut argv = std::mem::take(&mut a.overrides);
    // `--resume --max-steps 9`: clap hands a recipe flag that follows a bare --resume to it as
    // its value; it is the first recipe flag, and --resume has none
    if let Some(flag) = a.resume.take_if(|r| r.to_string_lossy().starts_with("--")) {
        argv.insert(0, flag.to_string_lossy().into_owned());
        a.resume = Some(PathBuf::new());
    }
    let overrides =
        flags::split(argv, |key, _, value| {
            match key {
                "--recipe" => a.recipe = Some(value()?.into()),
                "--run-dir" => a.run_dir = Some(value()?.into()),
                // alone (`--run-dir r --resume`): the --run-dir run
                "--resume" => a.resume = Some(value().map(PathBuf::from).unwrap_or_default()),
                "--overwrite" => a.overwrite = true,
                "--allow-world-change" => a.allow_world_change = true,
                "--allow-data-change" => a.allow_data_change = true,
                "--seeds" => {
                    let v = value()?;
                    for s in v.split(',').filter(|s| !s.is_empty()) {
                        a.seeds.push(s.trim().parse().map_err(|_| {
                            anyhow::anyhow!("--seeds: '{s}' is not a whole number")
                        })?);
                    }
                }
                _ => return Ok(false),
            }
            Ok(true)
        })?;
    Ok((a, overrides))
}

/// `--resume` as the run folder it continues: alone, the `--run-dir` run; `auto` (true
/// returned) leaves it to whether the folder holds a run. Resuming without `--recipe` reads the
/// run's own resolved recipe.
fn resolve_resume(a: &mut TrainArgs) -> Result<bool> {
    if a.resume.as_deref() == Some(std::path::Path::new("")) {
        let Some(dir) = a.run_dir.clone() else {
            anyhow::bail!(
                "--resume without a folder continues the --run-dir run: pass --resume RUN_DIR, \
                 or --run-dir RUN_DIR --resume"
            );
        };
        a.resume = Some(dir);
    }
    let auto = a.resume.as_deref() == Some(std::path::Path::new("auto"));
    if auto {
        if a.recipe.is_none() || a.run_dir.is_none() {
            anyhow::bail!("--resume auto needs --recipe and --run-dir (it starts the run when the folder has none)");
        }
        a.resume = None;
    }
    if let (Some(run), None) = (&a.resume, &a.recipe) {
        let saved = run.join("recipe.toml");
        anyhow::ensure!(
            saved.is_file(),
            "{}: no run to resume here (no recipe.toml): a new run leaves out --resume \
             (`--resume auto` with --recipe starts it when the folder has none)",
            run.display()
        );
        a.recipe = Some(saved);
    }
    Ok(auto)
}

pub fn run(a: TrainArgs) -> Result<()> {
    let (mut a, overrides) = split_own_flags(a)?;
    crate::interrupt::stop_training_on_signals()?;
    anyhow::ensure!(
        !(a.overwrite && a.resume.is_some()),
        "--resume and --overwrite contradict each other: --resume continues a run, --overwrite \
         replaces it (once the new run finished); pass one"
    );
    let auto = resolve_resume(&mut a)?;
    let run_dir = match (&a.resume, &a.run_dir) {
        (Some(r), _) => r.clone(),
        (None, Some(d)) => d.clone(),
        (None, None) => {
            let stem = a
                .recipe
                .as_ref()
                .and_then(|p| p.file_stem())
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "run".into());
            PathBuf::from("runs").join(stem)
        }
    };
    let opts = TrainOptions {
        resume: a.resume.is_some() || (auto && run_dir.join("recipe.toml").is_file()),
        overwrite: a.overwrite,
        allow_world_change: a.allow_world_change,
        allow_data_change: a.allow_data_change,
        ..TrainOptions::new(&run_dir, nest_model::default_device())
    };
    if a.recipe.is_none() && a.resume.is_none() && overrides.is_empty() {
        anyhow::bail!(
            "nothing to train: pass --recipe FILE (see recipes/), or the keys as flags \
             (--model DIR --data FILE:FORMAT --loss LOSS), or --resume RUN"
        );
    }
    if a.seeds.is_empty() {
        let recipe = Recipe::load(a.recipe.as_deref(), &overrides)?;
        return run_one(&recipe, &opts, None);
    }
    anyhow::ensure!(
        a.resume.is_none(),
        "--seeds starts or continues each seed's run itself; leave out --resume"
    );
    let mut finals = Vec::new();
    for &seed in &a.seeds {
        let with_seed = overrides.clone().with("seed", seed as i64);
        let recipe = Recipe::load(a.recipe.as_deref(), &with_seed)?;
        let dir = PathBuf::from(format!("{}-seed{seed}", run_dir.display()));
        eprintln!("== seed {seed}: {} ==", dir.display());
        let opts = TrainOptions {
            resume: !a.overwrite && dir.join("recipe.toml").is_file(),
            run_dir: dir.clone(),
            ..opts.clone()
        };
        run_one(
            &recipe,
            &opts,
            Some("the same `nest train --seeds ...` command"),
        )?;
        finals.push(dir.join("final"));
    }
    eprintln!(
        "{} seeds trained; evaluate each (`nest eval --model DIR --out reports/NAME-seedS`) and compare the reports comma-separated (`nest eval compare base.json a1.json,a2.json,...`)",
        finals.len()
    );
    Ok(())
}

/// One run; `again` is what continues it after a signal stopped it (default: `--resume DIR`).
fn run_one(recipe: &Recipe, opts: &TrainOptions, again: Option<&str>) -> Result<()> {
    let pb = bar();
    let summary = train(recipe, opts, &mut |e| on_event(&pb, e))?;
    pb.finish_and_clear();
    if summary.final_dir.as_os_str().is_empty() {
        // a signal stopped it (`crate::interrupt`), with this step's checkpoint on disk
        if summary.main {
            let dir = opts.run_dir.display();
            let resume = format!("`nest {}train --resume {dir}`", super::threads_given());
            eprintln!(
                "stopped after step {}, with a checkpoint in {dir}/checkpoints; {} continues \
                 the run exactly",
                summary.steps,
                again.unwrap_or(&resume)
            );
        }
        std::process::exit(crate::interrupt::stopped_status());
    }
    if !summary.main {
        return Ok(()); // rank 0 reports for the job
    }
    if summary.resumed_from == Some(summary.steps) {
        // a max_steps past the data's epochs cannot take more steps: say what can
        let (epochs, max_steps) = recipe.length();
        let more = match max_steps > summary.steps {
            true => format!(
                " (max_steps {max_steps} asks for more steps than the data's epochs hold, \
                 epochs = {epochs}: raise --epochs to train further)"
            ),
            false => String::new(),
        };
        eprintln!(
            "the run had already finished (step {} of {}){more}; nothing to train; model: {}",
            summary.steps,
            summary.steps,
            summary.final_dir.display()
        );
        return Ok(());
    }
    let ran = summary.steps - summary.resumed_from.unwrap_or(0);
    eprintln!(
        "trained {ran} steps{} in {:.1} s (last loss {:.4}); model: {}; log: {}",
        summary
            .resumed_from
            .map(|r| format!(" (from step {r} to {})", summary.steps))
            .unwrap_or_default(),
        summary.seconds,
        summary.last_loss,
        summary.final_dir.display(),
        opts.run_dir.join("metrics.jsonl").display()
    );
    Ok(())
}

/// The training progress bar (hidden when stderr is not a terminal; a log then gets a line every
/// 30 s from the first rank: `train: 120/1000 steps (12%, 1.20/s, eta 12 min) loss 0.4127 ...`).
pub fn bar() -> ProgressBar {
    let pb = ProgressBar::new(0);
    pb.set_style(
        ProgressStyle::with_template(
            "train [{bar:30}] {pos}/{len} steps {msg} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    if std::env::var("RANK").ok().is_none_or(|r| r == "0") {
        progress::in_log(&pb, Some("train"), " steps", Duration::from_secs(30));
    }
    pb
}

/// A trainer event on the bar: position, loss, evaluations, checkpoints, messages.
pub fn on_event(pb: &ProgressBar, e: Event) {
    match e {
        Event::Start {
            total_steps,
            resumed_from,
        } => {
            pb.set_length(total_steps);
            pb.set_position(resumed_from.unwrap_or(0));
        }
        Event::Step { step, loss, lr } => {
            pb.set_position(step);
            pb.set_message(format!("loss {loss:.4} lr {lr:.2e}"));
        }
        Event::Eval { step, summary } => say(pb, format!("step {step}: {summary}")),
        Event::Checkpoint { step, path } => {
            say(pb, format!("step {step}: checkpoint {}", path.display()))
        }
        Event::Message(m) => say(pb, m),
    }
}

/// A line above the bar, or on stderr when the bar is hidden (not a terminal).
fn say(pb: &ProgressBar, line: String) {
    if pb.is_hidden() {
        eprintln!("{line}");
    } else {
        pb.println(line);
    }
}

/// `nest export checkpoint`: a checkpoint's model written as a model folder.
pub fn export_checkpoint(a: &crate::args_search::ExportCheckpointArgs) -> Result<()> {
    let ck = nest_train::trainer::find_checkpoint(&a.checkpoint)?;
    nest_model::export::check_out(&a.out, &ck, a.overwrite).map_err(anyhow::Error::msg)?;
    let pb = ProgressBar::hidden();
    let mut events = |e: Event| on_event(&pb, e);
    let device = nest_model::default_device();
    let done = nest_train::trainer::export_checkpoint(&ck, &a.out, device, &mut events)?;
    eprintln!(
        "wrote {}: the model of {} (step {}); it loads as any model: --model {0}",
        a.out.display(),
        done.checkpoint.display(),
        done.step
    );
    Ok(())
}
