// libtorch's fused AdamW kernel (`at::_fused_adamw_`, what `torch.optim.AdamW(fused=True)` runs)
// behind one C function: one pass over each parameter, its gradient and its two moments,
// instead of the eight tensor operations per parameter the update takes op by op. tch does not
// wrap it (it takes lists of tensors it updates in place).
//
// Errors never cross the boundary as exceptions (guard.h).

#include <ATen/core/Tensor.h>
#include <ATen/ops/_fused_adamw.h>

#include "guard.h"

#include <optional>
#include <vector>

extern "C" {

// One AdamW update of `n` parameters: `params[i]` with gradient `grads[i]` and moments
// `exp_avgs[i]`, `exp_avg_sqs[i]` (all float32, contiguous, on one device), at step `step` (a
// float32 scalar tensor on that device, already counting this update). With `lr_tensor` not
// null the rate is read from that float32 scalar tensor on the device instead of `lr` (what a
// CUDA graph replays with a changing rate); with `found_inf` not null (a float32 scalar tensor)
// the kernel leaves everything untouched where it holds 1.
int nest_fused_adamw(
    at::Tensor* const* params,
    at::Tensor* const* grads,
    at::Tensor* const* exp_avgs,
    at::Tensor* const* exp_avg_sqs,
    long n,
    at::Tensor* step,
    double lr,
    at::Tensor* lr_tensor,
    at::Tensor* found_inf,
    double beta1,
    double beta2,
    double weight_decay,
    double eps,
    char** err) {
  return nest::guarded(err, [&] {
    std::vector<at::Tensor> ps, gs, ms, vs, steps;
    for (long i = 0; i < n; ++i) {
      ps.push_back(*params[i]);
      gs.push_back(*grads[i]);
      ms.push_back(*exp_avgs[i]);
      vs.push_back(*exp_avg_sqs[i]);
      steps.push_back(*step);
    }
    std::optional<at::Tensor> inf;
    if (found_inf != nullptr) {
      inf = *found_inf;
    }
    if (lr_tensor != nullptr) {
      at::_fused_adamw_(
          ps, gs, ms, vs, {}, steps, *lr_tensor, beta1, beta2, weight_decay, eps, false, false,
          std::nullopt, inf);
    } else {
      at::_fused_adamw_(
          ps, gs, ms, vs, {}, steps, lr, beta1, beta2, weight_decay, eps, false, false,
          std::nullopt, inf);
    }
  });
}

} // extern "C"
