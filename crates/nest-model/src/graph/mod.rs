//! Replaying recorded device work: CUDA graphs behind a small trait, with a CPU fake.
//!
//! A step of a small model on a GPU is bound by kernel launches, not arithmetic: MiniLM's
//! training step at batch 32 is a few thousand launches of a few microseconds each, and the GPU
//! idles between them (BENCHMARKS.md, "On a GPU"). A CUDA graph records those launches once and
//! replays them with one launch. The rules of a capture ([`torch.cuda.graph`]'s) shape this
//! module:
//! - **fixed shapes and addresses**: the recorded work reads and writes the same tensors every
//!   replay, so a caller copies its inputs into static tensors ([`Captured::state`]) and reads
//!   its outputs from static tensors; a new shape is a new graph (callers key graphs by shape
//!   bucket);
//! - **no host synchronisation** inside the recorded work (no `.item()`, no `nonzero`, no copy
//!   to or from pageable host memory): the layers run unpacked
//!   ([`crate::without_packing`]), learning rates and step counts are device tensors;
//! - **a side stream**: capture runs on a stream other than the default one, after warm-up passes
//!   on that stream (lazy initialisation inside a capture fails), as `torch.cuda.graph` does;
//!   one side stream per device, so **one thread records at a time** (a server's workers on one
//!   GPU take turns), in thread-local capture mode (other threads' work goes on meanwhile).
//!
//! [`StepGraph`] is that bookkeeping; [`CudaGraph`] (the `cuda` feature) is libtorch's
//! `at::cuda::CUDAGraph` through `shim/cuda_graph.cpp`, and [`Eager`] is the CPU fake, which
//! records nothing and asks the caller to run the body again at every replay: the same
//! arithmetic on the same static tensors, so that the CPU tests check everything but the
//! recording itself.
//!
//! [`torch.cuda.graph`]: https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs

use tch::Device;

use crate::{Error, Result};

/// When recorded work replaces eager passes: an encode's batches
/// ([`crate::EncodeOptions::graphs`]) and a training step (nest-train's recipe key
/// `cuda_graph`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphMode {
    /// Record on a GPU, run eagerly on the CPU (the default).
    #[default]
    Auto,
    /// Always go through the recording bookkeeping (on the CPU: the fake, which runs the body at
    /// each replay; what the tests use).
    On,
    Off,
}

impl std::str::FromStr for GraphMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<GraphMode, String> {
        match s {
            "auto" => Ok(GraphMode::Auto),
            "on" => Ok(GraphMode::On),
            "off" => Ok(GraphMode::Off),
            other => Err(format!("'{other}': expected auto, on or off")),
        }
    }
}

impl GraphMode {
    /// Whether work on `device` is recorded: `NEST_CUDA_GRAPHS=1` (on) or `0` (off) overrides
    /// the mode, for measurements; `Auto` records on a GPU only.
    pub fn resolve(self, device: Device) -> bool {
        let mode = match std::env::var("NEST_CUDA_GRAPHS").as_deref() {
            Ok("1") => GraphMode::On,
            Ok("0") => GraphMode::Off,
            _ => self,
        };
        match mode {
            GraphMode::Auto => device.is_cuda(),
            GraphMode::On => true,
            GraphMode::Off => false,
        }
    }

    /// The spelling a recipe and a flag use.
    pub fn name(&self) -> &'static str {
        match self {
            GraphMode::Auto => "auto",
            GraphMode::On => "on",
            GraphMode::Off => "off",
        }
    }

    /// Whether this is the default (what a saved recipe leaves out).
    pub fn is_default(&self) -> bool {
        *self == GraphMode::Auto
    }
}

/// What a replay did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The recorded work was launched.
    Replayed,
    /// Nothing was recorded (the CPU fake): the caller runs the body itself.
    RunBody,
}

