// What the CUDA backend tells about the machine, and its one knob (GEMM precision).
//
// Compiled in every build: without nvcc the functions come from backends/cuda_stub.cpp and say
// "no CUDA" (cuda_devices() is empty, make_cuda_backend throws Error). Includes no CUDA header.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/fused_mlp.h"
#include "core/error.h"

namespace crossover {

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;          // "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;          // streaming multiprocessors
  std::size_t memory_bytes = 0;
  std::string host_link;  // "PCIe gen5 x16" (from NVML when the driver has it), or "unknown"
};

// Whether this build has the CUDA backend (compiled with nvcc), whatever the machine has.
bool cuda_built();

// Every visible device; empty when built without CUDA, or when there is no driver or no device.
// Never throws for a missing driver.
std::vector<CudaDeviceInfo> cuda_devices();

// The CUDA backend on device `ordinal` with GEMMs in `precision`; make_cuda_backend(ordinal)
// (backend.h) is this with Precision::fp32. Throws Error("cuda:N", why) when the device is
// unavailable or the build has no CUDA backend.
std::unique_ptr<Backend> make_cuda_backend(int ordinal, Precision precision);

// The fused training step's rates on device `ordinal` (backends/fused_mlp.h), with the fused
// kernel's own code (backends/cuda/fused_mlp.cu): a cooperative grid of as many blocks as the
// fused kernel has resident timing grid.sync() in a loop (two loop lengths, the difference per
// barrier), and the kernel's tile product with every resident block on one tile at two depths
// (the difference per FLOP). Under a second with `quick`, about one otherwise. Throws Error
// without a cooperative launch, and in a build without CUDA.
FusedStepRates measure_fused_step_rates(int ordinal, bool quick);

}  // namespace crossover
