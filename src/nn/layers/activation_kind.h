// What Activation, LeakyReLU and ELU share as kinds: a layer that applies the activation of its
// ActivationArgs element by element, keeping the shape (each kind reads and writes its own
// Keras arguments). Its forward and backward are in nn/layers/activation.cpp.
#pragma once

#include "nn/layers/activation.h"
#include "nn/layers/kind.h"

namespace crossover {

class AppliesActivationKind : public LayerKind {
 public:
  bool keeps_shape() const override { return true; }
  // The last layer in training leaves its activation to the loss op.
  bool defers_activation() const override { return true; }
  bool applies_activation() const override { return true; }
  LayerActivation activation(const Layer& l) const override {
    return l.args<ActivationArgs>().activation;
  }
  void forward(const ForwardStep& s) const override;
  void backward(BackwardStep& s) const override;
};

}  // namespace crossover
