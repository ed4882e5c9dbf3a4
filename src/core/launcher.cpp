#include "core/launcher.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace crossover {

namespace {

// The variable's value as a count >= `min`, or -1 when unset or not such a count.
int env_count(const char* name, int min) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  int n = 0;
  const char* end = v + std::strlen(v);
  const auto [p, ec] = std::from_chars(v, end, n);
  return ec == std::errc() && p == end && n >= min ? n : -1;
}

}  // namespace

LaunchedRanks launched_ranks() {
  static constexpr const char* kVars[][2] = {
      {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
      {"PMI_SIZE", "PMI_RANK"},
      {"MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"},
  };
  for (const auto& [size_var, rank_var] : kVars) {
    const int size = env_count(size_var, 1);
    if (size < 1) continue;
    LaunchedRanks r;
    r.size = size;
    r.rank = std::max(env_count(rank_var, 0), 0);
    if (size > 1) r.source = std::string(size_var) + "=" + std::to_string(size);
    return r;
  }
  return {};
}

}  // namespace crossover
