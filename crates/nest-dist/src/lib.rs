//! Data parallelism for Nest on PyTorch's own distributed engine (c10d): the launch
//! environment ([`Launch`], read from the variables torchrun and most schedulers set) and a
//! process group ([`Group`]: a `TCPStore` for rendezvous, `ProcessGroupGloo` for the
//! collectives on CPU, `ProcessGroupNCCL` on GPU in the `cuda` build) reached through
//! nest-sys's six-function C++ shim (`shim/dist.cpp`).
//!
//! Why a crate of its own: it knows nothing of models or objectives; nest-train decides what
//! to gather and what to sum. What not to put
//! here: anything about batches, losses or checkpoints.

mod end;
mod launch;

use std::ffi::{c_int, c_long, c_void, CString};
use std::time::{Duration, Instant};

use tch::{Device, Tensor};

pub use end::End;
pub use launch::{Launch, LaunchError};

/// Groups this process has joined so far.
static JOINED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A failed collective or rendezvous, with c10d's own message.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(
        "rank {rank}: could not join the process group at {addr}:{port} within {timeout_s} s \
         (MASTER_ADDR / MASTER_PORT; is rank 0 up and the port reachable?): {message}"
    )]
    Rendezvous {
        rank: usize,
        addr: String,
        port: u16,
        timeout_s: u64,
        message: String,
    },
    #[error(
        "rank {rank}: {op} failed (another rank stopped or the network broke; \
         the group times out after {timeout_s} s): {message}"
    )]
    Collective {
        rank: usize,
        op: &'static str,
        timeout_s: u64,
        message: String,
    },
    #[error(
        "rank {rank}: {local_world} processes on this machine and {gpus} GPU(s): NCCL needs a \
         GPU of its own for each process (two ranks on one GPU are refused); launch at most \
         {gpus} per machine (torchrun --nproc-per-node {gpus}), or train on the CPU (Gloo)"
    )]
    GpusShort {
        rank: usize,
        local_world: usize,
        gpus: usize,
    },
}

use nest_sys::{self as ffi, call};

/// What the collectives cost so far on this rank.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Traffic {
    /// Bytes this rank put into collectives (all-reduce buffers and all-gather inputs).
    pub bytes: u64,
    /// Wall time spent inside collectives.
    pub seconds: f64,
    /// Number of collective calls.
    pub calls: u64,
}

/// The engine a [`Group`] runs its collectives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// c10d's `ProcessGroupGloo`: CPU tensors, any build.
    Gloo,
    /// c10d's `ProcessGroupNCCL` on this CUDA device (the `cuda` build only).
    Nccl(usize),
}

impl Backend {
    /// The engine for tensors on `device`: NCCL for a GPU, Gloo for the CPU.
    pub fn for_device(device: Device) -> Backend {
        match device {
            Device::Cuda(i) => Backend::Nccl(i),
            _ => Backend::Gloo,
        }
    }

    /// How a log names it: `c10d Gloo`, `c10d NCCL on cuda:0`.
    pub fn describe(self) -> String {
        match self {
            Backend::Gloo => "c10d Gloo".into(),
            Backend::Nccl(i) => format!("c10d NCCL on cuda:{i}"),
        }
    }

    /// Where the collectives' tensors must live.
    pub fn device(self) -> Device {
        match self {
            Backend::Gloo => Device::Cpu,
            Backend::Nccl(i) => Device::Cuda(i),
        }
    }
}

/// A c10d process group: Gloo for CPU tensors, NCCL for GPU tensors. A tensor on another
/// device than the group's is staged through the group's device and copied back.
pub struct Group {
    raw: *mut c_void,
    rank: usize,
    world: usize,
    backend: Backend,
    timeout: Duration,
    traffic: std::cell::Cell<Traffic>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Group(rank {} of {})", self.rank, self.world)
    }
}

#[allow(unsafe_code)]
impl Drop for Group {
    fn drop(&mut self) {
        let how = End::for_backend(self.backend).bits();
        // SAFETY: `raw` came from nest_dist_new and is ended once (here or in `end`, which
        // forgets the group).
        unsafe { ffi::nest_dist_free(self.raw, how) }
    }
}

