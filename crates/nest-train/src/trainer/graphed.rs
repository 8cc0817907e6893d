//! A whole training step (forward, objective, backward, clipping, AdamW) recorded once as a
//! CUDA graph per input shape and replayed ([`nest_model::graph`]): on a GPU a small model's
//! step is bound by kernel launches, and a replay is one launch.
//!
//! What a replay needs, and this module arranges:
//! - fixed shapes: each column of a batch is padded to a multiple of [`BUCKET`] tokens, and one
//!   graph is kept per (rows, padded lengths, the objective's draws), at most [`MAX_GRAPHS`]
//!   and while the device's memory leaves room ([`Pool::has_room`]; other shapes run eagerly);
//! - static tensors: the token ids and masks, the gold scores and the objective's targets (a
//!   teacher's vectors of the batch, looked up on the host: [`Objective::targets`]) are copied
//!   into the graph's own tensors before a replay, and the loss, terms, diagnostics and
//!   gradient norm are read from its outputs after;
//! - nothing read back inside the step: the layers run unpacked, the objective must say what
//!   fixes its terms ([`Objective::recorded_draws`]: nothing for MRL, MIC, MIPIC, distillation
//!   and HSIC; for 2DMSE the shallow layers and prefix dims it samples, so that its steps are
//!   recorded once per shape and draws; ESE, whose SVD checks its result on the host, stays
//!   eager), the clipping and the update read the rate and step from the device
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
use nest_model::{ElasticEncoder, EncoderInput};
use tch::{Device, Kind, Tensor};

use super::graphed_chunks::ChunkGraphs;
use super::spread::column_sources;
use super::step::MicroResult;
use crate::data::{Batch, Source};
use crate::objective::{BatchOutput, Column, Objective, StepContext};
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

/// One shape's static tensors.
struct Static {
    /// Per column: token ids and attention mask `[rows, padded]`, pooling mask (a prompt's
    /// tokens zeroed).
    inputs: Vec<(EncoderInput, Tensor)>,
    /// Gold scores `[rows]`, when the source has them.
    scores: Option<Tensor>,
    /// The objective's targets `[rows, width]` ([`Objective::targets`]), when it reads some.
    targets: Option<Tensor>,
    /// The summed loss and the gradient norm before clipping (float64 scalars).
    loss: Tensor,
    norm: Tensor,
    /// The objective's terms and then its diagnostics (float64, the first `names.len()` of
    /// [`MAX_TERMS`]), named at the first pass.
    terms: Tensor,
    names: std::cell::RefCell<Vec<String>>,
}

/// Terms a recorded step reports at most (beyond: summed into the loss, not logged one by one).
const MAX_TERMS: usize = 64;

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
    graphs: HashMap<Vec<i64>, Captured<Static>>,
    update: Option<DeviceUpdate>,
    /// Why recording stopped (a failed capture): later steps run eagerly.
    pub failed: Option<String>,
    /// GradCache's chunk passes, recorded when the step itself cannot be (a GradCache run).
    pub chunks: ChunkGraphs,
    /// Where the step graphs keep their memory, made at the first recording.
    pool: Option<Pool>,
}

impl GraphedStep {
    pub fn new(mode: GraphMode) -> GraphedStep {
        GraphedStep {
            mode,
            graphs: HashMap::new(),
            update: None,
            failed: None,
            chunks: ChunkGraphs::new(mode),
            pool: None,
        }
    }

    /// What a step of `spec` on `enc` would be recorded under besides its shape (the
    /// objective's draws), or `None` when it runs eagerly (before shape and memory checks).
    fn draws(&self, enc: &ElasticEncoder, spec: &StepSpec) -> Option<Vec<usize>> {
        if !self.mode.resolve(enc.device()) || self.failed.is_some() {
            return None;
        }
        spec.objective.recorded_draws(&spec.ctx, enc.num_layers())
    }

    /// How many graphs were recorded: one per whole-step shape, two per GradCache chunk
    /// shape.
    pub fn recorded(&self) -> usize {
        self.graphs.len() + self.chunks.recorded()
    }

