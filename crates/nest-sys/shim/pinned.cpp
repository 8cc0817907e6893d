// `Tensor::pin_memory()` without a device argument: tch's wrapper always passes one, which
// libtorch deprecates with a warning printed at every call (thousands per encode on a GPU).
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

} // extern "C"
