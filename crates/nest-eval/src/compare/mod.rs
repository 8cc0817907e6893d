//! `nest eval compare`: per-cell differences of the main metric between reports (e.g. MIPIC vs
//! MRL), each with a paired-bootstrap 95% interval and p-value over the test items, and Holm's
//! correction over every cell compared (see [`crate::significance`]).
//!
//! A side is one report or several runs of one method (seeds); its cell value is then the
//! mean over runs and its spread (sample sd) is shown beside it.
//!
//! `delta.rs` holds the sides and the deltas, `output.rs` their Markdown, JSON and heatmaps;
//! this file makes the comparison ([`compare`]) and Holm's correction ([`correct`]).

use crate::quantize::Precision;
use crate::report::{Report, TaskResult};
use crate::significance::{holm, spread, Bootstrap, Side};
use crate::{Error, Result};

mod delta;
mod output;

pub use delta::{CellDelta, Group, TaskDelta};
pub use output::{markdown, write, Legend};

fn shared<T: PartialEq + Copy>(lists: impl Iterator<Item = Vec<T>>) -> Vec<T> {
    let mut it = lists;
    let mut first = it.next().unwrap_or_default();
    for l in it {
        first.retain(|x| l.contains(x));
    }
    first
}

/// Which dims a comparison pairs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DimPairing {
    /// Each dim every report of both sides scored, with itself.
    #[default]
    Shared,
    /// Each side's full vector: the largest dim every report of that side scored. For models
    /// whose outputs differ in width (IBKD's `W s` in the teacher's 768 dims against a 384-dim
    /// student); the cells carry the first side's dim and [`CellDelta::other_dim`].
    Full,
}

/// The largest dim every report of `g` scored.
fn full_dim(g: &Group) -> Option<usize> {
    shared(g.reports.iter().map(|r| r.dims.clone()))
        .into_iter()
        .max()
}

/// What differs between the two sides' settings, which the cells' numbers depend on but do
/// not show: binary retrieval's re-ranking (`--rescore`), when both record it and the sides
/// share binary cells. One line each, for the comparison to print as warnings.
pub fn setting_notes(base: &Group, other: &Group) -> Vec<String> {
    let all: Vec<&Report> = base.reports.iter().chain(&other.reports).collect();
    let binary = shared(all.iter().map(|r| r.precisions.clone())).contains(&Precision::Binary);
    let rescores = |g: &Group| -> Vec<usize> {
        let mut r: Vec<usize> = g.reports.iter().filter_map(|r| r.rescore).collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    let (a, b) = (rescores(base), rescores(other));
    if !binary || a.is_empty() || b.is_empty() || a == b {
        return Vec::new();
    }
    vec![format!(
        "the binary cells were re-ranked otherwise: {} with rescore {a:?}, {} with {b:?} \
         (`nest eval --rescore`, Python's rescore=): their ndcg_at_10 differ by that too; \
         compare reports made with the same rescore",
        base.name, other.name
    )]
}

/// Every task and precision all reports of both sides share; with `boot`, each cell gets a
/// paired bootstrap (the reports need per-item scores, and the same test files).
pub fn compare(
    base: &Group,
    other: &Group,
    boot: Option<Bootstrap>,
    pairing: DimPairing,
) -> Result<Vec<TaskDelta>> {
    let all: Vec<&Report> = base.reports.iter().chain(&other.reports).collect();
    let layers = shared(all.iter().map(|r| r.layers.clone()));
    let pairs: Vec<(usize, usize)> = match pairing {
        DimPairing::Shared => shared(all.iter().map(|r| r.dims.clone()))
            .into_iter()
            .map(|d| (d, d))
            .collect(),
        DimPairing::Full => full_dim(base).zip(full_dim(other)).into_iter().collect(),
    };
    let dims: Vec<usize> = pairs.iter().map(|p| p.0).collect();
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
            let cells = pairs
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

/// The cell at `layer`, the base side at `dims.0` and the other at `dims.1`.
fn cell_delta(
    ta: &[&TaskResult],
    to: &[&TaskResult],
    layer: usize,
    (dim, other_dim): (usize, usize),
    p: Precision,
    boot: Option<Bootstrap>,
) -> Option<CellDelta> {
    let mains = |ts: &[&TaskResult], dim: usize| -> Option<Vec<f64>> {
        ts.iter().map(|t| t.main(layer, dim, p)).collect()
    };
    let (a, b) = (spread(&mains(ta, dim)?), spread(&mains(to, other_dim)?));
    let test = boot.and_then(|boot| {
        let (ia, ib) = (
            items_at(ta, layer, dim, p)?,
            items_at(to, layer, other_dim, p)?,
        );
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
        other_dim,
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
