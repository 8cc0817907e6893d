//! `nest eval compare`: per-cell differences of the main metric between reports (e.g. MIPIC vs
//! MRL), each with a paired-bootstrap 95% interval and p-value over the test items, and Holm's
//! correction over every cell compared (see [`crate::significance`]).
//!
//! A side is one report or several runs of one method (seeds); its cell value is then the
//! mean over runs and its spread (sample sd) is shown beside it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::quantize::Precision;
use crate::report::{Report, TaskResult};
use crate::significance::{holm, spread, Bootstrap, Side, Test};
use crate::{Error, Result};

/// One side of a comparison: a name and one or more reports (runs of one method).
#[derive(Debug)]
pub struct Group {
    pub name: String,
    pub paths: Vec<PathBuf>,
    pub reports: Vec<Report>,
}

impl Group {
    /// Reads the reports of one side.
    pub fn read(name: String, paths: Vec<PathBuf>) -> Result<Self> {
        let reports = paths
            .iter()
            .map(|p| Report::read(p))
            .collect::<Result<Vec<_>>>()?;
        if reports.is_empty() {
            return Err(Error::Report(format!("side '{name}' has no report")));
        }
        Ok(Group {
            name,
            paths,
            reports,
        })
    }

    fn task(&self, name: &str) -> Option<Vec<&TaskResult>> {
        self.reports
            .iter()
            .map(|r| r.tasks.iter().find(|t| t.task == name))
            .collect()
    }
}

/// One cell of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct CellDelta {
    pub layer: usize,
    pub dim: usize,
    /// Mean over the side's runs of the main metric (x100).
    pub base: f64,
    pub other: f64,
    /// Sample sd over runs (NaN for one run).
    pub base_sd: f64,
    pub other_sd: f64,
    /// The paired bootstrap, when asked for.
    pub test: Option<Test>,
    /// Holm-adjusted p-value over every cell of the invocation.
    pub p_holm: Option<f64>,
}

impl CellDelta {
    pub fn delta(&self) -> f64 {
        self.other - self.base
    }

    /// Whether the difference survives Holm's correction at `alpha`.
    pub fn significant(&self, alpha: f64) -> bool {
        self.p_holm.is_some_and(|p| p < alpha)
    }
}

/// The comparison of one task at one precision.
#[derive(Debug, Clone, Serialize)]
pub struct TaskDelta {
    pub task: String,
    pub main_metric: String,
    pub precision: Precision,
    pub layers: Vec<usize>,
    pub dims: Vec<usize>,
    /// `[dim][layer]`, where every run of both sides has the cell.
    pub cells: Vec<Vec<Option<CellDelta>>>,
}

impl TaskDelta {
    pub fn cell(&self, layer: usize, dim: usize) -> Option<&CellDelta> {
        let li = self.layers.iter().position(|&l| l == layer)?;
        let di = self.dims.iter().position(|&d| d == dim)?;
        self.cells[di][li].as_ref()
    }

    pub fn delta(&self, layer: usize, dim: usize) -> Option<f64> {
        self.cell(layer, dim).map(CellDelta::delta)
    }

    /// Mean delta over the cells both sides have.
    pub fn mean_delta(&self) -> f64 {
        let v: Vec<f64> = self.all().map(CellDelta::delta).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }

    fn all(&self) -> impl Iterator<Item = &CellDelta> {
        self.cells.iter().flatten().flatten()
    }

    fn all_mut(&mut self) -> impl Iterator<Item = &mut CellDelta> {
        self.cells.iter_mut().flatten().flatten()
    }
}

fn shared<T: PartialEq + Copy>(lists: impl Iterator<Item = Vec<T>>) -> Vec<T> {
    let mut it = lists;
    let mut first = it.next().unwrap_or_default();
    for l in it {
        first.retain(|x| l.contains(x));
    }
    first
}

