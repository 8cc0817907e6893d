//! Objectives: what a batch's encoder outputs are scored by. An [`Objective`] sees every
//! column's hidden states (all layers) and returns **named loss terms**, so later methods (2DMSE,
//! MIPIC, MIC, IBKD) add terms without touching the training loop.

use nest_model::Pooling;
use tch::Tensor;

use crate::losses;
use crate::recipe::LossKind;

/// One encoded column of a batch (anchors, positives, negatives, or a SimCSE view).
#[derive(Debug)]
pub struct Column {
    /// Index 0 = embeddings, `l` = output of layer `l`: `[B, seq, hidden]` each.
    pub hidden: Vec<Tensor>,
    /// `[B, seq]`, 1 = token.
    pub mask: Tensor,
    pub pooling: Pooling,
}

impl Column {
    /// Pooled sentence vectors at `layer`: `[B, hidden]`.
    pub fn pooled(&self, layer: usize) -> Tensor {
        self.pooling.pool(&self.hidden[layer], &self.mask)
    }
}

/// What an objective sees for one batch.
#[derive(Debug)]
pub struct BatchOutput {
    pub columns: Vec<Column>,
    /// Gold scores of scored pairs: `[B]`.
    pub scores: Option<Tensor>,
    /// Layers the encoder ran (the last index of `hidden`).
    pub layers: usize,
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
    /// Loss terms for one batch; the trainer minimises their sum.
    fn terms(&self, out: &BatchOutput) -> Vec<Term>;
    /// Prefix dims this objective trains (recorded in the saved model).
    fn trained_dims(&self) -> Vec<usize>;
    /// Exit layers this objective trains.
    fn trained_layers(&self, num_layers: usize) -> Vec<usize>;
}

/// A task loss on the embeddings of the batch's columns.
#[derive(Debug, Clone, Copy)]
pub struct TaskLoss {
    pub kind: LossKind,
    pub scale: f64,
    pub angle_weight: f64,
}

impl TaskLoss {
    /// # Shapes
    /// - `cols[k]`: `[B, d]` embeddings of column `k`; `scores`: `[B]` for CoSENT
    pub fn apply(&self, cols: &[Tensor], scores: Option<&Tensor>) -> Tensor {
        match self.kind {
            LossKind::Mnrl => losses::mnrl(&cols[0], &cols[1], cols.get(2), self.scale),
            LossKind::MnrlSymmetric => {
                losses::mnrl_symmetric(&cols[0], &cols[1], cols.get(2), self.scale)
            }
            LossKind::Simcse => losses::simcse(&cols[0], &cols[1], self.scale),
            LossKind::Cosent => {
                let gold = scores.expect("scored pairs carry scores");
                let mut l = losses::cosent(&cols[0], &cols[1], gold, self.scale);
                if self.angle_weight > 0.0 {
                    // not `+=`: an in-place add would modify logsumexp's output, which its backward reads
                    #[allow(clippy::assign_op_pattern)]
                    let sum =
                        l + losses::angle(&cols[0], &cols[1], gold, self.scale) * self.angle_weight;
                    l = sum;
                }
                l
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self.kind {
            LossKind::Mnrl => "mnrl",
            LossKind::MnrlSymmetric => "mnrl-symmetric",
            LossKind::Simcse => "simcse",
            LossKind::Cosent if self.angle_weight > 0.0 => "cosent+angle",
            LossKind::Cosent => "cosent",
        }
    }
}

/// Matryoshka Representation Learning (Kusupati et al. 2022; MIPIC paper eq. (1)):
/// `L = sum_m w_m * L_task(z[:, :d_m])` at the last layer, one forward pass serving every dim
/// (each prefix is sliced and re-normalised inside the task loss).
#[derive(Debug, Clone)]
pub struct Matryoshka {
    pub task: TaskLoss,
    pub dims: Vec<usize>,
    pub weights: Vec<f64>,
}

impl Objective for Matryoshka {
    fn describe(&self) -> String {
        format!("mrl({}) dims {:?}", self.task.name(), self.dims)
    }

    fn terms(&self, out: &BatchOutput) -> Vec<Term> {
        let full: Vec<Tensor> = out.columns.iter().map(|c| c.pooled(out.layers)).collect();
        self.dims
            .iter()
            .zip(&self.weights)
            .map(|(&d, &w)| {
                let cols: Vec<Tensor> = full.iter().map(|t| t.narrow(1, 0, d as i64)).collect();
                Term {
                    name: format!("{}@{d}", self.task.name()),
                    value: self.task.apply(&cols, out.scores.as_ref()) * w,
                }
            })
            .collect()
    }

    fn trained_dims(&self) -> Vec<usize> {
        self.dims.clone()
    }

    fn trained_layers(&self, num_layers: usize) -> Vec<usize> {
        vec![num_layers]
    }
}
