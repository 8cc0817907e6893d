//! Teacher -> student distillation on cached teacher vectors (`IBKD.md` section 3.1 and
//! stage 1 of section 3.3; the baselines of section 4.2).
//!
//! Paper: "Text Representation Distillation via Information Bottleneck Principle" (Zhang, Long,
//! Li and Xie, EMNLP 2023, arXiv:2311.05472), eq. 3-5 (InfoNCE towards the teacher).
//!
//! - `loss = "infonce"`: eq. 3-5, InfoNCE between the student mapped into the teacher's space
//!   by a learnable `W` and the teacher, other texts of the batch as negatives. As the authors'
//!   code (`Alibaba-NLP/IBKD`, `simcse/models_unsup.py`) does, `W` is a linear layer (with bias)
//!   from the student's to the teacher's dims and the similarity is the cosine over `tau`
//!   (Table 1: 0.1). With `beta = 0` (no `hsic` component) this is the CRD-style contrastive
//!   baseline.
//! - `loss = "mse"`: the MSE baseline (Kim and Rush 2016), `||W s - t||^2`.
//!
//! With several `dims`, each prefix `s[:d]` gets its own `W_d` and the losses are summed: a
//! Matryoshka student (beyond the paper). The `W`s live in the objective's parameter store:
//! optimised, checkpointed and resumed, never exported (`map = "learned"`, the default).
//!
//! `map = "identity"` matches the student's output to the teacher directly, with no `W` of its
//! own: the student's output must then be as wide as the teacher's, which a stage-1 recipe gets
//! from `projection = <teacher dim>` (the model's Dense head, `[I; 0]` start, no bias). `W` is
//! then that head: trained with the encoder, exported as `2_Dense`, kept through stage 2, and
//! what `nest eval` scores is `W s`, as the authors' released code evaluates the student.

use serde::{Deserialize, Serialize};
use tch::nn::{self, Module};
use tch::{Kind, Tensor};

use super::component::{increasing, BuildContext, Component};
use super::{BatchOutput, Objective, StepContext, Term};
use crate::losses;

pub use super::teacher::TeacherTable;

fn one() -> f64 {
    1.0
}
fn tenth() -> f64 {
    0.1
}

/// How the student is matched to the teacher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum DistillLoss {
    Infonce,
    Mse,
}

fn infonce() -> DistillLoss {
    DistillLoss::Infonce
}

/// Where the student's vector is mapped into the teacher's space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum DistillMap {
    /// A `W_d` per dim in the objective (not exported): `nest eval` scores `s`.
    #[default]
    Learned,
    /// No map: the student's output (through its Dense head, if any) is the teacher-space
    /// vector, and `nest eval` scores it.
    Identity,
}

/// The keys of a `[[objective]]` table with `kind = "distill"` (only `nest distill`, which
/// supplies the teacher's vectors, can build it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DistillConfig {
    #[serde(default = "one")]
    weight: f64,
    #[serde(default = "infonce")]
    loss: DistillLoss,
    /// `tau` of the InfoNCE (Table 1, stage 1: 0.1).
    #[serde(default = "tenth")]
    temperature: f64,
    /// Student prefix dims matched to the teacher; empty = the student's full dim.
    #[serde(default)]
    dims: Vec<usize>,
    /// `learned` (a `W_d` per dim in the objective) or `identity` (the student's output is
    /// matched as it is; with `projection`, the model's own head is `W`).
    #[serde(default)]
    map: DistillMap,
}

/// InfoNCE through `W` (eq. 5 with the authors' cosine): `CE(cos(W s_i, t_j) / tau, i)`.
///
/// # Shapes
/// - `mapped`: `[B, teacher dim]` = `W s`; `teacher`: `[B, teacher dim]`; returns a scalar
pub fn infonce_to_teacher(mapped: &Tensor, teacher: &Tensor, tau: f64) -> Tensor {
    losses::mnrl(mapped, teacher, None, 1.0 / tau)
}

/// The distillation component.
#[derive(Debug)]
struct Distill {
    config: DistillConfig,
    dims: Vec<usize>,
    /// One `W_d` per dim; empty with `map = "identity"`.
    maps: Vec<nn::Linear>,
    teacher: std::rc::Rc<TeacherTable>,
}

