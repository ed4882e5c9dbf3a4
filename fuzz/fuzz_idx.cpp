// read_idx on arbitrary bytes: every input must end in data that matches its header or in a
// crossover::Error; never a crash, a leak, a hang, or an allocation the input cannot justify
// (scripts/fuzz-smoke runs this with a small -malloc_limit_mb).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const crossover::fuzz::ScratchFile file("input.idx");
  const std::string& path = file.write(data, size);
  // Rank 1 (labels) and rank 3 (images) are the two the engine asks for.
  for (int rank : {1, 3}) {
    try {
      crossover::Shape dims;
      const std::vector<uint8_t> bytes = crossover::data::read_idx(path, rank, dims);
      if (static_cast<int>(dims.size()) != rank) std::abort();
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      if (static_cast<int64_t>(bytes.size()) != n) std::abort();
    } catch (const crossover::Error&) {
    }
  }
  return 0;
}
