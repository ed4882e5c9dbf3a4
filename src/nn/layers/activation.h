// Keras's Activation, LeakyReLU and ELU layers: their one argument (the activation and its
// parameter) and their constructors.
#pragma once

#include <string_view>

#include "nn/layer.h"

namespace crossover {

// Activation: the function named; LeakyReLU: leaky_relu with alpha its negative_slope; ELU: elu
// with its alpha.
struct ActivationArgs {
  LayerActivation activation;
};

// Applies an activation on its own.
Layer Activation(std::string_view activation);
// The square root of a custom layer's traced call() (tf.sqrt, keras.ops.sqrt): an Activation of
// ActivationKind::sqrt, which no Keras model file holds (Keras has no such activation).
Layer Sqrt();
// Keras's LeakyReLU layer: x where x >= 0, else negative_slope * x. Requires negative_slope >= 0.
Layer LeakyReLU(double negative_slope = 0.3);
// Keras's ELU layer: x where x > 0, else alpha * (exp(x) - 1). Requires alpha >= 0.
Layer ELU(double alpha = 1.0);

}  // namespace crossover
