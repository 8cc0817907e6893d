// A Kineto trace of a piece of work, for `nest_model::profile`: libtorch's own profiler (what
// `torch.profiler` drives from Python), recording the host's operators and, on a GPU, every
// kernel and copy with its device time (CUPTI), written as a Chrome trace. On a GPU this says
// what a pass runs and how long each kernel takes, which a wall clock cannot split.
//
// Errors never cross the boundary as exceptions (guard.h).

#include <torch/csrc/autograd/profiler_kineto.h>

#include "guard.h"

#include <set>
#include <string>

extern "C" {

// Starts the profiler on this process: host operators, and the GPU's kernels where `cuda`.
int nest_profile_start(int cuda, char** err) {
  return nest::guarded(err, [&] {
    using torch::profiler::impl::ActivityType;
    using torch::profiler::impl::ProfilerConfig;
    using torch::profiler::impl::ProfilerState;
    ProfilerConfig config(ProfilerState::KINETO, /*report_input_shapes=*/true,
                          /*profile_memory=*/false, /*with_stack=*/false,
                          /*with_flops=*/false, /*with_modules=*/false);
    std::set<ActivityType> activities{ActivityType::CPU};
    if (cuda != 0) {
      activities.insert(ActivityType::CUDA);
    }
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
  });
}

// Stops the profiler and writes its trace (Chrome trace JSON) to `path`.
int nest_profile_stop(const char* path, char** err) {
  return nest::guarded(err, [&] {
    auto result = torch::autograd::profiler::disableProfiler();
    TORCH_CHECK(result != nullptr, "the profiler was not running");
    result->save(std::string(path));
  });
}

} // extern "C"
