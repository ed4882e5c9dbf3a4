// model_from_json and training_config_from_json on arbitrary bytes: a Sequential model or a
// crossover::Error, never a crash, a leak or a hang. A model that is read must survive a round
// trip through model_to_json with the same layers (and the same dtype policies)
// and write the same JSON again.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/error.h"
#include "formats/model_config.h"
#include "nn/sequential.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    crossover::training_config_from_json(text, "fuzz.json");
  } catch (const crossover::Error&) {
  }
  try {
    crossover::Sequential m = crossover::model_from_json(text, "fuzz.json");
    (void)m.summary();
    const std::string again = crossover::model_to_json(m);
    crossover::Sequential back = crossover::model_from_json(again, "roundtrip");
    if (back.count_params() != m.count_params() || back.input_shape() != m.input_shape())
      std::abort();
    const auto& a = m.layers();
    const auto& b = back.layers();
    // An InputLayer followed by a Flatten reads back as one Flatten; otherwise layer for layer.
    std::size_t i = 0, j = 0;
    if (!a.empty() && a[0].type == crossover::LayerType::input &&
        b[0].type == crossover::LayerType::flatten)
      ++i;
    if (a.size() - i != b.size() - j) std::abort();
    for (; i < a.size(); ++i, ++j)
      if (a[i].type != b[j].type || a[i].dtype_policy != b[j].dtype_policy) std::abort();
    // Every kind's own arguments (units, activation, rate, ...) live in its args struct; the
    // written config is their whole record, so a second round trip must write the same text.
    if (crossover::model_to_json(back) != again) std::abort();
  } catch (const crossover::Error&) {
  }
  return 0;
}
