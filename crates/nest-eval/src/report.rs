//! Evaluation reports: `report.json` (every cell and metric, the model, data files and hashes,
//! costs, the command), `report.md` (tables in the papers' layout: rows = dims, columns =
//! layers) and the plots (see [`crate::plots`]).
//!
//! All quality metrics are stored x100.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::items::Items;
use crate::quantize::Precision;
use crate::run_info::nullable_map;
pub use crate::run_info::{Costs, ModelInfo};
use crate::tasks::TaskKind;
use crate::{Error, Result};

mod markdown;

/// One (layer, dim, precision) point of one task.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Cell {
    pub layer: usize,
    pub dim: usize,
    pub precision: Precision,
    #[serde(deserialize_with = "nullable_map")]
    pub metrics: BTreeMap<String, f64>,
    /// Per-item scores for significance tests (see [`crate::items`]); absent with
    /// `nest eval --no-items` and in reports written before they existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Items>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FileRef {
    pub path: String,
    pub sha256: String,
}

/// One task over the grid.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskResult {
    /// e.g. `stsb/test`, `banking77`, `scifact/test`.
    pub task: String,
    pub kind: TaskKind,
    pub main_metric: String,
    pub files: Vec<FileRef>,
    pub n_examples: usize,
    pub warnings: Vec<String>,
    pub seconds: f64,
    pub cells: Vec<Cell>,
    /// Per-item gold for significance tests (see [`crate::items`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gold: Option<Items>,
}

impl TaskResult {
    pub fn main(&self, layer: usize, dim: usize, precision: Precision) -> Option<f64> {
        self.cell(layer, dim, precision)
            .and_then(|c| c.metrics.get(&self.main_metric).copied())
    }

    pub fn cell(&self, layer: usize, dim: usize, precision: Precision) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| c.layer == layer && c.dim == dim && c.precision == precision)
    }
}

/// A whole evaluation report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub nest_version: String,
    pub command: String,
    pub model: ModelInfo,
    pub layers: Vec<usize>,
    pub dims: Vec<usize>,
    pub precisions: Vec<Precision>,
    /// Binary retrieval's re-ranking (`--rescore`: the top `10 x N` Hamming candidates
    /// re-scored with the float query; 0: none), when the grid has binary cells: their
    /// `ndcg_at_10` depends on it. `None` in reports from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescore: Option<usize>,
    pub costs: Costs,
    pub tasks: Vec<TaskResult>,
    pub seconds: f64,
}

/// A point on the quality/cost plane.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    pub layer: usize,
    pub dim: usize,
    pub precision: Precision,
    pub quality: f64,
    pub latency_ms: f64,
    pub bytes: usize,
}

impl Report {
    pub fn latency(&self, layer: usize) -> f64 {
        self.costs
            .latency_ms
            .get(&layer)
            .copied()
            .unwrap_or(f64::NAN)
    }

    /// The points of the tasks selected by `selector` (a task name, or a kind such as `sts`,
    /// whose tasks' main metrics are averaged), one per (layer, dim, precision) that every
    /// selected task has.
    pub fn points(&self, selector: &str) -> Result<Vec<Point>> {
        let chosen: Vec<&TaskResult> = self
            .tasks
            .iter()
            .filter(|t| t.task == selector || t.kind.name() == selector || selector == "all")
            .collect();
        if chosen.is_empty() {
            let names: Vec<String> = self.tasks.iter().map(|t| t.task.clone()).collect();
            let kinds: Vec<&str> = crate::family::FAMILIES.iter().map(|f| f.name()).collect();
            return Err(Error::Report(format!(
                "--task '{selector}' matches no task of the report (tasks: {}; kinds: {}; or all)",
                names.join(", "),
                kinds.join(", ")
            )));
        }
        let mut out = Vec::new();
        for c in &chosen[0].cells {
            let vals: Option<Vec<f64>> = chosen
                .iter()
                .map(|t| t.main(c.layer, c.dim, c.precision))
                .collect();
            if let Some(v) = vals {
                out.push(Point {
                    layer: c.layer,
                    dim: c.dim,
                    precision: c.precision,
                    quality: v.iter().sum::<f64>() / v.len() as f64,
                    latency_ms: self.latency(c.layer),
                    bytes: c.precision.bytes(c.dim),
                });
            }
        }
        Ok(out)
    }

    /// Reads a `report.json`.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| nest_core::Error::io(path, e))?;
        serde_json::from_str(&text)
            .map_err(|e| Error::Report(format!("{}: not a Nest report.json: {e}", path.display())))
    }
}

