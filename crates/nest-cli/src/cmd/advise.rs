use anyhow::{bail, Result};
use nest_eval::advise::{advise, CostBy};
use nest_eval::Report;

use crate::args::AdviseArgs;

pub fn run(a: AdviseArgs) -> Result<()> {
    let by = match a.by.as_str() {
        "latency" => CostBy::Latency,
        "memory" => CostBy::Memory,
        other => bail!("--by: '{other}' is not latency or memory"),
    };
    let report = Report::read(&a.report)?;
    let adv = advise(&report, &a.task, a.min_score, by)?;
    let c = adv.chosen;
    println!(
        "cheapest point with {} >= {} on '{}' (by {}): layer {}, dim {}, {} -> {:.2}; {:.3} ms/text encode, {} bytes/vector",
        report.tasks.iter().find(|t| t.task == a.task || t.kind.name() == a.task).map(|t| t.main_metric.as_str()).unwrap_or("main metric"),
        a.min_score,
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
