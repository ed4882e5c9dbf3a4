// The one conversion of raw bytes to float32, done once at load (DESIGN.md).
#include <array>

#include "core/error.h"
#include "data/dataset.h"

namespace crossover::data {

Tensor to_float_images(const ImageSet& set) {
  Shape shape{set.count};
  shape.insert(shape.end(), set.item_shape.begin(), set.item_shape.end());
  Tensor t(shape);
  if (static_cast<std::size_t>(t.size()) != set.pixels.size())
    throw Error("to_float_images",
                std::to_string(set.pixels.size()) + " pixels for shape " + shape_to_string(shape));
  // Division, not multiplication by 1/255: it is what Keras code (x.astype("float32") / 255)
  // computes, bit for bit. A table keeps it as cheap as the multiply.
  std::array<float, 256> scale{};
  for (int v = 0; v < 256; ++v) scale[static_cast<std::size_t>(v)] = static_cast<float>(v) / 255.0f;
  float* out = t.data();
  for (std::size_t i = 0; i < set.pixels.size(); ++i) out[i] = scale[set.pixels[i]];
  return t;
}

Tensor to_float_labels(const ImageSet& set) {
  Tensor t(Shape{set.count});
  if (static_cast<std::size_t>(t.size()) != set.labels.size())
    throw Error("to_float_labels", std::to_string(set.labels.size()) + " labels for " +
                                       std::to_string(set.count) + " items");
  float* out = t.data();
  for (std::size_t i = 0; i < set.labels.size(); ++i) out[i] = static_cast<float>(set.labels[i]);
  return t;
}

Tensor to_one_hot_labels(const ImageSet& set, int num_classes) {
  if (num_classes < 1)
    throw Error("to_one_hot_labels",
                "num_classes must be at least 1, got " + std::to_string(num_classes));
  const Tensor indices = to_float_labels(set);
  Tensor t(Shape{set.count, num_classes});  // zero-filled
  for (int64_t i = 0; i < set.count; ++i) {
    const auto label = static_cast<int64_t>(indices[i]);
    if (label >= num_classes)
      throw Error("to_one_hot_labels", "label " + std::to_string(label) + " at index " +
                                           std::to_string(i) + " is not below " +
                                           std::to_string(num_classes));
    t[i * num_classes + label] = 1.0f;
  }
  return t;
}

}  // namespace crossover::data
