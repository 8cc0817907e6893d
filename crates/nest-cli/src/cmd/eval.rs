use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use nest_core::{parse_dims, parse_layers};
use nest_eval::compare::{Group, Legend};
use nest_eval::quantize::Precision;
use nest_eval::report::grid_text;
use nest_eval::significance::Bootstrap;
use nest_eval::suite::{self, GridSpec, Progress};
use nest_eval::tasks::{default_sources, Task, TaskKind, TaskSource};
use nest_eval::Report;

use crate::args::{CompareArgs, EvalArgs, EvalCommand, GridArgs, ModelArgs, SeedsArgs};
use crate::progress;

pub fn run(a: EvalArgs) -> Result<()> {
    match a.sub {
        Some(EvalCommand::Sts(s)) => {
            let sources: Vec<TaskSource> =
                s.data.iter().map(|p| TaskSource::Sts(p.clone())).collect();
            run_grid(&s.model, &sources, &s.grid)
        }
        Some(EvalCommand::Compare(c)) => compare(c),
        Some(EvalCommand::Seeds(c)) => seeds(c),
        None => {
            let kinds = TaskKind::parse_list(&a.tasks)?;
            if let Some(problem) = nest_eval::tasks::data_root_problem(&a.data_root, "--data-root")
            {
                anyhow::bail!(problem);
            }
            anyhow::ensure!(
                a.sts_extra.is_empty() || kinds.contains(&TaskKind::Sts),
                "--sts-extra adds to the sts family, which --tasks {} leaves out",
                a.tasks
            );
            let mut sources = default_sources(&a.data_root, &kinds);
            let at = sources
                .iter()
                .rposition(|s| matches!(s, TaskSource::Sts(_)))
                .map_or(0, |i| i + 1);
            let extra = a.sts_extra.iter().map(|p| TaskSource::Sts(p.clone()));
            sources.splice(at..at, extra);
            anyhow::ensure!(
                a.retrieval_extra.is_empty() || kinds.contains(&TaskKind::Retrieval),
                "--retrieval-extra adds to the retrieval family, which --tasks {} leaves out",
                a.tasks
            );
            sources.extend(a.retrieval_extra.iter().map(|s| beir_source(s)));
            run_grid(&a.model, &sources, &a.grid)
        }
    }
}

/// `DIR` or `DIR:SPLIT` (a split name has no `/`) of `--retrieval-extra`; the test split by
/// default.
fn beir_source(spec: &str) -> TaskSource {
    let (dir, split) = match spec.rsplit_once(':') {
        Some((dir, split)) if !split.is_empty() && !split.contains('/') => (dir, split),
        _ => (spec, "test"),
    };
    TaskSource::Retrieval {
        dir: dir.into(),
        split: split.into(),
    }
}

/// One grid per `--dtype`: a single one writes its report to `--out`; several write each to
/// `--out/<dtype>/` and compare each with the first (`compare-vs-<dtype>`), so that what a
/// lower-precision arithmetic costs in quality is shown cell by cell.
fn run_grid(m: &ModelArgs, sources: &[TaskSource], g: &GridArgs) -> Result<()> {
    super::eval_out::check(&g.out, &m.model, g.overwrite)?;
    let mut seen = Vec::new();
    for &c in &m.dtype {
        anyhow::ensure!(!seen.contains(&c), "--dtype lists {c} twice");
        seen.push(c);
    }
    if let [one] = m.dtype.as_slice() {
        return run_one_grid(m, *one, sources, g, &g.out).map(|_| ());
    }
    let mut written: Vec<(String, std::path::PathBuf)> = Vec::new();
    for &c in &m.dtype {
        let r = nest_model::dtype::resolve(c, nest_model::default_device());
        let name = r.dtype.name().to_string();
        anyhow::ensure!(
            written.iter().all(|(n, _)| *n != name),
            "--dtype {c} resolves to {name} on this machine, which the list already has"
        );
        eprintln!("== dtype {name} ({}) ==", r.reason);
        let out = g.out.join(&name);
        // resolved once: the grid runs in what was printed
        let fixed = nest_model::DtypeChoice::Fixed(r.dtype);
        let report = run_one_grid(m, fixed, sources, g, &out)?;
        written.push((name, report));
    }
    let reports = written
        .into_iter()
        .map(|(_, p)| p.display().to_string())
        .collect();
    compare(CompareArgs {
        reports,
        out: None,
        resamples: 1000,
        seed: 0,
        alpha: 0.05,
        full_dim: false,
    })
}

