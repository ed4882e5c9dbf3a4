// Optimizers, with Keras's names, defaults and formulas (the arithmetic is in
// backends/kernel_math.h, shared by every device).
#pragma once

#include <array>
#include <string_view>

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
  // Keras's AMSGrad variant (Adam and AdamW only): a third slot per weight, velocity_hat, the
  // running maximum of v, divides the step in v's place.
  bool amsgrad = false;
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

struct AdagradOptions {
  double learning_rate = 1e-3;
  double initial_accumulator_value = 0.1;
  double epsilon = 1e-7;
  double weight_decay = 0;
  double clipnorm = 0;
  double clipvalue = 0;
};
struct AdadeltaOptions {
  double learning_rate = 1e-3;
  double rho = 0.95;
  double epsilon = 1e-7;
  double weight_decay = 0;
  double clipnorm = 0;
  double clipvalue = 0;
};
// Nadam and Adamax take Adam's options (the same names and defaults); amsgrad is refused.

OptimizerConfig Adam(const AdamOptions& options = {});
// Adam with decoupled weight decay, Keras's AdamW defaults (weight_decay 0.004).
OptimizerConfig AdamW(AdamOptions options = {.weight_decay = 0.004});
OptimizerConfig SGD(const SGDOptions& options = {});
OptimizerConfig RMSprop(const RMSpropOptions& options = {});
OptimizerConfig Adagrad(const AdagradOptions& options = {});
OptimizerConfig Adadelta(const AdadeltaOptions& options = {});
OptimizerConfig Nadam(const AdamOptions& options = {});
OptimizerConfig Adamax(const AdamOptions& options = {});

// Keras's ExponentialDecay: lr(step) = initial * decay_rate ^ (step / decay_steps), evaluated on
// the device every step. Returns `optimizer` with that schedule.
OptimizerConfig with_exponential_decay(OptimizerConfig optimizer, int64_t decay_steps,
                                       double decay_rate, bool staircase = false);

// Keras's clipnorm (each parameter tensor's gradient clipped to this L2 norm on its own; the
// options' clipnorm is Keras's global_clipnorm). Returns `optimizer` with it; throws Error for a
// negative value, or with clipnorm or clipvalue already set (Keras takes one of the three).
OptimizerConfig with_tensor_clipnorm(OptimizerConfig optimizer, double clipnorm);

// "adam", "adamw", "sgd", "rmsprop", "adagrad", "adadelta", "nadam", "adamax" with default
// options (Keras's string names); throws Error otherwise.
OptimizerConfig optimizer_from_name(std::string_view name);
std::string_view optimizer_name(OptimizerKind kind);

// Keras's names of the optimizer's variables per weight held in ParamSlot's slot1, slot2 and
// slot3 ("momentum", "velocity" for Adam, and "velocity_hat" with amsgrad), empty where that slot
// is unused by `config`.
std::array<std::string_view, 3> optimizer_slot_names(const OptimizerConfig& config);
// The number of state slots `config` uses per weight (0 to 3).
int optimizer_slot_count(const OptimizerConfig& config);

}  // namespace crossover
