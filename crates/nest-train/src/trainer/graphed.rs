//! A whole training step (forward, objective, backward, clipping, AdamW) recorded once as a
//! CUDA graph per input shape and replayed ([`nest_model::graph`]): on a GPU a small model's
//! step is bound by kernel launches, and a replay is one launch. A step that accumulates
//! micro-batches (`grad_accum`) records each micro-batch's forward and backward instead
//! ([`GraphedStep::micro`]: its gradients added to the parameters'), and the caller updates
//! eagerly after the last.
//!
//! What a replay needs, and this module arranges:
//! - fixed shapes: each column of a batch is padded to a multiple of [`BUCKET`] tokens, and one
//!   graph is kept per (rows, padded lengths, whole step or micro-batch, the objective's
//!   draws), at most [`MAX_GRAPHS`] and while the device's memory leaves room
//!   ([`Pool::has_room`]; other shapes run eagerly);
//! - static tensors: the token ids and masks, the gold scores and the objective's targets (a
//!   teacher's vectors of the batch, looked up on the host: [`Objective::targets`]) are copied
//!   into the graph's own tensors before a replay, and the loss, terms, diagnostics and
//!   gradient norm are read from its outputs after;
//! - nothing read back inside the step: the layers run unpacked, the objective must say what
//!   fixes its terms ([`Objective::recorded_draws`]: nothing for MRL, MIC, MIPIC, distillation
//!   and HSIC; for 2DMSE the shallow layers and prefix dims it samples, so that its steps are
//!   recorded once per shape and draws; ESE with its PCA term, whose SVD checks its result on
//!   the host, stays eager), the clipping and the update read the rate and step from the device
//!   ([`AdamW::clip_and_step_on_device`]).
//!
//! Dropout stays random: the generator is re-seeded before each replay as before each eager
//! step, and libtorch's CUDA generator feeds a graph its current seed and offset at replay. The
//! values differ from the eager step's only by the padding (float reordering: the same loss to
//! about 1e-6 relative, asserted on the CPU fake).

use std::collections::HashMap;

pub use nest_model::graph::GraphMode;
use nest_model::graph::{Budget, Captured, Pool, Reserved};
use nest_model::optim::DeviceUpdate;
use nest_model::ElasticEncoder;
use tch::Device;

use super::graphed_body::{micro_body, outputs, run_body};
use super::graphed_chunks::ChunkGraphs;
use super::graphed_inputs::{self, fill, host_inputs, scores, static_like, Host, Static};
use super::spread::column_sources;
use super::step::MicroResult;
use crate::data::{Batch, Source};
use crate::objective::{Objective, StepContext};
use crate::optim::AdamW;
use crate::recipe::LossKind;
use crate::Result;

/// Token lengths are padded up to a multiple of this (fewer graphs, a little more padding).
pub const BUCKET: usize = 16;
/// At most this many shapes get a graph; others run eagerly.
pub const MAX_GRAPHS: usize = 32;
/// A new shape's first step runs eagerly on the graph's side stream (as a warm-up pass: lazy
/// initialisation must not happen inside a capture), then the step is recorded for the next
/// batches of that shape.
const WARMUP: usize = 1;

/// What one recorded or eager step needs to know besides the batch.
pub struct StepSpec<'a> {
    pub objective: &'a dyn Objective,
    pub loss: LossKind,
    pub ctx: StepContext,
    pub max_grad_norm: f64,
    pub lrs: &'a [f64],
    /// Dropout on (the recipe's `dropout` is not 0).
    pub train: bool,
}

/// The graphs of one run and the device copy of the optimizer's numbers.
pub struct GraphedStep {
    mode: GraphMode,
    /// Whole steps and accumulated micro-batches, recorded.
    recordings: Recordings,
    update: Option<DeviceUpdate>,
    /// GradCache's chunk passes, recorded when the step itself cannot be (a GradCache run).
    pub chunks: ChunkGraphs,
}

impl GraphedStep {
    pub fn new(mode: GraphMode) -> GraphedStep {
        GraphedStep {
            mode,
            recordings: Recordings::default(),
            update: None,
            chunks: ChunkGraphs::new(mode),
        }
    }

