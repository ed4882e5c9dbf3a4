// Keras's TimeDistributed: a layer applied to every time step of a sequence.
#pragma once

#include "nn/layer.h"

namespace crossover {

// Applies `layer` to each of the T slices of (T, ...) samples alike, with the same weights: its
// output is (T, <layer's output>). Keras keeps `layer` as the wrapper's attribute "layer" (its
// weights under layers/time_distributed/layer/vars). `layer` takes one input; a
// BatchNormalization is refused (Keras computes its statistics per time step).
Layer TimeDistributed(Layer layer);

}  // namespace crossover
