// Keras 3's Lion (keras/src/optimizers/lion.py; Chen et al., 2023, "Symbolic Discovery of
// Optimization Algorithms"): the sign of an interpolation of momentum and gradient is the step.
#pragma once

#include "backends/optimizers/unit.h"

namespace crossover::optimizers {

struct Lion : Unit {
  static constexpr std::string_view class_name = "Lion", name = "lion";
  struct Options {
    double learning_rate = 1e-3;
    double beta_1 = 0.9;
    double beta_2 = 0.99;
    double weight_decay = 0;
    double clipnorm = 0;
    double clipvalue = 0;
  };
  // Keras refuses a beta_1 outside (0, 1] (the optimizer would degenerate to SignSGD).
  static constexpr std::array arguments{
      number("beta_1", &Options::beta_1, Range{.low = 0, .high = 1, .low_open = true}),
      number("beta_2", &Options::beta_2, Range{.low = 0, .high = 1}),
  };
  static constexpr SlotNames slots(const Options&) { return {"momentum", "", ""}; }
  enum Constant { beta_1, one_minus_beta1, beta_2, one_minus_beta2 };
  // lion.py casts the betas to the variable's float32 first: 1 - beta is float32 arithmetic.
  CROSSOVER_HD static void constants(const Options& o, int64_t, const CarriedValue&,
                                     UpdateConstants& u) {
    const auto b1 = static_cast<float>(o.beta_1), b2 = static_cast<float>(o.beta_2);
    u.k[beta_1] = b1;
    u.k[one_minus_beta1] = 1.0f - b1;
    u.k[beta_2] = b2;
    u.k[one_minus_beta2] = 1.0f - b2;
  }
  // w -= lr sign(m beta_1 + g (1 - beta_1)); m = m beta_2 + g (1 - beta_2). sign(0) is 0.
  CROSSOVER_HD static void element(const Options&, const UpdateConstants& u, float decay, float& w,
                                   float g, float* s1, float*, float*, int64_t i) {
    w -= w * decay;
    float& m = s1[i];
    const float blend = m * u.k[beta_1] + g * u.k[one_minus_beta1];
    const float sign = blend > 0.0f ? 1.0f : (blend < 0.0f ? -1.0f : 0.0f);
    w -= u.lr * sign;
    m = m * u.k[beta_2] + g * u.k[one_minus_beta2];
  }
};

}  // namespace crossover::optimizers
