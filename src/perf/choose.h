// `--device auto`: the device predicted faster for a model, and why, in one line.
#pragma once

#include <cstdint>
#include <string>

namespace crossover {
class Sequential;
}

namespace crossover::perf {

// The device ("cpu" or "cuda:N") whose predicted training step at `batch` is shortest: the CPU
// from this machine's CPU profile, each visible GPU in resident mode from a shipped or
// calibrated profile of that GPU model. `model` must know its input shape (built: a Flatten
// with a shape, or after a fit). `why` gets one sentence with the numbers. Without a GPU the
// answer is "cpu"; with a GPU but nothing to predict it with (no profile for it or for this
// CPU), the GPU, saying so.
std::string choose_device(const Sequential& model, int64_t batch, std::string& why);

}  // namespace crossover::perf
