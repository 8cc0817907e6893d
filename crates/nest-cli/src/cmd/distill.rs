//! `nest distill`: IBKD's two stages (distillation on unlabeled texts with a cached teacher,
//! then fine-tuning on labeled triplets) as one resumable run; see `nest_train::distill`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use nest_train::distill::{self, DistillRecipe, Stages};
use nest_train::trainer::TrainOptions;

use super::train::{bar, on_event};
use crate::args::DistillArgs;
use crate::flags;
use nest_train::recipe::Overrides;

/// Once clap meets the first stage key, everything after it lands in `overrides`: take the
/// command's own flags back out of it, so they work in any position (as `nest train`'s do);
/// the rest are the recipe's overrides (`--stage1.lr 1e-4`).
fn split_own_flags(mut a: DistillArgs) -> Result<(DistillArgs, Overrides)> {
    let argv = std::mem::take(&mut a.overrides);
    let overrides = flags::split(argv, |key, inline, value| {
        match key {
            "--recipe" => a.recipe = Some(value()?.into()),
            "--run-dir" => a.run_dir = Some(value()?.into()),
            "--teacher" => a.teacher = Some(value()?),
            "--student" => a.student = Some(value()?),
            "--stage" => a.stage = value()?,
            "--resume" if !inline => a.resume = true,
            "--overwrite" if !inline => a.overwrite = true,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok((a, overrides))
}

pub fn run(a: DistillArgs) -> Result<()> {
    let (a, mut overrides) = split_own_flags(a)?;
    crate::interrupt::stop_training_on_signals()?;
    let Some(recipe_path) = a.recipe.clone() else {
        bail!("nest distill needs --recipe FILE (see recipes/ibkd.toml)");
    };
    for (key, value) in [("teacher", &a.teacher), ("student", &a.student)] {
        if let Some(v) = value {
            overrides.push(key, v.clone().into(), format!("--{key}"));
        }
    }
    let (recipe, s1, s2) = DistillRecipe::load(&recipe_path, &overrides)?;
    let stages = match a.stage.as_str() {
        "all" => Stages::Both,
        "1" => Stages::First,
        "2" => Stages::Second,
        s => bail!("--stage {s}: expected 1, 2 or all"),
    };
    let run_dir = a.run_dir.clone().unwrap_or_else(|| {
        let stem = recipe_path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned());
        PathBuf::from("runs").join(stem.unwrap_or_else(|| "distill".into()))
    });
    let opts = TrainOptions {
        resume: a.resume,
        overwrite: a.overwrite,
        ..TrainOptions::new(&run_dir, nest_model::default_device())
    };
    let pb = bar();
    let out = distill::run(&recipe, (&s1, &s2), &run_dir, stages, &opts, &mut |e| {
        on_event(&pb, e)
    })?;
    pb.finish_and_clear();
    let last = out.stages.last();
    if last.is_some_and(|s| s.final_dir.as_os_str().is_empty()) {
        // a signal stopped a stage (`crate::interrupt`), with that step's checkpoint on disk
        if last.is_some_and(|s| s.main) {
            eprintln!(
                "stopped, with a checkpoint in {}; `{}` continues the run exactly",
                run_dir.display(),
                resume_command(std::env::args().skip(1))
            );
        }
        std::process::exit(crate::interrupt::stopped_status());
    }
    for s in &out.stages {
        eprintln!(
            "{} steps in {:.1} s (last loss {:.4}) -> {}",
            s.steps,
            s.seconds,
            s.last_loss,
            s.final_dir.display()
        );
    }
    eprintln!("student: {}", out.final_dir.display());
    Ok(())
}

/// The command that continues a stopped run: this one as typed (every override and model
/// flag too: the stages' keys must be the same, and `--recipe` alone went back to the recipe's
/// models), without `--overwrite` (which would start over), with `--resume`.
fn resume_command(args: impl Iterator<Item = String>) -> String {
    let quote = |a: &str| {
        let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=,+@%".contains(c);
        match !a.is_empty() && a.chars().all(plain) {
            true => a.to_string(),
            false => format!("'{}'", a.replace('\'', "'\\''")),
        }
    };
    let mut words = vec!["nest".to_string()];
    words.extend(
        args.filter(|a| a != "--overwrite" && a != "--resume")
            .map(|a| quote(&a)),
    );
    words.push("--resume".into());
    words.join(" ")
}

#[cfg(test)]
mod tests {
    /// (helper trial C) the printed command named only --recipe and --run-dir: run as printed,
    /// it went back to the recipe's models (a hub download) and other stage keys
    #[test]
    fn the_resume_command_repeats_the_overrides() {
        let typed = [
            "distill",
            "--recipe",
            "ibkd.toml",
            "--teacher",
            "/m/t",
            "--stage2.data",
            "trip.tsv:triplets",
            "--stage1.prompts",
            "[\"query: \"]",
            "--overwrite",
        ];
        let got = super::resume_command(typed.iter().map(|s| s.to_string()));
        assert_eq!(
            got,
            "nest distill --recipe ibkd.toml --teacher /m/t --stage2.data trip.tsv:triplets \
             --stage1.prompts '[\"query: \"]' --resume"
        );
    }
}
