//! Encoding through recorded forward passes: one CUDA graph per batch shape ([`crate::graph`]).
//!
//! A batch of 32 short sentences costs a GPU a few hundred kernel launches of a few microseconds
//! each, more than their arithmetic, so early exit saved little there (layer 3 1.07-1.17x layer
//! 6; BENCHMARKS.md, "On a GPU: one NVIDIA H200"). A replay is one launch. What it needs, and
//! this module arranges:
//! - fixed shapes: a batch is padded to its bucket, `rows` rows (a last, partial batch gets
//!   padding rows of one pad token) and its longest text rounded up to a multiple of [`BUCKET`]
//!   tokens; one graph per (rows, tokens, deepest layer, pooled layers, prompt tokens skipped),
//!   at most [`MAX_GRAPHS`], and while the device's memory leaves room ([`Pool::has_room`];
//!   further shapes run eagerly);
//! - static tensors: the ids and mask are copied in before a replay, and the pooled vectors of
//!   every requested layer copied out after it (to a new tensor, which the next replay leaves
//!   alone: the host reads it later, [`super::embed`]);
//! - nothing read back inside: the layers run unpacked ([`crate::without_packing`]).
//!
//! Padding changes the vectors by float reordering only (the tests below, on the CPU fake: 1e-5).
//! A failed recording or replay (a refused operation, a CUDA error, a panic) warns once; that
//! batch and all later ones then run eagerly, so no encode is lost.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, PoisonError};

use tch::{Device, Kind, Tensor};

use super::embed::BatchJob;
use super::transfer::upload_into;
use super::ElasticEncoder;
use crate::dtype::Dtype;
use crate::graph::{Captured, Pool};
use crate::{EncoderInput, Error, Result};

/// Token counts are padded up to a multiple of this (fewer graphs, a little more padding).
pub const BUCKET: usize = 16;
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
/// - `input`: `[rows, tokens]` int64 ids and mask
/// - `out`: `[layers, rows, output_dim]` float32, the pooled vectors of each requested layer
struct Static {
    input: EncoderInput,
    out: Tensor,
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
        if cache.failed || (fresh && !has_room(&mut cache, self.device())) {
            return None;
        }
        let mut body = |s: &Static| self.graphed_body(s, job);
        match self.graphed_pass(&mut cache, shape, &host, &mut body) {
            Ok(out) => Some((0..job.layers.len() as i64).map(|k| out.get(k)).collect()),
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
        host: &(EncoderInput, usize),
        body: &mut dyn FnMut(&Static) -> Result<()>,
    ) -> Result<Tensor> {
        let (input, n) = host;
        let taken = |s: &Static| s.out.narrow(1, 0, *n as i64).copy();
        if let Some(slot) = cache.slots.get_mut(&shape) {
            fill(&slot.0.state, input);
            slot.0.run(body)?;
            return Ok(taken(&slot.0.state));
        }
        let dev = self.device();
        let state = Static {
            input: EncoderInput {
                ids: input.ids.zeros_like().to_device(dev),
                mask: input.mask.zeros_like().to_device(dev),
            },
            out: Tensor::zeros(
                [shape.layers.len(), shape.rows, self.output_dim()].map(|d| d as i64),
                (Kind::Float, dev),
            ),
        };
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
        let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let pooled = crate::without_packing(|| self.pool_layers(&s.input, job));
            s.out.shallow_clone().copy_(&Tensor::stack(&pooled, 0));
        }));
        run.map_err(|p| {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|m| m.to_string()))
                .unwrap_or_else(|| "the forward pass panicked".into());
            Error::Core(nest_core::Error::value("cuda graph", msg))
        })
    }

    /// The shape `seqs` is padded to: `rows` rows (at least the batch's), the longest text
    /// rounded up to [`BUCKET`] tokens (not beyond the tokenizer's longest, unless it is longer).
    fn bucket(&self, seqs: &[&[i64]], job: &BatchJob, rows: usize) -> Shape {
        let longest = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
        let cap = self.tokenizer.max_length().max(longest);
        Shape {
            rows: rows.max(seqs.len()),
            tokens: (longest.div_ceil(BUCKET) * BUCKET).min(cap),
            deepest: job.deepest,
            layers: job.layers.to_vec(),
            skip: job.skip,
        }
    }

    /// The batch padded to `shape` on the host, with its real row count. Padding rows hold one
    /// pad token (a row with no token at all would be a fully masked softmax).
    fn bucket_input(&self, seqs: &[&[i64]], shape: &Shape) -> (EncoderInput, usize) {
        let pad = [self.config.pad_id()];
        let mut rows = seqs.to_vec();
        rows.resize(shape.rows, &pad);
        (
            self.make_input_on(&rows, shape.tokens, Device::Cpu),
            seqs.len(),
        )
    }
}

