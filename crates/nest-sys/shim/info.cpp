// What this build of Nest runs on, for `nest_model::machine`: the version of the libtorch whose
// headers it was compiled against (the one it links, see build.rs), and with the `cuda` feature
// a GPU's properties and the CUDA runtime libtorch loaded.
//
// Errors never cross the boundary as exceptions (guard.h).

#include <torch/headeronly/version.h>

#ifdef NEST_CUDA_INFO
#include <ATen/cuda/CUDAContextLight.h>
#include <ATen/detail/CUDAHooksInterface.h>
#endif

#include "guard.h"

#include <cstdio>

extern "C" {

// The libtorch version ("2.13.0"): a static string, never freed.
const char* nest_torch_version() { return TORCH_VERSION; }

#ifdef NEST_CUDA_INFO
// Device `device`'s name into `name` (NUL-terminated, cut to `name_len` bytes) and out = {total
// memory in bytes, compute capability major, minor, multiprocessors, the CUDA runtime's version
// as libtorch reports it (13000 for 13.0)}.
int nest_cuda_device_info(int device, char* name, int name_len, long long* out, char** err) {
  return nest::guarded(err, [&] {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device));
    std::snprintf(name, static_cast<size_t>(name_len), "%s", p->name);
    out[0] = static_cast<long long>(p->totalGlobalMem);
    out[1] = p->major;
    out[2] = p->minor;
    out[3] = p->multiProcessorCount;
    out[4] = at::detail::getCUDAHooks().versionCUDART();
  });
}
#endif

} // extern "C"