/// Every task and precision all reports of both sides share; with `boot`, each cell gets a
/// paired bootstrap (the reports need per-item scores, and the same test files).
pub fn compare(base: &Group, other: &Group, boot: Option<Bootstrap>) -> Result<Vec<TaskDelta>> {
    let all: Vec<&Report> = base.reports.iter().chain(&other.reports).collect();
    let layers = shared(all.iter().map(|r| r.layers.clone()));
    let dims = shared(all.iter().map(|r| r.dims.clone()));
    let precisions = shared(all.iter().map(|r| r.precisions.clone()));
    let mut out = Vec::new();
    for tb in &base.reports[0].tasks {
        let (Some(ta), Some(to)) = (base.task(&tb.task), other.task(&tb.task)) else {
            continue;
        };
        if boot.is_some() {
            check_items(base, other, &ta, &to)?;
        }
        for &p in &precisions {
            let cells = dims
                .iter()
                .map(|&d| {
                    layers
                        .iter()
                        .map(|&l| cell_delta(&ta, &to, l, d, p, boot))
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
    Ok(out)
}

/// Errors unless every run of both sides has per-item scores on the same test files.
fn check_items(base: &Group, other: &Group, ta: &[&TaskResult], to: &[&TaskResult]) -> Result<()> {
    let paths = base.paths.iter().chain(&other.paths);
    let first = ta[0];
    for (t, path) in ta.iter().chain(to).zip(paths) {
        let has_cells = t.cells.iter().all(|c| c.items.is_some());
        let has_gold = t.gold.is_some() || !crate::items::needs_gold(t.kind);
        if !has_cells || !has_gold {
            return Err(Error::Report(format!(
                "{}: task {} has no per-item scores, so no significance test can be made; \
                 re-run `nest eval` without --no-items (reports before Nest kept them lack \
                 them too), or pass --resamples 0 to compare without one",
                path.display(),
                t.task
            )));
        }
        let sha =
            |t: &TaskResult| -> Vec<String> { t.files.iter().map(|f| f.sha256.clone()).collect() };
        if sha(t) != sha(first) || t.n_examples != first.n_examples {
            return Err(Error::Report(format!(
                "{}: task {} was evaluated on other files than in {} (sha256 or item count \
                 differ); a paired test needs the same test items",
                path.display(),
                t.task,
                base.paths[0].display()
            )));
        }
    }
    Ok(())
}

fn cell_delta(
    ta: &[&TaskResult],
    to: &[&TaskResult],
    layer: usize,
    dim: usize,
    p: Precision,
    boot: Option<Bootstrap>,
) -> Option<CellDelta> {
    let mains = |ts: &[&TaskResult]| -> Option<Vec<f64>> {
        ts.iter().map(|t| t.main(layer, dim, p)).collect()
    };
    let (a, b) = (spread(&mains(ta)?), spread(&mains(to)?));
    let test = boot.and_then(|boot| {
        let (ia, ib) = (items_at(ta, layer, dim, p)?, items_at(to, layer, dim, p)?);
        let sa = Side {
            gold: gold(ta[0]),
            runs: &ia,
        };
        let sb = Side {
            gold: gold(to[0]),
            runs: &ib,
        };
        boot.paired(ta[0].kind, sa, sb)
    });
    Some(CellDelta {
        layer,
        dim,
        base: a.mean,
        other: b.mean,
        base_sd: a.sd,
        other_sd: b.sd,
        test,
        p_holm: None,
    })
}

fn items_at<'a>(
    ts: &[&'a TaskResult],
    layer: usize,
    dim: usize,
    p: Precision,
) -> Option<Vec<&'a [f32]>> {
    ts.iter()
        .map(|t| Some(t.cell(layer, dim, p)?.items.as_ref()?.0.as_slice()))
        .collect()
}

fn gold(t: &TaskResult) -> &[f32] {
    t.gold.as_ref().map_or(&[][..], |g| g.0.as_slice())
}

/// Holm's correction over every tested cell of every comparison (one family), in place;
/// returns the family's size.
pub fn correct(comparisons: &mut [Vec<TaskDelta>]) -> usize {
    let p: Vec<f64> = comparisons
        .iter()
        .flatten()
        .flat_map(|t| t.all())
        .map(|c| c.test.map_or(f64::NAN, |t| t.p))
        .collect();
    let m = p.iter().filter(|x| x.is_finite()).count();
    let adj = holm(&p);
    let cells = comparisons.iter_mut().flatten().flat_map(|t| t.all_mut());
    for (c, a) in cells.zip(adj) {
        c.p_holm = a.is_finite().then_some(a);
    }
    m
}

/// How a comparison was made, for the Markdown header.
#[derive(Debug, Clone, Copy)]
pub struct Legend {
    pub boot: Option<Bootstrap>,
    pub alpha: f64,
    /// Cells in Holm's family.
    pub family: usize,
}

fn fmt_value(v: f64, sd: f64) -> String {
    if sd.is_finite() {
        format!("{v:.2}±{sd:.2}")
    } else {
        format!("{v:.2}")
    }
}

/// Markdown: one table per task and precision, each cell `other (delta [lo, hi])`, `*` where
/// the difference survives Holm's correction.
pub fn markdown(base: &Group, other: &Group, deltas: &[TaskDelta], legend: Legend) -> String {
    let (bn, on) = (&base.name, &other.name);
    let runs = |g: &Group| match g.reports.len() {
        1 => String::new(),
        n => format!(" (mean ± sd over {n} runs)"),
    };
    let mut s = format!(
        "# {on} vs {bn}\n\nCells: {on}'s main metric (x100){}, and in brackets its difference from {bn}{}",
        runs(other),
        runs(base)
    );
    match legend.boot {
        Some(b) => {
            let _ = write!(
                s,
                " with a 95% paired-bootstrap interval over the test items ({} resamples, seed {}). \
                 `*`: the difference survives Holm's correction at {} over all {} cells compared.\n\n",
                b.resamples, b.seed, legend.alpha, legend.family
            );
        }
        None => s.push_str(" (no significance test: --resamples 0).\n\n"),
    }
    for t in deltas {
        let n_sig = t.all().filter(|c| c.significant(legend.alpha)).count();
        let _ = writeln!(
            s,
            "## {} ({} {}), mean delta {:+.2}{}\n",
            t.task,
            t.main_metric,
            t.precision.name(),
            t.mean_delta(),
            if legend.boot.is_some() {
                format!(", {n_sig} of {} cells significant", t.all().count())
            } else {
                String::new()
            }
        );
        s.push_str(&crate::report::grid_markdown(&t.layers, &t.dims, |l, d| {
            let c = t.cell(l, d)?;
            let v = fmt_value(c.other, c.other_sd);
            Some(match c.test {
                Some(x) => format!(
                    "{v} ({:+.2} [{:+.2}, {:+.2}]){}",
                    c.delta(),
                    x.lo,
                    x.hi,
                    if c.significant(legend.alpha) {
                        " *"
                    } else {
                        ""
                    }
                ),
                None => format!("{v} ({:+.2})", c.delta()),
            })
        }));
        s.push('\n');
    }
    s
}

/// Writes `compare.md`, `compare.json`, a diverging heatmap of the deltas per task and
/// precision, and with a test, one of the significant deltas only.
pub fn write(
    dir: &Path,
    base: &Group,
    other: &Group,
    deltas: &[TaskDelta],
    legend: Legend,
) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let p = dir.join("compare.md");
    let md = markdown(base, other, deltas, legend);
    nest_core::fsutil::write_atomic(&p, md.as_bytes())?;
    out.push(p);
    let p = dir.join("compare.json");
    let json = serde_json::json!({
        "base": {"name": base.name, "reports": base.paths},
        "other": {"name": other.name, "reports": other.paths},
        "resamples": legend.boot.map(|b| b.resamples),
        "seed": legend.boot.map(|b| b.seed),
        "alpha": legend.alpha,
        "correction": "holm",
        "family": legend.family,
        "tasks": deltas,
    });
    let text = serde_json::to_string_pretty(&json).map_err(|e| Error::Report(e.to_string()))?;
    nest_core::fsutil::write_atomic(&p, text.as_bytes())?;
    out.push(p);
    let (bn, on) = (&base.name, &other.name);
    for t in deltas {
        let slug: String = t
            .task
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let p = dir.join(format!("compare-{slug}-{}.svg", t.precision.name()));
        let title = format!("{} {}: {on} - {bn}", t.task, t.main_metric);
        crate::plots::heatmap_svg(&p, &title, &t.layers, &t.dims, &|l, d| t.delta(l, d), true)?;
        out.push(p);
        if legend.boot.is_some() {
            let p = dir.join(format!(
                "compare-{slug}-{}-significant.svg",
                t.precision.name()
            ));
            let title = format!(
                "{} {}: {on} - {bn}, Holm p < {}",
                t.task, t.main_metric, legend.alpha
            );
            let sig = |l, d| {
                t.cell(l, d)
                    .filter(|c| c.significant(legend.alpha))
                    .map(CellDelta::delta)
            };
            crate::plots::heatmap_svg(&p, &title, &t.layers, &t.dims, &sig, true)?;
            out.push(p);
        }
    }
    Ok(out)
}