    /// Why recording stopped, if it did (the whole step's or a chunk's).
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref().or(self.chunks.failed.as_deref())
    }

    /// Pools of this budget for the steps and the GradCache chunks recorded from now on, the
    /// process's bytes read by `reserved` (tests give the CPU what a GPU has).
    pub fn set_budget(&mut self, dev: Device, budget: Budget, reserved: Reserved) {
        let pool = || Pool::with_sharing(dev, false).with_budget(budget, reserved);
        self.pool = Some(pool());
        self.chunks.pool = Some(pool());
    }

    /// Whether a new shape may be recorded: under [`MAX_GRAPHS`] and within the pool's memory
    /// budget ([`Pool::has_room`]); the pool is made here.
    fn has_room(&mut self, dev: Device) -> bool {
        self.graphs.len() < MAX_GRAPHS && self.pool.get_or_insert_with(|| Pool::new(dev)).has_room()
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
        let Some(draws) = self.draws(enc, spec) else {
            return Ok(None);
        };
        let host = host_inputs(enc, src, b, &column_sources(src, spec.loss));
        // (rows, each column's padded length, the objective's draws)
        let key: Vec<i64> = std::iter::once(b.examples.len() as i64)
            .chain(host.iter().map(|(i, _)| i.ids.size()[1]))
            .chain(std::iter::once(-1))
            .chain(draws.into_iter().map(|d| d as i64))
            .collect();
        if !self.graphs.contains_key(&key) && !self.has_room(enc.device()) {
            return Ok(None);
        }
        let update = self
            .update
            .get_or_insert_with(|| DeviceUpdate::new(opt, enc.device()));
        // the rates, and the step count (eager steps between recorded ones advance the host's)
        update.set_lrs(spec.lrs);
        let _ = update.step.shallow_clone().fill_(opt.step as f64);
        tch::manual_seed(spec.ctx.seed.wrapping_add(spec.ctx.micro_batch) as i64);
        let host = Host {
            inputs: host,
            scores: scores(src, b),
            targets: super::step::targets(spec.objective, src, &b.examples),
        };
        let mut body = |s: &Static| run_body(enc, opt, update, spec, s);
        let state = match self.graphs.get_mut(&key) {
            Some(c) => {
                fill(&c.state, &host);
                c.run(&mut body)?;
                &c.state
            }
            None => {
                let state = static_like(&host, enc.device());
                fill(&state, &host);
                // the warm-up pass is this step; the recording serves the next ones
                let pool = self.pool.get_or_insert_with(|| Pool::new(enc.device()));
                match Captured::record(pool, state, WARMUP, &mut body) {
                    Ok(c) => &self.graphs.entry(key).or_insert(c).state,
                    // a capture that failed part-way can leave libtorch's CUDA generator in
                    // its capture state (an H100, 2026-11-26: the next eager dropout was
                    // refused), so the run stops here rather than going on eagerly; the last
                    // checkpoint stands
                    Err(f) => {
                        self.failed = Some(f.error.to_string());
                        return Err(nest_model::Error::Core(nest_core::Error::value(
                            "cuda_graph",
                            format!(
                                "recording the training step as a CUDA graph failed ({}); set \
                                 cuda_graph = \"off\" (or --cuda-graph off) and resume",
                                f.error
                            ),
                        ))
                        .into());
                    }
                }
            }
        };
        Ok(Some(outputs(opt, state)))
    }
}

/// The step's loss, terms and norm, read back (one synchronisation); the host step count
/// follows a finite norm.
fn outputs(opt: &mut AdamW, s: &Static) -> (MicroResult, f64) {
    let names = s.names.borrow();
    let values = Vec::<f64>::try_from(
        s.terms
            .narrow(0, 0, names.len() as i64)
            .to_device(Device::Cpu),
    )
    .unwrap_or_default();
    let (loss, norm) = (s.loss.double_value(&[]), s.norm.double_value(&[]));
    if norm.is_finite() {
        opt.step += 1;
    }
    let terms = names.iter().cloned().zip(values).collect();
    (MicroResult { loss, terms }, norm)
}

/// The recorded work: forward every column, the objective's summed terms, backward, clip and
/// update on the device, zero the gradients (as the eager update leaves them); the loss and norm
/// into the static outputs.
fn run_body(
    enc: &ElasticEncoder,
    opt: &mut AdamW,
    update: &DeviceUpdate,
    spec: &StepSpec,
    s: &Static,
) -> nest_model::Result<()> {
    let out = nest_model::without_packing(|| batch_output(enc, s, spec));
    let terms = spec.objective.terms(&out, &spec.ctx);
    let diagnostics = tch::no_grad(|| spec.objective.diagnostics(&out));
    let logged: Vec<(String, &Tensor)> = terms
        .iter()
        .map(|t| (t.name.clone(), &t.value))
        .chain(diagnostics.iter().map(|(n, v)| (format!("diag/{n}"), v)))
        .take(MAX_TERMS)
        .collect();
    if s.names.borrow().is_empty() {
        *s.names.borrow_mut() = logged.iter().map(|(n, _)| n.clone()).collect();
    }
    let values: Vec<Tensor> = logged
        .iter()
        .map(|(_, v)| v.detach().to_kind(Kind::Double).reshape([1]))
        .collect();
    s.terms
        .narrow(0, 0, values.len() as i64)
        .copy_(&Tensor::cat(&values, 0));
    let total = terms
        .iter()
        .map(|t| t.value.shallow_clone())
        .reduce(|a, b| a + b)
        .expect("an objective returns terms");
    // an error fails the recording with its reason (an autograd formula that reads a value
    // back to the host cannot be recorded: the trace's, which MIC used until 2026-11-28)
    total.f_backward().map_err(nest_model::Error::Torch)?;
    s.loss
        .shallow_clone()
        .copy_(&total.detach().to_kind(Kind::Double));
    let norm = opt
        .clip_and_step_on_device(spec.max_grad_norm, update)
        .map_err(nest_model::Error::Torch)?;
    s.norm.shallow_clone().copy_(&norm);
    opt.zero_grad();
    Ok(())
}

