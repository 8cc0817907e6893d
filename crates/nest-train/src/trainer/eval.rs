//! The periodic (layer x dim) STS grid of a training run.

use nest_eval::quantize::Precision;
use nest_eval::suite::{GridSpec, Progress};
use nest_eval::tasks::Task;
use nest_model::{ElasticEncoder, EncodeOptions};
use serde_json::json;

use crate::Result;

/// Runs the (layer x dim) STS grid on `task` and returns (log line JSON, summary text).
pub(crate) fn evaluate(
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
    };
    let res = nest_eval::suite::run(
        enc,
        std::slice::from_ref(task),
        &g,
        EncodeOptions { batch_size: 64 },
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
    let last = *layers.last().unwrap_or(&1);
    let row: Vec<String> = dims
        .iter()
        .map(|&d| {
            format!(
                "d{d} {:.2}",
                t.main(last, d, Precision::Float32).unwrap_or(f64::NAN)
            )
        })
        .collect();
    Ok((
        json!({ "task": t.task, "metric": t.main_metric, "cells": cells }),
        format!("{} L{last}: {}", t.task, row.join(", ")),
    ))
}
