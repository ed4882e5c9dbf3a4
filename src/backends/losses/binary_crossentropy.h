// Keras 3's BinaryCrossentropy (keras/src/losses/losses.py): 0/1 targets per output element,
// the mean over the sample's elements.
#pragma once

#include "backends/losses/unit.h"

namespace crossover::losses {

struct BinaryCrossentropy {
  static constexpr LossRules rules{.name = "binary_crossentropy",
                                   .class_name = "BinaryCrossentropy",
                                   .logits = ActivationKind::sigmoid,
                                   .fuses = true,
                                   .elementwise = true};
  // After a final sigmoid or softmax, z is read as the logits (Keras 3 on TensorFlow: the
  // activation's _keras_logits, as for the cross-entropies): TensorFlow's
  // sigmoid_cross_entropy_with_logits, max(z, 0) - z t + log(1 + exp(-|z|)), unclipped. Else p
  // clipped to [eps, 1 - eps]. Right: each element's p > 0.5 as its target's, the fraction.
  CROSSOVER_HD static void row(float, ActivationKind act, const float* z, const float* targets,
                               int64_t r, int64_t c, const float* p, float* d, float inv_m, double,
                               LossRow& out) {
    const float* t = targets + r * c;
    double l = 0.0, right = 0.0;
    const bool logits = act == ActivationKind::sigmoid || act == ActivationKind::softmax;
    for (int64_t j = 0; j < c; ++j) {
      right += ((p[j] > 0.5f) == (t[j] > 0.5f)) ? 1.0 : 0.0;
      if (logits) {
        const double zj = z[j];
        l += std::fmax(zj, 0.0) - zj * t[j] + std::log1p(std::exp(-std::fabs(zj)));
        if (d) {
          const float s = act == ActivationKind::sigmoid
                              ? p[j]
                              : static_cast<float>(1.0 / (1.0 + std::exp(-zj)));
          d[j] = (s - t[j]) / static_cast<float>(c) * inv_m;
        }
        continue;
      }
      const float pj = fminf(fmaxf(p[j], kProbabilityEpsilon), 1.0f - kProbabilityEpsilon);
      l -= t[j] * std::log(static_cast<double>(pj)) +
           (1.0f - t[j]) * std::log1p(-static_cast<double>(pj));
      if (d) d[j] = (pj - t[j]) / (pj * (1.0f - pj)) / static_cast<float>(c) * inv_m;
    }
    out.loss = l / static_cast<double>(c);
    out.correct = right / static_cast<double>(c);
  }
};

}  // namespace crossover::losses
