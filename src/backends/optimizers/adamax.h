// Keras 3's Adamax (keras/src/optimizers/adamax.py): Adam with the infinity norm.
#pragma once

#include "backends/optimizers/unit.h"

namespace crossover::optimizers {

struct Adamax : Unit {
  static constexpr std::string_view class_name = "Adamax", name = "adamax";
  struct Options {
    double learning_rate = 1e-3;
    double beta_1 = 0.9;
    double beta_2 = 0.999;
    double epsilon = 1e-7;
    double weight_decay = 0;
    double clipnorm = 0;
    double clipvalue = 0;
  };
  static constexpr std::array arguments = betas_and_epsilon<Options>();
  static constexpr SlotNames slots(const Options&) { return {"momentum", "norm", ""}; }
  enum Constant { one_minus_beta1, one_minus_beta1_power };
  CROSSOVER_HD static void constants(const Options& o, int64_t t, const CarriedValue&,
                                     UpdateConstants& u) {
    u.k[one_minus_beta1] = static_cast<float>(1.0 - o.beta_1);  // 1 - self.beta_1: Python's
    u.k[one_minus_beta1_power] = 1.0f - float_power(o.beta_1, t);
  }
  // m += (g - m)(1 - b1); norm = max(b2 norm, |g|); w -= lr m / ((1 - b1^t)(norm + epsilon)).
  CROSSOVER_HD static void element(const Options& o, const UpdateConstants& u, float decay,
                                   float& w, float g, float* s1, float* s2, float*, int64_t i) {
    w -= w * decay;
    float &m = s1[i], &norm = s2[i];
    m += (g - m) * u.k[one_minus_beta1];
    const float decayed = static_cast<float>(o.beta_2) * norm, a = std::fabs(g);
    norm = decayed > a ? decayed : a;
    w -= u.lr * m / (u.k[one_minus_beta1_power] * (norm + static_cast<float>(o.epsilon)));
  }
};

}  // namespace crossover::optimizers
