// Keras 3's categorical cross-entropies (keras/src/losses/losses.py): SparseCategoricalCrossentropy
// (a class index per sample) and CategoricalCrossentropy (a probability row per sample).
#pragma once

#include "backends/losses/unit.h"

namespace crossover::losses {

// Both: loss = logsumexp(z) - sum_j t_j z_j from the logits when a softmax (or sigmoid) is
// fused; else the cross-entropy of the probabilities p as Keras's backend clips them.
CROSSOVER_HD void crossentropy_row(bool sparse, ActivationKind act, const float* z,
                                   const float* targets, int64_t r, int64_t c, const float* p,
                                   float* d, float inv_m, double lse, LossRow& out) {
  const int64_t label = sparse ? static_cast<int64_t>(targets[r]) : -1;
  const float* t = sparse ? nullptr : targets + r * c;
  if (act == ActivationKind::softmax || act == ActivationKind::sigmoid) {
    // A final sigmoid's input is taken as the logits too: Keras 3 on TensorFlow keeps a
    // sigmoid's and a softmax's input on their output (_keras_logits) and its cross-entropies
    // read it back, from_logits or not; the model's output stays the sigmoid, p.
    if (act == ActivationKind::sigmoid) lse = logsumexp_row(z, c);
    if (sparse) {
      out.loss = lse - z[label];
    } else {
      double tz = 0.0, tsum = 0.0;
      for (int64_t j = 0; j < c; ++j) tz += static_cast<double>(t[j]) * z[j], tsum += t[j];
      out.loss = tsum * lse - tz;
    }
    if (d)
      for (int64_t j = 0; j < c; ++j) {
        const float q = act == ActivationKind::softmax
                            ? p[j]
                            : static_cast<float>(std::exp(static_cast<double>(z[j]) - lse));
        d[j] = (q - (sparse ? (j == label ? 1.0f : 0.0f) : t[j])) * inv_m;
      }
  } else {
    out.loss = probability_crossentropy(sparse, label, t, p, d, c, inv_m);
  }
  const int64_t truth = sparse ? label : argmax_row(t, c);
  out.correct = argmax_row(p, c) == truth ? 1.0 : 0.0;
}

// The row of both: sparse (a class index per sample) or not.
template <bool Sparse>
struct CrossentropyRow {
  CROSSOVER_HD static void row(float, ActivationKind act, const float* z, const float* targets,
                               int64_t r, int64_t c, const float* p, float* d, float inv_m,
                               double lse, LossRow& out) {
    crossentropy_row(Sparse, act, z, targets, r, c, p, d, inv_m, lse, out);
  }
};

struct SparseCategoricalCrossentropy : CrossentropyRow<true> {
  static constexpr LossRules rules{.name = "sparse_categorical_crossentropy",
                                   .class_name = "SparseCategoricalCrossentropy",
                                   .class_index_targets = true,
                                   .classes_on_last_axis = true,
                                   .logits = ActivationKind::softmax,
                                   .fuses = true};
};

struct CategoricalCrossentropy : CrossentropyRow<false> {
  static constexpr LossRules rules{.name = "categorical_crossentropy",
                                   .class_name = "CategoricalCrossentropy",
                                   .classes_on_last_axis = true,
                                   .logits = ActivationKind::softmax,
                                   .fuses = true};
};

}  // namespace crossover::losses
