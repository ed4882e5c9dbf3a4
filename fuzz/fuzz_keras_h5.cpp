// The .weights.h5 reader (formats/keras_h5.h) on arbitrary bytes: every input must end in Keras
// weights or in a crossover::Error; never a crash, a leak, a hang, or an allocation the input
// cannot justify, whatever libhdf5 makes of the bytes. Inputs that parse are also loaded into the
// model of the seed files (tests/data/keras/tiny.weights.h5: group, count and shape checks).
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/error.h"
#include "formats/keras_h5.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"

namespace {

crossover::Sequential& model() {
  static crossover::Sequential m = [] {
    using namespace crossover;
    Sequential s({Input({2, 3}), Flatten(), Dense(5, "relu"), Dropout(0.25),
                  Dense(4, "linear", false), Dense(3), Activation("softmax")},
                 "tiny");
    s.compile(SGD(), "mse", {}, {.threads = 1});
    return s;
  }();
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  crossover::KerasH5Weights w;
  try {
    w = crossover::parse_keras_weights_h5(std::span<const uint8_t>(data, size), "fuzz");
  } catch (const crossover::Error&) {
    return 0;
  }
  // What the reader promises: the variables read (4 bytes or more each in the file) fit in it.
  uint64_t values = 0;
  for (const crossover::KerasH5Layer& l : w.layers)
    for (const crossover::Tensor& t : l.vars) values += static_cast<uint64_t>(t.size());
  if (values * 4 > size) std::abort();
  try {
    crossover::load_keras_weights(model(), w, "fuzz");
  } catch (const crossover::Error&) {
  }
  return 0;
}
