// The safetensors reader on arbitrary bytes: every input must end in a header whose tensors tile
// the data section exactly, or in a crossover::Error; never a crash, a leak, a hang, or an
// allocation the input cannot justify. Inputs that parse are also read back from a file and
// loaded into a small model (name and shape checks, F32 decoding, the NaN/Inf warning).
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/error.h"
#include "formats/safetensors.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "scratch_file.h"

namespace {

crossover::Sequential& model() {
  // The names and shapes of the seed files fuzz/corpus/safetensors/python-style.safetensors.
  static crossover::Sequential m = [] {
    crossover::Sequential s({crossover::Input({2}), crossover::Dense(2)});
    s.compile(crossover::SGD(), "mse", {}, {.threads = 1});
    return s;
  }();
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const crossover::fuzz::ScratchFile file("input.safetensors");
  crossover::SafetensorsHeader h;
  try {
    h = crossover::parse_safetensors(std::span<const uint8_t>(data, size), "fuzz");
  } catch (const crossover::Error&) {
    return 0;
  }
  // What parse_safetensors promises.
  if (h.data_offset + h.data_bytes != size) std::abort();
  uint64_t at = 0;
  for (const crossover::SafetensorsEntry& e : h.tensors) {
    if (e.begin != at || e.end < e.begin || e.end > h.data_bytes) std::abort();
    at = e.end;
  }
  if (at != h.data_bytes) std::abort();
  try {
    const std::string& path = file.write(data, size);
    const crossover::SafetensorsFile f = crossover::read_safetensors(path);
    if (f.tensors.size() != h.tensors.size()) std::abort();
    crossover::load_weights(model(), f, path);
  } catch (const crossover::Error&) {
  }
  return 0;
}
