//! The peers: plain PyTorch's step and sentence-transformers' epoch, timed by
//! scripts/bench/bench_train.py on the same data in the same run.

use std::path::Path;
use std::process::Command;

use super::TrainBench;
use crate::{Error, Result};

/// Runs scripts/bench/bench_train.py with `py` and parses the JSON line it ends with: for
/// `objective` `mrl` the step and sentence-transformers' epoch, for another (`2dmse`) the
/// step only (Nest's epoch is MRL's).
pub(super) fn run_python(
    py: &Path,
    a: &TrainBench,
    epoch_file: &Path,
    objective: &str,
    say: &mut dyn FnMut(String),
) -> Result<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench/bench_train.py");
    let epoch = match objective {
        "mrl" => " and sentence-transformers",
        _ => "",
    };
    say(format!(
        "  running PyTorch ({objective}){epoch} with {} ...",
        py.display()
    ));
    let out = Command::new(py)
        .arg(&script)
        .args(["--model", &a.model, "--data"])
        .arg(&a.data)
        .arg("--epoch-data")
        .arg(epoch_file)
        .args([
            "--batch-size",
            &a.batch_size.to_string(),
            "--max-length",
            &a.max_length.to_string(),
            "--dims",
            &a.dims,
            "--steps",
            &a.steps.to_string(),
            "--mini-batch-size",
            &a.mini_batch_size.to_string(),
        ])
        .args(["--objective", objective])
        .args((objective != "mrl").then_some("--no-epoch"))
        .args((a.dtype == nest_model::Dtype::Bf16).then_some("--bf16"))
        .args(&a.peer_args)
        .output()
        .map_err(|e| Error::io(format!("starting {}", py.display()), e))?;
    if !out.status.success() {
        return Err(Error::Peer(format!(
            "{} failed:\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| Error::Peer(format!("parsing '{line}': {e}")))?;
    Ok(v)
}
