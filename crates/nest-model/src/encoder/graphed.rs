//! Encoding through recorded forward passes: one CUDA graph per batch shape ([`crate::graph`]).
//!
//! A batch of 32 short sentences costs a GPU a few hundred kernel launches of a few microseconds
//! each, more than their arithmetic, so early exit saved little there (layer 3 1.07-1.17x layer
//! 6; BENCHMARKS.md, "On a GPU: one NVIDIA H200"). A replay is one launch. What it needs, and
//! this module arranges:
//! - fixed shapes: a batch is padded to its bucket, `rows` rows (a last, partial batch gets
//!   padding rows of one pad token) and its longest text rounded up to a multiple of [`bucket`]
//!   tokens; one graph per (rows, tokens, deepest layer, pooled layers, prompt tokens skipped),
//!   at most [`MAX_GRAPHS`], and while the device's memory leaves room ([`Pool::has_room`];
//!   further shapes run eagerly);
//! - static tensors: the ids and mask are copied in (one buffer, one copy) before a replay, and
//!   the pooled vectors of every requested layer copied out after it (to a new tensor, which
//!   the next replay leaves alone: the host reads it later, [`super::embed`]);
//! - nothing read back inside: the layers run unpacked ([`crate::without_packing`]).
//!
//! Padding changes the vectors by float reordering only (the tests below, on the CPU fake: 1e-5).
//! A failed recording or replay (a refused operation, a CUDA error, a panic) warns once; that
//! batch and all later ones then run eagerly, so no encode is lost. A recording that ran out of
//! memory turns off only shapes as large as its own (warned once): smaller ones stay recorded.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, PoisonError};

use tch::{Device, Kind, Tensor};

use super::embed::BatchJob;
use super::transfer::{pack_batch, unpack_batch, upload_into, Layout, Unpacked};
use super::ElasticEncoder;
use crate::dtype::Dtype;
use crate::graph::{Captured, Pool};
use crate::{Error, Result};

/// Token counts are padded up to a multiple of this by default (fewer graphs, more padding:
/// 30-37% of the tokens of STS-B's short sentences, against 10-22% at 4).
pub const BUCKET: usize = 16;

/// The token bucket of recorded encode passes: `NEST_GRAPH_BUCKET` (1 to 64, for
/// measurements: a finer bucket pads less and records more shapes) or [`BUCKET`]; any other
/// value warns once and keeps the default.
pub fn bucket() -> usize {
    static B: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *B.get_or_init(|| {
        bucket_from(std::env::var("NEST_GRAPH_BUCKET").ok().as_deref()).unwrap_or_else(|e| {
            eprintln!("warning: {e}; padding to multiples of {BUCKET} tokens");
            BUCKET
        })
    })
}

/// [`bucket`]'s reading of the variable's value.
fn bucket_from(v: Option<&str>) -> std::result::Result<usize, String> {
    match v.map(str::trim) {
        None | Some("") => Ok(BUCKET),
        Some(v) => match v.parse::<usize>() {
            Ok(b @ 1..=64) => Ok(b),
            _ => Err(format!(
                "NEST_GRAPH_BUCKET={v:?}: expected a whole number of tokens, 1 to 64"
            )),
        },
    }
}

/// At most this many shapes get a graph per encoder (each holds its own activation memory).
pub const MAX_GRAPHS: usize = 64;
/// Passes run on the side stream before recording (lazy initialisation inside a capture fails);
/// the warm-up pass's vectors are the first batch's of that shape.
const WARMUP: usize = 1;

/// What a graph is recorded for besides the weights.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Shape {
    rows: usize,
    tokens: usize,
    deepest: usize,
    layers: Vec<usize>,
    skip: usize,
}

/// One shape's static tensors.
///
/// # Shapes
/// - `bytes`: a [`pack_batch`] buffer (ids, mask, what the host makes besides; one copy in),
///   which `batch` views
/// - `out`: `[layers, rows, output_dim]` float32, the pooled vectors of each requested layer
struct Static {
    bytes: Tensor,
    batch: Unpacked,
    out: Tensor,
}

