// What one training step computes, as settings: the optimizer (its kind, one of the units of
// backends/optimizers/, with its arguments, and the learning-rate schedule) and the loss. The
// backends' kernels compute them (kernel_math.h) and the model and the file formats describe them;
// neither needs the kernel interface (backend.h) for that, so they live here, in a header with no
// device code. (They are not in nn/: the backends sit below nn and may not include it.)
#pragma once

#include <cstdint>

#include "backends/optimizers/list.h"

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

#define CROSSOVER_OPTIMIZER_KIND(kind, Unit) kind,
enum class OptimizerKind { CROSSOVER_OPTIMIZERS(CROSSOVER_OPTIMIZER_KIND) };
#undef CROSSOVER_OPTIMIZER_KIND

// The arguments of the optimizer a config holds: its unit's Options (the member named by its kind
// is the one in use). Device code reads them as its unit's element() takes them.
union OptimizerArguments {
#define CROSSOVER_OPTIMIZER_MEMBER(kind, Unit) optimizers::Unit::Options kind;
  CROSSOVER_OPTIMIZERS(CROSSOVER_OPTIMIZER_MEMBER)
#undef CROSSOVER_OPTIMIZER_MEMBER
  constexpr OptimizerArguments() : adam() {}
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adam;
  OptimizerArguments args;  // args.<kind>: Keras's arguments (Adam's defaults unless set)
  LearningRateSchedule schedule;
  // The base optimizer's arguments, as the step applies them (the options' copies are what was
  // given; these are what the kernels read):
  float weight_decay = 0.0f;  // decoupled (AdamW-style; Keras's weight_decay argument)
  float clipnorm = 0.0f;      // clip by global norm when > 0 (Keras's global_clipnorm)
  // Keras's clipnorm: each parameter tensor's gradient clipped to this L2 norm on its own when
  // > 0 (tensor_clip_divisor in kernel_math.h). At most one of the clippings is set, as in Keras.
  float tensor_clipnorm = 0.0f;
  float clipvalue = 0.0f;  // clip each element to [-clipvalue, clipvalue] when > 0
};

// X(kind, Unit): LossKind::kind is losses::Unit (backends/losses/, listed in losses/list.h).
#define CROSSOVER_LOSSES(X)                                         \
  X(sparse_categorical_crossentropy, SparseCategoricalCrossentropy) \
  X(categorical_crossentropy, CategoricalCrossentropy)              \
  X(binary_crossentropy, BinaryCrossentropy)                        \
  X(mean_squared_error, MeanSquaredError)                           \
  X(huber, Huber)

#define CROSSOVER_LOSS_KIND(kind, Unit) kind,
enum class LossKind { CROSSOVER_LOSSES(CROSSOVER_LOSS_KIND) };
#undef CROSSOVER_LOSS_KIND

// A loss as the kernels take it: its kind and its one argument (the unit's LossRules::parameter,
// Huber's delta; 0 where it has none).
struct LossConfig {
  LossKind kind = LossKind::sparse_categorical_crossentropy;
  float parameter = 0.0f;
  constexpr LossConfig() = default;
  constexpr LossConfig(LossKind k, float p = 0.0f) : kind(k), parameter(p) {}  // NOLINT: implicit
};

}  // namespace crossover
