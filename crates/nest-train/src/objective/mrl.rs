//! Matryoshka Representation Learning at the last layer.
//!
//! Paper: "Matryoshka Representation Learning" (Kusupati et al. 2022, arXiv:2205.13147),
//! section 3: the task loss summed over the nested prefix dims, each weighted `c_m`.

use serde::{Deserialize, Serialize};

use super::component::{increasing, BuildContext, Component};
use super::{BatchOutput, Objective, StepContext, TaskLoss, Term};

fn one() -> f64 {
    1.0
}

/// The keys of a `[[objective]]` table with `kind = "mrl"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MrlConfig {
    /// Weight of the whole component in a composite objective.
    #[serde(default = "one")]
    pub(crate) weight: f64,
    /// Prefix dims (increasing); empty = the recipe's `matryoshka_dims`, or the full dim.
    #[serde(default)]
    pub(crate) dims: Vec<usize>,
    /// One weight per dim; empty = the recipe's `matryoshka_weights`, or all 1.
    #[serde(default)]
    pub(crate) dim_weights: Vec<f64>,
}

/// Matryoshka Representation Learning (Kusupati et al. 2022; MIPIC paper eq. (1)):
/// `L = sum_m w_m * L_task(z[:, :d_m])` at the last layer, one forward pass serving every dim
/// (each prefix is sliced and re-normalised inside the task loss).
#[derive(Debug, Clone)]
struct Matryoshka {
    task: TaskLoss,
    dims: Vec<usize>,
    weights: Vec<f64>,
}

impl Objective for Matryoshka {
    fn describe(&self) -> String {
        format!("mrl({}) dims {:?}", self.task.name(), self.dims)
    }

    fn terms(&self, out: &BatchOutput, _ctx: &StepContext) -> Vec<Term> {
        let full = out.pooled(out.layers);
        self.dims
            .iter()
            .zip(&self.weights)
            .map(|(&d, &w)| Term {
                name: format!("{}@{d}", self.task.name()),
                value: self.task.at_dim(&full, d, out.scores.as_ref()) * w,
            })
            .collect()
    }

    fn trained_dims(&self) -> Vec<usize> {
        self.dims.clone()
    }

    fn trained_layers(&self, num_layers: usize) -> Vec<usize> {
        vec![num_layers]
    }

    fn recorded_draws(&self, _ctx: &StepContext, _num_layers: usize) -> Option<Vec<usize>> {
        Some(Vec::new())
    }
}

impl Component for MrlConfig {
    fn weight(&self) -> f64 {
        self.weight
    }

    fn uses_task_loss(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), String> {
        increasing(&self.dims, &self.dim_weights)
    }

    fn build(&self, cx: &BuildContext) -> Result<Box<dyn Objective>, String> {
        let (dims, w) = cx.dims(&self.dims, &self.dim_weights)?;
        let weights = if w.is_empty() {
            vec![1.0; dims.len()]
        } else {
            w
        };
        Ok(Box::new(Matryoshka {
            task: cx.task,
            dims,
            weights,
        }))
    }
}
