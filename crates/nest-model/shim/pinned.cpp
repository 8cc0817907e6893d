// `Tensor::pin_memory()` without a device argument: tch's wrapper always passes one, which
// libtorch deprecates with a warning printed at every call (thousands per encode on a GPU).
// The same contract as the other shims: no C++ exception crosses, the message is returned in a
// malloc'd string (`nest_fused_adamw_free_message` frees it).

#include <ATen/core/Tensor.h>

#include <cstdlib>
#include <cstring>
#include <exception>

extern "C" {

// A new `at::Tensor*` (owned by the caller, as tch's own wrappers return) holding `t` in pinned
// host memory; null and `err` on failure.
at::Tensor* nest_pin_memory(const at::Tensor* t, char** err) {
  try {
    return new at::Tensor(t->pin_memory());
  } catch (const std::exception& e) {
    size_t len = std::strlen(e.what());
    *err = static_cast<char*>(std::malloc(len + 1));
    if (*err != nullptr) {
      std::memcpy(*err, e.what(), len + 1);
    }
    return nullptr;
  }
}

} // extern "C"
