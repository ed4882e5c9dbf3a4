// Keras 3's Adagrad (keras/src/optimizers/adagrad.py).
#pragma once

#include "backends/optimizers/unit.h"

namespace crossover::optimizers {

struct Adagrad : Unit {
  static constexpr std::string_view class_name = "Adagrad", name = "adagrad";
  struct Options {
    double learning_rate = 1e-3;
    double initial_accumulator_value = 0.1;
    double epsilon = 1e-7;
    double weight_decay = 0;
    double clipnorm = 0;
    double clipvalue = 0;
  };
  static constexpr std::array arguments{
      number("initial_accumulator_value", &Options::initial_accumulator_value, kNotNegative, true),
      number("epsilon", &Options::epsilon, kPositive, true),
  };
  static constexpr SlotNames slots(const Options&) { return {"accumulator", "", ""}; }
  // Keras's accumulators start at initial_accumulator_value.
  static float initial_slot_value(const Options& o) {
    return static_cast<float>(o.initial_accumulator_value);
  }
  CROSSOVER_HD static void constants(const Options&, int64_t, const CarriedValue&,
                                     UpdateConstants&) {}
  // acc += g^2; w -= lr g / sqrt(acc + epsilon).
  CROSSOVER_HD static void element(const Options& o, const UpdateConstants& u, float decay,
                                   float& w, float g, float* s1, float*, float*, int64_t i) {
    w -= w * decay;
    s1[i] += g * g;
    w -= u.lr * g / std::sqrt(s1[i] + static_cast<float>(o.epsilon));
  }
};

}  // namespace crossover::optimizers