impl Static {
    /// Static tensors for `shape`'s host batch `host` (laid out as `layout`) on `dev`.
    fn new(host: &Tensor, layout: &Layout, layers: usize, out_dim: usize, dev: Device) -> Static {
        let bytes = host.zeros_like().to_device(dev);
        let rows = layout.rows as i64;
        Static {
            batch: unpack_batch(&bytes, layout),
            bytes,
            out: Tensor::zeros([layers as i64, rows, out_dim as i64], (Kind::Float, dev)),
        }
    }
}

/// A recorded pass, kept in the encoder.
struct Slot(Captured<Static>);

// SAFETY: a `Slot` is only reached through `Graphs`' mutex, so one thread at a time uses it. Its
// tensors are `Send`; its graph is the CPU fake (plain data) or a CUDA graph (a pointer to a
// libtorch `CUDAGraph`, which may be replayed and freed from any thread: it replays on the
// calling thread's current stream). Without this, a recorded pass would make the encoder
// `!Send`, and the server moves encoders to its worker threads.
#[allow(unsafe_code)]
unsafe impl Send for Slot {}

/// Whether a new shape may be recorded: under [`MAX_GRAPHS`] and within the pool's memory
/// budget ([`Pool::has_room`]).
fn has_room(cache: &mut Cache, dev: Device) -> bool {
    cache.slots.len() < MAX_GRAPHS && cache.pool.get_or_insert_with(|| Pool::new(dev)).has_room()
}

/// The recorded passes of one encoder, by shape.
#[derive(Default)]
pub(super) struct Graphs {
    inner: Mutex<Cache>,
}

impl std::fmt::Debug for Graphs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        write!(
            f,
            "Graphs({} recorded, failed: {})",
            c.slots.len(),
            c.failed
        )
    }
}

#[derive(Default)]
struct Cache {
    slots: HashMap<Shape, Slot>,
    /// The arithmetic and output width the slots were recorded with: a conversion or a new
    /// Dense head replaces tensors that the recordings read, so they are dropped.
    made_for: Option<(Dtype, usize)>,
    /// Set by the first failure: later batches run eagerly.
    failed: bool,
    /// The smallest padded size (rows x tokens) whose recording ran out of memory: shapes as
    /// large run eagerly, smaller ones are still recorded (one long batch, say a server's
    /// largest request, must not turn recording off for the rest of the process).
    too_big: Option<usize>,
    /// Where the slots keep their memory (a new one whenever the slots are dropped).
    pool: Option<Pool>,
}

impl ElasticEncoder {
    /// How many encode shapes have a recorded pass.
    pub fn recorded_encode_shapes(&self) -> usize {
        let c = self.graphs.inner.lock();
        c.unwrap_or_else(PoisonError::into_inner).slots.len()
    }

    /// Whether a recording failed (the encoder then encodes eagerly for good).
    pub fn encode_graphs_failed(&self) -> bool {
        let c = self.graphs.inner.lock();
        c.unwrap_or_else(PoisonError::into_inner).failed
    }

