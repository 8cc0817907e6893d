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

mod component;
pub mod distill;
pub(crate) mod ese;
pub mod hsic;
pub mod mic;
pub mod mipic;
pub(crate) mod mrl;
pub mod quant;
pub(crate) mod registry;
mod teacher;
pub(crate) mod two_d;

use nest_model::{ClsAttention, Head, Pooling};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tch::Tensor;

use serde::{Deserialize, Serialize};

use crate::losses;

pub(crate) use component::BuildContext;
pub use ese::{Ese, EseConfig};
pub(crate) use mrl::MrlConfig;
pub(crate) use registry::ObjectiveSpec;
pub use two_d::{TwoDConfig, TwoDMse};

/// One encoded column of a batch (anchors, positives, negatives, or a SimCSE view).
#[derive(Debug)]
pub struct Column {
    /// Index 0 = embeddings, `l` = output of layer `l`: `[B, seq, hidden]` each.
    pub hidden: Vec<Tensor>,
    /// `[B, seq]`, 1 = token.
    pub mask: Tensor,
    pub pooling: Pooling,
    /// The model's Dense modules (IBKD's projection, section 3.4), applied after pooling.
    pub head: Head,
    /// Index `l - 1` = layer `l`'s \[CLS\]-row attention probabilities, when the objective asked
    /// for them ([`Objective::attention`]); empty otherwise.
    pub cls_attention: Vec<Tensor>,
    /// Sentence vectors pooled before the objective ran (GradCache chunks, or gathered from
    /// every process of a data-parallel run), index `l` = layer `l`; `hidden` and `mask` are
    /// then empty. Empty: pooled from `hidden` on demand.
    pub pooled: Vec<PooledLayer>,
}

/// One layer's sentence vectors of a whole (possibly global) batch.
#[derive(Debug)]
pub struct PooledLayer {
    /// Pooled token states: `[B, hidden]`.
    pub(crate) raw: Tensor,
    /// Through the Dense head when the model has one (else `raw` again): `[B, output_dim]`.
    pub(crate) out: Tensor,
}

impl Column {
    /// Sentence vectors at `layer`: pooled, through the Dense head if the model has one, not
    /// normalised: `[B, output_dim]`.
    pub fn pooled(&self, layer: usize) -> Tensor {
        if let Some(p) = self.pooled.get(layer) {
            return p.out.shallow_clone();
        }
        self.head.forward(&self.pooled_raw(layer))
    }

    /// Pooled token states at `layer`, without the Dense head: `[B, hidden]`.
    pub(crate) fn pooled_raw(&self, layer: usize) -> Tensor {
        if let Some(p) = self.pooled.get(layer) {
            return p.raw.shallow_clone();
        }
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
    /// Whether the model's pipeline ends with `Normalize` (what its users receive).
    pub normalize: bool,
    /// The first column's texts (e.g. for looking up a teacher's vectors).
    pub texts: Vec<String>,
}

impl BatchOutput {
    /// Every column's pooled vectors at `layer`.
    fn pooled(&self, layer: usize) -> Vec<Tensor> {
        self.columns.iter().map(|c| c.pooled(layer)).collect()
    }

    /// The embedding the model's users get at `layer` (pooled, L2-normalised when the model
    /// ends with `Normalize`), every column stacked: `[columns * B, hidden]`.
    fn output_embeddings(&self, layer: usize) -> Tensor {
        let all = Tensor::cat(&self.pooled(layer), 0);
        if self.normalize {
            nest_model::pooling::l2_normalize(&all)
        } else {
            all
        }
    }
}

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
    /// the loss: what tells a user that a term is inert (e.g. a saturated kernel).
    fn diagnostics(&self, _out: &BatchOutput) -> Vec<(String, f64)> {
        Vec::new()
    }
    /// Whether [`Objective::terms`] runs the same tensor operations at every step: nothing drawn
    /// from the [`StepContext`] (no sampled layers or dims), nothing read back to the host. Only
    /// such an objective's step can be recorded once as a CUDA graph and replayed
    /// ([`crate::trainer::GraphedStep`]).
    fn fixed_terms(&self) -> bool {
        false
    }
}

