// Keras's InputLayer: its constructor (no arguments of its own but the shape).
#pragma once

#include "nn/layer.h"

namespace crossover {

// Keras's InputLayer: the per-sample shape, e.g. Input({28, 28}).
Layer Input(Shape shape);

}  // namespace crossover
