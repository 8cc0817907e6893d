//! Training steps of several objectives on one model and the same batches, through the trainer's
//! own micro-step and update: what `nest bench train` times. Not a training run (no data plan,
//! no schedule, no checkpoints): the learning rate is constant and each step's seed is its index.

use std::rc::Rc;

use nest_model::ElasticEncoder;
use tch::nn::VarStore;

use super::graphed::{GraphMode, GraphedStep, StepSpec};
use super::spread::{spread_micro_step, Spread};
use super::step::apply_update;
use crate::data::{Batch, Source};
use crate::objective::distill::TeacherTable;
use crate::objective::{Objective, StepContext};
use crate::optim::AdamW;
use crate::recipe::{DataFormat, DataSource, Recipe};
use crate::{Error, Result};
use nest_model::graph::{Budget, Reserved};

/// Steps of each recipe's objective on one encoder, one AdamW over the encoder's weights and
/// every objective's own parameters (as in training).
pub struct StepTimer {
    enc: ElasticEncoder,
    objectives: Vec<Box<dyn Objective>>,
    recipes: Vec<Recipe>,
    /// The objectives' parameters (the optimizer has their tensors).
    params: VarStore,
    opt: AdamW,
    lr: f64,
    graphs: GraphedStep,
    /// The last step's terms and diagnostics (`diag/...`), as a run logs them.
    last: Vec<(String, f64)>,
}

impl StepTimer {
    /// One objective per recipe, built as `nest train` builds it on `enc` (the recipes' model,
    /// data and schedule keys are not read); `teacher` for the objectives that need one.
    pub fn new(
        enc: ElasticEncoder,
        recipes: Vec<Recipe>,
        teacher: Option<Rc<TeacherTable>>,
        lr: f64,
    ) -> Result<StepTimer> {
        let params = VarStore::new(enc.device());
        let objectives = recipes
            .iter()
            .enumerate()
            .map(|(i, r)| -> Result<Box<dyn Objective>> {
                let path = params.root() / format!("objective{i}");
                Ok(Box::new(r.build_objective(
                    enc.output_dim(),
                    enc.num_layers(),
                    &path,
                    teacher.clone(),
                )?))
            })
            .collect::<Result<Vec<_>>>()?;
        let weight_decay = recipes.first().map_or(0.01, |r| r.weight_decay);
        let mut named: Vec<(String, tch::Tensor)> = enc.vs.variables().into_iter().collect();
        named.extend(params.variables());
        Ok(StepTimer {
            opt: AdamW::new(named, weight_decay),
            enc,
            objectives,
            recipes,
            params,
            lr,
            graphs: GraphedStep::new(GraphMode::Off),
            last: Vec::new(),
        })
    }

    pub fn encoder(&self) -> &ElasticEncoder {
        &self.enc
    }

    /// The objectives' own trained tensors (e.g. distillation's maps `W`), by name.
    pub fn objective_variables(&self) -> std::collections::HashMap<String, tch::Tensor> {
        self.params.variables()
    }

    /// Records steps as CUDA graphs per shape (see [`GraphedStep`]); `Off` by default.
    pub fn set_graph_mode(&mut self, mode: GraphMode) {
        self.graphs = GraphedStep::new(mode);
    }

    /// Records into pools of this budget from now on (the steps' and the GradCache chunks'),
    /// the process's bytes read by `reserved`: what a GPU's pools do, for tests on the CPU.
    pub fn set_graph_budget(&mut self, budget: Budget, reserved: Reserved) {
        let dev = self.encoder().device();
        self.graphs.set_budget(dev, budget, reserved);
    }

    /// The last step's named terms and diagnostics (`diag/<name>`), as `metrics.jsonl` has
    /// them.
    pub fn last_terms(&self) -> &[(String, f64)] {
        &self.last
    }

    /// How many shapes have a recorded step, and why recording stopped if it did.
    pub fn graph_report(&self) -> (usize, Option<&str>) {
        (self.graphs.recorded(), self.graphs.failure())
    }

    /// One optimizer step of objective `o` on `pairs` (anchor, positive), tokenisation
    /// included, in GradCache chunks when the recipe has a `mini_batch_size`; returns the
    /// anchors' and the positives' lengths in tokens.
    pub fn step(
        &mut self,
        o: usize,
        pairs: &[(String, String)],
        step: u64,
    ) -> Result<[Vec<usize>; 2]> {
        let src = pairs_source(&self.enc, pairs)?;
        let batch = Batch {
            source: 0,
            examples: (0..pairs.len()).collect(),
        };
        let r = &self.recipes[o];
        let ctx = StepContext {
            step,
            micro_batch: step,
            seed: r.seed,
        };
        let non_finite = |value| Error::NonFinite {
            what: "gradient norm",
            step: step + 1,
            value,
            last_checkpoint: "(a benchmark: none)".into(),
        };
        let spec = StepSpec {
            objective: self.objectives[o].as_ref(),
            loss: r.loss,
            ctx,
            max_grad_norm: r.max_grad_norm,
            lrs: &[self.lr],
            train: true,
        };
        // GradCache (the recipe's mini_batch_size) as `nest train` runs it: chunk passes
        // recorded, not the whole step
        let spread = Spread {
            group: None,
            chunk: (r.mini_batch_size > 0).then_some(r.mini_batch_size),
        };
        let whole = match spread.chunk {
            Some(_) => None,
            None => self
                .graphs
                .step(&self.enc, &mut self.opt, &src, &batch, &spec)?,
        };
        match whole {
            Some((_, norm)) if !norm.is_finite() => return Err(non_finite(norm)),
            Some((res, _)) => self.last = res.terms,
            None => {
                let chunks = Some(&mut self.graphs.chunks);
                let train = spec.train;
                self.last = spread_micro_step(
                    &self.enc,
                    spec.objective,
                    &src,
                    &batch,
                    r.loss,
                    &ctx,
                    1,
                    &spread,
                    train,
                    chunks,
                )?
                .terms;
                apply_update(&mut self.opt, r.max_grad_norm, &[self.lr], non_finite)?;
            }
        }
        let lengths = |c: usize| src.ids.iter().map(|x| x[c].len()).collect();
        Ok([lengths(0), lengths(1)])
    }
}

/// `pairs` (anchor, positive) tokenised as a data source of pairs.
fn pairs_source(enc: &ElasticEncoder, pairs: &[(String, String)]) -> Result<Source> {
    let texts: Vec<&str> = pairs
        .iter()
        .flat_map(|p| [p.0.as_str(), p.1.as_str()])
        .collect();
    let ids = enc.tokenizer.encode(&texts)?;
    Ok(Source {
        spec: DataSource {
            path: "(benchmark pairs)".into(),
            format: DataFormat::Pairs,
            weight: 1.0,
            made_by: None,
            prompts: vec![],
        },
        texts: pairs
            .iter()
            .map(|p| vec![p.0.clone(), p.1.clone()])
            .collect(),
        ids: ids.chunks(2).map(|c| c.to_vec()).collect(),
        scores: vec![],
        prompt_tokens: vec![],
    })
}
