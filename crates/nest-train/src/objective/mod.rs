//! Objectives: what a batch's encoder outputs are scored by. An [`Objective`] sees one forward
//! pass of every column (all layers' hidden states, optionally each layer's \[CLS\] attention
//! row), a [`StepContext`] for reproducible sampling, and its own trainable parameters
//! (registered at build time in a store the trainer optimises and checkpoints, never exported).
//! It returns **named loss terms**; composing methods is summing their terms ([`Composite`]).
//!
//! One file per method: `mrl` (Matryoshka), `two_d` (2DMSE, [`TwoDMse`]), `ese` (ESE /
//! Espresso, [`Ese`]), [`mipic`] (MIPIC's SIA and PIC), [`mic`] (MIC's SCR and SIR), [`distill`]
//! and [`hsic`] (IBKD's teacher matching and information bottleneck). [`quant`] scores every
//! task loss also on quantised vectors (quantization-aware training).
//!
//! Shared by the methods: what they read of a batch ([`Column`], [`BatchOutput`], in
//! `column.rs`), the task loss they wrap ([`TaskLoss`], `task_loss.rs`) and the weighted sum
//! of components ([`Composite`], `composite.rs`).

mod column;
mod component;
mod composite;
pub mod distill;
pub(crate) mod ese;
pub mod hsic;
pub mod mic;
pub mod mipic;
pub(crate) mod mrl;
pub mod quant;
pub(crate) mod registry;
mod task_loss;
mod teacher;
pub(crate) mod two_d;

use nest_model::ClsAttention;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tch::Tensor;

pub use column::{BatchOutput, Column, PooledLayer};
pub(crate) use component::BuildContext;
pub use composite::{Composite, Part};
pub use ese::{Ese, EseConfig};
pub(crate) use mrl::MrlConfig;
pub(crate) use registry::ObjectiveSpec;
pub use task_loss::{LossKind, TaskLoss};
pub use two_d::{TwoDConfig, TwoDMse};

/// Where a micro-batch stands: objectives draw their random choices (sampled layers, dims) from
/// [`StepContext::rng`], so the choices are a function of the seed and the micro-batch index and
/// replay exactly on resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepContext {
    /// Optimizer steps done before this micro-batch.
    pub step: u64,
    /// Index of this micro-batch in the whole run (across epochs).
    pub micro_batch: u64,
    /// The recipe's seed.
    pub seed: u64,
}

impl StepContext {
    /// A generator for this micro-batch; `salt` separates independent draws (e.g. layers vs
    /// dims, or two components of a composite).
    pub fn rng(&self, salt: u64) -> ChaCha8Rng {
        let mut r = ChaCha8Rng::seed_from_u64(self.seed ^ 0x6e65_7374_5f6f_626a);
        r.set_stream(salt);
        r.set_word_pos(u128::from(self.micro_batch) << 8);
        r
    }
}

/// A named loss term.
#[derive(Debug)]
pub struct Term {
    pub name: String,
    pub value: Tensor,
}

/// A training objective.
pub trait Objective {
    /// Short description for logs and `nest.json`.
    fn describe(&self) -> String;
    /// Loss terms for one micro-batch; the trainer minimises their sum.
    fn terms(&self, out: &BatchOutput, ctx: &StepContext) -> Vec<Term>;
    /// Prefix dims this objective trains (recorded in the saved model).
    fn trained_dims(&self) -> Vec<usize>;
    /// Exit layers this objective trains.
    fn trained_layers(&self, num_layers: usize) -> Vec<usize>;
    /// Whether the forward pass must also return \[CLS\]-row attention probabilities.
    fn attention(&self) -> ClsAttention {
        ClsAttention::None
    }
    /// Why this objective needs token-level states (not just pooled vectors), if it does:
    /// GradCache and data-parallel runs hand objectives pooled vectors only, and refuse it.
    fn reads_tokens(&self) -> Option<String> {
        (self.attention() != ClsAttention::None)
            .then(|| "it reads attention probabilities".to_string())
    }
    /// Values logged beside the terms (as `diag/<name>` in `metrics.jsonl`) but not part of
    /// the loss: what tells a user that a term is inert (e.g. a saturated kernel). Scalars
    /// left where they were computed (a recorded step writes them into its outputs; an eager
    /// one reads them back).
    fn diagnostics(&self, _out: &BatchOutput) -> Vec<(String, Tensor)> {
        Vec::new()
    }
    /// What this objective reads for each row besides the encoded columns, found on the host
    /// from the first column's texts in row order (a teacher's vectors of them: `[B, width]`,
    /// on the CPU), or `None`. The step hands them over on the device as
    /// [`BatchOutput::targets`]; a recorded step copies them into its static input before each
    /// replay, so the lookup stays outside the recording.
    fn targets(&self, _texts: &[&str]) -> Option<Tensor> {
        None
    }
    /// What fixes this micro-batch's terms, where something does: `Some(draws)` (the layers
    /// and dims drawn from the [`StepContext`]; empty when nothing is drawn) when
    /// [`Objective::terms`] runs the same tensor operations for every micro-batch with equal
    /// draws and reads nothing back to the host; `None` otherwise. Only such a step can be
    /// recorded as a CUDA graph, one per input shape and draws, and replayed
    /// ([`crate::trainer::GraphedStep`]).
    fn recorded_draws(&self, _ctx: &StepContext, _num_layers: usize) -> Option<Vec<usize>> {
        None
    }
}
/// Per-layer weight schemes for shallow layers; `i` is the 0-based layer index (layer `i + 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LayerWeighting {
    /// `1 / (1 + i)`: sentence-transformers' `AdaptiveLayerLoss`.
    Inverse,
    /// `1 / (1 + ln(1 + i))`: AnglE's ESE trainer.
    Log,
    /// 1.
    Uniform,
}

impl LayerWeighting {
    fn weight(self, i: usize) -> f64 {
        match self {
            LayerWeighting::Inverse => 1.0 / (1.0 + i as f64),
            LayerWeighting::Log => 1.0 / (1.0 + (1.0 + i as f64).ln()),
            LayerWeighting::Uniform => 1.0,
        }
    }
}
