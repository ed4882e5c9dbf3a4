// Keras's Rescaling: its arguments and constructor.
#pragma once

#include "nn/layer.h"

namespace crossover {

// As Keras's config holds them (doubles); the step computes with their float32 values, as Keras
// casts them to the layer's compute dtype.
struct RescalingArgs {
  double scale = 1.0;
  double offset = 0.0;
};

// Keras's Rescaling: y = x * scale + offset, element by element, in training and inference alike
// (`Rescaling(1 / 255)` makes pixels 0-255 into 0-1); no weights. Requires finite numbers; a
// per-channel scale (an array) is not supported.
Layer Rescaling(double scale, double offset = 0.0);

}  // namespace crossover
