// Keras 3's SGD (keras/src/optimizers/sgd.py), with momentum and Nesterov's variant.
#pragma once

#include "backends/optimizers/unit.h"

namespace crossover::optimizers {

struct SGD : Unit {
  // Keras 3.15's SGD().get_config()["name"] is "sgd" (the snake case, as for the others).
  static constexpr std::string_view class_name = "SGD", name = "sgd";
  struct Options {
    double learning_rate = 0.01;
    double momentum = 0;
    bool nesterov = false;
    double weight_decay = 0;
    double clipnorm = 0;
    double clipvalue = 0;
  };
  static constexpr std::array arguments{
      number("momentum", &Options::momentum, kUnitOpen, true),
      flag("nesterov", &Options::nesterov),
  };
  static constexpr SlotNames slots(const Options& o) {
    return {o.momentum > 0 ? "momentum" : "", "", ""};
  }
  CROSSOVER_HD static void constants(const Options&, int64_t, const CarriedValue&,
                                     UpdateConstants&) {}
  // velocity = momentum velocity - lr g; w += velocity (Nesterov: momentum velocity - lr g).
  CROSSOVER_HD static void element(const Options& o, const UpdateConstants& u, float decay,
                                   float& w, float g, float* s1, float*, float*, int64_t i) {
    w -= w * decay;
    const auto momentum = static_cast<float>(o.momentum);
    if (momentum == 0.0f) {
      w -= u.lr * g;
      return;
    }
    const float vel = s1[i] = momentum * s1[i] - u.lr * g;
    w += o.nesterov ? momentum * vel - u.lr * g : vel;
  }
};

}  // namespace crossover::optimizers
