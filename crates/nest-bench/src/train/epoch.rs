//! The epoch benchmark: one epoch over the benchmark's first pairs, the trainer as `nest train`
//! runs it.

use std::fmt::Write as _;
use std::path::Path;

use nest_train::trainer::{train, TrainOptions};
use nest_train::Recipe;

use super::{Setup, TrainBench};
use crate::{Error, Result};

/// One epoch over the first `epoch_pairs` pairs, the trainer as `nest train` runs it (written
/// to `epoch_file`): (training seconds, optimizer steps).
pub(super) fn epoch_benchmark(
    a: &TrainBench,
    s: &Setup,
    dir: &Path,
    say: &mut dyn FnMut(String),
) -> Result<(f64, u64)> {
    let epoch_file = dir.join("pairs.tsv");
    let mut text = String::from("anchor\tpositive\n");
    for p in s.pairs.iter().take(a.epoch_pairs) {
        let _ = writeln!(text, "{}\t{}", p.0, p.1);
    }
    std::fs::write(&epoch_file, text)
        .map_err(|e| Error::io(format!("writing {}", epoch_file.display()), e))?;
    let max_len = a.max_length.to_string();
    let extra = [
        ("warmup-ratio", "0.1"),
        ("decay", "linear"),
        ("max-length", &max_len),
        ("save-every", "0"),
        ("dtype", a.dtype.name()),
        ("cuda-graph", a.cuda_graph.name()),
    ];
    let recipe = Recipe::load(None, &s.overrides(a, &epoch_file, &extra))?;
    let opts = TrainOptions {
        overwrite: true,
        ..TrainOptions::new(dir.join("run"), nest_model::default_device())
    };
    let summary = train(&recipe, &opts, &mut |_| {})?;
    say(format!(
        "  nest epoch ({} pairs, {} steps): {:.1} s",
        a.epoch_pairs, summary.steps, summary.train_seconds
    ));
    Ok((summary.train_seconds, summary.steps))
}
