// read_npz on arbitrary bytes taken as an .npz file, and parse_npy_header on the same bytes
// taken as a .npy: every input must end in consistent data or in a crossover::Error; never a
// crash, a leak, a hang, or an allocation the input cannot justify.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/error.h"
#include "data/dataset.h"
#include "data/npy.h"
#include "scratch_file.h"

namespace {

void check_set(const crossover::data::ImageSet& set) {
  if (set.item_shape.size() != 2) std::abort();
  const int64_t item = set.item_shape[0] * set.item_shape[1];
  if (static_cast<int64_t>(set.pixels.size()) != set.count * item) std::abort();
  if (static_cast<int64_t>(set.labels.size()) != set.count) std::abort();
  for (uint8_t l : set.labels)
    if (l >= 10) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const crossover::data::NpyHeader h =
        crossover::data::parse_npy_header(std::span<const uint8_t>(data, size), "fuzz.npy");
    if (h.data_offset > size) std::abort();
  } catch (const crossover::Error&) {
  }

  static const crossover::fuzz::ScratchFile file("input.npz");
  try {
    const crossover::data::DataSplits d = crossover::data::read_npz(file.write(data, size));
    check_set(d.train);
    check_set(d.test);
  } catch (const crossover::Error&) {
  }
  return 0;
}
