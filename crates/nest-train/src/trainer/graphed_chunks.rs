//! GradCache's chunk passes recorded as CUDA graphs per chunk shape and replayed
//! ([`nest_model::graph`]): at batch 256 in chunks of 32, a step of a small model is some tens
//! of thousands of kernel launches (every chunk encoded twice, the second time with its
//! backward; MiniLM's whole step at batch 32 was about 3,000), and the GPU idles between them.
//! Each chunk shape gets two graphs:
//! - **encode** (GradCache's first pass): every column's forward without autograd, all layers
//!   pooled, into static outputs (`[L+1, rows, width]`), which the caller copies out before
//!   the next chunk;
//! - **back-propagate** (the second pass): the same forward with autograd, then the backward
//!   of `sum(v * cached_grad)` over every pooled stack, accumulating into the weights'
//!   gradients in place (they exist after the first pass of the run and are zeroed, not freed,
//!   by each update).
//!
//! The objective, which scores the whole batch's pooled vectors, and the update run eagerly:
//! a few hundred launches for the whole step. Both passes of a chunk see the same padded shape
//! and are replayed after the same seed, so their dropout masks agree as in the eager passes.
//! Shapes are keyed by (rows, every column's length padded to [`super::graphed::BUCKET`]
//! tokens); past [`MAX_GRAPHS`] shapes, or once the device's memory budget is spent
//! ([`Pool::has_room`]), a chunk of a new shape runs eagerly (both passes).

use std::collections::HashMap;
use std::rc::Rc;

use nest_model::graph::{Captured, GraphMode, Pool};
use nest_model::EncoderInput;
use tch::{Device, Tensor};

use super::graphed::MAX_GRAPHS;
use super::graphed_inputs::{copy_inputs, host_inputs, inputs_like};
use super::spread::{pooled_stack, Encoding, Pooled};
use crate::data::Batch;
use crate::objective::Column;
use crate::Result;

/// Each encoded column's token ids and attention mask, and its pooling mask.
type ColumnInputs = Vec<(EncoderInput, Tensor)>;

/// One chunk shape's static tensors, shared by its two graphs.
struct ChunkStatic {
    /// Per encoded column: token ids and attention mask `[rows, padded]`, pooling mask.
    inputs: ColumnInputs,
    /// Per column: the pooled stacks the encode pass writes (made by the first pass, outside
    /// any capture, so that their kinds follow the training arithmetic).
    pooled: std::cell::RefCell<Vec<Pooled>>,
    /// Per column: the cached gradients of those stacks, which the second pass reads.
    grads: std::cell::RefCell<Vec<Pooled>>,
}

struct Shape {
    encode: Option<Captured<Rc<ChunkStatic>>>,
    backward: Option<Captured<Rc<ChunkStatic>>>,
    state: Rc<ChunkStatic>,
}

/// The chunk graphs of one run.
pub struct ChunkGraphs {
    mode: GraphMode,
    shapes: HashMap<Vec<i64>, Shape>,
    /// Why recording stopped (a failed capture).
    pub failed: Option<String>,
    /// Where the chunk graphs keep their memory, made at the first recording.
    pub(super) pool: Option<Pool>,
}

impl ChunkGraphs {
    pub fn new(mode: GraphMode) -> ChunkGraphs {
        ChunkGraphs {
            mode,
            shapes: HashMap::new(),
            failed: None,
            pool: None,
        }
    }

    /// Whether GradCache's chunks on `device` go through graphs.
    pub fn applies(&self, device: Device) -> bool {
        self.mode.resolve(device) && self.failed.is_none()
    }

    /// Graphs recorded so far (two per chunk shape once both passes ran).
    pub fn recorded(&self) -> usize {
        self.shapes
            .values()
            .map(|s| s.encode.is_some() as usize + s.backward.is_some() as usize)
            .sum()
    }

    /// The chunk's shape key, with its host inputs; `None` (the chunk then runs eagerly) for a
    /// new shape unless `admit` (the first pass's question: the second pass follows what the
    /// first did, so that a chunk's two passes pad alike) and it stays under [`MAX_GRAPHS`]
    /// and within the pool's memory budget ([`Pool::has_room`]).
    fn key(&mut self, e: &Encoding, ex: &[usize], admit: bool) -> Option<(Vec<i64>, ColumnInputs)> {
        let b = Batch {
            source: 0,
            examples: ex.to_vec(),
        };
        let host = host_inputs(e.enc, e.src, &b, e.cols);
        let key: Vec<i64> = std::iter::once(ex.len() as i64)
            .chain(host.iter().map(|(i, _)| i.ids.size()[1]))
            .collect();
        let dev = e.enc.device();
        let room = self.shapes.contains_key(&key)
            || (admit
                && self.shapes.len() < MAX_GRAPHS
                && self.pool.get_or_insert_with(|| Pool::new(dev)).has_room());
        room.then_some((key, host))
    }

