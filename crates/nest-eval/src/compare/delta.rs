//! The sides of a comparison ([`Group`]) and what comparing them gives: per cell
//! ([`CellDelta`]) and per task and precision ([`TaskDelta`]).

use std::path::PathBuf;

use serde::Serialize;

use crate::quantize::Precision;
use crate::report::{Report, TaskResult};
use crate::significance::Test;
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

    pub(super) fn task(&self, name: &str) -> Option<Vec<&TaskResult>> {
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
    /// The other side's dim: `dim` unless the comparison pairs full vectors
    /// ([`super::DimPairing::Full`]).
    pub other_dim: usize,
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

    pub(super) fn all(&self) -> impl Iterator<Item = &CellDelta> {
        self.cells.iter().flatten().flatten()
    }

    pub(super) fn all_mut(&mut self) -> impl Iterator<Item = &mut CellDelta> {
        self.cells.iter_mut().flatten().flatten()
    }
}
