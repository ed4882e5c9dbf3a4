// Keras's MaxPooling2D and AveragePooling2D: their arguments and constructors.
#pragma once

#include <optional>
#include <string_view>

#include "nn/layer.h"

namespace crossover {

struct PoolingArgs {
  Size2 pool_size = 2;
  Size2 strides = 2;  // pool_size unless given
  Padding padding = Padding::valid;
};

// The maximum over each pool_size window of each channel; strides default to pool_size.
Layer MaxPooling2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                   std::string_view padding = "valid");
// The mean over each window (padded positions not counted, as in Keras).
Layer AveragePooling2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                       std::string_view padding = "valid");

}  // namespace crossover