    /// GradCache's first pass over `local` in chunks of `chunk` rows: per column, the pooled
    /// stacks of the slice as fresh leaves (as the eager pass returns them). Chunks whose
    /// shape has no room run `eager(chunk index, examples)`.
    pub(crate) fn encode(
        &mut self,
        e: &Encoding,
        local: &[usize],
        chunk: usize,
        seed: &dyn Fn(usize) -> i64,
        eager: &mut dyn FnMut(usize, &[usize]) -> Vec<Pooled>,
    ) -> Result<Vec<Pooled>> {
        let mut parts: Vec<Vec<Pooled>> = e.cols.iter().map(|_| Vec::new()).collect();
        for (k, ex) in local.chunks(chunk.max(1)).enumerate() {
            let got = match self.key(e, ex, true) {
                None => eager(k, ex),
                Some((key, host)) => {
                    let dev = e.enc.device();
                    let pool = self.pool.get_or_insert_with(|| Pool::new(dev));
                    let shape = shape_of(&mut self.shapes, key, &host, dev);
                    tch::manual_seed(seed(k));
                    let mut body = |s: &Rc<ChunkStatic>| encode_body(e, s);
                    let run = run_or_record(&mut shape.encode, pool, &shape.state, &mut body);
                    if let Err(err) = run {
                        return Err(self.fail(err));
                    }
                    let pooled = shape.state.pooled.borrow();
                    // copied out: the next chunk of this shape writes the same tensors
                    pooled
                        .iter()
                        .map(|(r, o)| (r.detach().copy(), o.as_ref().map(|o| o.detach().copy())))
                        .collect()
                }
            };
            for (c, p) in got.into_iter().enumerate() {
                parts[c].push(p);
            }
        }
        Ok(parts.into_iter().map(|p| leaves(&p)).collect())
    }

    /// GradCache's second pass: each chunk again after the same seed, back-propagating the
    /// leaves' cached gradients (`leaves` as [`ChunkGraphs::encode`] returned them, after the
    /// objective's backward). Chunks without a graph run `eager(chunk index, examples, at)`.
    pub(crate) fn backward(
        &mut self,
        e: &Encoding,
        local: &[usize],
        chunk: usize,
        seed: &dyn Fn(usize) -> i64,
        leaves: &[Pooled],
        eager: &mut dyn FnMut(usize, &[usize], i64),
    ) -> Result<()> {
        for (k, ex) in local.chunks(chunk.max(1)).enumerate() {
            let at = (k * chunk) as i64;
            let Some((key, host)) = self.key(e, ex, false) else {
                eager(k, ex, at);
                continue;
            };
            let dev = e.enc.device();
            let pool = self.pool.get_or_insert_with(|| Pool::new(dev));
            let shape = shape_of(&mut self.shapes, key, &host, dev);
            {
                let grads = shape.state.grads.borrow();
                for ((g_raw, g_out), (raw, out)) in grads.iter().zip(leaves) {
                    fill_grad(g_raw, raw, at);
                    if let (Some(g), Some(o)) = (g_out, out) {
                        fill_grad(g, o, at);
                    }
                }
            }
            tch::manual_seed(seed(k));
            let mut body = |s: &Rc<ChunkStatic>| backward_body(e, s);
            let run = run_or_record(&mut shape.backward, pool, &shape.state, &mut body);
            run.map_err(|err| self.fail(err))?;
        }
        Ok(())
    }

    /// A failed capture stops the run (libtorch's generator can be left capturing, as
    /// [`super::graphed::GraphedStep`] says); later chunks would run eagerly.
    fn fail(&mut self, err: nest_model::Error) -> crate::Error {
        self.failed = Some(err.to_string());
        nest_model::Error::Core(nest_core::Error::value(
            "cuda_graph",
            format!(
                "recording a GradCache chunk as a CUDA graph failed ({err}); set cuda_graph = \
                 \"off\" (or --cuda-graph off) and resume"
            ),
        ))
        .into()
    }
}

/// A chunk shape's static tensors, made on first use; the host inputs copied in.
fn shape_of<'a>(
    shapes: &'a mut HashMap<Vec<i64>, Shape>,
    key: Vec<i64>,
    host: &[(EncoderInput, Tensor)],
    dev: Device,
) -> &'a mut Shape {
    let shape = shapes.entry(key).or_insert_with(|| Shape {
        encode: None,
        backward: None,
        state: Rc::new(ChunkStatic {
            inputs: inputs_like(host, dev),
            pooled: Default::default(),
            grads: Default::default(),
        }),
    });
    copy_inputs(&shape.state.inputs, host);
    shape
}

