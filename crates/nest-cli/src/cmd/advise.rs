use anyhow::{bail, Result};
use nest_eval::advise::{advise, full_point, Advice, CostBy};
use nest_eval::files::same_model;
use nest_eval::Report;

use crate::args::AdviseArgs;

pub fn run(a: AdviseArgs) -> Result<()> {
    let mut by = parse_by(&a.by)?;
    let reports = a
        .report
        .iter()
        .map(|p| Report::read(&super::eval::report_file(p)))
        .collect::<Result<Vec<_>, _>>()?;
    // several reports are one model's in several dtypes: another model's cells would be
    // ranked with its own as if they were the same model's (the answer then named neither)
    let first = &reports[0].model.path;
    let other = a.report.iter().zip(&reports).skip(1);
    if let Some((p, r)) = other
        .into_iter()
        .find(|(_, r)| !same_model(&r.model.path, first))
    {
        bail!(
            "--report {}: a report of {}, the first ({}) of {first}: advise ranks one model's \
             reports (one per dtype); run it once per model",
            p.display(),
            r.model.path,
            a.report[0].display()
        );
    }
    let no_latency = by == CostBy::Latency && !has_latency(&reports, &a.task);
    if no_latency {
        by = CostBy::Memory;
    }
    let report = &reports[0];
    let min_score = min_score(&a, report)?;
    let Some(Cheapest { advice: adv, dtype }) = cheapest(&a, &reports, min_score, by)? else {
        bail!(
            "no report has a point with the main metric >= {min_score} on '{}'",
            a.task
        )
    };
    // said once the advice stands, so that an error is the only line of a failed call
    if no_latency {
        eprintln!(
            "note: the report holds no latency (made with --latency-texts 0): ranked by memory"
        );
    }
    print_advice(&a, report, min_score, &adv, dtype);
    Ok(())
}

/// Whether any report measured a latency for `task`'s points.
fn has_latency(reports: &[Report], task: &str) -> bool {
    reports.iter().any(|r| {
        r.points(task)
            .is_ok_and(|ps| ps.iter().any(|p| p.latency_ms.is_finite()))
    })
}

/// The cost `--by` names: latency or memory.
fn parse_by(by: &str) -> Result<CostBy> {
    Ok(match by {
        "latency" => CostBy::Latency,
        "memory" => CostBy::Memory,
        other => bail!("--by: '{other}' is not latency or memory"),
    })
}

/// The quality floor: `--min-score`, or `--within` of the full point of the first report (printed).
fn min_score(a: &AdviseArgs, report: &Report) -> Result<f64> {
    Ok(match (a.min_score, a.within) {
        (Some(m), _) => m,
        (None, Some(w)) => {
            let f = full_point(report, &a.task)?;
            println!(
                "full point: layer {}, dim {}, float32 -> {:.2}; floor {:.2} (within {w})",
                f.layer,
                f.dim,
                f.quality,
                f.quality - w
            );
            f.quality - w
        }
        (None, None) => bail!("give --min-score or --within"),
    })
}

/// The cheapest advice over all reports, with the dtype of the report it came from.
struct Cheapest<'a> {
    advice: Advice,
    dtype: &'a str,
}

/// The cheapest point over every report (each measured its latency in its own dtype).
fn cheapest<'a>(
    a: &AdviseArgs,
    reports: &'a [Report],
    min_score: f64,
    by: CostBy,
) -> Result<Option<Cheapest<'a>>> {
    let mut best: Option<Cheapest> = None;
    for (r, path) in reports.iter().zip(&a.report) {
        let adv = match advise(r, &a.task, min_score, by) {
            Ok(adv) => adv,
            Err(e) if reports.len() > 1 => {
                eprintln!("note: {}: {e}", path.display());
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let key = |c: &nest_eval::report::Point| match by {
            CostBy::Latency => (c.latency_ms, c.bytes as f64),
            CostBy::Memory => (c.bytes as f64, c.latency_ms),
        };
        if best
            .as_ref()
            .is_none_or(|b| key(&adv.chosen) < key(&b.advice.chosen))
        {
            best = Some(Cheapest {
                advice: adv,
                dtype: r.model.dtype.as_str(),
            });
        }
    }
    Ok(best)
}

/// Prints the chosen point and the other Pareto-optimal points that meet the floor.
fn print_advice(a: &AdviseArgs, report: &Report, min_score: f64, adv: &Advice, dtype: &str) {
    let c = &adv.chosen;
    println!(
        "cheapest point with {} >= {} on '{}' (by {}): dtype {dtype}, layer {}, dim {}, {} -> {:.2}; {} encode, {} bytes/vector",
        report.tasks.iter().find(|t| t.task == a.task || t.kind.name() == a.task).map(|t| t.main_metric.as_str()).unwrap_or("main metric"),
        (min_score * 100.0).round() / 100.0,
        a.task,
        match adv.by {
            CostBy::Latency => "latency",
            CostBy::Memory => "memory",
        },
        c.layer,
        c.dim,
        c.precision.name(),
        c.quality,
        latency(c.latency_ms),
        c.bytes
    );
    if !adv.alternatives.is_empty() {
        println!("other Pareto-optimal points that meet the floor:");
        for p in &adv.alternatives {
            println!(
                "  layer {:>2}, dim {:>4}, {:<7} -> {:.2}; {}, {} bytes",
                p.layer,
                p.dim,
                p.precision.name(),
                p.quality,
                latency(p.latency_ms),
                p.bytes
            );
        }
    }
}

/// A latency as printed: unmeasured (NaN) ones say so.
fn latency(ms: f64) -> String {
    match ms.is_finite() {
        true => format!("{ms:.3} ms/text"),
        false => "latency not measured".into(),
    }
}
