#pragma once
// Where the files crossover ships (the 10,000 digits, the measured profiles) are found at run time.
#include <string>
#include <vector>

namespace crossover {

// The folders that may hold `name` (e.g. "mnist-10k", "profiles"), in the order to look:
// beside the sources of this build (a checkout), then beside the binary that holds this code,
// wherever it was moved to: `<dir>/share/name` (a wheel: crossover/_core*.so and crossover/bin/
// beside crossover/share) and `<dir>/../share/crossover/name` (an installed prefix, bin/ or lib/),
// then the install folder this build was configured for. Existence is not checked.
std::vector<std::string> shipped_places(const std::string& name);

}  // namespace crossover
