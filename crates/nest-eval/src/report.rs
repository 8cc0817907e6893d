//! Evaluation reports: `report.json` (every cell, the model, data hashes, the command),
//! `report.md` (rows = dims, columns = layers, as in the papers' tables) and a heatmap per task.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// One task's scores over the grid.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskGrid {
    /// e.g. `stsb/test`.
    pub task: String,
    /// e.g. `sts`.
    pub kind: String,
    /// e.g. `spearman_x100`.
    pub metric: String,
    pub file: String,
    pub sha256: String,
    pub n_examples: usize,
    pub layers: Vec<usize>,
    pub dims: Vec<usize>,
    /// `scores[dim_index][layer_index]`.
    pub scores: Vec<Vec<f64>>,
}

impl TaskGrid {
    pub fn get(&self, layer: usize, dim: usize) -> Option<f64> {
        let li = self.layers.iter().position(|&l| l == layer)?;
        let di = self.dims.iter().position(|&d| d == dim)?;
        Some(self.scores[di][li])
    }
}

/// The model a report describes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModelInfo {
    pub path: String,
    pub architecture: String,
    pub num_layers: usize,
    pub hidden_size: usize,
    pub pooling: String,
    pub max_seq_length: usize,
}

/// A whole evaluation report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub nest_version: String,
    pub command: String,
    pub model: ModelInfo,
    pub tasks: Vec<TaskGrid>,
    pub seconds: f64,
}

impl Report {
    /// The Markdown tables, one per task.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let m = &self.model;
        let _ = writeln!(s, "# Nest evaluation report\n");
        let _ = writeln!(
            s,
            "Model `{}` ({}, {} layers x {} dims, {} pooling, max {} tokens). Command: `{}`. Time: {:.1} s.\n",
            m.path, m.architecture, m.num_layers, m.hidden_size, m.pooling, m.max_seq_length, self.command, self.seconds
        );
        for t in &self.tasks {
            let _ = writeln!(
                s,
                "## {} ({}, {} examples)\n",
                t.task, t.metric, t.n_examples
            );
            let _ = writeln!(s, "File `{}`, sha256 `{}`.\n", t.file, &t.sha256);
            let _ = write!(s, "| dim \\ layer |");
            for l in &t.layers {
                let _ = write!(s, " {l} |");
            }
            let _ = write!(s, "\n|---|");
            for _ in &t.layers {
                let _ = write!(s, "---:|");
            }
            s.push('\n');
            for (di, d) in t.dims.iter().enumerate() {
                let _ = write!(s, "| {d} |");
                for v in &t.scores[di] {
                    let _ = write!(s, " {v:.2} |");
                }
                s.push('\n');
            }
            s.push('\n');
        }
        s
    }

    /// Writes `report.json`, `report.md` and `heatmap-<task>.svg` into `dir`; returns the paths.
    pub fn write(&self, dir: &Path) -> Result<Vec<PathBuf>> {
        let json = serde_json::to_string_pretty(self).map_err(|e| Error::Report(e.to_string()))?;
        let mut written = Vec::new();
        let p = dir.join("report.json");
        nest_core::fsutil::write_atomic(&p, json.as_bytes())?;
        written.push(p);
        let p = dir.join("report.md");
        nest_core::fsutil::write_atomic(&p, self.markdown().as_bytes())?;
        written.push(p);
        for t in &self.tasks {
            let p = dir.join(format!("heatmap-{}.svg", t.task.replace(['/', ' '], "-")));
            crate::heatmap::write_svg(&p, t, &self.model.path)?;
            written.push(p);
        }
        Ok(written)
    }

    /// Reads a `report.json`.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| nest_core::Error::io(path, e))?;
        serde_json::from_str(&text).map_err(|e| Error::Report(format!("{}: {e}", path.display())))
    }
}

/// The grid as aligned text for the terminal.
pub fn grid_text(t: &TaskGrid) -> String {
    let mut s = format!(
        "{} ({}, n={})\n{:>8}",
        t.task, t.metric, t.n_examples, "dim\\layer"
    );
    for l in &t.layers {
        let _ = write!(s, "{l:>8}");
    }
    s.push('\n');
    for (di, d) in t.dims.iter().enumerate() {
        let _ = write!(s, "{d:>9}");
        for v in &t.scores[di] {
            let _ = write!(s, "{v:>8.2}");
        }
        s.push('\n');
    }
    s
}
