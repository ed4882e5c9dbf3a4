// Keras's GlobalAveragePooling2D and GlobalMaxPooling2D: their constructors (no arguments).
#pragma once

#include "nn/layer.h"

namespace crossover {

// (height, width, channels) -> (channels): the mean of each channel.
Layer GlobalAveragePooling2D();
// (height, width, channels) -> (channels): the maximum of each channel.
Layer GlobalMaxPooling2D();

}  // namespace crossover
