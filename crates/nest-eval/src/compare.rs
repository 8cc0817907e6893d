//! `nest eval compare`: per-cell deltas of the main metric between reports (e.g. MIPIC vs MRL).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::quantize::Precision;
use crate::report::Report;
use crate::Result;

/// The deltas `other - base` of one task at one precision.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TaskDelta {
    pub task: String,
    pub main_metric: String,
    pub precision: Precision,
    pub layers: Vec<usize>,
    pub dims: Vec<usize>,
    /// `[dim][layer]`: (base, other) where both reports have the cell.
    pub cells: Vec<Vec<Option<(f64, f64)>>>,
}

impl TaskDelta {
    pub fn delta(&self, layer: usize, dim: usize) -> Option<f64> {
        let li = self.layers.iter().position(|&l| l == layer)?;
        let di = self.dims.iter().position(|&d| d == dim)?;
        self.cells[di][li].map(|(a, b)| b - a)
    }

    /// Mean delta over the cells both reports have.
    pub fn mean_delta(&self) -> f64 {
        let v: Vec<f64> = self
            .cells
            .iter()
            .flatten()
            .flatten()
            .map(|(a, b)| b - a)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }
}

/// Every task and precision the two reports share.
pub fn compare(base: &Report, other: &Report) -> Vec<TaskDelta> {
    let mut out = Vec::new();
    for tb in &base.tasks {
        let Some(to) = other.tasks.iter().find(|t| t.task == tb.task) else {
            continue;
        };
        let layers: Vec<usize> = base
            .layers
            .iter()
            .copied()
            .filter(|l| other.layers.contains(l))
            .collect();
        let dims: Vec<usize> = base
            .dims
            .iter()
            .copied()
            .filter(|d| other.dims.contains(d))
            .collect();
        for &p in base
            .precisions
            .iter()
            .filter(|p| other.precisions.contains(p))
        {
            let cells = dims
                .iter()
                .map(|&d| {
                    layers
                        .iter()
                        .map(|&l| Some((tb.main(l, d, p)?, to.main(l, d, p)?)))
                        .collect()
                })
                .collect();
            out.push(TaskDelta {
                task: tb.task.clone(),
                main_metric: tb.main_metric.clone(),
                precision: p,
                layers: layers.clone(),
                dims: dims.clone(),
                cells,
            });
        }
    }
    out
}

/// Markdown: one table per task and precision, each cell `other (delta)`.
pub fn markdown(base_name: &str, other_name: &str, deltas: &[TaskDelta]) -> String {
    let mut s = format!("# {other_name} vs {base_name}\n\nCells: {other_name}'s main metric (x100), and in brackets its difference from {base_name}.\n\n");
    for t in deltas {
        let _ = writeln!(
            s,
            "## {} ({} {}), mean delta {:+.2}\n",
            t.task,
            t.main_metric,
            t.precision.name(),
            t.mean_delta()
        );
        s.push_str(&crate::report::grid_markdown(&t.layers, &t.dims, |l, d| {
            let li = t.layers.iter().position(|&x| x == l)?;
            let di = t.dims.iter().position(|&x| x == d)?;
            t.cells[di][li].map(|(a, b)| format!("{b:.2} ({:+.2})", b - a))
        }));
        s.push('\n');
    }
    s
}

/// Writes `compare.md` and a diverging heatmap of the deltas per task and precision.
pub fn write(
    dir: &Path,
    base_name: &str,
    other_name: &str,
    deltas: &[TaskDelta],
) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let p = dir.join("compare.md");
    nest_core::fsutil::write_atomic(&p, markdown(base_name, other_name, deltas).as_bytes())?;
    out.push(p);
    for t in deltas {
        let slug: String = t
            .task
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let p = dir.join(format!("compare-{slug}-{}.svg", t.precision.name()));
        let title = format!("{} {}: {other_name} - {base_name}", t.task, t.main_metric);
        crate::plots::heatmap_svg(&p, &title, &t.layers, &t.dims, &|l, d| t.delta(l, d), true)?;
        out.push(p);
    }
    Ok(out)
}
