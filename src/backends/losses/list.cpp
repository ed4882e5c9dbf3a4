// The losses' host-side rules that need formatting (list.h declares them; nvcc compiles list.h
// for the kernels, and fmt's checked format strings do not compile there).
#include "backends/losses/list.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace crossover {

std::string loss_parameter_problem(const losses::LossRules& r, double value) {
  if (value > 0.0 && std::isfinite(value)) return {};
  return fmt::format("{} must be positive, got {}", r.parameter, value);
}

}  // namespace crossover