/// Reads (and checks) every task's data, printing its warnings.
fn read_tasks(sources: &[TaskSource]) -> Result<Vec<Task>> {
    let tasks = sources
        .iter()
        .map(Task::load)
        .collect::<Result<Vec<_>, _>>()?;
    for t in &tasks {
        for w in &t.warnings {
            eprintln!("warning: {}: {w}", t.name);
        }
    }
    Ok(tasks)
}

/// `f` (an evaluation given a progress callback) with progress bars: embedding, then each
/// task's cells.
/// An evaluation that reports its progress to the callback it is given.
type Evaluation<'a, T> = dyn FnMut(&mut dyn FnMut(Progress)) -> nest_eval::Result<T> + 'a;

fn with_bars<T>(f: &mut Evaluation<'_, T>) -> Result<T> {
    let pb = progress::bar(0, "embed");
    let mut task_bar: Option<(String, indicatif::ProgressBar)> = None;
    let out = f(&mut |p| match p {
        Progress::Embed { done, total } => {
            if pb.length() != Some(total as u64) {
                pb.set_length(total as u64);
                pb.set_message(format!("embed {total} distinct texts"));
            }
            pb.set_position(done as u64);
        }
        Progress::Cells { task, done, total } => {
            if task_bar.as_ref().is_none_or(|(t, _)| t != task) {
                pb.finish_and_clear();
                if let Some((_, b)) = task_bar.take() {
                    b.finish_and_clear();
                }
                task_bar = Some((task.to_string(), progress::cells_bar(total, task)));
            }
            if let Some((_, b)) = &task_bar {
                b.set_position(done as u64);
            }
        }
    })?;
    pb.finish_and_clear();
    if let Some((_, b)) = task_bar {
        b.finish_and_clear();
    }
    Ok(out)
}

/// One dtype's grid: read, check, load, run the suite, measure, write, in that order.
fn run_one_grid(
    m: &ModelArgs,
    dtype: nest_model::DtypeChoice,
    sources: &[TaskSource],
    g: &GridArgs,
    out: &Path,
) -> Result<std::path::PathBuf> {
    let opts = m.encode_options()?;
    let precisions = Precision::parse_list(&g.precision)?;
    // every data file is read and checked before the model loads, so a bad file fails fast
    let tasks = read_tasks(sources)?;
    let adaptor = match &g.adaptor {
        Some(p) => Some(std::rc::Rc::new(nest_model::Adaptor::load(p)?)),
        None => None,
    };
    let model = super::load_model_in(m, dtype)?;
    let offer = nest_model::Offer::new(&model, adaptor.as_deref())?;
    if let Some(note) = adaptor
        .as_deref()
        .map(|a| a.foreign_note(&model))
        .transpose()?
    {
        note.iter().for_each(|n| eprintln!("warning: {n}"));
    }
    let (layers, dims) = offer.resolve_grid(
        g.layers.as_deref().map(parse_layers).transpose()?,
        g.dims.as_deref().map(parse_dims).transpose()?,
        nest_model::Keys::GRID_FLAGS,
    )?;
    if let Some(note) = adaptor.as_deref().and_then(|a| a.layer_note(&layers)) {
        eprintln!("warning: {note}");
    }
    let spec = GridSpec {
        layers: layers.clone(),
        dims: dims.clone(),
        precisions: precisions.clone(),
        rescore: g.rescore,
        logreg: Default::default(),
        adaptor,
        items: !g.no_items,
        prompts: g.prompts.resolve(&model)?,
    };
    if g.latency_texts > 0 {
        eprintln!(
            "(then the encode latency per layer on up to {} texts)",
            g.latency_texts
        );
    }
    let report = with_bars(&mut |progress| {
        suite::evaluate(
            &m.model,
            std::env::args().collect::<Vec<_>>().join(" "),
            &model,
            &tasks,
            &spec,
            g.latency_texts,
            opts,
            progress,
        )
    })?;
    for t in &report.tasks {
        for &p in &precisions {
            println!("{}", grid_text(t, p, &layers, &dims));
        }
    }
    let written = report
        .write(out)
        .with_context(|| format!("writing the report to {}", out.display()))?;
    eprintln!(
        "{} tasks in {:.1} s ({}); wrote {} files to {}",
        report.tasks.len(),
        report.seconds,
        report.model.dtype,
        written.len(),
        out.display()
    );
    Ok(out.join("report.json"))
}