/// Markdown table of the main metric: rows = dims, columns = layers.
pub fn table(t: &TaskResult, p: Precision, layers: &[usize], dims: &[usize]) -> String {
    grid_markdown(layers, dims, |l, d| {
        t.main(l, d, p).map(|v| format!("{v:.2}"))
    })
}

/// A Markdown grid in the papers' layout: rows = dims, columns = layers; `-` where `cell` has
/// nothing.
pub fn grid_markdown(
    layers: &[usize],
    dims: &[usize],
    cell: impl Fn(usize, usize) -> Option<String>,
) -> String {
    let mut s = String::from("| dim \\ layer |");
    for l in layers {
        let _ = write!(s, " {l} |");
    }
    s.push_str("\n|---|");
    for _ in layers {
        s.push_str("---:|");
    }
    s.push('\n');
    for &d in dims {
        let _ = write!(s, "| {d} |");
        for &l in layers {
            let _ = write!(s, " {} |", cell(l, d).unwrap_or_else(|| "-".into()));
        }
        s.push('\n');
    }
    s
}

/// The grid as aligned text for the terminal.
pub fn grid_text(t: &TaskResult, p: Precision, layers: &[usize], dims: &[usize]) -> String {
    let mut s = format!(
        "{} ({} {}, n={})\n{:>9}",
        t.task,
        t.main_metric,
        p.name(),
        t.n_examples,
        "dim\\layer"
    );
    for l in layers {
        let _ = write!(s, "{l:>8}");
    }
    s.push('\n');
    for d in dims {
        let _ = write!(s, "{d:>9}");
        for l in layers {
            let _ = write!(s, "{:>8.2}", t.main(*l, *d, p).unwrap_or(f64::NAN));
        }
        s.push('\n');
    }
    s
}

/// Cells no other cell dominates (latency <=, bytes <=, quality >=, one strictly), sorted by
/// bytes then latency.
pub fn pareto_front(points: &[Point]) -> Vec<Point> {
    use std::cmp::Ordering;
    let mut front: Vec<Point> = points
        .iter()
        .filter(|a| {
            !points.iter().any(|b| {
                // an unknown latency (NaN: a report made with --latency-texts 0) neither wins
                // nor loses: the other two decide
                let lat_le = b.latency_ms.partial_cmp(&a.latency_ms) != Some(Ordering::Greater);
                let lat_lt = b.latency_ms < a.latency_ms;
                lat_le
                    && b.bytes <= a.bytes
                    && b.quality >= a.quality
                    && (lat_lt || b.bytes < a.bytes || b.quality > a.quality)
            })
        })
        .copied()
        .collect();
    front.sort_by(|a, b| {
        a.bytes
            .cmp(&b.bytes)
            .then(a.latency_ms.total_cmp(&b.latency_ms))
    });
    front
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(latency_ms: f64, bytes: usize, quality: f64) -> Point {
        Point {
            layer: 1,
            dim: 1,
            precision: Precision::Float32,
            quality,
            latency_ms,
            bytes,
        }
    }

    #[test]
    fn pareto_front_without_latencies_is_decided_by_bytes_and_quality() {
        // new-user trial #27: dim 384 (89.11, 1536 bytes) was listed although dim 64 (90.10,
        // 256 bytes) dominates it, because every comparison with a NaN latency is false
        let (small, big) = (pt(f64::NAN, 256, 90.10), pt(f64::NAN, 1536, 89.11));
        let tiny = pt(f64::NAN, 32, 80.0);
        let front = pareto_front(&[big, small, tiny]);
        let bytes: Vec<usize> = front.iter().map(|p| p.bytes).collect();
        assert_eq!(bytes, vec![32, 256]);
    }

    #[test]
    fn nan_metrics_round_trip() {
        let c = Cell {
            layer: 1,
            dim: 8,
            precision: Precision::Binary,
            metrics: [
                ("spearman".to_string(), f64::NAN),
                ("pearson".to_string(), 1.5),
            ]
            .into(),
            items: None,
        };
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("null"), "{json}");
        let back: Cell = serde_json::from_str(&json).unwrap();
        assert!(back.metrics["spearman"].is_nan());
        assert_eq!(back.metrics["pearson"], 1.5);
    }

    #[test]
    fn pareto_keeps_only_undominated() {
        let pts = [
            pt(1.0, 10, 50.0),
            pt(2.0, 10, 60.0),
            pt(2.0, 20, 55.0),
            pt(1.0, 5, 50.0),
        ];
        let f = pareto_front(&pts);
        // (1,10,50) is dominated by (1,5,50); (2,20,55) by (2,10,60)
        assert_eq!(f.len(), 2);
        assert!(f.contains(&pts[1]) && f.contains(&pts[3]));
    }
}
