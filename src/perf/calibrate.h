// Calibration: micro-benchmarks of one device through the engine's own code paths (the Backend
// interface: the CPU backend's oneDNN GEMMs and threaded loops, or the CUDA backend's cuBLASLt
// GEMMs, kernels, graphs and copies), summarised as a Profile (perf/profile.h, docs/PROFILE.md).
#pragma once

#include <functional>
#include <string>

#include "perf/profile.h"

namespace crossover::perf {

struct CalibrateOptions {
  std::string device = "cpu";  // "cpu", "cuda", "cuda:N"
  bool quick = false;          // a coarser grid and fewer repeats: seconds, not a minute
  int threads = 0;             // CPU threads (0: all cores)
  std::function<void(const std::string&)> say;  // progress lines (may be empty)
};

// Measures the device; throws Error("cuda:N", ...) when the device is unavailable.
Profile calibrate(const CalibrateOptions& options);

// The GEMM grid calibrate measures (batch sizes, input widths, output widths), full or quick.
struct GemmGrid {
  std::vector<int64_t> batches, ins, outs;
};
GemmGrid gemm_grid(bool quick);

// Page-locked host memory for the pinned-bandwidth measurements: the CUDA runtime's
// cudaMallocHost where the build has CUDA (nullptr otherwise, or when it fails).
void* pinned_host_alloc(std::size_t bytes);
void pinned_host_free(void* p);

}  // namespace crossover::perf