/// A report argument: a `report.json`, or a folder holding one (what `nest eval --out` names).
pub(crate) fn report_file(p: &Path) -> PathBuf {
    match p.is_dir() && p.join("report.json").is_file() {
        true => p.join("report.json"),
        false => p.to_path_buf(),
    }
}

fn report_name(p: &Path) -> String {
    p.parent()
        .and_then(|d| d.file_name())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// One side from `a.json` or `a1.json,a2.json,...` (runs of one method); named after the
/// reports' folders, their common prefix for several.
fn read_group(arg: &str) -> Result<Group> {
    let paths: Vec<PathBuf> = arg
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| report_file(Path::new(s)))
        .collect();
    anyhow::ensure!(!paths.is_empty(), "'{arg}' names no report.json");
    let names: Vec<String> = paths.iter().map(|p| report_name(p)).collect();
    let name = match names.as_slice() {
        [one] => one.clone(),
        [first, rest @ ..] => {
            let common = rest.iter().fold(first.len(), |n, s| {
                first
                    .bytes()
                    .zip(s.bytes())
                    .take(n)
                    .take_while(|(a, b)| a == b)
                    .count()
            });
            let prefix = first[..common].trim_end_matches(['-', '_', '.']);
            if prefix.is_empty() {
                format!("{first} (+{})", rest.len())
            } else {
                format!("{prefix} (x{})", names.len())
            }
        }
        [] => unreachable!("paths is not empty"),
    };
    Ok(Group::read(name, paths)?)
}

/// A side's name as a folder name.
fn slug(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn compare(c: CompareArgs) -> Result<()> {
    anyhow::ensure!(
        c.alpha > 0.0 && c.alpha < 1.0,
        "--alpha {} is not in (0, 1)",
        c.alpha
    );
    let groups = c
        .reports
        .iter()
        .map(|a| read_group(a))
        .collect::<Result<Vec<_>>>()?;
    let pairing = match c.full_dim {
        true => nest_eval::compare::DimPairing::Full,
        false => nest_eval::compare::DimPairing::Shared,
    };
    let boot = (c.resamples > 0).then_some(Bootstrap {
        resamples: c.resamples,
        seed: c.seed,
    });
    let mut all = Vec::new();
    for g in &groups[1..] {
        for note in nest_eval::compare::setting_notes(&groups[0], g) {
            eprintln!("warning: {note}");
        }
        let deltas = nest_eval::compare::compare(&groups[0], g, boot, pairing)?;
        anyhow::ensure!(
            !deltas.is_empty(),
            "{} and {} share no task and precision",
            groups[0].paths[0].display(),
            g.paths[0].display()
        );
        all.push(deltas);
    }
    let family = nest_eval::compare::correct(&mut all);
    let legend = Legend {
        boot,
        alpha: c.alpha,
        family,
    };
    for (g, deltas) in groups[1..].iter().zip(&all) {
        print!(
            "{}",
            nest_eval::compare::markdown(&groups[0], g, deltas, legend)
        );
        let out = match &c.out {
            Some(o) if groups.len() > 2 => o.join(slug(&g.name)),
            Some(o) => o.clone(),
            None => g.paths[0]
                .parent()
                .unwrap_or(Path::new("."))
                .join(format!("compare-vs-{}", report_name(&groups[0].paths[0]))),
        };
        let written = nest_eval::compare::write(&out, &groups[0], g, deltas, legend)?;
        eprintln!("wrote {} files to {}", written.len(), out.display());
    }
    Ok(())
}

fn seeds(mut c: SeedsArgs) -> Result<()> {
    c.reports = c.reports.iter().map(|p| report_file(p)).collect();
    let runs = c
        .reports
        .iter()
        .map(|p| Report::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = c.reports.iter().map(|p| report_name(p)).collect();
    let tasks = nest_eval::seeds::summarise(&runs)?;
    print!("{}", nest_eval::seeds::markdown(&names, &tasks));
    let out = c.out.clone().unwrap_or_else(|| {
        c.reports[0]
            .parent()
            .unwrap_or(Path::new("."))
            .join("seeds")
    });
    let written = nest_eval::seeds::write(&out, &c.reports, &names, &tasks)?;
    eprintln!("wrote {} files to {}", written.len(), out.display());
    Ok(())
}