impl Distill {
    /// Registers one `W_d` (`d -> teacher dim`, PyTorch's default start) per dim under
    /// `params`.
    fn new(
        config: DistillConfig,
        dims: Vec<usize>,
        teacher: std::rc::Rc<TeacherTable>,
        params: &nn::Path,
    ) -> Self {
        let t = teacher.dim() as i64;
        let maps = match config.map {
            DistillMap::Learned => dims
                .iter()
                .map(|&d| nn::linear(params / format!("w{d}"), d as i64, t, Default::default()))
                .collect(),
            DistillMap::Identity => Vec::new(),
        };
        Distill {
            config,
            dims,
            maps,
            teacher,
        }
    }
}

impl Objective for Distill {
    fn describe(&self) -> String {
        format!(
            "distill({:?}{}) student dims {:?} -> teacher {}{}",
            self.config.loss,
            if self.config.loss == DistillLoss::Infonce {
                format!(", tau {}", self.config.temperature)
            } else {
                String::new()
            },
            self.dims,
            self.teacher.dim(),
            match self.config.map {
                DistillMap::Learned => "",
                DistillMap::Identity => " (no map: the student's output is W s)",
            }
        )
    }

    /// The teacher's vectors of the batch's texts (looked up on the host, outside a recorded
    /// step).
    fn targets(&self, texts: &[&str]) -> Option<Tensor> {
        // a text outside the table is a bug in the caller (nest distill embeds every training
        // text first), not bad input
        let t = self
            .teacher
            .lookup(texts)
            .unwrap_or_else(|t| panic!("the teacher table lacks the training text {t:?}"));
        Some(t)
    }

    /// Nothing drawn, nothing read back: the teacher's rows come in as the step's targets.
    fn recorded_draws(&self, _ctx: &StepContext, _num_layers: usize) -> Option<Vec<usize>> {
        Some(Vec::new())
    }

    fn terms(&self, out: &BatchOutput, _ctx: &StepContext) -> Vec<Term> {
        let s = out.columns[0].pooled(out.layers);
        let t = out
            .targets
            .as_ref()
            .expect("the step hands a distill component its teacher's vectors")
            .to_kind(s.kind());
        self.dims
            .iter()
            .enumerate()
            .map(|(i, &d)| {
                let prefix = s.narrow(1, 0, d as i64);
                let mapped = match self.maps.get(i) {
                    Some(w) => w.forward(&prefix),
                    None => prefix,
                };
                let value = match self.config.loss {
                    DistillLoss::Infonce => {
                        infonce_to_teacher(&mapped, &t, self.config.temperature)
                    }
                    DistillLoss::Mse => (mapped - &t).square().mean(None::<Kind>),
                };
                Term {
                    name: format!("{:?}@{d}", self.config.loss).to_lowercase(),
                    value,
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

impl Component for DistillConfig {
    fn weight(&self) -> f64 {
        self.weight
    }

    fn validate(&self) -> Result<(), String> {
        if !self.dims.is_empty() {
            increasing(&self.dims, &[])?;
        }
        if self.temperature.is_nan() || self.temperature <= 0.0 {
            return Err("temperature must be > 0".into());
        }
        if self.temperature < 1e-3 {
            // (1e-9 trained on at a loss of 34 million, nothing said: helper trial E)
            return Err(format!(
                "temperature {:e} is below 0.001: the similarities are divided by it, so the \
                 logits would reach {:.0e} (IBKD uses 0.1; 0.01 to 1 is the usual range)",
                self.temperature,
                1.0 / self.temperature
            ));
        }
        Ok(())
    }

    /// The dims default to the full width (not the recipe's `matryoshka_dims`).
    fn build(&self, cx: &BuildContext) -> Result<Box<dyn Objective>, String> {
        let table = cx
            .teacher
            .clone()
            .ok_or("needs a teacher's vectors: run it with `nest distill`")?;
        let dims = match self.dims.is_empty() {
            true => vec![cx.hidden],
            false => self.dims.clone(),
        };
        cx.in_range(&dims)?;
        if self.map == DistillMap::Identity && dims != [table.dim()] {
            return Err(format!(
                "map = \"identity\" matches the student's vector to the teacher's as it is, so \
                 it needs dims = [{t}] (the teacher's width; got {dims:?}) and a student that \
                 wide: add `projection = {t}` to the stage (a Dense head, the W the model keeps)",
                t = table.dim()
            ));
        }
        Ok(Box::new(Distill::new(
            self.clone(),
            dims,
            table,
            &cx.params,
        )))
    }
}