    /// One batch's pooled vectors through its shape's recorded pass, padded to `rows` rows, or
    /// `None` when the batch must run eagerly (too many shapes, or a recording failed).
    ///
    /// # Shapes
    /// - returns `job.layers.len()` float32 tensors `[seqs.len(), output_dim]` on the device
    pub(super) fn embed_graphed(
        &self,
        seqs: &[&[i64]],
        job: &BatchJob,
        rows: usize,
    ) -> Option<Vec<Tensor>> {
        let _guard = tch::no_grad_guard();
        let shape = self.bucket(seqs, job, rows);
        let host = self.bucket_input(seqs, &shape);
        let mut cache = self
            .graphs
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let made_for = Some((self.dtype(), self.output_dim()));
        if cache.made_for != made_for {
            cache.slots.clear();
            cache.pool = None;
            cache.made_for = made_for;
        }
        let fresh = !cache.slots.contains_key(&shape);
        let padded = shape.rows * shape.tokens;
        let too_big = cache.too_big.is_some_and(|t| padded >= t);
        if cache.failed || (fresh && (too_big || !has_room(&mut cache, self.device()))) {
            return None;
        }
        let mut body = |s: &Static| self.graphed_body(s, job);
        let (rows, tokens) = (shape.rows, shape.tokens);
        match self.graphed_pass(&mut cache, shape, &host, &mut body) {
            Ok(out) => {
                super::phases::count_tokens(seqs.iter().map(|s| s.len()).sum(), padded);
                Some((0..job.layers.len() as i64).map(|k| out.get(k)).collect())
            }
            Err(e) if fresh && nest_core::caught::out_of_memory(&e.to_string()) => {
                cache.too_big = Some(cache.too_big.map_or(padded, |t| t.min(padded)));
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    eprintln!(
                        "warning: recording an encode pass of {rows} x {tokens} tokens ran out of \
                         memory; passes as large run eagerly, smaller ones stay recorded"
                    )
                });
                None
            }
            Err(e) => {
                cache.failed = true;
                eprintln!("warning: encoding through CUDA graphs failed ({e}); encoding eagerly");
                None
            }
        }
    }

    /// Replays `shape`'s pass on `host`, recording it first if new (the caller asked
    /// [`has_room`]); returns the pooled vectors
    /// of the batch's rows, copied out of the static output (`[layers, rows of host, dim]`).
    fn graphed_pass(
        &self,
        cache: &mut Cache,
        shape: Shape,
        host: &(Tensor, Layout, usize),
        body: &mut dyn FnMut(&Static) -> Result<()>,
    ) -> Result<Tensor> {
        let (input, layout, n) = host;
        let taken = |s: &Static| s.out.narrow(1, 0, *n as i64).copy();
        if let Some(slot) = cache.slots.get_mut(&shape) {
            fill(&slot.0.state, input);
            slot.0.run(body)?;
            return Ok(taken(&slot.0.state));
        }
        let dev = self.device();
        let state = Static::new(input, layout, shape.layers.len(), self.output_dim(), dev);
        fill(&state, input);
        // the warm-up pass computes this batch; the recording serves the next ones
        let pool = cache.pool.get_or_insert_with(|| Pool::new(dev));
        let c = Captured::record(pool, state, WARMUP, body).map_err(|f| f.error)?;
        let out = taken(&c.state);
        cache.slots.insert(shape, Slot(c));
        Ok(out)
    }

    /// The recorded work: the forward pass on the static input, unpacked, to the deepest
    /// layer, and every requested layer's pooled vectors into the static output. A panic (a
    /// libtorch error: an operation the capture refuses) is this pass's error.
    fn graphed_body(&self, s: &Static, job: &BatchJob) -> Result<()> {
        let run = nest_core::caught::catch(AssertUnwindSafe(|| {
            // pooled straight into the static output (a mean's product writes it: no copy)
            crate::without_packing(|| self.pool_layers(&s.batch, job, Some(&s.out)));
        }));
        run.map_err(|c| Error::Core(nest_core::Error::value("cuda graph", c.describe())))
    }

    /// The shape `seqs` is padded to: `rows` rows (at least the batch's), the longest text
    /// rounded up to [`bucket`] tokens (not beyond the tokenizer's longest, unless it is longer).
    fn bucket(&self, seqs: &[&[i64]], job: &BatchJob, rows: usize) -> Shape {
        let longest = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
        let cap = self.tokenizer.max_length().max(longest);
        let step = bucket();
        Shape {
            rows: rows.max(seqs.len()),
            tokens: (longest.div_ceil(step) * step).min(cap),
            deepest: job.deepest,
            layers: job.layers.to_vec(),
            skip: job.skip,
        }
    }

    /// The batch padded to `shape` on the host ([`pack_batch`]: ids, mask and what the host
    /// makes besides, laid out as the returned [`Layout`]), with its real row count. Padding
    /// rows hold one pad token (a row with no token at all would be a fully masked softmax).
    fn bucket_input(&self, seqs: &[&[i64]], shape: &Shape) -> (Tensor, Layout, usize) {
        let pad = [self.config.pad_id()];
        let mut rows = seqs.to_vec();
        rows.resize(shape.rows, &pad);
        let extras = self.extras(shape.skip);
        let (host, layout) = pack_batch(&rows, shape.tokens, self.config.pad_id(), extras);
        (host, layout, seqs.len())
    }
}

/// Copies a host batch ([`pack_batch`]'s bytes) into a graph's static input in one copy
/// (straight from pinned memory on a GPU, without waiting: the copy queues before the replay).
fn fill(s: &Static, host: &Tensor) {
    upload_into(&s.bytes, host);
}

#[cfg(test)]
mod tests;
