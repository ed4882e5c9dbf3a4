// Keras's Add: its constructor (no arguments).
#pragma once

#include "nn/layer.h"

namespace crossover {

// The element-wise sum of inputs of one shape (a merging layer: two or more inputs, in a
// functional model).
Layer Add();

}  // namespace crossover
