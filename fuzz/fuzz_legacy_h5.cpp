// The legacy whole-model .h5 reader (formats/keras_h5.h, Keras's model.save("m.h5")) on arbitrary
// bytes: every input must end in a LegacyH5Model or in a crossover::Error; never a crash, a leak,
// a hang, or an allocation the input cannot justify, whatever libhdf5 makes of the bytes.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/error.h"
#include "formats/keras_h5.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  crossover::LegacyH5Model m;
  try {
    m = crossover::parse_legacy_h5_model(std::span<const uint8_t>(data, size), "fuzz");
  } catch (const crossover::Error&) {
    return 0;
  }
  // What the reader promises: each layer has a tensor per weight name, and the values read (4
  // bytes or more each in the file) and the strings fit in it.
  uint64_t bytes =
      m.model_config.size() + m.training_config.size() + m.keras_version.size() + m.backend.size();
  for (const crossover::LegacyH5Layer& l : m.layers) {
    if (l.weights.size() != l.weight_names.size()) std::abort();
    bytes += l.name.size();
    for (const std::string& n : l.weight_names) bytes += n.size();
    for (const crossover::Tensor& t : l.weights) bytes += 4 * static_cast<uint64_t>(t.size());
  }
  if (bytes > size) std::abort();
  return 0;
}
