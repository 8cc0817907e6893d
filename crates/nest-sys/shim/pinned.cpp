// `Tensor::pin_memory()` without a device argument: tch's wrapper always passes one, which
// libtorch deprecates with a warning printed at every call (thousands per encode on a GPU).
// And `Tensor::copy_` with `non_blocking` (tch's wrapper always blocks, which for a copy from
// the host to a GPU makes the host wait for all the work queued on the stream).
// The contract of guard.h: no C++ exception crosses.

#include <ATen/core/Tensor.h>

#include "guard.h"

extern "C" {

// A new `at::Tensor*` (owned by the caller, as tch's own wrappers return) holding `t` in pinned
// host memory; null and `err` on failure.
at::Tensor* nest_pin_memory(const at::Tensor* t, char** err) {
  at::Tensor* out = nullptr;
  nest::guarded(err, [&] { out = new at::Tensor(t->pin_memory()); });
  return out;
}

// `dst.copy_(src, non_blocking)`: `dst` keeps its storage (a recorded graph's static input).
int nest_copy_into(at::Tensor* dst, const at::Tensor* src, int non_blocking, char** err) {
  return nest::guarded(err, [&] { dst->copy_(*src, non_blocking != 0); });
}

} // extern "C"