    /// What a step of `spec` on `enc` would be recorded under besides its shape (the
    /// objective's draws), or `None` when it runs eagerly (before shape and memory checks).
    fn draws(&self, enc: &ElasticEncoder, spec: &StepSpec) -> Option<Vec<usize>> {
        if !self.mode.resolve(enc.device()) || self.recordings.failed.is_some() {
            return None;
        }
        spec.objective.recorded_draws(&spec.ctx, enc.num_layers())
    }

    /// How many graphs were recorded: one per whole-step (or accumulated micro-batch) shape,
    /// two per GradCache chunk shape.
    pub fn recorded(&self) -> usize {
        self.recordings.graphs.len() + self.chunks.recorded()
    }

    /// A line for the run's end when anything was recorded: how many graphs, and why
    /// recording stopped if it did.
    pub fn report(&self) -> Option<String> {
        let n = self.recorded();
        let why = self.failure().map(|f| format!("; recording stopped: {f}"));
        (n > 0 || why.is_some()).then(|| {
            format!(
                "cuda graphs: {n} recorded, each replayed as one launch{}",
                why.unwrap_or_default()
            )
        })
    }

    /// A line for a run's start where steps would be recorded but this run's will not be: its
    /// objective's terms are not a fixed set of operations (ESE's SVD checks its result on
    /// the host), or its processes gather a batch's vectors without GradCache.
    pub fn eager_notice(
        &self,
        enc: &ElasticEncoder,
        objective: &dyn Objective,
        ctx: &StepContext,
        data_parallel: bool,
        gradcache: bool,
    ) -> Option<String> {
        if !self.mode.resolve(enc.device()) || gradcache {
            return None;
        }
        let why = match objective.recorded_draws(ctx, enc.num_layers()) {
            None => "its objective reads values back to the host",
            Some(_) if data_parallel => "data-parallel steps gather vectors across processes",
            Some(_) => return None,
        };
        Some(format!(
            "cuda graphs: this run's steps run eagerly ({why}); GradCache (mini_batch_size) \
             records its chunk passes instead"
        ))
    }

    /// Why recording stopped, if it did (the whole step's or a chunk's).
    pub fn failure(&self) -> Option<&str> {
        let steps = self.recordings.failed.as_deref();
        steps.or(self.chunks.failed.as_deref())
    }

    /// Pools of this budget for the steps and the GradCache chunks recorded from now on, the
    /// process's bytes read by `reserved` (tests give the CPU what a GPU has).
    pub fn set_budget(&mut self, dev: Device, budget: Budget, reserved: Reserved) {
        let pool = || Pool::with_sharing(dev, false).with_budget(budget, reserved);
        self.recordings.pool = Some(pool());
        self.chunks.pool = Some(pool());
    }

    /// Whether a new shape may be recorded: under [`MAX_GRAPHS`] and within the pool's memory
    /// budget ([`Pool::has_room`]); the pool is made here.
    fn has_room(&mut self, dev: Device) -> bool {
        let r = &mut self.recordings;
        r.graphs.len() < MAX_GRAPHS && r.pool.get_or_insert_with(|| Pool::new(dev)).has_room()
    }

    /// One optimizer step on batch `b` through its shape's graph: `Some((loss, grad norm))`, or
    /// `None` when this step cannot be recorded (the caller runs the eager step). The optimizer's
    /// host step count advances on a finite norm; a non-finite one is returned as it is, with the
    /// weights untouched (the caller stops).
    pub fn step(
        &mut self,
        enc: &ElasticEncoder,
        opt: &mut AdamW,
        src: &Source,
        b: &Batch,
        spec: &StepSpec,
    ) -> Result<Option<(MicroResult, f64)>> {
        let Some((key, host)) = self.prepare(enc, src, b, spec, -1) else {
            return Ok(None);
        };
        let update = self
            .update
            .get_or_insert_with(|| DeviceUpdate::new(opt, enc.device()));
        // the rates, and the step count (eager steps between recorded ones advance the host's)
        update.set_lrs(spec.lrs);
        let _ = update.step.shallow_clone().fill_(opt.step as f64);
        let mut body = |s: &Static| run_body(enc, opt, update, spec, s);
        let state = self.recordings.run(key, &host, enc.device(), &mut body)?;
        Ok(Some(outputs(opt, state)))
    }

