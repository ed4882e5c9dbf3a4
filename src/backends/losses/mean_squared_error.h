// Keras 3's MeanSquaredError (keras/src/losses/losses.py): the mean over the sample's elements
// of (p - t)^2.
#pragma once

#include "backends/losses/unit.h"

namespace crossover::losses {

struct MeanSquaredError {
  static constexpr LossRules rules{
      .name = "mean_squared_error", .class_name = "MeanSquaredError", .alias = "mse"};
  // Right: the sample's argmax is its target's.
  CROSSOVER_HD static void row(float, ActivationKind, const float*, const float* targets, int64_t r,
                               int64_t c, const float* p, float* d, float inv_m, double,
                               LossRow& out) {
    const float* t = targets + r * c;
    double l = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      const float e = p[j] - t[j];
      l += static_cast<double>(e) * e;
      if (d) d[j] = 2.0f * e / static_cast<float>(c) * inv_m;
    }
    out.loss = l / static_cast<double>(c);
    out.correct = argmax_row(p, c) == argmax_row(t, c) ? 1.0 : 0.0;
  }
};

}  // namespace crossover::losses
