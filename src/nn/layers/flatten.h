// Keras's Flatten: its constructor (no arguments of its own).
#pragma once

#include "nn/layer.h"

namespace crossover {

// Flattens each sample to a vector; with a shape it also declares the model's input.
Layer Flatten(Shape input_shape = {});

}  // namespace crossover