/// Copies a host batch into a graph's static input (straight from pinned memory on a GPU,
/// without waiting: the copies queue before the replay).
fn fill(s: &Static, host: &EncoderInput) {
    upload_into(&s.input.ids, &host.ids);
    upload_into(&s.input.mask, &host.mask);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Architecture;
    use crate::graph::GraphMode;
    use crate::tiny::{write_tiny_model, TinySpec};
    use crate::EncodeOptions;

    /// Lengths from 3 to over 30 tokens: several token buckets.
    const TEXTS: [&str; 7] = [
        "the cat sat on the mat",
        "a man is playing music",
        "dog",
        "the dog is playing guitar on the mat, a man sat!",
        "xyz 123",
        "the cat and the dog sat on a mat while a man is playing guitar music",
        "a",
    ];

    fn tiny(arch: Architecture) -> (tempfile::TempDir, ElasticEncoder) {
        let dir = tempfile::tempdir().unwrap();
        write_tiny_model(dir.path(), &TinySpec::new(arch)).unwrap();
        let enc = ElasticEncoder::load(dir.path(), Device::Cpu, None).unwrap();
        (dir, enc)
    }

    fn opts(batch_size: usize, graphs: GraphMode) -> EncodeOptions {
        EncodeOptions {
            batch_size,
            graphs,
            ..EncodeOptions::default()
        }
    }

    fn max_diff(a: &[Tensor], b: &[Tensor]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(a, b)| {
                assert_eq!(a.size(), b.size());
                (a - b).abs().max().double_value(&[])
            })
            .fold(0.0, f64::max)
    }

    /// Forced on (the CPU fake), padded rows and tokens and no packing give the eager vectors
    /// to 1e-5: every architecture, several batch sizes (a last partial batch among them), one
    /// and several layers at once; a second encode reuses the recorded shapes.
    #[test]
    fn recorded_passes_give_the_eager_vectors() {
        for arch in [
            Architecture::Bert,
            Architecture::Mpnet,
            Architecture::ModernBert,
            Architecture::Qwen3,
        ] {
            let (_d, enc) = tiny(arch);
            for layers in [&[2usize][..], &[1], &[1, 2]] {
                for batch in [1, 3, 4, 7, 32] {
                    let off = opts(batch, GraphMode::Off);
                    let eager = enc.embed_layers(&TEXTS, layers, off, &mut |_| {}).unwrap();
                    let on = opts(batch, GraphMode::On);
                    let graphed = enc.embed_layers(&TEXTS, layers, on, &mut |_| {}).unwrap();
                    let d = max_diff(&eager, &graphed);
                    assert!(d < 1e-5, "{arch:?} layers {layers:?} batch {batch}: {d}");
                }
            }
            let shapes = enc.recorded_encode_shapes();
            assert!(shapes > 1 && shapes <= MAX_GRAPHS, "{arch:?}: {shapes}");
            enc.embed_layers(&TEXTS, &[1, 2], opts(3, GraphMode::On), &mut |_| {})
                .unwrap();
            assert_eq!(enc.recorded_encode_shapes(), shapes, "{arch:?}: reused");
        }
    }

    /// A prompt left out of the pooling (its tokens skipped) is skipped in the recorded pass too.
    #[test]
    fn recorded_passes_skip_a_prompt() {
        let (_d, mut enc) = tiny(Architecture::Bert);
        enc.include_prompt = false;
        let run = |mode| {
            let o = opts(3, mode);
            enc.embed_prompted(&TEXTS, &[1, 2], o, Some("the man "), &mut |_| {})
                .unwrap()
        };
        let (eager, graphed) = (run(GraphMode::Off), run(GraphMode::On));
        assert!(max_diff(&eager, &graphed) < 1e-5);
        let unprompted = enc
            .embed_layers(&TEXTS, &[1, 2], opts(3, GraphMode::Off), &mut |_| {})
            .unwrap();
        assert!(max_diff(&eager, &unprompted) > 1e-3, "the prompt counts");
    }

    /// A pass that fails (here a panic inside the forward pass, as a capture's refusal would
    /// be) gives `None`, warns, and turns recording off for good; encodes go on eagerly.
    #[test]
    fn a_failed_recording_falls_back_to_eager() {
        let (_d, enc) = tiny(Architecture::Bert);
        let ids = enc.tokenizer.encode(&TEXTS).unwrap();
        let seqs: Vec<&[i64]> = ids.iter().map(Vec::as_slice).collect();
        // layer 5 of a 2-layer model: the pooling indexes past the hidden states
        let bad = BatchJob {
            layers: &[5],
            deepest: 5,
            skip: 0,
        };
        assert!(enc.embed_graphed(&seqs, &bad, 8).is_none());
        assert_eq!(enc.recorded_encode_shapes(), 0);
        let good = BatchJob {
            layers: &[2],
            deepest: 2,
            skip: 0,
        };
        assert!(enc.embed_graphed(&seqs, &good, 8).is_none(), "off for good");
        let on = enc.embed_layers(&TEXTS, &[2], opts(2, GraphMode::On), &mut |_| {});
        let off = enc.embed_layers(&TEXTS, &[2], opts(2, GraphMode::Off), &mut |_| {});
        assert_eq!(
            max_diff(&on.unwrap(), &off.unwrap()),
            0.0,
            "eager, bit for bit"
        );
    }

    /// A pool whose memory budget is spent records no new shape: those batches run eagerly
    /// (the same vectors as a recorded pass, to 1e-5), shapes recorded before still replay,
    /// and the encoder is not marked failed.
    #[test]
    fn a_spent_memory_budget_records_no_new_shape() {
        use crate::graph::{Budget, Pool};
        let (_d, enc) = tiny(Architecture::Bert);
        let on = |batch| opts(batch, GraphMode::On);
        let first = enc.embed_layers(&TEXTS, &[2], on(4), &mut |_| {}).unwrap();
        let shapes = enc.recorded_encode_shapes();
        assert!(shapes > 0);
        {
            let mut c = enc.graphs.inner.lock().unwrap();
            // the process holds 900 of 1,000 bytes, 800 may be held with a new recording
            let full = Pool::with_sharing(Device::Cpu, false)
                .with_budget(Budget::new(1000, 0.8), |_| Some(900));
            c.pool = Some(full);
        }
        let again = enc.embed_layers(&TEXTS, &[2], on(4), &mut |_| {}).unwrap();
        assert_eq!(
            max_diff(&first, &again),
            0.0,
            "recorded shapes still replay"
        );
        let other = enc.embed_layers(&TEXTS, &[2], on(3), &mut |_| {}).unwrap();
        let eager = enc
            .embed_layers(&TEXTS, &[2], opts(3, GraphMode::Off), &mut |_| {})
            .unwrap();
        assert!(max_diff(&other, &eager) < 1e-5);
        assert_eq!(
            enc.recorded_encode_shapes(),
            shapes,
            "no new shape recorded"
        );
        assert!(!enc.encode_graphs_failed());
    }

    /// Buckets: rows at least the batch's, tokens rounded up to 16 but not past the
    /// tokenizer's longest (64 here) unless a text is longer.
    #[test]
    fn buckets_round_tokens_up() {
        let (_d, enc) = tiny(Architecture::Bert);
        let job = BatchJob {
            layers: &[1, 2],
            deepest: 2,
            skip: 1,
        };
        let (a, b, c) = (vec![1i64; 17], vec![1i64; 3], vec![1i64; 70]);
        let s = enc.bucket(&[&a, &b], &job, 4);
        assert_eq!((s.rows, s.tokens, s.deepest, s.skip), (4, 32, 2, 1));
        assert_eq!(enc.bucket(&[&b], &job, 1).tokens, 16);
        assert_eq!(enc.bucket(&[&c, &b], &job, 1).tokens, 70);
        assert_eq!(enc.bucket(&[&c, &b], &job, 1).rows, 2);
        let (input, n) = enc.bucket_input(&[&a, &b], &s);
        assert_eq!((input.ids.size(), n), (vec![4, 32], 2));
        let mask = Vec::<i64>::try_from(input.mask.sum_dim_intlist(1, false, Kind::Int64));
        assert_eq!(mask.unwrap(), [17, 3, 1, 1], "padding rows hold one token");
    }

    /// `Auto` records on a GPU only (when `NEST_CUDA_GRAPHS` is not set).
    #[test]
    fn auto_is_off_on_the_cpu() {
        if std::env::var_os("NEST_CUDA_GRAPHS").is_some() {
            return;
        }
        assert!(!GraphMode::Auto.resolve(Device::Cpu));
        assert!(GraphMode::Auto.resolve(Device::Cuda(0)));
        assert!(GraphMode::On.resolve(Device::Cpu));
        assert!(!GraphMode::Off.resolve(Device::Cuda(0)));
        assert_eq!("on".parse::<GraphMode>(), Ok(GraphMode::On));
        assert!("yes".parse::<GraphMode>().is_err());
    }
}
