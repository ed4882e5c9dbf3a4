// Keras's Reshape: its argument and constructor.
#pragma once

#include "nn/layer.h"

namespace crossover {

struct ReshapeArgs {
  Shape target_shape;  // one dimension may be -1: inferred
};

// The same values in a new per-sample shape; one dimension may be -1 (inferred).
Layer Reshape(Shape target_shape);

}  // namespace crossover
