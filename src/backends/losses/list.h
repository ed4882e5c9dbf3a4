// The losses, each a unit in its own file (unit.h says what a unit holds). Adding one: its file,
// its #include here and its line in CROSSOVER_LOSSES (step_config.h); the kernels, the model's
// rules, the formats, the CLI and Python find it from here.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "backends/losses/binary_crossentropy.h"
#include "backends/losses/crossentropy.h"
#include "backends/losses/huber.h"
#include "backends/losses/mean_squared_error.h"

namespace crossover {

// Every loss kind, in CROSSOVER_LOSSES's order.
constexpr auto all_loss_kinds() {
#define CROSSOVER_LOSS_KIND(k, Unit) LossKind::k,
  return std::array{CROSSOVER_LOSSES(CROSSOVER_LOSS_KIND)};
#undef CROSSOVER_LOSS_KIND
}

// What the engine must know of a loss kind (unit.h), from its unit.
constexpr const losses::LossRules& loss_rules(LossKind kind) {
  switch (kind) {
#define CROSSOVER_LOSS_RULES(k, Unit) \
  case LossKind::k:                   \
    return losses::Unit::rules;
    CROSSOVER_LOSSES(CROSSOVER_LOSS_RULES)
#undef CROSSOVER_LOSS_RULES
  }
  return losses::SparseCategoricalCrossentropy::rules;  // not reached
}

// The kind compile's string names (a unit's name or alias), if any. Host code.
inline std::optional<LossKind> find_loss(std::string_view name) {
  for (const LossKind kind : all_loss_kinds()) {
    const losses::LossRules& r = loss_rules(kind);
    if (name == r.name || (!r.alias.empty() && name == r.alias)) return kind;
  }
  return std::nullopt;
}

// "sparse_categorical_crossentropy, ..., huber": every loss's name, for an error. Host code.
inline std::string loss_names() {
  std::string out;
  for (const LossKind kind : all_loss_kinds())
    out += (out.empty() ? "" : ", ") + std::string(loss_rules(kind).name);
  return out;
}

// Why `value` cannot be the loss's one argument (Huber's delta: positive and finite), "<parameter>
// must be positive, got <value>"; empty when it can. compile, the compile_config reader and
// Python's loss classes all ask it. Host code (losses/list.cpp).
std::string loss_parameter_problem(const losses::LossRules& r, double value);

// One sample (row r): activation `act` of the logits z (c values) into p, the loss and whether it
// is right, and the gradient of (loss / m) with respect to z into d (when d is not null).
// Softmax with a cross-entropy and sigmoid with binary cross-entropy use the fused gradient
// (p - t); other pairs chain the loss gradient through the activation.
CROSSOVER_HD LossRow loss_row(const LossConfig& loss, ActivationKind act, const float* z,
                              const float* targets, int64_t r, int64_t c, float* p, float* d,
                              float inv_m) {
  LossRow out;
  // The activations the loss op does not apply were applied by the layer: z is the output.
  if (!loss_applies_activation(act)) act = ActivationKind::linear;
  // Activated output.
  double lse = 0.0;  // softmax: log(sum_j exp(z_j))
  if (act == ActivationKind::softmax) {
    lse = softmax_row(z, p, c);
  } else {
    for (int64_t j = 0; j < c; ++j) {
      p[j] = activation_value(act, z[j], 0.0f);  // linear, relu, sigmoid or tanh
    }
  }
  bool fuses = false;
  switch (loss.kind) {
#define CROSSOVER_LOSS_ROW(k, Unit)                                                  \
  case LossKind::k:                                                                  \
    losses::Unit::row(loss.parameter, act, z, targets, r, c, p, d, inv_m, lse, out); \
    fuses = losses::Unit::rules.fuses;                                               \
    break;
    CROSSOVER_LOSSES(CROSSOVER_LOSS_ROW)
#undef CROSSOVER_LOSS_ROW
  }
  // Chain the gradient through an activation that is not fused with the loss above (the
  // cross-entropies took a final sigmoid's or softmax's input as the logits: fused).
  const bool fused = (act == ActivationKind::softmax || act == ActivationKind::sigmoid) && fuses;
  if (d && !fused && act != ActivationKind::linear) {
    if (act == ActivationKind::softmax) {
      float dot = 0.0f;
      for (int64_t j = 0; j < c; ++j) dot += d[j] * p[j];
      for (int64_t j = 0; j < c; ++j) d[j] = p[j] * (d[j] - dot);
    } else {
      for (int64_t j = 0; j < c; ++j) d[j] *= activation_derivative(act, z[j], p[j], 0.0f);
    }
  }
  return out;
}

// loss_row with Keras's sample weight of row r (weights[r]): the row's loss times it, and its
// gradient scaled by inv_m * weight, the factor Keras's gradient of sum(w * loss) / m reaches the
// row's loss with. Whether it is right stays unweighted (Keras's plain metrics).
CROSSOVER_HD LossRow weighted_loss_row(const LossConfig& loss, ActivationKind act, const float* z,
                                       const float* targets, const float* weights, int64_t r,
                                       int64_t c, float* p, float* d, float inv_m) {
  const float w = weights[r];
  LossRow out = loss_row(loss, act, z, targets, r, c, p, d, inv_m * w);
  out.loss *= static_cast<double>(w);
  return out;
}

}  // namespace crossover