/// The task loss wrapped by the objective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossKind {
    /// MultipleNegativesRanking / InfoNCE with in-batch negatives (+ hard negatives).
    Mnrl,
    /// MNRL in both directions (anchor -> positive and positive -> anchor), averaged.
    MnrlSymmetric,
    /// CoSENT on scored pairs.
    Cosent,
    /// Unsupervised SimCSE: each sentence twice with different dropout masks, MNRL between them.
    Simcse,
    /// No task loss: the components score the batch themselves (e.g. `distill` + `hsic` on
    /// unlabeled texts, one forward pass per column).
    None,
}

/// A task loss on the embeddings of the batch's columns.
#[derive(Debug, Clone, Copy)]
pub struct TaskLoss {
    pub kind: LossKind,
    pub scale: f64,
    pub angle_weight: f64,
    /// Also score the loss on the quantised vectors (straight-through, [`quant`]); off by
    /// default.
    pub quantization: quant::Quantization,
}

impl TaskLoss {
    /// The loss on the columns as given plus, with [`TaskLoss::quantization`], its weight times
    /// the loss on each precision's straight-through quantised columns.
    ///
    /// # Shapes
    /// - `cols[k]`: `[B, d]` embeddings of column `k`; `scores`: `[B]` for CoSENT
    fn apply(&self, cols: &[Tensor], scores: Option<&Tensor>) -> Tensor {
        let q = self.quantization;
        let mut total = self.apply_float(cols, scores);
        for p in q.precisions() {
            let term = self.apply_at_scale(&quant::columns(cols, p), scores, self.scale_at(p));
            // not `+=`: see apply_float
            #[allow(clippy::assign_op_pattern)]
            let sum = total + term * q.weight;
            total = sum;
        }
        if q.binary && q.spread > 0.0 {
            let spread: Vec<Tensor> = cols.iter().map(losses::spread_out).collect();
            let mean = Tensor::stack(&spread, 0).mean(spread[0].kind());
            #[allow(clippy::assign_op_pattern)]
            let sum = total + mean * q.spread;
            total = sum;
        }
        total
    }

    /// The scale the term of precision `p` is scored at.
    fn scale_at(&self, p: quant::QuantPrecision) -> f64 {
        match (p, self.quantization.binary_scale) {
            (quant::QuantPrecision::Binary, Some(s)) => s,
            _ => self.scale,
        }
    }

    /// The loss on the columns as given (no quantisation).
    fn apply_float(&self, cols: &[Tensor], scores: Option<&Tensor>) -> Tensor {
        self.apply_at_scale(cols, scores, self.scale)
    }

    /// The loss on the columns as given, at `scale`.
    fn apply_at_scale(&self, cols: &[Tensor], scores: Option<&Tensor>, scale: f64) -> Tensor {
        let me = TaskLoss { scale, ..*self };
        me.apply_plain(cols, scores)
    }

