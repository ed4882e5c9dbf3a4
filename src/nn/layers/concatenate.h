// Keras's Concatenate: its argument and constructor.
#pragma once

#include <cstdint>

#include "nn/layer.h"

namespace crossover {

struct ConcatenateArgs {
  // Counting the batch axis as Keras does (-1: the last; only the last is supported).
  int64_t axis = -1;
};

// The inputs joined along the last axis (axis=-1 or the rank counting the batch axis); the other
// axes must agree.
Layer Concatenate(int64_t axis = -1);

}  // namespace crossover
