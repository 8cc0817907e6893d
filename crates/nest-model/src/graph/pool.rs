//! Where an owner's recordings keep their memory: [`Pool`].

use tch::Device;

#[cfg(feature = "cuda")]
use super::cuda;
use super::{Eager, StepGraph};
use crate::Result;

/// Where one owner's recordings (an encoder's shapes, a run's steps) keep the memory of their
/// intermediate tensors.
///
/// - **private** (the default): one memory pool per recording, libtorch's default. Each shape
///   holds every intermediate tensor of its pass for good: at batch 256 a training process
///   peaked at 3.5x the eager one, an encoder of Qwen3-0.6B's shape at 5x its peer
///   (BENCHMARKS.md, "On a GPU: one NVIDIA H100").
/// - **shared** (`NEST_GRAPH_POOL=shared`): the owner's recordings share one pool, as
///   `torch.cuda.graph(pool=...)` does, so the intermediates of one shape reuse those of
///   another and the owner holds about its largest pass's. Sound here because every tensor
///   that outlives a pass (static inputs and outputs, gradients, optimizer state) is made
///   outside the recordings, so a pool holds only a pass's temporaries, and an owner's
///   replays run one at a time on one stream. A pool is used by its owner only, and a new
///   one is taken when the owner drops its recordings (libtorch refuses a capture into a
///   pool whose graphs are all gone). Not yet measured on a GPU; the default stays private
///   until it is.
#[derive(Debug)]
pub struct Pool {
    device: Device,
    shared: bool,
    /// libtorch's id of the shared pool, taken at the first recording.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    id: Option<[u64; 2]>,
}

impl Pool {
    /// The pool of a new owner on `device`: shared when `NEST_GRAPH_POOL=shared`.
    pub fn new(device: Device) -> Pool {
        let shared = std::env::var("NEST_GRAPH_POOL").as_deref() == Ok("shared");
        Pool::with_sharing(device, shared)
    }

    pub fn with_sharing(device: Device, shared: bool) -> Pool {
        Pool {
            device,
            shared,
            id: None,
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
}
