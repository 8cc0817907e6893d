//! The recipe's objective: its `[[objective]]` components (or MRL over `matryoshka_dims` when
//! there are none) built for one model through the registry
//! ([`crate::objective::registry`]), errors naming the recipe key.

use std::rc::Rc;

use super::{LossKind, ObjectiveSpec, Recipe};
use crate::objective::distill::TeacherTable;
use crate::objective::quant::QuantReport;
use crate::objective::{BuildContext, Composite, MrlConfig, Part, TaskLoss};
use crate::{Error, Result};

impl Recipe {
    /// One line per component that evidence says may hurt, naming the recipe key: what
    /// `nest train` prints when it starts.
    pub fn cautions(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .objective
            .iter()
            .enumerate()
            .filter_map(|(i, spec)| {
                let e = spec.component().evidence()?;
                Some(format!("note: objective[{i}] ({}): {e}", spec.kind()))
            })
            .collect();
        let q = self.quantization();
        if q.is_on() && !(q.binary_scale.is_some() && q.spread > 0.0) {
            notes.push(
                "note: quantization: on all-MiniLM-L6-v2 (MRL, STS-B, 120 steps, three seeds) the \
                 plain straight-through term made binary worse than plain MRL (-0.8 to -18 \
                 Spearman); with quantization = [\"binary\"], quantization_binary_scale = 5 and \
                 quantization_spread = 1 binary rose +0.9 to +10.9 (docs/TRAINING.md, \
                 \"Quantization-aware training\")"
                    .into(),
            );
        }
        notes
    }

    /// Whether a component needs the teacher's vectors (a `distill` term).
    pub(crate) fn uses_teacher(&self) -> bool {
        self.objective
            .iter()
            .any(|o| matches!(o, ObjectiveSpec::Distill(_)))
    }

    /// Builds the objective for a model with `hidden` output dims and `num_layers` layers.
    /// `params` is where components with trainable parameters register them (the trainer
    /// optimises and checkpoints that store; the exported model never holds it), each under its
    /// own `c{i}_{kind}` prefix; `teacher` is the teacher's vectors that `distill` components
    /// need.
    pub fn build_objective(
        &self,
        hidden: usize,
        num_layers: usize,
        params: &tch::nn::Path,
        teacher: Option<Rc<TeacherTable>>,
    ) -> Result<Composite> {
        let task = TaskLoss {
            kind: self.loss,
            scale: self.scale,
            angle_weight: self.angle_weight,
            quantization: self.quantization(),
        };
        let implicit = self.objective.is_empty();
        let specs = match implicit {
            true => vec![ObjectiveSpec::Mrl(MrlConfig {
                weight: 1.0,
                dims: Vec::new(),
                dim_weights: Vec::new(),
            })],
            false => self.objective.clone(),
        };
        let mut parts = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let bad = |message: String| Error::Recipe {
                source_name: match implicit {
                    true => "matryoshka_dims".into(),
                    false => format!("objective[{i}] ({})", spec.kind()),
                },
                message,
            };
            let c = spec.component();
            if c.uses_task_loss() && self.loss == LossKind::None {
                return Err(bad(
                    "needs a task loss, but the recipe's loss is \"none\"".into()
                ));
            }
            let cx = BuildContext {
                task,
                hidden,
                num_layers,
                default_dims: &self.matryoshka_dims,
                default_weights: &self.matryoshka_weights,
                params: params / format!("c{i}_{}", spec.kind()),
                teacher: teacher.clone(),
            };
            parts.push(Part::new(
                spec.kind(),
                c.weight(),
                c.build(&cx).map_err(bad)?,
            ));
        }
        self.add_quantization_report(&mut parts, task)?;
        Ok(Composite { parts })
    }

    /// With `quantization`, the component that logs the per-precision task losses (last, so
    /// that the other components keep their random streams); refused when no component scores
    /// the task loss it quantises.
    fn add_quantization_report(&self, parts: &mut Vec<Part>, task: TaskLoss) -> Result<()> {
        let quantization = task.quantization;
        if !quantization.is_on() {
            return Ok(());
        }
        let scored = self.objective.is_empty()
            || self
                .objective
                .iter()
                .any(|s| s.component().uses_task_loss());
        if !scored {
            return Err(Error::Recipe {
                source_name: "quantization".into(),
                message: "no objective component scores the task loss that it quantises \
                          (mrl, 2dmse and ese do)"
                    .into(),
            });
        }
        let mut dims: Vec<usize> = parts
            .iter()
            .flat_map(|p| p.objective.trained_dims())
            .collect();
        dims.sort_unstable();
        dims.dedup();
        let task = TaskLoss {
            quantization: Default::default(),
            ..task
        };
        let report = QuantReport {
            task,
            quantization,
            dims,
        };
        parts.push(Part::new("quantization", 1.0, Box::new(report)));
        Ok(())
    }
}
