//! What a training run takes and gives back: its options and objective builder, its summary,
//! its progress events.

use std::path::PathBuf;

use nest_model::ElasticEncoder;
use tch::Device;

use crate::data::Padding;
use crate::objective::Objective;
use crate::recipe::Recipe;
use crate::Result;

/// How to run.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    pub run_dir: PathBuf,
    pub resume: bool,
    pub overwrite: bool,
    pub device: Device,
    /// Stop (as if interrupted) after this many optimizer steps of this process, leaving the
    /// checkpoints as they are: no final checkpoint, no export. For time-boxed runs and tests.
    pub stop_after_steps: Option<u64>,
    /// Resume a checkpoint written by another number of processes (not bit-exact then).
    pub allow_world_change: bool,
    /// Resume on training data other than the checkpoint's (refused otherwise: the plan from
    /// there on is the new data's).
    pub allow_data_change: bool,
}

impl TrainOptions {
    /// A fresh run in `run_dir` on `device`: refused where a run already is (neither `resume`
    /// nor `overwrite`), trained to its end (no `stop_after_steps`), never resumed under another
    /// number of processes (no `allow_world_change`) or on other data (no `allow_data_change`).
    /// The rest are public fields:
    /// `TrainOptions { resume: true, ..TrainOptions::new(dir, device) }`.
    pub fn new(run_dir: impl Into<PathBuf>, device: Device) -> Self {
        TrainOptions {
            run_dir: run_dir.into(),
            resume: false,
            overwrite: false,
            device,
            stop_after_steps: None,
            allow_world_change: false,
            allow_data_change: false,
        }
    }
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct Summary {
    pub steps: u64,
    pub final_dir: PathBuf,
    pub last_loss: f64,
    /// Tokens of epoch 0 with the recipe's batching, for the padding report.
    pub padding: Padding,
    /// The same without length batching.
    pub padding_unbatched: Padding,
    pub seconds: f64,
    /// Seconds from after the model is loaded to the end of the last step (data reading and
    /// tokenisation, training, periodic eval and checkpoints; not the final save).
    pub train_seconds: f64,
    pub resumed_from: Option<u64>,
    /// Whether this process wrote the run's files (the only process, or rank 0).
    pub main: bool,
}

/// Events for a progress display.
#[derive(Debug, Clone)]
pub enum Event {
    Start {
        total_steps: u64,
        resumed_from: Option<u64>,
    },
    Step {
        step: u64,
        loss: f64,
        lr: f64,
    },
    Eval {
        step: u64,
        summary: String,
    },
    Checkpoint {
        step: u64,
        path: PathBuf,
    },
    Message(String),
}

/// Builds a run's objective from the recipe and the loaded model; trainable parameters go
/// under the given path (optimised, checkpointed, never exported).
pub type ObjectiveBuilder<'a> =
    dyn Fn(&Recipe, &ElasticEncoder, &tch::nn::Path) -> Result<Box<dyn Objective>> + 'a;

/// The objective a recipe names ([`Recipe::build_objective`]).
pub(crate) fn recipe_objective(
    r: &Recipe,
    enc: &ElasticEncoder,
    params: &tch::nn::Path,
) -> Result<Box<dyn Objective>> {
    Ok(Box::new(r.build_objective(
        enc.output_dim(),
        enc.num_layers(),
        params,
        None,
    )?))
}