/// One recording of device work: enter the side stream, warm up, begin, run the body once,
/// end, leave; then replay as often as wanted.
pub trait StepGraph {
    /// Makes the graph's side stream current (after the work queued so far).
    fn enter(&mut self) -> Result<()>;
    /// Restores the previous stream, which then waits for the side stream.
    fn leave(&mut self) -> Result<()>;
    /// Starts recording (inside [`StepGraph::enter`]).
    fn begin(&mut self) -> Result<()>;
    /// Stops recording.
    fn end(&mut self) -> Result<()>;
    /// Launches the recorded work, or says that nothing was recorded.
    fn replay(&mut self) -> Result<Replay>;
    /// Whether replays launch recorded work (false for the fake).
    fn records(&self) -> bool;
}

/// The CPU fake: checks the order of calls, records nothing.
#[derive(Debug, Default)]
pub struct Eager {
    entered: bool,
    recording: bool,
    recorded: bool,
}

impl Eager {
    fn order(what: &str) -> Error {
        Error::Core(nest_core::Error::value(
            "graph",
            format!("{what} out of order (enter, begin, end, leave, then replay)"),
        ))
    }
}

impl StepGraph for Eager {
    fn enter(&mut self) -> Result<()> {
        if self.entered {
            return Err(Self::order("enter"));
        }
        self.entered = true;
        Ok(())
    }
    fn leave(&mut self) -> Result<()> {
        if !self.entered || self.recording {
            return Err(Self::order("leave"));
        }
        self.entered = false;
        Ok(())
    }
    fn begin(&mut self) -> Result<()> {
        if !self.entered || self.recording || self.recorded {
            return Err(Self::order("begin"));
        }
        self.recording = true;
        Ok(())
    }
    fn end(&mut self) -> Result<()> {
        if !self.recording {
            return Err(Self::order("end"));
        }
        (self.recording, self.recorded) = (false, true);
        Ok(())
    }
    fn replay(&mut self) -> Result<Replay> {
        if !self.recorded || self.entered {
            return Err(Self::order("replay"));
        }
        Ok(Replay::RunBody)
    }
    fn records(&self) -> bool {
        false
    }
}

/// Recorded work with its static tensors: `state` holds the inputs the caller fills before
/// each [`Captured::run`] and the outputs it reads after.
pub struct Captured<S> {
    pub state: S,
    graph: Box<dyn StepGraph>,
}

/// `body(state)`, a panic in it (libtorch's error through tch: out of memory, an operation
/// a capture refuses) returned as its error, so that a capture is always ended and the side
/// stream left: a caller that goes on (Python, a server) finds its stream usable.
fn unpanicked<S>(body: &mut dyn FnMut(&S) -> Result<()>, state: &S) -> Result<()> {
    nest_core::caught::catch(std::panic::AssertUnwindSafe(|| body(state))).unwrap_or_else(|c| {
        Err(Error::Core(nest_core::Error::value(
            "cuda graph",
            c.describe(),
        )))
    })
}

/// A recording that failed, with its state back.
pub struct Failed<S> {
    pub state: S,
    pub error: Error,
    /// Whether every warm-up pass ran (the failure was the capture's): their effects stand.
    pub warmed: bool,
}

impl<S> Captured<S> {
    /// Runs `warmup` passes of `body` on the side stream (real passes: a training step's are
    /// steps), then records one pass, which does **not** run: [`Captured::run`] runs it. The
    /// fake records nothing and skips the recorded pass, so that both run the body the same
    /// number of times. At least one warm-up pass is wise on a GPU: lazy initialisation
    /// (handles, workspaces) inside a capture fails. The recording keeps its memory in
    /// `pool`, which notes what it took (its warm-up passes' included: an overestimate, on
    /// the safe side of [`Budget`]). Whether there is room for it is the caller's question
    /// ([`Pool::has_room`]), asked before it prepares the recording's state.
    pub fn record(
        pool: &mut Pool,
        state: S,
        warmup: usize,
        body: &mut dyn FnMut(&S) -> Result<()>,
    ) -> std::result::Result<Captured<S>, Failed<S>> {
        let before = pool.held();
        let recorded = match pool.graph() {
            Ok(g) => Self::record_with(g, state, warmup, body),
            Err(error) => Err(Failed {
                state,
                error,
                warmed: false,
            }),
        };
        if recorded.is_ok() {
            pool.note_recording(before);
        }
        recorded
    }