/// The objective's view of the static inputs.
fn batch_output(enc: &ElasticEncoder, s: &Static, spec: &StepSpec) -> BatchOutput {
    let attention = spec.objective.attention();
    let columns = s
        .inputs
        .iter()
        .map(|(input, pool_mask)| {
            let out = enc.forward_with(input, enc.num_layers(), spec.train, attention);
            Column {
                hidden: out.hidden_states,
                mask: pool_mask.shallow_clone(),
                pooling: enc.pooling,
                head: enc.head.shallow_clone(),
                cls_attention: out.cls_attention,
                pooled: Vec::new(),
            }
        })
        .collect();
    BatchOutput {
        columns,
        scores: s.scores.as_ref().map(Tensor::shallow_clone),
        layers: enc.num_layers(),
        normalize: enc.normalize,
        targets: s.targets.as_ref().map(Tensor::shallow_clone),
    }
}

/// Each encoded column's padded ids and masks on the host (`cols`: the source column each
/// reads), lengths rounded up to [`BUCKET`].
pub(super) fn host_inputs(
    enc: &ElasticEncoder,
    src: &Source,
    b: &Batch,
    cols: &[usize],
) -> Vec<(EncoderInput, Tensor)> {
    cols.iter()
        .map(|&col| {
            let seqs: Vec<&[i64]> = b
                .examples
                .iter()
                .map(|&i| src.ids[i][col].as_slice())
                .collect();
            let longest = seqs.iter().map(|s| s.len()).max().unwrap_or(1);
            let padded = longest.div_ceil(BUCKET) * BUCKET;
            let input = enc.make_input_on(&seqs, padded, Device::Cpu);
            let pool_mask = super::step::pool_mask(src, col, &input.mask);
            (input, pool_mask)
        })
        .collect()
}

fn scores(src: &Source, b: &Batch) -> Option<Tensor> {
    (!src.scores.is_empty()).then(|| {
        let s: Vec<f32> = b.examples.iter().map(|&i| src.scores[i] as f32).collect();
        Tensor::from_slice(&s)
    })
}

/// Zeroed device tensors of the host inputs' shapes (a recording's static inputs).
pub(super) fn inputs_like(
    host: &[(EncoderInput, Tensor)],
    dev: Device,
) -> Vec<(EncoderInput, Tensor)> {
    host.iter()
        .map(|(i, m)| {
            let input = EncoderInput {
                ids: i.ids.zeros_like().to_device(dev),
                mask: i.mask.zeros_like().to_device(dev),
            };
            (input, m.zeros_like().to_device(dev))
        })
        .collect()
}

/// Copies host inputs into a recording's static inputs.
pub(super) fn copy_inputs(dst: &[(EncoderInput, Tensor)], host: &[(EncoderInput, Tensor)]) {
    for ((d, d_mask), (h, h_mask)) in dst.iter().zip(host) {
        d.ids.shallow_clone().copy_(&h.ids);
        d.mask.shallow_clone().copy_(&h.mask);
        d_mask.shallow_clone().copy_(h_mask);
    }
}

/// One batch's inputs on the host: each column's ids, masks and pooling masks, the gold scores
/// and the objective's targets.
struct Host {
    inputs: Vec<(EncoderInput, Tensor)>,
    scores: Option<Tensor>,
    targets: Option<Tensor>,
}

/// Device tensors of the host inputs' shapes, and the outputs.
fn static_like(host: &Host, dev: Device) -> Static {
    let like = |t: &Option<Tensor>| t.as_ref().map(|t| t.zeros_like().to_device(dev));
    Static {
        inputs: inputs_like(&host.inputs, dev),
        scores: like(&host.scores),
        targets: like(&host.targets),
        loss: Tensor::zeros([], (Kind::Double, dev)),
        norm: Tensor::zeros([], (Kind::Double, dev)),
        terms: Tensor::zeros([MAX_TERMS as i64], (Kind::Double, dev)),
        names: std::cell::RefCell::new(Vec::new()),
    }
}

/// Copies a batch into a graph's static inputs.
fn fill(s: &Static, host: &Host) {
    copy_inputs(&s.inputs, &host.inputs);
    for (d, h) in [(&s.scores, &host.scores), (&s.targets, &host.targets)] {
        if let (Some(d), Some(h)) = (d, h) {
            d.shallow_clone().copy_(h);
        }
    }
}
