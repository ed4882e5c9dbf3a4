// The mean or sum over the last axis (a custom layer's call() traced): its argument and
// constructor.
#pragma once

#include "nn/layer.h"

namespace crossover {

struct ReduceArgs {
  bool mean = true;  // else the sum
};

// The mean (or sum) over the last axis, keeping it as 1 (keepdims=True).
Layer ReduceLastAxis(bool mean);

}  // namespace crossover
