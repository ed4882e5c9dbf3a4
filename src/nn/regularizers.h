// Keras's regularizers (keras.regularizers' L1, L2 and L1L2: a layer's kernel_regularizer and
// bias_regularizer, and its activity_regularizer): a penalty l1 * sum(|w|) + l2 * sum(w^2) that
// the step adds to the loss (as Keras's compute_loss adds the layers' losses, in fit and evaluate)
// and whose gradient, l1 * sign(w) + 2 * l2 * w, it adds to the weight's before the optimizer, or
// to the layer output's in the backward pass (Backend::regularize).
#pragma once

namespace crossover {

struct Regularizer {
  // The Keras class it came as, so that a model file writes it back as it read it.
  enum class Kind { none, l1, l2, l1_l2 };
  Kind kind = Kind::none;
  double l1 = 0.0, l2 = 0.0;  // as Keras holds them (its arithmetic casts them to float32)
  bool any() const { return kind != Kind::none && (l1 != 0.0 || l2 != 0.0); }
};

}  // namespace crossover
