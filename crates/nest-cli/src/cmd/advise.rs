use anyhow::{bail, Result};
use nest_eval::advise::{advise, full_point, CostBy};
use nest_eval::Report;

use crate::args::AdviseArgs;

pub fn run(a: AdviseArgs) -> Result<()> {
    let by = match a.by.as_str() {
        "latency" => CostBy::Latency,
        "memory" => CostBy::Memory,
        other => bail!("--by: '{other}' is not latency or memory"),
    };
    let reports = a
        .report
        .iter()
        .map(|p| Report::read(p))
        .collect::<Result<Vec<_>, _>>()?;
    let report = &reports[0];
    let min_score = match (a.min_score, a.within) {
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
    };
    // the cheapest over every report (each measured its latency in its own dtype)
    let mut best: Option<(nest_eval::advise::Advice, &str)> = None;
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
            .is_none_or(|(b, _)| key(&adv.chosen) < key(&b.chosen))
        {
            best = Some((adv, r.model.dtype.as_str()));
        }
    }
    let Some((adv, dtype)) = best else {
        bail!(
            "no report has a point with the main metric >= {min_score} on '{}'",
            a.task
        )
    };
    let c = adv.chosen;
    println!(
        "cheapest point with {} >= {} on '{}' (by {}): dtype {dtype}, layer {}, dim {}, {} -> {:.2}; {:.3} ms/text encode, {} bytes/vector",
        report.tasks.iter().find(|t| t.task == a.task || t.kind.name() == a.task).map(|t| t.main_metric.as_str()).unwrap_or("main metric"),
        (min_score * 100.0).round() / 100.0,
        a.task,
        a.by,
        c.layer,
        c.dim,
        c.precision.name(),
        c.quality,
        c.latency_ms,
        c.bytes
    );
    if !adv.alternatives.is_empty() {
        println!("other Pareto-optimal points that meet the floor:");
        for p in &adv.alternatives {
            println!(
                "  layer {:>2}, dim {:>4}, {:<7} -> {:.2}; {:.3} ms/text, {} bytes",
                p.layer,
                p.dim,
                p.precision.name(),
                p.quality,
                p.latency_ms,
                p.bytes
            );
        }
    }
    Ok(())
}
