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

// Every visible device; empty when built without CUDA, or when there is no driver or no device.
// Never throws for a missing driver.
std::vector<CudaDeviceInfo> cuda_devices();

// The arithmetic of the dense layers' matrix products on CUDA. Everything else is float32.
//   fp32: float32 operands, float32 accumulation, no TF32 (CUBLAS_COMPUTE_32F). The default: the
//         one that follows the CPU's trajectory up to summation order.
//   tf32: float32 operands rounded to TF32 inside the tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
//   bf16: bfloat16 copies of both operands (converted by a kernel before each product), float32
//         accumulation and output.
enum class Precision { fp32, tf32, bf16 };

inline const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::bf16:
      return "bf16";
  }
  return "fp32";
}

// "fp32" | "tf32" | "bf16"; throws Error(where, ...) for anything else.
inline Precision parse_precision(const std::string& text,
                                 const std::string& where = "--precision") {
  if (text == "fp32") return Precision::fp32;
  if (text == "tf32") return Precision::tf32;
  if (text == "bf16") return Precision::bf16;
  throw Error(where, "unknown precision '" + text + "' (expected fp32, tf32 or bf16)");
}

// The CUDA backend on device `ordinal` with GEMMs in `precision`; make_cuda_backend(ordinal)
// (backend.h) is this with Precision::fp32. Throws Error("cuda:N", why) when the device is
// unavailable or the build has no CUDA backend.
std::unique_ptr<Backend> make_cuda_backend(int ordinal, Precision precision);

}  // namespace crossover