/// The error of more processes on this machine than GPUs for an NCCL group, said before any
/// rank joins (NCCL's own "Duplicate GPU detected" came at the first collective, and the
/// ranks crashed leaving the group).
fn gpus_short(launch: &Launch, gpus: usize) -> Option<DistError> {
    (launch.local_world > gpus).then_some(DistError::GpusShort {
        rank: launch.rank,
        local_world: launch.local_world,
        gpus,
    })
}

impl Group {
    /// Rendezvous at `launch`'s MASTER_ADDR:MASTER_PORT and join a Gloo group (CPU). Every
    /// collective (and the rendezvous itself) fails after `timeout` instead of hanging when a
    /// rank is gone.
    pub fn join(launch: &Launch, timeout: Duration) -> Result<Group, DistError> {
        Group::join_with(launch, timeout, Backend::Gloo)
    }

    /// [`Group::join`] on the given engine. NCCL needs the `cuda` build (the error says so
    /// otherwise); every rank must ask for the same engine.
    #[allow(unsafe_code)]
    pub fn join_with(
        launch: &Launch,
        timeout: Duration,
        backend: Backend,
    ) -> Result<Group, DistError> {
        if matches!(backend, Backend::Nccl(_)) && cfg!(feature = "cuda") {
            let gpus = usize::try_from(tch::Cuda::device_count()).unwrap_or(0);
            gpus_short(launch, gpus).map_or(Ok(()), Err)?;
        }
        let fail = |message: String| DistError::Rendezvous {
            rank: launch.rank,
            addr: launch.master_addr.clone(),
            port: launch.master_port,
            timeout_s: timeout.as_secs(),
            message,
        };
        let host = CString::new(launch.master_addr.as_str()).map_err(|e| fail(e.to_string()))?;
        // every group this process joins gets its own keys (e.g. `nest distill`'s two stages
        // under torchrun's long-lived agent store); all ranks join in the same order
        let k = JOINED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let prefix = format!("{}group_{k}/", launch.store_prefix());
        let prefix = CString::new(prefix).map_err(|e| fail(e.to_string()))?;
        let mut raw: *mut c_void = std::ptr::null_mut();
        call(|err| unsafe {
            // SAFETY: pointers live for the call; `raw` is written on success only.
            ffi::nest_dist_new(
                host.as_ptr(),
                c_int::from(launch.master_port),
                launch.rank as c_int,
                launch.world as c_int,
                timeout.as_millis() as c_long,
                prefix.as_ptr(),
                c_int::from(launch.serves_store()),
                c_int::from(matches!(backend, Backend::Nccl(_))),
                match backend {
                    Backend::Nccl(i) => i as c_int,
                    Backend::Gloo => 0,
                },
                &mut raw,
                err,
            )
        })
        .map_err(fail)?;
        Ok(Group {
            raw,
            rank: launch.rank,
            world: launch.world,
            backend,
            timeout,
            traffic: Default::default(),
        })
    }

