// Keras's Permute and RepeatVector: their arguments and constructors.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/layer.h"

namespace crossover {

struct PermuteArgs {
  std::vector<int64_t> dims;  // Keras's: a permutation of 1..rank (the batch axis not counted)
};

struct RepeatVectorArgs {
  int64_t n = 1;
};

// Keras's Permute: each sample's axes reordered, output axis i being input axis dims[i] (1-based,
// as Keras counts them past the batch axis); no weights. dims must be a permutation of 1..rank,
// and the input must have rank axes (checked when the layer is built).
Layer Permute(std::vector<int64_t> dims);

// Keras's RepeatVector: a (features) sample repeated n times, giving (n, features); no weights.
// n must be >= 1; the input must be flat (checked when the layer is built).
Layer RepeatVector(int64_t n);

}  // namespace crossover
