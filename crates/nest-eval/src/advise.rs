//! `nest advise`: the cheapest (layer, dim, precision) that meets a quality floor.

use crate::report::{pareto_front, Point, Report};
use crate::{Error, Result};

/// Which cost to minimise first (the other breaks ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CostBy {
    /// Encode latency (layers computed), then bytes per vector.
    Latency,
    /// Bytes per vector (index memory), then latency.
    Memory,
}

/// The answer: the chosen cell and the other Pareto-optimal cells that meet the floor.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Advice {
    pub task: String,
    pub min_score: f64,
    pub chosen: Point,
    pub alternatives: Vec<Point>,
    /// The cost the points were ranked by: `--by latency` becomes memory when the report holds
    /// no latency (made with `--latency-texts 0`).
    pub by: CostBy,
}

/// The full point of a report for `task`: the deepest layer at the largest dim in float32 (what
/// the model gives without truncation or early exit), the reference for `--within`.
pub fn full_point(report: &Report, task: &str) -> Result<Point> {
    report
        .points(task)?
        .into_iter()
        .filter(|p| p.precision == crate::quantize::Precision::Float32)
        .max_by_key(|p| (p.layer, p.dim))
        .ok_or_else(|| Error::Report(format!("the report has no float32 cell for '{task}'")))
}

/// Picks the cheapest cell of `report` whose main metric (averaged over the tasks `task`
/// selects) is at least `min_score`.
pub fn advise(report: &Report, task: &str, min_score: f64, by: CostBy) -> Result<Advice> {
    let points = report.points(task)?;
    let by = match points.iter().any(|p| p.latency_ms.is_finite()) {
        true => by,
        false => CostBy::Memory,
    };
    let mut ok: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| p.quality >= min_score)
        .collect();
    let key = |p: &Point| match by {
        CostBy::Latency => (p.latency_ms, p.bytes as f64, -p.quality),
        CostBy::Memory => (p.bytes as f64, p.latency_ms, -p.quality),
    };
    ok.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.total_cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then(ka.2.total_cmp(&kb.2))
    });
    let Some(chosen) = ok.first().copied() else {
        let best = points
            .iter()
            .filter(|p| p.quality.is_finite())
            .max_by(|a, b| a.quality.total_cmp(&b.quality));
        return Err(Error::Report(match best {
            Some(b) => format!(
                "no cell reaches {min_score} on '{task}': the best is {:.2} at layer {}, dim {}, {}",
                b.quality,
                b.layer,
                b.dim,
                b.precision.name()
            ),
            None => format!("the report has no scored cell for '{task}'"),
        }));
    };
    let alternatives = pareto_front(&ok)
        .into_iter()
        // the cell, not `!=`: a NaN latency is never equal to itself
        .filter(|p| (p.layer, p.dim, p.precision) != (chosen.layer, chosen.dim, chosen.precision))
        .collect();
    Ok(Advice {
        task: task.to_string(),
        min_score,
        chosen,
        alternatives,
        by,
    })
}
