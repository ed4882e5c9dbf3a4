// Keras 3's Adam (keras/src/optimizers/adam.py), with its amsgrad variant; AdamW is Adam with
// Keras's AdamW default weight decay (nn/optimizers.cpp lists it as an alias).
#pragma once

#include "backends/optimizers/unit.h"

namespace crossover::optimizers {

// Keras's order: m += (g - m) * (1 - beta_1); v += (g^2 - v) * (1 - beta_2);
// w -= m * alpha / (sqrt(v) + epsilon) (epsilon outside the root, after the bias correction).
CROSSOVER_HD void adam_update(float one_minus_beta1, float one_minus_beta2, float epsilon,
                              float alpha, float decay, float& w, float g, float& m, float& v) {
  w -= w * decay;
  m += (g - m) * one_minus_beta1;
  v += (g * g - v) * one_minus_beta2;
  w -= m * alpha / (std::sqrt(v) + epsilon);
}

// Keras's amsgrad (adam.py): after v's update, v_hat = maximum(v_hat, v), and v_hat takes v's
// place in the step: w -= m * alpha / (sqrt(v_hat) + epsilon). alpha is Adam's, unchanged.
CROSSOVER_HD void adam_amsgrad_update(float one_minus_beta1, float one_minus_beta2, float epsilon,
                                      float alpha, float decay, float& w, float g, float& m,
                                      float& v, float& v_hat) {
  w -= w * decay;
  m += (g - m) * one_minus_beta1;
  v += (g * g - v) * one_minus_beta2;
  v_hat = v_hat < v ? v : v_hat;
  w -= m * alpha / (std::sqrt(v_hat) + epsilon);
}

// Keras's AdamW: Adam with this weight decay by default.
inline constexpr double kAdamWWeightDecay = 0.004;

struct Adam : Unit {
  static constexpr std::string_view class_name = "Adam", name = "adam";
  struct Options {
    double learning_rate = 1e-3;
    double beta_1 = 0.9;
    double beta_2 = 0.999;
    double epsilon = 1e-7;    // Keras's "epsilon hat" (PyTorch's default is 1e-8)
    double weight_decay = 0;  // decoupled, as in Keras 3 and AdamW
    double clipnorm = 0;      // clip the global gradient norm to this (0: off)
    double clipvalue = 0;     // clip each gradient element to [-clipvalue, clipvalue] (0: off)
    // Keras's AMSGrad: a third slot per weight, velocity_hat, the running maximum of v, divides
    // the step in v's place.
    bool amsgrad = false;
  };
  static constexpr std::array arguments = [] {
    const auto b = betas_and_epsilon<Options>();
    return std::array{b[0], b[1], b[2], flag("amsgrad", &Options::amsgrad)};
  }();
  static constexpr SlotNames slots(const Options& o) {
    return {"momentum", "velocity", o.amsgrad ? "velocity_hat" : ""};
  }

  enum Constant { alpha, one_minus_beta1, one_minus_beta2 };
  // Keras's float32 arithmetic: beta is cast to float32 and raised to the step t, then alpha =
  // lr * sqrt(1 - b2^t) / (1 - b1^t) in float32 operations. The moments' coefficient 1 - beta is
  // Python arithmetic on the double beta, rounded to float32 once: 0.001f for beta_2 = 0.999,
  // where 1 - 0.999f would be 1.3e-5 smaller, a systematic 6.4e-6 in every step that alone moves
  // a run away from Keras's (bench/RESULTS.md, "Adam against Keras, op by op").
  CROSSOVER_HD static void constants(const Options& o, int64_t t, const CarriedValue&,
                                     UpdateConstants& u) {
    const float b1t = float_power(o.beta_1, t), b2t = float_power(o.beta_2, t);
    u.k[alpha] = u.lr * std::sqrt(1.0f - b2t) / (1.0f - b1t);
    u.k[one_minus_beta1] = static_cast<float>(1.0 - o.beta_1);
    u.k[one_minus_beta2] = static_cast<float>(1.0 - o.beta_2);
  }
  CROSSOVER_HD static void element(const Options& o, const UpdateConstants& u, float decay,
                                   float& w, float g, float* s1, float* s2, float* s3, int64_t i) {
    const auto eps = static_cast<float>(o.epsilon);
    if (o.amsgrad)
      adam_amsgrad_update(u.k[one_minus_beta1], u.k[one_minus_beta2], eps, u.k[alpha], decay, w, g,
                          s1[i], s2[i], s3[i]);
    else
      adam_update(u.k[one_minus_beta1], u.k[one_minus_beta2], eps, u.k[alpha], decay, w, g, s1[i],
                  s2[i]);
  }
};

}  // namespace crossover::optimizers
