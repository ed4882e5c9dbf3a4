// Keras 3's Huber (keras/src/losses/losses.py, huber): with e = p - t, 0.5 e^2 where |e| <= delta,
// delta |e| - 0.5 delta^2 beyond; the mean over the sample's elements. Quadratic near the target
// and linear far from it: a regression loss that outliers pull less than the squared error.
#pragma once

#include "backends/losses/unit.h"

namespace crossover::losses {

struct Huber {
  static constexpr LossRules rules{
      .name = "huber", .class_name = "Huber", .parameter = "delta", .parameter_default = 1.0};
  // Right: the sample's argmax is its target's (as for mean_squared_error). The gradient is e
  // inside delta and delta sign(e) beyond (the two agree at |e| = delta).
  CROSSOVER_HD static void row(float delta, ActivationKind, const float*, const float* targets,
                               int64_t r, int64_t c, const float* p, float* d, float inv_m, double,
                               LossRow& out) {
    const float* t = targets + r * c;
    double l = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      const float e = p[j] - t[j], a = std::fabs(e);
      const bool inside = a <= delta;
      l += inside ? 0.5 * static_cast<double>(e) * e
                  : static_cast<double>(delta) * a - 0.5 * static_cast<double>(delta) * delta;
      if (d) {
        const float g = inside ? e : (e > 0.0f ? delta : -delta);
        d[j] = g / static_cast<float>(c) * inv_m;
      }
    }
    out.loss = l / static_cast<double>(c);
    out.correct = argmax_row(p, c) == argmax_row(t, c) ? 1.0 : 0.0;
  }
};

}  // namespace crossover::losses
