// CUDA graphs (`at::cuda::CUDAGraph`, what `torch.cuda.graph` wraps) and the CUDA caching
// allocator's peak counters, behind C functions for nest-model's `graph/cuda.rs`. Compiled with
// the `cuda` feature only (it needs the CUDA runtime's headers).
//
// A capture must run on a stream other than the default one: `nest_graph_enter` makes a side
// stream this thread's current stream (after the work already queued on the previous stream),
// `nest_graph_leave` restores the previous one (which then waits for the side stream). Warm-up
// passes and the capture run between the two, as `torch.cuda.graph` does; replays run on the
// current stream. All graphs of a device share one side stream (autograd ties a parameter's
// gradient accumulation to the stream it last ran on: one stream keeps every capture on it).
// A graph records into a memory pool of its own, or into a pool its owner shares between its
// graphs (`nest_graph_pool`, `at::cuda::graph_pool_handle()`). libtorch frees a shared pool once
// every graph that used it is gone, and a later capture into it then fails an internal assertion
// (seen on an H100, 2026-11-26: one process-wide pool, a benchmark's graphs dropped, the
// training run's first capture refused): nest-model's `graph::Pool` takes a new id whenever an
// owner drops its graphs.
//
// Only libtorch's and c10's out-of-line functions are called (events through `c10::Event`, not
// the header-inline `at::cuda::CUDAEvent`), so the shim needs no CUDA runtime library of its own.
//
// Errors never cross the boundary as exceptions (guard.h).

#include <c10/core/Event.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include "guard.h"

#include <map>
#include <mutex>
#include <optional>

namespace {

// The current device's side stream, made on first use.
c10::cuda::CUDAStream side_stream() {
  static std::mutex lock;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> all;
  std::lock_guard<std::mutex> guard(lock);
  auto device = c10::cuda::current_device();
  auto it = all.find(device);
  if (it == all.end()) {
    it = all.emplace(device, c10::cuda::getStreamFromPool(false, device)).first;
  }
  return it->second;
}

struct NestGraph {
  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream side;
  std::optional<c10::cuda::CUDAStream> previous;
  explicit NestGraph(c10::cuda::CUDAStream stream) : graph(), side(stream) {}
};

} // namespace

extern "C" {

// A new, empty graph on the current device (with its side stream); null and `err` on failure.
void* nest_graph_new(char** err) {
  NestGraph* g = nullptr;
  nest::guarded(err, [&] { g = new NestGraph(side_stream()); });
  return g;
}

void nest_graph_free(void* g) { delete static_cast<NestGraph*>(g); }

// The graph's side stream becomes current, after the work queued so far on the current stream.
int nest_graph_enter(void* raw, char** err) {
  return nest::guarded(err, [&] {
    auto* g = static_cast<NestGraph*>(raw);
    if (g->previous) {
      throw std::runtime_error("nest_graph_enter: already on the graph's side stream");
    }
    auto current = c10::cuda::getCurrentCUDAStream();
    c10::Event ready(c10::DeviceType::CUDA);
    ready.record(current.unwrap());
    ready.block(g->side.unwrap());
    g->previous = current;
    c10::cuda::setCurrentCUDAStream(g->side);
  });
}

// Back to the stream that was current before `nest_graph_enter`; it waits for the side stream.
int nest_graph_leave(void* raw, char** err) {
  return nest::guarded(err, [&] {
    auto* g = static_cast<NestGraph*>(raw);
    if (!g->previous) {
      throw std::runtime_error("nest_graph_leave: not on the graph's side stream");
    }
    c10::Event done(c10::DeviceType::CUDA);
    done.record(g->side.unwrap());
    done.block(g->previous->unwrap());
    c10::cuda::setCurrentCUDAStream(*g->previous);
    g->previous.reset();
  });
}

// A new id of a memory pool for graphs to share: out = {first, second}.
int nest_graph_pool(unsigned long long* out, char** err) {
  return nest::guarded(err, [&] {
    auto id = at::cuda::graph_pool_handle();
    out[0] = id.first;
    out[1] = id.second;
  });
}

// Starts recording what is queued on the current (side) stream, into the pool {pool_a, pool_b}
// (from `nest_graph_pool`), or into a pool of its own when both are 0. The capture mode is
// thread-local (`torch.cuda.graph(capture_error_mode="thread_local")`): only this thread's
// unsafe calls (a `cudaMalloc`, a synchronising copy) break the capture, not those of another
// thread working meanwhile on its own stream (a server's other worker). nest-model lets one
// thread at a time capture (`graph::Captured::record_with`), since the side stream is shared.
int nest_graph_begin(void* raw, unsigned long long pool_a, unsigned long long pool_b, char** err) {
  return nest::guarded(err, [&] {
    static_cast<NestGraph*>(raw)->graph.capture_begin({pool_a, pool_b},
                                                      cudaStreamCaptureModeThreadLocal);
  });
}

int nest_graph_end(void* raw, char** err) {
  return nest::guarded(err, [&] { static_cast<NestGraph*>(raw)->graph.capture_end(); });
}

// Launches the recorded work on the current stream.
int nest_graph_replay(void* raw, char** err) {
  return nest::guarded(err, [&] { static_cast<NestGraph*>(raw)->graph.replay(); });
}

// The caching allocator's bytes on device `device`: out = {allocated now, allocated peak,
// reserved now, reserved peak}.
int nest_cuda_memory(int device, long long* out, char** err) {
  return nest::guarded(err, [&] {
    auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out[0] = s.allocated_bytes[all].current;
    out[1] = s.allocated_bytes[all].peak;
    out[2] = s.reserved_bytes[all].current;
    out[3] = s.reserved_bytes[all].peak;
  });
}

int nest_cuda_reset_peak(int device, char** err) {
  return nest::guarded(err, [&] {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
  });
}

// A stream of libtorch's pool becomes the calling thread's current stream on `device` (from
// then on its work queues there, and a copy to the host waits for its own work only, not for
// another thread's). From the high-priority pool: the side stream comes from the other one, so
// a thread's own stream is never the side stream that another thread captures on (work a
// thread queued there would be recorded into that thread's graph).
int nest_cuda_own_stream(int device, char** err) {
  return nest::guarded(err, [&] {
    auto d = static_cast<c10::DeviceIndex>(device);
    c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(true, d));
  });
}

} // extern "C"
