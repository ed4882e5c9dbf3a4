// `--device auto`: the device predicted faster for a model, and why, in one line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "perf/calibrate.h"

namespace crossover {
class Sequential;
}

namespace crossover::perf {

// The device ("cpu" or "cuda:N") whose predicted training step at `batch` is shortest: the CPU
// from this machine's CPU profile, each visible GPU in resident mode from a shipped or
// calibrated profile of that GPU model. `model` must know its input shape (built: a Flatten
// with a shape, or after a fit). `why` gets one sentence with the numbers. Without a GPU the
// answer is "cpu", and so it is for a model the GPU cannot train (unsupported_on: a convnet); with
// a GPU but nothing to predict it with (no profile for it or for this CPU), the GPU, saying so.
// `cpu_profile` finds the CPU's profile for the model's step (perf::cpu_profile_for, which may
// calibrate this CPU first); by default cpu_profile_for with the default request. It is only
// asked when a GPU is present.
// `precision`: the dense GEMMs' arithmetic the model will train in. The CPU is weighed in it (bf16:
// at its profile's bf16 GEMM rates, which the workload asks cpu_profile to have) and is no
// candidate where it cannot train in it (tf32; bf16 without AVX512_BF16): then the GPU. A GPU
// profile without bf16 rates prices the GPU's bf16 step at its fp32 rates (an upper bound), and
// tf32 is priced at the fp32 rates; `why` says so.
using CpuProfileSource =
    std::function<CpuProfileChoice(std::vector<Workload> workloads, const std::string& what)>;
std::string choose_device(const Sequential& model, int64_t batch, std::string& why,
                          const CpuProfileSource& cpu_profile = {},
                          Precision precision = Precision::fp32);

}  // namespace crossover::perf