    /// [`Captured::record`] with a given graph (tests pass the fake).
    pub fn record_with(
        mut graph: Box<dyn StepGraph>,
        state: S,
        warmup: usize,
        body: &mut dyn FnMut(&S) -> Result<()>,
    ) -> std::result::Result<Captured<S>, Failed<S>> {
        let fail = |state, error, warmed| Failed {
            state,
            error,
            warmed,
        };
        let _turn = match Turn::take() {
            Ok(t) => t,
            Err(e) => return Err(fail(state, e, false)),
        };
        if let Err(e) = graph.enter() {
            return Err(fail(state, e, false));
        }
        if let Err(e) = (0..warmup).try_for_each(|_| unpanicked(body, &state)) {
            let _ = graph.leave();
            return Err(fail(state, e, false));
        }
        let recorded = graph.begin().and_then(|()| {
            let ran = match graph.records() {
                true => unpanicked(body, &state),
                false => Ok(()),
            };
            // a failed body still ends the capture, so that the stream is usable again
            let ended = graph.end();
            ran.and(ended)
        });
        let left = graph.leave();
        match recorded.and(left) {
            Ok(()) => Ok(Captured { state, graph }),
            Err(e) => Err(fail(state, e, true)),
        }
    }

    /// One pass: the recorded work replayed, or `body` run on the fake.
    pub fn run(&mut self, body: &mut dyn FnMut(&S) -> Result<()>) -> Result<()> {
        match self.graph.replay()? {
            Replay::Replayed => Ok(()),
            Replay::RunBody => body(&self.state),
        }
    }

    /// Whether [`Captured::run`] replays recorded work.
    pub fn records(&self) -> bool {
        self.graph.records()
    }
}

/// One thread records at a time in the process: every graph of a device captures on one shared
/// side stream (`shim/cuda_graph.cpp`: autograd ties a gradient's accumulation to one stream),
/// so two threads recording at once (a server's workers sharing a GPU) would each record the
/// other's launches into their graph, or break its capture. Held from `enter` to `leave`;
/// replays and eager work of other threads go on meanwhile.
static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

thread_local! {
    /// Whether this thread holds [`RECORDING`] (a recording inside a recording's body is an
    /// error, not a deadlock).
    static HOLDS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// This thread's turn to record, until dropped.
struct Turn {
    _guard: std::sync::MutexGuard<'static, ()>,
}

impl Turn {
    fn take() -> Result<Turn> {
        if HOLDS.with(|h| h.get()) {
            return Err(Error::Core(nest_core::Error::value(
                "graph",
                "a recording inside another recording's body (one thread records at a time)",
            )));
        }
        let guard = RECORDING.lock().unwrap_or_else(|p| p.into_inner());
        HOLDS.with(|h| h.set(true));
        Ok(Turn { _guard: guard })
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        HOLDS.with(|h| h.set(false));
    }
}

/// The CUDA caching allocator's bytes on a device: `(allocated peak, reserved peak)` since the
/// last [`reset_peak_memory`]; `None` on the CPU or without the `cuda` feature.
pub fn peak_memory(device: Device) -> Option<(u64, u64)> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => cuda::memory(i).ok().map(|m| (m[1] as u64, m[3] as u64)),
        _ => None,
    }
}

/// Restarts [`peak_memory`]'s peaks from the current use (nothing on the CPU).
pub fn reset_peak_memory(device: Device) {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => {
            let _ = cuda::reset_peak(i);
        }
        _ => {}
    }
}

/// Gives the calling thread a CUDA stream of its own on `device` (nothing on the CPU): its work
/// queues there from then on, and its copies to the host wait for its own work only. A server's
/// workers sharing one GPU each take one, so that one worker's host work (taking a batch,
/// uploading it, answering) overlaps another's device work.
pub fn own_stream(device: Device) -> Result<()> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => cuda::own_stream(i),
        _ => Ok(()),
    }
}

#[cfg(feature = "cuda")]
#[allow(unsafe_code)]
pub(crate) mod cuda;
mod pool;

pub use pool::{Budget, Pool, Reserved, MEMORY_SHARE};

#[cfg(feature = "cuda")]
pub use cuda::CudaGraph;

#[cfg(test)]
mod tests;
