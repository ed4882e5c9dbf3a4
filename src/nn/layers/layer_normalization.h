// Keras's LayerNormalization: its arguments and their defaults, and its constructor.
#pragma once

#include <cstdint>

#include "nn/initializers.h"
#include "nn/layer.h"
#include "nn/regularizers.h"

namespace crossover {

struct LayerNormArgs {
  // The last axis: -1, or tf.keras 2's positive index of it (checked when the model builds).
  int64_t axis = -1;
  double epsilon = 1e-3;
  bool center = true;  // beta
  bool scale = true;   // gamma
  Initializer gamma_initializer = Ones();
  Initializer beta_initializer = Zeros();
  Regularizer gamma_regularizer, beta_regularizer;  // Keras's, of the trainable weights
};

// Keras's LayerNormalization over the last axis (axis=-1 only; rms_scaling=False only): each
// sample's last-axis vector x (n features) becomes y = (x - mean) / sqrt(variance + epsilon) *
// gamma + beta, mean and (biased) variance over those n values, the same in fit, evaluate and
// predict. Weights, in Keras's order: gamma (ones; when scale), beta (zeros; when center), each
// (n,). Requires epsilon > 0.
Layer LayerNormalization(double epsilon = 1e-3, bool center = true, bool scale = true);

}  // namespace crossover
