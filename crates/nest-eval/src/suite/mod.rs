//! The grid runner: every distinct text of every task is embedded once (all requested layers in
//! one forward pass), then each (layer, dim, precision) cell of each task is derived from those
//! cached pooled vectors: prefix -> L2-normalise -> quantise -> task protocol.
//!
//! `spec.rs` holds what is asked, `texts.rs` the text cache and `space.rs` a cell's vectors;
//! each task's rows in the cache and a cell's metrics are its family's (see `family/`);
//! this file runs them in order.

use std::time::Instant;

use nest_model::{ElasticEncoder, EncodeOptions};

use crate::family::{At, Rows};
use crate::report::{Cell, FileRef, TaskResult};
use crate::tasks::Task;
use crate::Result;

pub(crate) mod space;
mod spec;
pub(crate) mod texts;

pub use spec::{GridSpec, Progress};
use texts::TextIndex;

/// Runs every task over the grid.
pub fn run(
    encoder: &ElasticEncoder,
    tasks: &[Task],
    g: &GridSpec,
    opts: EncodeOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Vec<TaskResult>> {
    encoder.check(&g.layers, &g.dims)?;
    let mut index = TextIndex::default();
    let rows: Vec<Box<dyn Rows>> = tasks
        .iter()
        .map(|t| t.data.rows(&mut index, &g.prompts))
        .collect();
    let pooled = index.embed(encoder, &g.layers, opts, progress)?;
    let _guard = tch::no_grad_guard();
    let mut out = Vec::with_capacity(tasks.len());
    for (task, r) in tasks.iter().zip(&rows) {
        let start = Instant::now();
        let n_cells = g.layers.len() * g.dims.len() * g.precisions.len();
        let mut cells = Vec::with_capacity(n_cells);
        for (li, &layer) in g.layers.iter().enumerate() {
            for &dim in &g.dims {
                for &precision in &g.precisions {
                    let at = At {
                        pooled: &pooled[li],
                        dim,
                        precision,
                        grid: g,
                    };
                    let (metrics, items) = r.score(&at);
                    cells.push(Cell {
                        layer,
                        dim,
                        precision,
                        metrics,
                        items: g.items.then_some(items),
                    });
                    progress(Progress::Cells {
                        task: &task.name,
                        done: cells.len(),
                        total: n_cells,
                    });
                }
            }
        }
        let files = task
            .files
            .iter()
            .map(|p| FileRef {
                path: p.display().to_string(),
                sha256: nest_core::fsutil::sha256_file(p).unwrap_or_default(),
            })
            .collect();
        out.push(TaskResult {
            task: task.name.clone(),
            kind: task.kind,
            main_metric: task.kind.main_metric().into(),
            files,
            n_examples: r.n_examples(),
            warnings: task.warnings.clone(),
            seconds: start.elapsed().as_secs_f64(),
            cells,
            gold: if g.items { r.gold() } else { None },
        });
    }
    Ok(out)
}

/// A whole evaluation of a loaded model as `nest eval` runs it: the grid ([`run`]), the encode
/// latency per layer on up to `latency_texts` texts, and the report that records them (what
/// `report.json` holds). `path` names the model in the report, `command` how it was run.
// eight arguments: each is one of `nest eval`'s settings, and the Python package calls this too
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    path: &str,
    command: String,
    model: &ElasticEncoder,
    tasks: &[Task],
    g: &GridSpec,
    latency_texts: usize,
    opts: EncodeOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<crate::Report> {
    let start = Instant::now();
    let results = run(model, tasks, g, opts, progress)?;
    let costs = crate::report::Costs::measure(model, tasks, &g.layers, latency_texts, opts)?;
    Ok(crate::Report {
        nest_version: env!("CARGO_PKG_VERSION").into(),
        command,
        model: crate::report::ModelInfo {
            prompts: g.prompts.clone(),
            ..crate::report::ModelInfo::of(path, model)
        },
        layers: g.layers.clone(),
        dims: g.dims.clone(),
        precisions: g.precisions.clone(),
        rescore: g
            .precisions
            .contains(&crate::quantize::Precision::Binary)
            .then_some(g.rescore),
        costs,
        tasks: results,
        seconds: start.elapsed().as_secs_f64(),
    })
}
