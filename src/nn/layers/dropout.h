// Keras's Dropout: its argument and its constructor.
#pragma once

#include "nn/layer.h"

namespace crossover {

struct DropoutArgs {
  float rate = 0.0f;
};

// Inverted dropout: in training, zeroes each unit with probability rate and scales the rest by
// 1 / (1 - rate); the identity in evaluate and predict. Requires 0 <= rate < 1.
Layer Dropout(double rate);

}  // namespace crossover
