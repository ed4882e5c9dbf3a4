// Keras 3's Adadelta (keras/src/optimizers/adadelta.py).
#pragma once

#include "backends/optimizers/unit.h"

namespace crossover::optimizers {

struct Adadelta : Unit {
  static constexpr std::string_view class_name = "Adadelta", name = "adadelta";
  struct Options {
    double learning_rate = 1e-3;
    double rho = 0.95;
    double epsilon = 1e-7;
    double weight_decay = 0;
    double clipnorm = 0;
    double clipvalue = 0;
  };
  static constexpr std::array arguments{
      number("rho", &Options::rho, kUnitOpen),
      number("epsilon", &Options::epsilon, kPositive, true),
  };
  static constexpr SlotNames slots(const Options&) {
    return {"accumulated_grad", "accumulated_delta_var", ""};
  }
  enum Constant { one_minus_rho };
  CROSSOVER_HD static void constants(const Options& o, int64_t, const CarriedValue&,
                                     UpdateConstants& u) {
    u.k[one_minus_rho] = static_cast<float>(1.0 - o.rho);
  }
  // With rms(x) = sqrt(x + epsilon): ag = rho ag + (1 - rho) g^2; delta = -(rms(ad) g) / rms(ag);
  // ad = rho ad + (1 - rho) delta^2; w += lr delta. rho is float32 where it multiplies a tensor,
  // 1 - rho is Python's (double).
  CROSSOVER_HD static void element(const Options& o, const UpdateConstants& u, float decay,
                                   float& w, float g, float* s1, float* s2, float*, int64_t i) {
    w -= w * decay;
    const auto rho = static_cast<float>(o.rho), eps = static_cast<float>(o.epsilon);
    float &accumulated_grad = s1[i], &accumulated_delta_var = s2[i];
    accumulated_grad = rho * accumulated_grad + u.k[one_minus_rho] * (g * g);
    const float delta =
        -(std::sqrt(accumulated_delta_var + eps) * g / std::sqrt(accumulated_grad + eps));
    accumulated_delta_var = rho * accumulated_delta_var + u.k[one_minus_rho] * (delta * delta);
    w += u.lr * delta;
  }
};

}  // namespace crossover::optimizers