    fn apply_plain(&self, cols: &[Tensor], scores: Option<&Tensor>) -> Tensor {
        match self.kind {
            LossKind::Mnrl => losses::mnrl(&cols[0], &cols[1], cols.get(2), self.scale),
            LossKind::MnrlSymmetric => {
                losses::mnrl_symmetric(&cols[0], &cols[1], cols.get(2), self.scale)
            }
            LossKind::Simcse => losses::simcse(&cols[0], &cols[1], self.scale),
            LossKind::None => unreachable!("build refuses task-loss components without a loss"),
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

    /// The task loss on the first `dim` coordinates of each column.
    ///
    /// # Shapes
    /// - `cols[k]`: `[B, hidden]`; returns a scalar
    fn at_dim(&self, cols: &[Tensor], dim: usize, scores: Option<&Tensor>) -> Tensor {
        let cut: Vec<Tensor> = cols.iter().map(|t| t.narrow(1, 0, dim as i64)).collect();
        self.apply(&cut, scores)
    }

    /// The loss's name in term names: e.g. `cosent`, `cosent+angle`, `mnrl+int8+binary`.
    fn name(&self) -> String {
        let mut n = self.float_name().to_string();
        for p in self.quantization.precisions() {
            n = format!("{n}+{}", p.name());
        }
        if self.quantization.binary && self.quantization.spread > 0.0 {
            n.push_str("+spread");
        }
        n
    }

    fn float_name(&self) -> &'static str {
        match self.kind {
            LossKind::Mnrl => "mnrl",
            LossKind::MnrlSymmetric => "mnrl-symmetric",
            LossKind::Simcse => "simcse",
            LossKind::Cosent if self.angle_weight > 0.0 => "cosent+angle",
            LossKind::Cosent => "cosent",
            LossKind::None => "none",
        }
    }
}

/// Several objectives summed, each with a weight; term names are prefixed with the component's
/// name when there is more than one.
pub struct Composite {
    pub parts: Vec<Part>,
}

/// One component of a [`Composite`].
pub struct Part {
    /// Prefix of its term names (the recipe's `kind`).
    pub name: String,
    /// Multiplies each of its terms.
    pub weight: f64,
    pub objective: Box<dyn Objective>,
}

impl Part {
    pub fn new(name: impl Into<String>, weight: f64, objective: Box<dyn Objective>) -> Self {
        Part {
            name: name.into(),
            weight,
            objective,
        }
    }
}

impl std::fmt::Debug for Composite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Objective for Composite {
    fn describe(&self) -> String {
        let parts: Vec<String> = self
            .parts
            .iter()
            .map(|p| {
                if p.weight == 1.0 {
                    p.objective.describe()
                } else {
                    format!("{} x {}", p.weight, p.objective.describe())
                }
            })
            .collect();
        parts.join(" + ")
    }

    fn fixed_terms(&self) -> bool {
        self.parts.iter().all(|p| p.objective.fixed_terms())
    }

    fn terms(&self, out: &BatchOutput, ctx: &StepContext) -> Vec<Term> {
        let many = self.parts.len() > 1;
        let mut all = Vec::new();
        for (
            k,
            Part {
                name,
                weight: w,
                objective: o,
            },
        ) in self.parts.iter().enumerate()
        {
            // each component draws from its own stream
            let c = StepContext {
                seed: ctx.seed.wrapping_add(k as u64 * 0x9e37_79b9),
                ..*ctx
            };
            for t in o.terms(out, &c) {
                all.push(Term {
                    name: if many {
                        format!("{name}/{}", t.name)
                    } else {
                        t.name
                    },
                    value: if *w == 1.0 { t.value } else { t.value * *w },
                });
            }
        }
        all
    }

    fn trained_dims(&self) -> Vec<usize> {
        let mut d: Vec<usize> = self
            .parts
            .iter()
            .flat_map(|p| p.objective.trained_dims())
            .collect();
        d.sort_unstable();
        d.dedup();
        d
    }

    fn trained_layers(&self, num_layers: usize) -> Vec<usize> {
        let mut l: Vec<usize> = self
            .parts
            .iter()
            .flat_map(|p| p.objective.trained_layers(num_layers))
            .collect();
        l.sort_unstable();
        l.dedup();
        l
    }

    fn reads_tokens(&self) -> Option<String> {
        self.parts.iter().find_map(|p| p.objective.reads_tokens())
    }

    fn diagnostics(&self, out: &BatchOutput) -> Vec<(String, f64)> {
        let many = self.parts.len() > 1;
        self.parts
            .iter()
            .flat_map(|p| {
                p.objective
                    .diagnostics(out)
                    .into_iter()
                    .map(|(n, v)| match many {
                        true => (format!("{}/{n}", p.name), v),
                        false => (n, v),
                    })
            })
            .collect()
    }

    fn attention(&self) -> ClsAttention {
        let asks: Vec<ClsAttention> = self.parts.iter().map(|p| p.objective.attention()).collect();
        if asks.contains(&ClsAttention::PerHead) {
            ClsAttention::PerHead
        } else if asks.contains(&ClsAttention::Mean) {
            ClsAttention::Mean
        } else {
            ClsAttention::None
        }
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
