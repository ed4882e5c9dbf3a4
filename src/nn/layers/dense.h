// Keras's Dense: its arguments and their defaults, and its constructor.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "nn/initializers.h"
#include "nn/layer.h"
#include "nn/regularizers.h"

namespace crossover {

struct DenseArgs {
  int64_t units = 0;
  LayerActivation activation;
  bool use_bias = true;
  Initializer kernel_initializer = GlorotUniform();
  Initializer bias_initializer = Zeros();
  Regularizer kernel_regularizer, bias_regularizer;  // Keras's kernel_regularizer, bias_regularizer
  // A custom layer's matmul (Python's tracing): the kernel's variable name, as its add_weight
  // names it ("kernel" where empty), and whether it trains (add_weight's trainable).
  std::string weight_name;
  bool weight_trainable = true;
};

// y = activation(x . kernel + bias); kernel (inputs, units) glorot-uniform, bias zeros.
// Requires units >= 1.
Layer Dense(int64_t units, std::string_view activation = "linear", bool use_bias = true);

}  // namespace crossover
