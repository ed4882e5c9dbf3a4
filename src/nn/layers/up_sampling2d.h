// Keras's UpSampling2D: its argument and constructor.
#pragma once

#include <string_view>

#include "nn/layer.h"

namespace crossover {

struct UpSamplingArgs {
  Size2 size = 2;
};

// Keras's UpSampling2D (channels_last, interpolation 'nearest' only): each value of a (height,
// width, channels) sample repeated over a size.h x size.w block, giving (height * size.h, width *
// size.w, channels); no weights. Requires size >= 1; any other interpolation is refused.
Layer UpSampling2D(Size2 size = 2, std::string_view interpolation = "nearest");

}  // namespace crossover
