// What a loss unit is made of (backends/losses/<name>.h, one file per Keras loss, listed in
// step_config.h's CROSSOVER_LOSSES). A unit holds, in one place:
//   - rules: its Keras names and what the engine must know around it: its targets (a class index
//     per sample, or a value per output element), whether it reads the last axis as classes,
//     what from_logits means for it, whether it takes a final softmax's or sigmoid's input as
//     its logits (fused), and its one numeric argument (Huber's delta) with its default;
//   - row(): one sample's loss, whether it is right (the loss's "accuracy"), and the gradient of
//     loss / m with respect to its input, compiled for the CPU and CUDA alike (losses/loss_row.h
//     applies the final activation first and chains the gradient through it after).
#pragma once

#include <string_view>

#include "backends/kernel_math.h"

namespace crossover::losses {

struct LossRules {
  std::string_view name = {};        // Keras's function name, the string compile takes
  std::string_view class_name = {};  // Keras's class
  std::string_view alias = {};       // another string compile takes ("mse"), or empty
  // One target column per sample, a class index (sparse); else one target per output element.
  bool class_index_targets = false;
  // Reads the output's last axis as classes: an output of one axis only (and its accuracy is
  // the argmax's, as is a regression loss's).
  bool classes_on_last_axis = false;
  // from_logits=True: the activation the loss applies to the output (linear: not accepted).
  ActivationKind logits = ActivationKind::linear;
  // A final softmax's or sigmoid's input is taken as the logits (Keras 3 on TensorFlow reads a
  // sigmoid's and a softmax's input back from their output): the gradient is fused (p - t).
  bool fuses = false;
  // Its logits and its "accuracy" element by element (binary cross-entropy): a softmax over the
  // last axis of an output of several axes may still be deferred to it.
  bool elementwise = false;
  // Its one numeric argument by Keras's name ("delta"), or empty; its default; positive.
  std::string_view parameter = {};
  double parameter_default = 0;
};

}  // namespace crossover::losses
