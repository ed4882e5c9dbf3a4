// What one training step computes, as settings: the optimizer (Keras's kinds and arguments, the
// learning-rate schedule) and the loss. The backends' kernels compute them (kernel_math.h) and the
// model and the file formats describe them; neither needs the kernel interface (backend.h) for
// that, so they live here, in a header with no device code. (They are not in nn/: the backends
// sit below nn and may not include it.)
#pragma once

#include <cstdint>

namespace crossover {

// The learning rate as a function of the optimizer step, evaluated on the device each step.
// lr(step) = base * decay_rate ^ (staircase ? floor(step / decay_steps) : step / decay_steps);
// decay_steps == 0 means constant. Epoch-level schedules (ReduceLROnPlateau, step decay per
// epoch) change `base` between epochs.
struct LearningRateSchedule {
  float base = 1e-3f;
  float decay_rate = 1.0f;
  int64_t decay_steps = 0;
  bool staircase = false;
};

enum class OptimizerKind { sgd, adam, rmsprop, adagrad, adadelta, nadam, adamax };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adam;
  LearningRateSchedule schedule;
  // Adam's betas and RMSprop's rho as given, in double: Keras takes 1 - beta in double (Python)
  // and rounds it to float32 once, which a float32 beta cannot reproduce (1 - 0.999f is 1.3e-5
  // from 0.001f). See update_constants.
  double beta1 = 0.9;                      // Adam, Nadam, Adamax
  double beta2 = 0.999;                    // Adam, Nadam, Adamax
  float epsilon = 1e-7f;                   // all but SGD (Keras's default)
  float momentum = 0.0f;                   // SGD, RMSprop
  bool nesterov = false;                   // SGD
  double rho = 0.9;                        // RMSprop, Adadelta
  float initial_accumulator_value = 0.1f;  // Adagrad: slot1's value before the first step
  float weight_decay = 0.0f;               // decoupled (AdamW-style; Keras's weight_decay argument)
  float clipnorm = 0.0f;                   // clip by global norm when > 0 (Keras's global_clipnorm)
  // Keras's clipnorm: each parameter tensor's gradient clipped to this L2 norm on its own when
  // > 0 (tensor_clip_divisor in kernel_math.h). At most one of the clippings is set, as in Keras.
  float tensor_clipnorm = 0.0f;
  float clipvalue = 0.0f;  // clip each element to [-clipvalue, clipvalue] when > 0
  // Adam (and so AdamW): Keras's amsgrad, a third slot per parameter (ParamSlot::slot3, Keras's
  // velocity_hat = max(velocity_hat, v)) whose root divides the step instead of v's.
  bool amsgrad = false;
};

enum class LossKind {
  sparse_categorical_crossentropy,  // targets: class index per row
  categorical_crossentropy,         // targets: a probability row per row
  binary_crossentropy,              // targets: 0/1 per element
  mean_squared_error,               // targets: a value per element
};

}  // namespace crossover
