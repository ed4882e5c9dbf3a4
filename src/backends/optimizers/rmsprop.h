// Keras 3's RMSprop (keras/src/optimizers/rmsprop.py), not centered.
#pragma once

#include "backends/optimizers/unit.h"

namespace crossover::optimizers {

struct RMSprop : Unit {
  static constexpr std::string_view class_name = "RMSprop", name = "rmsprop";
  struct Options {
    double learning_rate = 1e-3;
    double rho = 0.9;
    double momentum = 0;
    double epsilon = 1e-7;
    double weight_decay = 0;
    double clipnorm = 0;
    double clipvalue = 0;
  };
  static constexpr std::array arguments{
      number("rho", &Options::rho, kUnitOpen),
      number("momentum", &Options::momentum, kUnitOpen, true),
      number("epsilon", &Options::epsilon, kAny, true),
      refused<Options>("centered", "centered RMSprop is not supported"),
  };
  static constexpr SlotNames slots(const Options& o) {
    return {"velocity", o.momentum > 0 ? "momentum" : "", ""};
  }
  enum Constant { one_minus_rho };
  CROSSOVER_HD static void constants(const Options& o, int64_t, const CarriedValue&,
                                     UpdateConstants& u) {
    u.k[one_minus_rho] = static_cast<float>(1.0 - o.rho);
  }
  // ms = rho ms + (1 - rho) g^2; step = lr g / sqrt(ms + epsilon) (epsilon inside the root);
  // with momentum, mom = momentum mom + step and w -= mom.
  CROSSOVER_HD static void element(const Options& o, const UpdateConstants& u, float decay,
                                   float& w, float g, float* s1, float* s2, float*, int64_t i) {
    w -= w * decay;
    float& mean_square = s1[i];
    mean_square = static_cast<float>(o.rho) * mean_square + u.k[one_minus_rho] * (g * g);
    const float step = u.lr * g / std::sqrt(mean_square + static_cast<float>(o.epsilon));
    const auto momentum = static_cast<float>(o.momentum);
    if (momentum > 0.0f) {
      s2[i] = momentum * s2[i] + step;
      w -= s2[i];
    } else {
      w -= step;
    }
  }
};

}  // namespace crossover::optimizers
