// Keras's GlobalAveragePooling2D: its constructor (no arguments).
#pragma once

#include "nn/layer.h"

namespace crossover {

// (height, width, channels) -> (channels): the mean of each channel.
Layer GlobalAveragePooling2D();

}  // namespace crossover
