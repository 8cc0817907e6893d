//! Where an owner's recordings keep their memory: [`Pool`].

use tch::Device;

#[cfg(feature = "cuda")]
use super::cuda;
use super::{Eager, StepGraph};
use crate::Result;

/// Where one owner's recordings (an encoder's shapes, a run's steps) keep the memory of their
/// intermediate tensors.
///
/// - **shared** (the default since 2026-11-28): the owner's recordings share one pool, as
///   `torch.cuda.graph(pool=...)` does, so the intermediates of one shape reuse those of
///   another and the owner holds about its largest pass's. Sound here because every tensor
///   that outlives a pass (static inputs and outputs, gradients, optimizer state) is made
///   outside the recordings, so a pool holds only a pass's temporaries, and an owner's
///   replays run one at a time on one stream. A pool is used by its owner only, and a new
///   one is taken when the owner drops its recordings (libtorch refuses a capture into a
///   pool whose graphs are all gone). Measured on an H200 (BENCHMARKS.md, "On a GPU: one
///   NVIDIA H200, 2026-11-28"): 200 recorded training steps gave the private pools' losses bit
///   for bit, plain and under GradCache, at 45-51% less process memory and the same speed.
/// - **private** (`NEST_GRAPH_POOL=private`): one memory pool per recording, libtorch's
///   default. Each shape holds every intermediate tensor of its pass for good: at batch 256 a
///   training process peaked at 3.5x the eager one, an encoder of Qwen3-0.6B's shape at 5x its
///   peer (BENCHMARKS.md, "On a GPU: one NVIDIA H100").
///
/// A pool also keeps its owner's recordings within a memory budget ([`Budget`]): a new shape is
/// recorded only while the process's memory leaves room for it; past that, the owner runs new
/// shapes eagerly ([`Pool::has_room`]), so that recording does not take a run or a server to
/// an out-of-memory stop that eager passes would have avoided (a guard, not a guarantee: other
/// processes on the device are not counted).
#[derive(Debug)]
pub struct Pool {
    device: Device,
    shared: bool,
    /// libtorch's id of the shared pool, taken at the first recording.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    id: Option<[u64; 2]>,
    /// The budget and how the process's memory is read (`None`: no device memory to watch,
    /// the CPU's case).
    memory: Option<(Budget, Reserved)>,
    /// Whether [`Pool::has_room`] said no already (it warns once).
    refused: bool,
}

/// Reads the bytes the process holds on a device (libtorch's caching allocator, recordings'
/// pools included).
pub type Reserved = fn(Device) -> Option<u64>;

/// The share of a device's memory that recordings may fill, unless `NEST_GRAPH_MEMORY` says.
pub const MEMORY_SHARE: f64 = 0.8;

/// How much of its device an owner's recordings may fill: a new recording is admitted while
/// the bytes the process holds plus the most that one recording has added so far stay within
/// a share of the device's memory ([`MEMORY_SHARE`], or `NEST_GRAPH_MEMORY` in `(0, 1]`).
///
/// Each recording keeps the temporaries of its pass for good (a private pool per shape), so a
/// run whose batches come in many shapes (lengths up to 256 tokens in buckets of 16, two
/// columns) could record its way out of memory: an all-mpnet-base-v2-sized model at batch 32
/// holds a few GiB per long shape. The rest of the device is left to the passes that then run
/// eagerly. Other processes on the same device are not counted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Bytes the process may hold once a new recording is made.
    limit: u64,
    /// The most one recording has added to the process's bytes so far.
    largest: u64,
}

impl Budget {
    /// A budget of `share` of `total` bytes.
    pub fn new(total: u64, share: f64) -> Budget {
        Budget {
            limit: (total as f64 * share.clamp(0.0, 1.0)) as u64,
            largest: 0,
        }
    }

    /// Whether a new recording fits while the process holds `held` bytes.
    pub fn admits(&self, held: u64) -> bool {
        held.saturating_add(self.largest) <= self.limit
    }

    /// Notes a recording that took the process from `before` to `after` bytes.
    pub fn recorded(&mut self, before: u64, after: u64) {
        self.largest = self.largest.max(after.saturating_sub(before));
    }

    /// The most one recording has added so far.
    pub fn largest(&self) -> u64 {
        self.largest
    }

    /// The bytes the process may hold once a new recording is made.
    pub fn limit(&self) -> u64 {
        self.limit
    }
}