    /// One micro-batch of an accumulated step through its shape's graph: the forward pass, the
    /// objective's terms and the backward of their sum over `grad_accum`, the gradients added
    /// to the parameters' (`Some(loss and terms)`); the update stays the caller's, eager, after
    /// the last micro-batch. `None` when it cannot be recorded (the caller runs it eagerly).
    pub fn micro(
        &mut self,
        enc: &ElasticEncoder,
        src: &Source,
        b: &Batch,
        spec: &StepSpec,
        grad_accum: usize,
    ) -> Result<Option<MicroResult>> {
        let Some((key, host)) = self.prepare(enc, src, b, spec, -2 - grad_accum as i64) else {
            return Ok(None);
        };
        let mut body = |s: &Static| micro_body(enc, spec, grad_accum, s);
        let state = self.recordings.run(key, &host, enc.device(), &mut body)?;
        Ok(Some(graphed_inputs::read(state)))
    }

    /// The key of batch `b`'s recording and its inputs on the host, with libtorch's generator
    /// seeded for it; `None` when it runs eagerly (nothing fixes the objective's terms, or a new
    /// shape finds no room). `kind` tells a whole step (-1) from an accumulated micro-batch.
    fn prepare(
        &mut self,
        enc: &ElasticEncoder,
        src: &Source,
        b: &Batch,
        spec: &StepSpec,
        kind: i64,
    ) -> Option<(Vec<i64>, Host)> {
        let draws = self.draws(enc, spec)?;
        let inputs = host_inputs(enc, src, b, &column_sources(src, spec.loss));
        // (rows, each column's padded length, the kind, the objective's draws)
        let key: Vec<i64> = std::iter::once(b.examples.len() as i64)
            .chain(inputs.iter().map(|(i, _)| i.ids.size()[1]))
            .chain(std::iter::once(kind))
            .chain(draws.into_iter().map(|d| d as i64))
            .collect();
        if !self.recordings.graphs.contains_key(&key) && !self.has_room(enc.device()) {
            return None;
        }
        tch::manual_seed(spec.ctx.seed.wrapping_add(spec.ctx.micro_batch) as i64);
        Some((
            key,
            Host {
                inputs,
                scores: scores(src, b),
                targets: super::step::targets(spec.objective, src, &b.examples),
            },
        ))
    }
}

/// The recordings of a run's steps (whole steps and accumulated micro-batches), by key, in one
/// pool.
#[derive(Default)]
struct Recordings {
    graphs: HashMap<Vec<i64>, Captured<Static>>,
    /// Where they keep their memory, made at the first recording.
    pool: Option<Pool>,
    /// Why recording stopped (a failed capture): later steps run eagerly.
    failed: Option<String>,
}

impl Recordings {
    /// `key`'s recording run on `host`'s inputs, or recorded (this pass is its warm-up; the
    /// recording serves the next ones): the static tensors its outputs are in. A failed
    /// recording stops the run.
    fn run(
        &mut self,
        key: Vec<i64>,
        host: &Host,
        dev: Device,
        body: &mut dyn FnMut(&Static) -> nest_model::Result<()>,
    ) -> Result<&Static> {
        if self.graphs.contains_key(&key) {
            let c = self.graphs.get_mut(&key).expect("checked");
            fill(&c.state, host);
            c.run(body)?;
            return Ok(&self.graphs[&key].state);
        }
        let state = static_like(host, dev);
        fill(&state, host);
        let pool = self.pool.get_or_insert_with(|| Pool::new(dev));
        match Captured::record(pool, state, WARMUP, body) {
            Ok(c) => Ok(&self.graphs.entry(key).or_insert(c).state),
            // a capture that failed part-way can leave libtorch's CUDA generator in its capture
            // state (an H100, 2026-11-26: the next eager dropout was refused), so the run stops
            // here rather than going on eagerly; the last checkpoint stands
            Err(f) => {
                self.failed = Some(f.error.to_string());
                Err(nest_model::Error::Core(nest_core::Error::value(
                    "cuda_graph",
                    format!(
                        "recording the training step as a CUDA graph failed ({}); set \
                         cuda_graph = \"off\" (or --cuda-graph off) and resume",
                        f.error
                    ),
                ))
                .into())
            }
        }
    }
}
