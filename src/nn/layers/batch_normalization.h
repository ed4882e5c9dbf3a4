// Keras's BatchNormalization: its arguments and their defaults, and its constructor.
#pragma once

#include <cstdint>

#include "nn/initializers.h"
#include "nn/layer.h"
#include "nn/regularizers.h"

namespace crossover {

struct BatchNormArgs {
  // The last axis: -1, or tf.keras 2's positive index of it (checked when the model builds).
  int64_t axis = -1;
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // beta
  bool scale = true;   // gamma
  Initializer gamma_initializer = Ones();
  Initializer beta_initializer = Zeros();
  Regularizer gamma_regularizer, beta_regularizer;  // Keras's, of the trainable weights
  Initializer moving_mean_initializer = Zeros();
  Initializer moving_variance_initializer = Ones();
};

// Keras's BatchNormalization over the last axis (the channels of an image, the features after
// Dense): y = gamma * (x - mean) / sqrt(variance + epsilon) + beta. In fit, mean and variance are
// the batch's (the biased variance, over every axis but the last), and the moving statistics
// become moving * momentum + batch * (1 - momentum); in evaluate and predict the moving statistics
// are used. Weights, in Keras's order: gamma (ones; when scale), beta (zeros; when center),
// moving_mean (zeros) and moving_variance (ones), each (channels,); the moving statistics are not
// trainable. Requires 0 <= momentum <= 1 and epsilon > 0.
Layer BatchNormalization(double momentum = 0.99, double epsilon = 1e-3, bool center = true,
                         bool scale = true);

}  // namespace crossover
