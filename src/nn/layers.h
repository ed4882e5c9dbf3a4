// The layers of a Sequential model, as Keras names them.
//
//   Sequential model({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
//
// A layer here is a description (a value); compile() turns the list into a static plan of
// buffers and kernel calls on one device (nn/plan.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "backends/backend.h"
#include "core/tensor.h"

namespace crossover {

enum class LayerType { input, flatten, dense, dropout, activation };

struct Layer {
  LayerType type = LayerType::dense;
  std::string name;   // "dense", "dense_1", ... given by Sequential when empty
  Shape input_shape;  // input / flatten: the per-sample shape, when given
  int64_t units = 0;  // dense
  ActivationKind activation = ActivationKind::linear;  // dense, activation
  bool use_bias = true;                                // dense
  float rate = 0.0f;                                   // dropout
};

// Requires a name Keras knows: "linear" (or "" / "None"), "relu", "sigmoid", "tanh", "softmax".
// Throws Error("activation", ...) otherwise.
ActivationKind parse_activation(std::string_view name);
std::string_view activation_name(ActivationKind a);
std::string_view layer_type_name(LayerType t);  // "Dense", "Dropout", ... (Keras class names)

// Keras's InputLayer: the per-sample shape, e.g. Input({28, 28}).
Layer Input(Shape shape);
// Flattens each sample to a vector; with a shape it also declares the model's input.
Layer Flatten(Shape input_shape = {});
// y = activation(x . kernel + bias); kernel (inputs, units) glorot-uniform, bias zeros.
// Requires units >= 1.
Layer Dense(int64_t units, std::string_view activation = "linear", bool use_bias = true);
// Inverted dropout: in training, zeroes each unit with probability rate and scales the rest by
// 1 / (1 - rate); the identity in evaluate and predict. Requires 0 <= rate < 1.
Layer Dropout(double rate);
// Applies an activation on its own.
Layer Activation(std::string_view activation);

}  // namespace crossover
