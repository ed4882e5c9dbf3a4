// Keras's noise layers GaussianNoise, GaussianDropout and SpatialDropout2D: their arguments and
// constructors.
#pragma once

#include "nn/layer.h"

namespace crossover {

struct GaussianNoiseArgs {
  float stddev = 0.0f;
};

struct GaussianDropoutArgs {
  float rate = 0.0f;
};

struct SpatialDropoutArgs {
  float rate = 0.0f;
};

// In training, x + N(0, stddev) per value; the identity in evaluate and predict (its gradient the
// identity). Requires 0 <= stddev <= 1 (Keras's bound).
Layer GaussianNoise(double stddev);

// In training, x * N(1, sqrt(rate / (1 - rate))) per value (its gradient multiplied by the same
// noise); the identity in evaluate and predict. Requires 0 <= rate < 1 (Keras takes 1 and divides
// by zero).
Layer GaussianDropout(double rate);

// In training, each channel of each (height, width, channels) sample dropped whole with
// probability rate (Keras's noise shape (batch, 1, 1, channels)), the rest scaled by
// 1 / (1 - rate); the identity in evaluate and predict. Requires 0 <= rate < 1 and images.
Layer SpatialDropout2D(double rate);

}  // namespace crossover
