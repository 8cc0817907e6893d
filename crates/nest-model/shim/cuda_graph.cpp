// CUDA graphs (`at::cuda::CUDAGraph`, what `torch.cuda.graph` wraps) and the CUDA caching
// allocator's peak counters, behind C functions for `src/graph.rs`. Compiled with the `cuda`
// feature only (it needs the CUDA runtime's headers).
//
// A capture must run on a stream other than the default one, so each graph owns a side stream
// from libtorch's pool: `nest_graph_enter` makes it this thread's current stream (after the work
// already queued on the previous stream), `nest_graph_leave` restores the previous one (which
// then waits for the side stream). Warm-up passes and the capture run between the two, as
// `torch.cuda.graph` does; replays run on the current stream.
//
// Errors never cross the boundary as exceptions: the message is copied into a malloc'd string
// for Rust to read and free (`nest_fused_adamw_free_message`), and the function returns non-zero.

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>

namespace {

struct NestGraph {
  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream side;
  std::optional<c10::cuda::CUDAStream> previous;
  NestGraph() : graph(), side(c10::cuda::getStreamFromPool()) {}
};

int fail(const std::exception& e, char** err) {
  size_t len = std::strlen(e.what());
  *err = static_cast<char*>(std::malloc(len + 1));
  if (*err != nullptr) {
    std::memcpy(*err, e.what(), len + 1);
  }
  return 1;
}

template <typename F>
int guarded(char** err, F f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    return fail(e, err);
  }
}

} // namespace

extern "C" {

// A new, empty graph on the current device (with its side stream); null and `err` on failure.
void* nest_graph_new(char** err) {
  NestGraph* g = nullptr;
  guarded(err, [&] { g = new NestGraph(); });
  return g;
}

void nest_graph_free(void* g) { delete static_cast<NestGraph*>(g); }

// The graph's side stream becomes current, after the work queued so far on the current stream.
int nest_graph_enter(void* raw, char** err) {
  return guarded(err, [&] {
    auto* g = static_cast<NestGraph*>(raw);
    if (g->previous) {
      throw std::runtime_error("nest_graph_enter: already on the graph's side stream");
    }
    auto current = c10::cuda::getCurrentCUDAStream();
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(g->side);
    g->previous = current;
    c10::cuda::setCurrentCUDAStream(g->side);
  });
}

// Back to the stream that was current before `nest_graph_enter`; it waits for the side stream.
int nest_graph_leave(void* raw, char** err) {
  return guarded(err, [&] {
    auto* g = static_cast<NestGraph*>(raw);
    if (!g->previous) {
      throw std::runtime_error("nest_graph_leave: not on the graph's side stream");
    }
    at::cuda::CUDAEvent done;
    done.record(g->side);
    done.block(*g->previous);
    c10::cuda::setCurrentCUDAStream(*g->previous);
    g->previous.reset();
  });
}

// Starts recording what is queued on the current (side) stream, into a private memory pool.
int nest_graph_begin(void* raw, char** err) {
  return guarded(err, [&] { static_cast<NestGraph*>(raw)->graph.capture_begin(); });
}

int nest_graph_end(void* raw, char** err) {
  return guarded(err, [&] { static_cast<NestGraph*>(raw)->graph.capture_end(); });
}

// Launches the recorded work on the current stream.
int nest_graph_replay(void* raw, char** err) {
  return guarded(err, [&] { static_cast<NestGraph*>(raw)->graph.replay(); });
}

// The caching allocator's bytes on device `device`: out = {allocated now, allocated peak,
// reserved now, reserved peak}.
int nest_cuda_memory(int device, long long* out, char** err) {
  return guarded(err, [&] {
    auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out[0] = s.allocated_bytes[all].current;
    out[1] = s.allocated_bytes[all].peak;
    out[2] = s.reserved_bytes[all].current;
    out[3] = s.reserved_bytes[all].peak;
  });
}

int nest_cuda_reset_peak(int device, char** err) {
  return guarded(err, [&] {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
  });
}

} // extern "C"
