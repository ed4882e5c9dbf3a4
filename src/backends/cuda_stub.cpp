// The CUDA entry points of a build without nvcc: no devices, and a clear error for `--device cuda`.
// The real ones live in backends/cuda/ and are compiled only when CMake found a CUDA compiler.
#ifndef CROSSOVER_HAVE_CUDA

#include <string>

#include "backends/backend.h"
#include "backends/cuda_info.h"
#include "core/error.h"

namespace crossover {

std::unique_ptr<Backend> make_cuda_backend(int ordinal, Precision) {
  throw Error("cuda:" + std::to_string(ordinal),
              "this build of crossover has no CUDA backend (built without nvcc)");
}

std::unique_ptr<Backend> make_cuda_backend(int ordinal) {
  return make_cuda_backend(ordinal, Precision::fp32);
}

bool cuda_built() { return false; }

int cuda_device_count() { return 0; }

std::vector<CudaDeviceInfo> cuda_devices() { return {}; }

FusedStepRates measure_fused_step_rates(int ordinal, bool) {
  throw Error("cuda:" + std::to_string(ordinal),
              "this build of crossover has no CUDA backend (built without nvcc)");
}

}  // namespace crossover

#endif  // CROSSOVER_HAVE_CUDA
