// The whole C++ side of Nest's data parallelism: a c10d TCPStore for rendezvous and a
// ProcessGroupGloo (CPU) or, in the `cuda` build, a ProcessGroupNCCL (GPU) on it, behind a
// handful of C functions. Everything else is in Rust (nest-dist).
//
// Errors never cross the boundary as exceptions (guard.h).

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#ifdef NEST_DIST_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "guard.h"

#include <stdexcept>

namespace {

struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
};

// The collectives' engine: Gloo for CPU tensors; NCCL (cuda build only) for tensors on GPU
// `device`, which it binds this process to.
c10::intrusive_ptr<c10d::Backend> make_backend(
    const c10::intrusive_ptr<c10d::Store>& store,
    int rank,
    int world,
    std::chrono::milliseconds timeout,
    int backend,
    int device) {
  if (backend == 0) {
    auto options = c10d::ProcessGroupGloo::Options::create_default(timeout);
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
  }
#ifdef NEST_DIST_NCCL
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, options);
#else
  (void)device;
  throw std::runtime_error(
      "this nest was built without NCCL; build with `--features cuda` for GPU process groups");
#endif
}

} // namespace

extern "C" {

// Rendezvous on host:port and join a group of `world`: `backend` 0 is Gloo, 1 is NCCL on
// GPU `device` (cuda build). `server`: this process hosts the
// TCPStore (rank 0, unless torchrun's agent already does); keys live under `prefix` (torchrun
// restarts reuse the agent's store, so each attempt needs its own).
int nest_dist_new(
    const char* host,
    int port,
    int rank,
    int world,
    long timeout_ms,
    const char* prefix,
    int server,
    int backend,
    int device,
    void** out,
    char** err) {
  return nest::guarded(err, [&] {
    auto timeout = std::chrono::milliseconds(timeout_ms);
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(port);
    so.isServer = server != 0;
    so.numWorkers = static_cast<std::size_t>(world);
    so.waitWorkers = true;
    so.timeout = timeout;
    auto group = new Group();
    try {
      auto tcp = c10::make_intrusive<c10d::TCPStore>(std::string(host), so);
      group->store = c10::make_intrusive<c10d::PrefixStore>(std::string(prefix), tcp);
      group->backend = make_backend(group->store, rank, world, timeout, backend, device);
    } catch (...) {
      delete group;
      throw;
    }
    *out = group;
  });
}

// Sum one tensor in place across the group (c10d reads a list as one tensor per device).
int nest_dist_allreduce_sum(void* g, at::Tensor* tensor, char** err) {
  return nest::guarded(err, [&] {
    std::vector<at::Tensor> ts{*tensor};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    static_cast<Group*>(g)->backend->allreduce(ts, opts)->wait();
  });
}

// Gather `input` from every rank into `outputs[0..world]` (preallocated, same shape).
int nest_dist_allgather(
    void* g,
    at::Tensor* input,
    at::Tensor** outputs,
    int world,
    char** err) {
  return nest::guarded(err, [&] {
    std::vector<std::vector<at::Tensor>> outs(1);
    for (int i = 0; i < world; i++) {
      outs[0].push_back(*outputs[i]);
    }
    std::vector<at::Tensor> ins{*input};
    static_cast<Group*>(g)->backend->allgather(outs, ins)->wait();
  });
}

int nest_dist_barrier(void* g, char** err) {
  return nest::guarded(err, [&] { static_cast<Group*>(g)->backend->barrier()->wait(); });
}

// Ends a group: `how` bit 1 shuts the engine down, bit 2 frees it (store and engine); a group
// not freed is left to the process's exit. Shutting down before freeing: a ProcessGroupNCCL
// destroyed without `shutdown()` leaves its watchdog and communicators to static destruction,
// which crashed the process at exit after a one-rank test had passed (SIGSEGV, H100, torch
// 2.11; Gloo's shutdown is a no-op). Freed, shut down first or not, the one-rank NCCL group
// crashed in this call; shut down alone it did not (H200, 2026-11-29): nest-dist's
// `End::for_backend` shuts NCCL groups down and leaves them to the process's exit.
void nest_dist_free(void* g, int how) {
  auto group = static_cast<Group*>(g);
  try {
    if ((how & 1) && group->backend) {
      group->backend->shutdown();
    }
  } catch (...) {
    // ending must not throw across the C boundary; the process is leaving the group anyway
  }
  if (how & 2) {
    delete group;
  }
}

} // extern "C"