    /// Ends the group as `how` says instead of as a drop would (see [`End`]).
    #[allow(unsafe_code)]
    pub fn end(self, how: End) {
        // SAFETY: as in `drop`; the group is forgotten, so it is ended once
        unsafe { ffi::nest_dist_free(self.raw, how.bits()) };
        std::mem::forget(self);
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn world(&self) -> usize {
        self.world
    }

    /// The engine the collectives run on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Collective traffic so far.
    pub fn traffic(&self) -> Traffic {
        self.traffic.get()
    }

    fn account(&self, bytes: u64, start: Instant) {
        let mut t = self.traffic.get();
        t.bytes += bytes;
        t.seconds += start.elapsed().as_secs_f64();
        t.calls += 1;
        self.traffic.set(t);
    }

    fn failed(&self, op: &'static str) -> impl Fn(String) -> DistError + '_ {
        move |message| DistError::Collective {
            rank: self.rank,
            op,
            timeout_s: self.timeout.as_secs(),
            message,
        }
    }

    /// Sums a contiguous tensor in place across the group.
    pub fn all_reduce_sum(&self, t: &mut Tensor) -> Result<(), DistError> {
        let home = self.backend.device();
        if t.device() == home {
            return self.all_reduce_here(t);
        }
        let mut staged = t.to_device(home);
        self.all_reduce_here(&mut staged)?;
        t.copy_(&staged);
        Ok(())
    }

    #[allow(unsafe_code)]
    fn all_reduce_here(&self, t: &mut Tensor) -> Result<(), DistError> {
        let start = Instant::now();
        let bytes = (t.numel() * t.kind().elt_size_in_bytes()) as u64;
        let ptr = t.as_mut_ptr();
        // SAFETY: `t` is alive and exclusively borrowed for the call.
        call(|err| unsafe { ffi::nest_dist_allreduce_sum(self.raw, ptr, err) })
            .map_err(self.failed("all-reduce"))?;
        self.account(bytes, start);
        Ok(())
    }

    /// Every rank's `t` (same shape and kind on every rank), in rank order, on `t`'s device.
    pub fn all_gather(&self, t: &Tensor) -> Result<Vec<Tensor>, DistError> {
        let home = self.backend.device();
        if t.device() == home {
            return self.all_gather_here(t);
        }
        let parts = self.all_gather_here(&t.to_device(home))?;
        Ok(parts.iter().map(|p| p.to_device(t.device())).collect())
    }

    #[allow(unsafe_code)]
    fn all_gather_here(&self, t: &Tensor) -> Result<Vec<Tensor>, DistError> {
        let start = Instant::now();
        let mut input = t.contiguous();
        let mut outs: Vec<Tensor> = (0..self.world).map(|_| input.empty_like()).collect();
        let ptrs: Vec<*mut ffi::C_tensor> = outs.iter_mut().map(|o| o.as_mut_ptr()).collect();
        let inp = input.as_mut_ptr();
        // SAFETY: every tensor outlives the call; the shim copies the handles it needs.
        call(|err| unsafe {
            ffi::nest_dist_allgather(self.raw, inp, ptrs.as_ptr(), self.world as c_int, err)
        })
        .map_err(self.failed("all-gather"))?;
        self.account((t.numel() * t.kind().elt_size_in_bytes()) as u64, start);
        Ok(outs)
    }

    /// The ranks whose step failed: each rank says whether its own step succeeded and learns
    /// every other rank's answer (one small all-gather), so that a refusal on one rank stops
    /// the others at once instead of leaving them in their next collective until the timeout.
    pub fn failed_ranks(&self, ok: bool) -> Result<Vec<usize>, DistError> {
        let flags = self.all_gather(&Tensor::from_slice(&[i64::from(!ok)]))?;
        Ok(flags
            .iter()
            .enumerate()
            .filter(|(_, f)| f.int64_value(&[0]) != 0)
            .map(|(rank, _)| rank)
            .collect())
    }

    /// Whether any rank says `yes` (one small all-gather): a decision every rank then takes
    /// alike, such as stopping after this step.
    pub fn any(&self, yes: bool) -> Result<bool, DistError> {
        Ok(!self.failed_ranks(!yes)?.is_empty())
    }

    /// Waits for every rank.
    #[allow(unsafe_code)]
    pub fn barrier(&self) -> Result<(), DistError> {
        // SAFETY: `raw` is a live group.
        call(|err| unsafe { ffi::nest_dist_barrier(self.raw, err) }).map_err(self.failed("barrier"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_processes_than_gpus_are_refused_with_the_fix() {
        let mut launch = Launch {
            rank: 1,
            world: 4,
            local_rank: 1,
            local_world: 2,
            master_addr: "127.0.0.1".into(),
            master_port: 29500,
            agent_store: false,
            restart: 0,
        };
        let e = gpus_short(&launch, 1).unwrap().to_string();
        assert_eq!(
            e,
            "rank 1: 2 processes on this machine and 1 GPU(s): NCCL needs a GPU of its own for \
             each process (two ranks on one GPU are refused); launch at most 1 per machine \
             (torchrun --nproc-per-node 1), or train on the CPU (Gloo)"
        );
        assert!(gpus_short(&launch, 2).is_none());
        launch.local_world = 8;
        assert!(gpus_short(&launch, 8).is_none() && gpus_short(&launch, 7).is_some());
    }
}
