// Optimizers, with Keras's names, defaults and formulas (the arithmetic is in
// backends/kernel_math.h, shared by every device).
#pragma once

#include "backends/backend.h"

namespace crossover {

struct AdamOptions {
  double learning_rate = 1e-3;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;    // Keras's "epsilon hat" (PyTorch's default is 1e-8)
  double weight_decay = 0;  // decoupled, as in Keras 3 and AdamW
  double clipnorm = 0;      // clip the global gradient norm to this (0: off)
  double clipvalue = 0;     // clip each gradient element to [-clipvalue, clipvalue] (0: off)
};
struct SGDOptions {
  double learning_rate = 0.01;
  double momentum = 0;
  bool nesterov = false;
  double weight_decay = 0;
  double clipnorm = 0;
  double clipvalue = 0;
};
struct RMSpropOptions {
  double learning_rate = 1e-3;
  double rho = 0.9;
  double momentum = 0;
  double epsilon = 1e-7;
  double weight_decay = 0;
  double clipnorm = 0;
  double clipvalue = 0;
};

OptimizerConfig Adam(const AdamOptions& options = {});
// Adam with decoupled weight decay, Keras's AdamW defaults (weight_decay 0.004).
OptimizerConfig AdamW(AdamOptions options = {.weight_decay = 0.004});
OptimizerConfig SGD(const SGDOptions& options = {});
OptimizerConfig RMSprop(const RMSpropOptions& options = {});

// Keras's ExponentialDecay: lr(step) = initial * decay_rate ^ (step / decay_steps), evaluated on
// the device every step. Returns `optimizer` with that schedule.
OptimizerConfig with_exponential_decay(OptimizerConfig optimizer, int64_t decay_steps,
                                       double decay_rate, bool staircase = false);

// "adam", "sgd", "rmsprop", "adamw" with default options; throws Error otherwise.
OptimizerConfig optimizer_from_name(std::string_view name);
std::string_view optimizer_name(OptimizerKind kind);

}  // namespace crossover
