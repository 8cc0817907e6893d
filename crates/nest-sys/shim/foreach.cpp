// libtorch's multi-tensor ("foreach") kernels over a list of gradients, what
// `torch.nn.utils.clip_grad_norm_` and `optimizer.zero_grad` run: on a GPU one kernel launch per
// chunk of many tensors instead of one or more per tensor (a step's clipping and zeroing took
// about five launches per parameter, some 500 for MiniLM's 101 tensors, each several
// microseconds on a step bound by launches, and inside a recorded step as many graph nodes). On
// the CPU libtorch runs the same per-tensor operations as before (its "slow path"), so the
// values are unchanged there. tch does not wrap them (they take lists of tensors).
//
// Errors never cross the boundary as exceptions (guard.h).

#include <ATen/core/Tensor.h>
#include <ATen/ops/_foreach_mul.h>
#include <ATen/ops/_foreach_norm.h>
#include <ATen/ops/_foreach_zero.h>
#include <ATen/ops/stack.h>

#include "guard.h"

#include <vector>

namespace {

std::vector<at::Tensor> list(at::Tensor* const* ts, long n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (long i = 0; i < n; ++i) {
    out.push_back(*ts[i]);
  }
  return out;
}

} // namespace

extern "C" {

// A new `at::Tensor*` (owned by the caller): the L2 norm of each of the `n` tensors, stacked
// (`[n]`, in their kind); null and `err` on failure.
at::Tensor* nest_foreach_norm(at::Tensor* const* ts, long n, char** err) {
  at::Tensor* out = nullptr;
  nest::guarded(err, [&] {
    out = new at::Tensor(at::stack(at::_foreach_norm(list(ts, n), 2), 0));
  });
  return out;
}

// Multiplies each of the `n` tensors in place by `factor` (a scalar tensor on their device, read
// there: nothing comes back to the host) or, when `factor` is null, by `value`.
int nest_foreach_mul_(
    at::Tensor* const* ts, long n, const at::Tensor* factor, double value, char** err) {
  return nest::guarded(err, [&] {
    auto tensors = list(ts, n);
    if (factor != nullptr) {
      at::_foreach_mul_(tensors, *factor);
    } else {
      at::_foreach_mul_(tensors, at::Scalar(value));
    }
  });
}

// Sets each of the `n` tensors to zero in place.
int nest_foreach_zero_(at::Tensor* const* ts, long n, char** err) {
  return nest::guarded(err, [&] { at::_foreach_zero_(list(ts, n)); });
}

} // extern "C"
