// Internal to src/perf's cost model (cost_model.cpp, step_ops.cpp): what both price ops with.
#pragma once

#include <cstdint>

namespace crossover::perf {

// The bytes of one float: the unit of the ops' byte counts.
inline constexpr int64_t kFloat = 4;

}  // namespace crossover::perf
