//! The periodic (layer x dim) STS grid of a training run.

use nest_eval::quantize::Precision;
use nest_eval::suite::{GridSpec, Progress};
use nest_eval::tasks::{Task, TaskSource};
use nest_model::prompt::TaskPrompts;
use nest_model::{ElasticEncoder, EncodeOptions};
use serde_json::json;

use crate::{Recipe, Result};

/// A run's evaluation: the recipe's `eval_data` task over its (layer x dim) grid.
pub(crate) struct EvalGrid {
    task: Task,
    layers: Vec<usize>,
    dims: Vec<usize>,
}

impl EvalGrid {
    /// The recipe's evaluation (absent without `eval_data`); the grid is checked either way,
    /// so a bad `eval_dims` fails before training.
    pub(crate) fn load(
        r: &Recipe,
        enc: &ElasticEncoder,
        trained_dims: Vec<usize>,
    ) -> Result<Option<EvalGrid>> {
        let (layers, dims) = grid(r, enc, trained_dims)?;
        if r.eval_data.is_empty() {
            return Ok(None);
        }
        let task = Task::load(&TaskSource::Sts(r.eval_data.clone().into()))?;
        Ok(Some(EvalGrid { task, layers, dims }))
    }

    /// Runs the grid: (log line JSON, summary text).
    pub(crate) fn run(&self, enc: &ElasticEncoder) -> Result<(serde_json::Value, String)> {
        evaluate(enc, &self.task, &self.layers, &self.dims)
    }
}

/// Runs the (layer x dim) STS grid on `task` and returns (log line JSON, summary text).
fn evaluate(
    enc: &ElasticEncoder,
    task: &Task,
    layers: &[usize],
    dims: &[usize],
) -> Result<(serde_json::Value, String)> {
    let g = GridSpec {
        layers: layers.to_vec(),
        dims: dims.to_vec(),
        precisions: vec![Precision::Float32],
        rescore: 0,
        logreg: Default::default(),
        adaptor: None,
        items: false,
        // STS texts read with the model's default prompt, as `nest eval` reads them
        prompts: TaskPrompts {
            text: enc.prompts.default_prompt().map(str::to_string),
            ..Default::default()
        },
    };
    let res = nest_eval::suite::run(
        enc,
        std::slice::from_ref(task),
        &g,
        EncodeOptions::batch(64),
        &mut |_: Progress| {},
    )?;
    let t = &res[0];
    let mut cells = serde_json::Map::new();
    for c in &t.cells {
        cells.insert(
            format!("L{}/d{}", c.layer, c.dim),
            json!(c.metrics[&t.main_metric]),
        );
    }
    // every layer evaluated, one after the other (it printed the last layer's alone, the
    // others only in metrics.jsonl)
    let row = |l: usize| -> String {
        let cells: Vec<String> = dims
            .iter()
            .map(|&d| {
                let v = t.main(l, d, Precision::Float32).unwrap_or(f64::NAN);
                format!("d{d} {v:.2}")
            })
            .collect();
        format!("L{l}: {}", cells.join(", "))
    };
    let rows: Vec<String> = layers.iter().map(|&l| row(l)).collect();
    Ok((
        json!({ "task": t.task, "metric": t.main_metric, "cells": cells }),
        format!("{} {}", t.task, rows.join(" | ")),
    ))
}

/// The recipe's evaluation grid: `eval_layers` (default: the last layer) and `eval_dims`
/// (default: the objective's trained dims), parsed and range-checked through
/// `nest_model::point`, errors naming the recipe key.
fn grid(
    r: &Recipe,
    enc: &ElasticEncoder,
    trained_dims: Vec<usize>,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let layers = match r.eval_layers.is_empty() {
        true => vec![enc.num_layers()],
        false => nest_core::parse_layers(&r.eval_layers).map_err(|e| e.with_key("eval_layers"))?,
    };
    let dims = match r.eval_dims.is_empty() {
        true => trained_dims,
        false => nest_core::parse_dims(&r.eval_dims).map_err(|e| e.with_key("eval_dims"))?,
    };
    let keys = nest_model::Keys {
        layer: "eval_layers",
        dim: "eval_dims",
    };
    nest_model::Offer::new(enc, None)?
        .resolve_grid(Some(layers), Some(dims), keys)
        .map_err(nest_model::Error::from)
        .map_err(Into::into)
}
