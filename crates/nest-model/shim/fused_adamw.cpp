// libtorch's fused AdamW kernel (`at::_fused_adamw_`, what `torch.optim.AdamW(fused=True)` runs)
// behind one C function: one pass over each parameter, its gradient and its two moments,
// instead of the eight tensor operations per parameter the update takes op by op. tch does not
// wrap it (it takes lists of tensors it updates in place).
//
// Errors never cross the boundary as exceptions: the message is copied into a malloc'd string
// for Rust to read and free, and the function returns non-zero.

#include <ATen/core/Tensor.h>
#include <ATen/ops/_fused_adamw.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <vector>

extern "C" {

// One AdamW update of `n` parameters: `params[i]` with gradient `grads[i]` and moments
// `exp_avgs[i]`, `exp_avg_sqs[i]` (all float32, contiguous, on one device), at step `step` (a
// float32 scalar tensor on that device, already counting this update).
int nest_fused_adamw(
    at::Tensor* const* params,
    at::Tensor* const* grads,
    at::Tensor* const* exp_avgs,
    at::Tensor* const* exp_avg_sqs,
    long n,
    at::Tensor* step,
    double lr,
    double beta1,
    double beta2,
    double weight_decay,
    double eps,
    char** err) {
  try {
    std::vector<at::Tensor> ps, gs, ms, vs, steps;
    for (long i = 0; i < n; ++i) {
      ps.push_back(*params[i]);
      gs.push_back(*grads[i]);
      ms.push_back(*exp_avgs[i]);
      vs.push_back(*exp_avg_sqs[i]);
      steps.push_back(*step);
    }
    at::_fused_adamw_(
        ps, gs, ms, vs, {}, steps, lr, beta1, beta2, weight_decay, eps, false, false);
    return 0;
  } catch (const std::exception& e) {
    size_t len = std::strlen(e.what());
    *err = static_cast<char*>(std::malloc(len + 1));
    if (*err != nullptr) {
      std::memcpy(*err, e.what(), len + 1);
    }
    return 1;
  }
}

void nest_fused_adamw_free_message(char* m) { std::free(m); }

} // extern "C"
