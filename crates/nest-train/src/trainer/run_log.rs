//! Where a run's progress is written: `metrics.jsonl` (one JSON line per optimizer step and per
//! evaluation, flushed at once) and, on the main process, the TensorBoard event file.
//!
//! In a data-parallel run rank 0 writes the run's `metrics.jsonl`; every other rank writes its
//! own `ranks/rank<r>.jsonl` (throughput, communication) and no event file.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::board::Board;
use crate::Result;

/// The open logs of one process of a run.
pub(crate) struct RunLog {
    path: PathBuf,
    file: File,
    board: Option<Board>,
}

impl RunLog {
    /// Opens (appending) this process's log under `run_dir`, first dropping the lines written
    /// after the step the run resumes from, or every line when it starts from step 0.
    pub(crate) fn open(
        run_dir: &Path,
        rank: Option<usize>,
        main: bool,
        resumed_at: Option<u64>,
    ) -> Result<RunLog> {
        let path = match rank {
            Some(r) if !main => {
                let dir = run_dir.join("ranks");
                std::fs::create_dir_all(&dir).map_err(|e| nest_core::Error::io(&dir, e))?;
                dir.join(format!("rank{r}.jsonl"))
            }
            _ => run_dir.join("metrics.jsonl"),
        };
        match resumed_at {
            Some(step) => trim_log(&path, step)?,
            // a run that starts over in a folder whose first attempt died before its first
            // checkpoint (`--resume` with nothing saved) keeps none of that attempt's lines
            None if path.exists() => nest_core::fsutil::write_atomic(&path, b"")?,
            None => {}
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| nest_core::Error::io(&path, e))?;
        let board = if main {
            Some(Board::open(run_dir)?)
        } else {
            None
        };
        Ok(RunLog { path, file, board })
    }

    /// One optimizer step's line (`step`, `loss`, `lr`, `grad_norm`, `terms`, and, in a
    /// data-parallel run, `comm_seconds` / `comm_bytes`); the board gets the same scalars.
    pub(crate) fn step(&mut self, line: &serde_json::Value) -> Result<()> {
        self.line(line)?;
        let Some(b) = &mut self.board else {
            return Ok(());
        };
        let step = line["step"].as_u64().unwrap_or(0);
        let mut scalars = Vec::new();
        for (key, tag) in [
            ("loss", "train/loss"),
            ("lr", "train/lr"),
            ("grad_norm", "train/grad_norm"),
            ("comm_seconds", "dist/comm_seconds"),
            ("comm_bytes", "dist/comm_bytes"),
        ] {
            if let Some(v) = line[key].as_f64() {
                scalars.push((tag.to_string(), v));
            }
        }
        b.write(step, &scalars)?;
        b.write_object(step, "terms", &line["terms"])
    }

    /// One evaluation's cells (the JSON that `eval::EvalGrid::run` returns).
    pub(crate) fn eval(&mut self, step: u64, cells: &serde_json::Value) -> Result<()> {
        self.line(&json!({"step": step, "eval": cells}))?;
        match &mut self.board {
            Some(b) => b.write_object(step, "eval", &cells["cells"]),
            None => Ok(()),
        }
    }

    fn line(&mut self, v: &serde_json::Value) -> Result<()> {
        writeln!(self.file, "{v}")
            .and_then(|_| self.file.flush())
            .map_err(|e| nest_core::Error::io(&self.path, e).into())
    }
}

/// Keeps the metrics log consistent with a resumed checkpoint: drops lines after `step` and any
/// half-written last line.
fn trim_log(path: &Path, step: u64) -> Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v["step"].as_u64())
                .is_some_and(|s| s <= step)
        })
        .collect();
    let mut out = kept.join("\n");
    if !out.is_empty() {
        out.push('\n');
    }
    nest_core::fsutil::write_atomic(path, out.as_bytes())?;
    Ok(())
}