/// `NEST_GRAPH_MEMORY`, or [`MEMORY_SHARE`] (with a warning naming the variable when it is not
/// a number in `(0, 1]`); read once per process, so that the warning comes once however many
/// owners make pools.
fn memory_share() -> f64 {
    static SHARE: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *SHARE.get_or_init(read_memory_share)
}

fn read_memory_share() -> f64 {
    match std::env::var("NEST_GRAPH_MEMORY") {
        Err(_) => MEMORY_SHARE,
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(x) if x > 0.0 && x <= 1.0 => x,
            _ => {
                eprintln!(
                    "warning: NEST_GRAPH_MEMORY={v:?}: expected a share of the device's memory \
                     in (0, 1]; using {MEMORY_SHARE}"
                );
                MEMORY_SHARE
            }
        },
    }
}

/// Whether owners share one pool among their recordings: `NEST_GRAPH_POOL` (`shared`, the
/// default, or `private`; anything else warns, naming the variable, and keeps the default),
/// read once per process.
fn shared_pools() -> bool {
    static SHARED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SHARED.get_or_init(|| {
        let v = std::env::var("NEST_GRAPH_POOL").ok();
        parse_sharing(v.as_deref()).unwrap_or_else(|e| {
            eprintln!("warning: {e}; using shared pools");
            true
        })
    })
}

/// `NEST_GRAPH_POOL`'s value: unset or `shared` -> shared, `private` -> private.
fn parse_sharing(v: Option<&str>) -> std::result::Result<bool, String> {
    match v.map(str::trim) {
        None | Some("") | Some("shared") => Ok(true),
        Some("private") => Ok(false),
        Some(other) => Err(format!(
            "NEST_GRAPH_POOL={other:?}: expected \"shared\" (the default) or \"private\""
        )),
    }
}

impl Pool {
    /// The pool of a new owner on `device`: shared unless `NEST_GRAPH_POOL=private`; on a GPU,
    /// recordings within [`Budget`]'s share of its memory.
    pub fn new(device: Device) -> Pool {
        let pool = Pool::with_sharing(device, shared_pools());
        match device_memory(device) {
            Some(total) => pool.with_budget(Budget::new(total, memory_share()), reserved_bytes),
            None => pool,
        }
    }

    pub fn with_sharing(device: Device, shared: bool) -> Pool {
        Pool {
            device,
            shared,
            id: None,
            memory: None,
            refused: false,
        }
    }

    /// This pool with `budget`, the process's bytes read by `reserved` (tests pass their own).
    pub fn with_budget(mut self, budget: Budget, reserved: Reserved) -> Pool {
        self.memory = Some((budget, reserved));
        self
    }

    /// The budget, where the device's memory is watched.
    pub fn budget(&self) -> Option<Budget> {
        self.memory.map(|(b, _)| b)
    }

    /// Whether a new shape may be recorded: always where no memory is watched (the CPU) or it
    /// cannot be read; else as [`Budget::admits`] says. The first no warns (on standard
    /// error).
    pub fn has_room(&mut self) -> bool {
        let Some((budget, reserved)) = self.memory else {
            return true;
        };
        let Some(held) = reserved(self.device) else {
            return true;
        };
        let room = budget.admits(held);
        if !room && !self.refused {
            self.refused = true;
            let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
            eprintln!(
                "note: no more shapes recorded as CUDA graphs on {:?}: the process holds {:.1} \
                 GiB, a recording has taken up to {:.1} GiB more, and recordings may fill {:.1} \
                 GiB (NEST_GRAPH_MEMORY); new shapes run eagerly",
                self.device,
                gib(held),
                gib(budget.largest()),
                gib(budget.limit())
            );
        }
        room
    }

    /// The process's bytes on the device now, where watched.
    pub(super) fn held(&self) -> Option<u64> {
        let (_, reserved) = self.memory?;
        reserved(self.device)
    }

    /// Notes what a recording added (`before`, then [`Pool::held`] now).
    pub(super) fn note_recording(&mut self, before: Option<u64>) {
        if let (Some(before), Some(after)) = (before, self.held()) {
            if let Some((budget, _)) = self.memory.as_mut() {
                budget.recorded(before, after);
            }
        }
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// A graph for work on the pool's device: a CUDA graph on a GPU (with the `cuda`
    /// feature), recording into this pool, else the fake.
    pub fn graph(&mut self) -> Result<Box<dyn StepGraph>> {
        match self.device {
            #[cfg(feature = "cuda")]
            Device::Cuda(_) => {
                let id = match (self.shared, self.id) {
                    (false, _) => None,
                    (true, Some(id)) => Some(id),
                    (true, None) => Some(*self.id.insert(cuda::new_pool()?)),
                };
                Ok(Box::new(cuda::CudaGraph::new(id)?))
            }
            _ => Ok(Box::new(Eager::default())),
        }
    }
}

/// The device's memory in bytes (a GPU's, with the `cuda` feature), else `None`.
fn device_memory(device: Device) -> Option<u64> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => cuda::total_memory(i).ok(),
        _ => None,
    }
}

