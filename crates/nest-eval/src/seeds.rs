//! `nest eval seeds`: several runs of one method (seeds) summarised per cell: mean, sample sd
//! and the 95% t-interval of the mean over runs (see [`crate::significance::spread`]).
//!
//! The interval says how far the seed mean may be from the method's mean over all seeds; it
//! says nothing about the test items' sampling, which `nest eval compare` with the runs as one
//! side (`a1.json,a2.json,...`) adds.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::quantize::Precision;
use crate::report::Report;
use crate::significance::{spread, Spread};
use crate::{Error, Result};

/// One task at one precision over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct TaskSpread {
    pub task: String,
    pub main_metric: String,
    pub precision: Precision,
    pub layers: Vec<usize>,
    pub dims: Vec<usize>,
    /// `[dim][layer]`, where every run has the cell.
    pub cells: Vec<Vec<Option<Spread>>>,
}

impl TaskSpread {
    pub fn cell(&self, layer: usize, dim: usize) -> Option<Spread> {
        let li = self.layers.iter().position(|&l| l == layer)?;
        let di = self.dims.iter().position(|&d| d == dim)?;
        self.cells[di][li]
    }
}

/// Every task, precision and cell all runs share. Needs two runs or more.
/// Refuses runs that cannot be seeds of one method: one model twice (the same folder
/// however written: not independent runs), models trained with other objectives or with one
/// seed (as their `nest.json` record them), or models of other shapes (architecture, layers,
/// width: other methods or backbones, which `nest eval compare` sets side by side).
fn check_runs_of_one_method(runs: &[Report]) -> Result<()> {
    let shape = |r: &Report| {
        let m = &r.model;
        format!(
            "{} of {} layers and width {}",
            m.architecture, m.num_layers, m.hidden_size
        )
    };
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            let (pa, pb) = (&a.model.path, &b.model.path);
            if nest_core::data::same_model(pa, pb) && a.model.dtype == b.model.dtype {
                return Err(Error::Report(format!(
                    "two reports are of one model ({pa}, {}): a spread over seeds needs runs \
                     trained with different seeds, one report each",
                    a.model.dtype
                )));
            }
            // what the models' nest.json record (reports from before did not: unchecked)
            if let (Some(oa), Some(ob)) = (&a.model.objective, &b.model.objective) {
                if oa != ob {
                    return Err(Error::Report(format!(
                        "{pa} was trained with {oa} and {pb} with {ob}: seeds of one method \
                         share an objective; `nest eval compare A1,A2 B1,B2` sets methods side \
                         by side"
                    )));
                }
            }
            if let (Some(sa), Some(sb)) = (a.model.seed, b.model.seed) {
                if sa == sb {
                    return Err(Error::Report(format!(
                        "{pa} and {pb} were both trained with seed {sa}: a spread over seeds \
                         needs runs of different seeds (--seed)"
                    )));
                }
            }
            if shape(a) != shape(b) {
                return Err(Error::Report(format!(
                    "{pa} is a {} and {pb} a {}: seeds of one method share a model shape; \
                     `nest eval compare A1,A2 B1,B2` sets methods side by side",
                    shape(a),
                    shape(b)
                )));
            }
        }
    }
    Ok(())
}

pub fn summarise(runs: &[Report]) -> Result<Vec<TaskSpread>> {
    if runs.len() < 2 {
        return Err(Error::Report(format!(
            "a spread over seeds needs at least 2 reports, got {}",
            runs.len()
        )));
    }
    check_runs_of_one_method(runs)?;
    let keep = |f: &dyn Fn(&Report) -> Vec<usize>| -> Vec<usize> {
        let mut v = f(&runs[0]);
        v.retain(|x| runs.iter().all(|r| f(r).contains(x)));
        v
    };
    let layers = keep(&|r| r.layers.clone());
    let dims = keep(&|r| r.dims.clone());
    let mut out = Vec::new();
    for t0 in &runs[0].tasks {
        let Some(ts) = runs
            .iter()
            .map(|r| r.tasks.iter().find(|t| t.task == t0.task))
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        for &p in runs[0]
            .precisions
            .iter()
            .filter(|p| runs.iter().all(|r| r.precisions.contains(p)))
        {
            let cells = dims
                .iter()
                .map(|&d| {
                    layers
                        .iter()
                        .map(|&l| {
                            let v: Option<Vec<f64>> = ts.iter().map(|t| t.main(l, d, p)).collect();
                            v.map(|v| spread(&v))
                        })
                        .collect()
                })
                .collect();
            out.push(TaskSpread {
                task: t0.task.clone(),
                main_metric: t0.main_metric.clone(),
                precision: p,
                layers: layers.clone(),
                dims: dims.clone(),
                cells,
            });
        }
    }
    Ok(out)
}

/// Markdown: per task and precision, cells `mean ± sd [lo, hi]`.
pub fn markdown(names: &[String], tasks: &[TaskSpread]) -> String {
    let mut s = format!(
        "# {} runs: {}\n\nCells: mean ± sample sd of the main metric (x100) over the runs, and the 95% t-interval of the mean.\n\n",
        names.len(),
        names.join(", ")
    );
    for t in tasks {
        let _ = writeln!(
            s,
            "## {} ({} {})\n",
            t.task,
            t.main_metric,
            t.precision.name()
        );
        s.push_str(&crate::report::grid_markdown(&t.layers, &t.dims, |l, d| {
            t.cell(l, d)
                .map(|c| format!("{:.2} ± {:.2} [{:.2}, {:.2}]", c.mean, c.sd, c.lo, c.hi))
        }));
        s.push('\n');
    }
    s
}

/// Writes `seeds.md` and `seeds.json` into `dir`.
pub fn write(
    dir: &Path,
    paths: &[PathBuf],
    names: &[String],
    tasks: &[TaskSpread],
) -> Result<Vec<PathBuf>> {
    let md = dir.join("seeds.md");
    nest_core::fsutil::write_atomic(&md, markdown(names, tasks).as_bytes())?;
    let js = dir.join("seeds.json");
    let json = serde_json::json!({"reports": paths, "tasks": tasks});
    let text = serde_json::to_string_pretty(&json).map_err(|e| Error::Report(e.to_string()))?;
    nest_core::fsutil::write_atomic(&js, text.as_bytes())?;
    Ok(vec![md, js])
}