/// One pass through `slot`'s graph, recorded first when the slot is empty (the warm-up pass
/// is then this pass).
fn run_or_record(
    slot: &mut Option<Captured<Rc<ChunkStatic>>>,
    pool: &mut Pool,
    state: &Rc<ChunkStatic>,
    body: &mut dyn FnMut(&Rc<ChunkStatic>) -> nest_model::Result<()>,
) -> nest_model::Result<()> {
    match slot {
        Some(c) => c.run(body),
        None => {
            let c = Captured::record(pool, state.clone(), WARMUP, body).map_err(|f| f.error)?;
            *slot = Some(c);
            Ok(())
        }
    }
}

/// A new shape's first pass of each kind runs eagerly on the graph's side stream (it is this
/// chunk's real pass); the recording serves the next chunks of that shape.
const WARMUP: usize = 1;

/// Every column's pooled stacks from the static inputs.
fn stacks(e: &Encoding, s: &ChunkStatic) -> Vec<Pooled> {
    s.inputs
        .iter()
        .map(|(input, pool_mask)| {
            let out = e.enc.forward_with(
                input,
                e.enc.num_layers(),
                e.train,
                nest_model::ClsAttention::None,
            );
            pooled_stack(&Column {
                hidden: out.hidden_states,
                mask: pool_mask.shallow_clone(),
                pooling: e.enc.pooling,
                head: e.enc.head.shallow_clone(),
                cls_attention: out.cls_attention,
                pooled: Vec::new(),
            })
        })
        .collect()
}

/// The encode pass: no autograd, the stacks into the static outputs (made at the first pass,
/// with the gradients' tensors of the same shapes and kinds).
fn encode_body(e: &Encoding, s: &ChunkStatic) -> nest_model::Result<()> {
    let got = tch::no_grad(|| nest_model::without_packing(|| stacks(e, s)));
    let mut pooled = s.pooled.borrow_mut();
    if pooled.is_empty() {
        *s.grads.borrow_mut() = got
            .iter()
            .map(|(r, o)| (r.zeros_like(), o.as_ref().map(Tensor::zeros_like)))
            .collect();
        *pooled = got;
        return Ok(());
    }
    for ((dst_r, dst_o), (r, o)) in pooled.iter().zip(&got) {
        dst_r.shallow_clone().copy_(r);
        if let (Some(d), Some(o)) = (dst_o, o) {
            d.shallow_clone().copy_(o);
        }
    }
    Ok(())
}

/// The back-propagate pass: the stacks again with autograd, `sum(v * cached_grad)` backward.
fn backward_body(e: &Encoding, s: &ChunkStatic) -> nest_model::Result<()> {
    let got = nest_model::without_packing(|| stacks(e, s));
    let grads = s.grads.borrow();
    let mut surrogate: Option<Tensor> = None;
    let mut add = |v: &Tensor, g: &Tensor| {
        let t = (v * g).sum(v.kind());
        surrogate = Some(match surrogate.take() {
            Some(acc) => acc + t,
            None => t,
        });
    };
    for ((raw, out), (g_raw, g_out)) in got.iter().zip(grads.iter()) {
        add(raw, g_raw);
        if let (Some(o), Some(g)) = (out, g_out) {
            add(o, g);
        }
    }
    // an error (an autograd formula that reads back while recording) fails the recording
    if let Some(t) = surrogate {
        t.f_backward().map_err(nest_model::Error::Torch)?;
    }
    Ok(())
}

/// Copies a leaf's gradient rows `at..` into a chunk's static gradient (zeros where the
/// objective did not read the leaf: the same gradient, 0).
fn fill_grad(dst: &Tensor, leaf: &Tensor, at: i64) {
    let g = leaf.grad();
    let mut d = dst.shallow_clone();
    if g.defined() {
        let rows = dst.size()[1];
        d.copy_(&g.narrow(1, at, rows));
    } else {
        let _ = d.zero_();
    }
}

/// Chunks' stacks concatenated along the rows into fresh leaves.
fn leaves(parts: &[Pooled]) -> Pooled {
    let raw = Tensor::cat(
        &parts
            .iter()
            .map(|x| x.0.shallow_clone())
            .collect::<Vec<_>>(),
        1,
    );
    let out = parts[0].1.is_some().then(|| {
        let outs: Vec<Tensor> = parts
            .iter()
            .map(|x| {
                x.1.as_ref()
                    .expect("every chunk has the head")
                    .shallow_clone()
            })
            .collect();
        Tensor::cat(&outs, 1)
    });
    (
        raw.detach().set_requires_grad(true),
        out.map(|o| o.detach().set_requires_grad(true)),
    )
}