/// The bytes libtorch's caching allocator holds on `device` (reserved: what the process has
/// taken from the device, recordings' pools included).
fn reserved_bytes(device: Device) -> Option<u64> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(i) => cuda::memory(i).ok().map(|m| m[2].max(0) as u64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the CPU a pool, shared or not, hands out the fake (nothing is recorded, nothing
    /// pooled); the sharing a caller asked for is kept.
    #[test]
    fn pools_on_the_cpu_give_the_fake() {
        for shared in [false, true] {
            let mut pool = Pool::with_sharing(Device::Cpu, shared);
            assert_eq!(pool.is_shared(), shared);
            let g = pool.graph().unwrap();
            assert!(!g.records());
            assert_eq!(pool.id, None, "no libtorch pool on the CPU");
        }
    }

    /// The CPU watches no memory: always room, no budget.
    #[test]
    fn the_cpu_always_has_room() {
        let mut pool = Pool::new(Device::Cpu);
        assert!(pool.budget().is_none());
        assert!(pool.has_room());
        assert_eq!(pool.held(), None);
    }

    /// A budget admits while what is held plus the costliest recording so far stays within
    /// its share: 80% of 1,000 bytes is 800.
    #[test]
    fn a_budget_admits_within_its_share() {
        let mut b = Budget::new(1000, 0.8);
        assert_eq!(b.limit(), 800);
        assert!(b.admits(800), "no recording yet: up to the limit");
        assert!(!b.admits(801));
        b.recorded(100, 350);
        assert_eq!(b.largest(), 250);
        b.recorded(400, 450);
        assert_eq!(b.largest(), 250, "the costliest is kept");
        b.recorded(500, 400);
        assert_eq!(
            b.largest(),
            250,
            "a recording that freed memory costs nothing"
        );
        assert!(b.admits(550));
        assert!(!b.admits(551));
        assert!(!b.admits(u64::MAX), "no overflow");
        assert_eq!(Budget::new(1000, 1.5).limit(), 1000, "a share is at most 1");
    }

    static HELD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    fn held_now(_: Device) -> Option<u64> {
        Some(HELD.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// A recording through a budgeted pool notes what it took (here its body holds 300 more
    /// bytes), and the pool says no once another such recording would pass the limit; a pool
    /// whose memory cannot be read always has room.
    #[test]
    fn recordings_note_their_cost_and_spend_the_budget() {
        use std::sync::atomic::Ordering::SeqCst;
        HELD.store(100, SeqCst);
        let mut pool =
            Pool::with_sharing(Device::Cpu, false).with_budget(Budget::new(1000, 0.8), held_now);
        assert!(pool.has_room());
        let mut body = |_: &()| {
            HELD.fetch_add(300, SeqCst);
            Ok(())
        };
        let c = super::super::Captured::record(&mut pool, (), 1, &mut body);
        assert!(c.is_ok());
        assert_eq!(HELD.load(SeqCst), 400);
        assert_eq!(pool.budget().unwrap().largest(), 300);
        assert!(pool.has_room(), "400 + 300 <= 800");
        HELD.store(501, SeqCst);
        assert!(!pool.has_room(), "501 + 300 > 800");
        assert!(!pool.has_room(), "and again (it warns once)");
        let mut unread =
            Pool::with_sharing(Device::Cpu, false).with_budget(Budget::new(1000, 0.8), |_| None);
        assert!(unread.has_room());
    }

    #[test]
    fn pools_are_shared_unless_private_is_asked_for() {
        assert_eq!(parse_sharing(None), Ok(true));
        assert_eq!(parse_sharing(Some("shared")), Ok(true));
        assert_eq!(parse_sharing(Some(" private ")), Ok(false));
        let e = parse_sharing(Some("per-shape")).unwrap_err();
        assert!(
            e.contains("NEST_GRAPH_POOL") && e.contains("private"),
            "{e}"
        );
    }
}
