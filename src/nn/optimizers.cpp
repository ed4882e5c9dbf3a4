#include "nn/optimizers.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace crossover {
namespace {

void check_common(const char* who, double lr, double weight_decay, double clipnorm,
                  double clipvalue) {
  if (!(lr > 0.0)) throw Error(who, "learning_rate must be positive, got " + std::to_string(lr));
  if (weight_decay < 0.0 || clipnorm < 0.0 || clipvalue < 0.0)
    throw Error(who, "weight_decay, clipnorm and clipvalue must not be negative");
}

// Adam, Nadam and Adamax: the same settings, checks and defaults.
OptimizerConfig adam_like(const char* who, OptimizerKind kind, const AdamOptions& o) {
  check_common(who, o.learning_rate, o.weight_decay, o.clipnorm, o.clipvalue);
  if (!(o.beta_1 >= 0 && o.beta_1 < 1 && o.beta_2 >= 0 && o.beta_2 < 1))
    throw Error(who, "beta_1 and beta_2 must be in [0, 1)");
  if (!(o.epsilon > 0)) throw Error(who, "epsilon must be positive");
  if (o.amsgrad && kind != OptimizerKind::adam)
    throw Error(who, "amsgrad is Adam's and AdamW's (Keras's " + std::string(who) + " has none)");
  OptimizerConfig c;
  c.kind = kind;
  c.amsgrad = o.amsgrad;
  c.schedule.base = static_cast<float>(o.learning_rate);
  c.beta1 = o.beta_1;
  c.beta2 = o.beta_2;
  c.epsilon = static_cast<float>(o.epsilon);
  c.weight_decay = static_cast<float>(o.weight_decay);
  c.clipnorm = static_cast<float>(o.clipnorm);
  c.clipvalue = static_cast<float>(o.clipvalue);
  return c;
}

}  // namespace

OptimizerConfig with_tensor_clipnorm(OptimizerConfig optimizer, double clipnorm) {
  if (!(clipnorm >= 0.0) || !std::isfinite(clipnorm))
    throw Error("clipnorm",
                "must be a finite number of 0 or more, got " + std::to_string(clipnorm));
  if (clipnorm > 0.0 && (optimizer.clipnorm > 0.0f || optimizer.clipvalue > 0.0f))
    throw Error("clipnorm", "only one of clipnorm, clipvalue and global_clipnorm can be set");
  optimizer.tensor_clipnorm = static_cast<float>(clipnorm);
  return optimizer;
}

OptimizerConfig Adam(const AdamOptions& o) { return adam_like("Adam", OptimizerKind::adam, o); }

OptimizerConfig AdamW(AdamOptions o) { return Adam(o); }

OptimizerConfig SGD(const SGDOptions& o) {
  check_common("SGD", o.learning_rate, o.weight_decay, o.clipnorm, o.clipvalue);
  if (o.momentum < 0 || o.momentum >= 1) throw Error("SGD", "momentum must be in [0, 1)");
  OptimizerConfig c;
  c.kind = OptimizerKind::sgd;
  c.schedule.base = static_cast<float>(o.learning_rate);
  c.momentum = static_cast<float>(o.momentum);
  c.nesterov = o.nesterov;
  c.weight_decay = static_cast<float>(o.weight_decay);
  c.clipnorm = static_cast<float>(o.clipnorm);
  c.clipvalue = static_cast<float>(o.clipvalue);
  return c;
}

OptimizerConfig RMSprop(const RMSpropOptions& o) {
  check_common("RMSprop", o.learning_rate, o.weight_decay, o.clipnorm, o.clipvalue);
  if (o.rho < 0 || o.rho >= 1) throw Error("RMSprop", "rho must be in [0, 1)");
  if (o.momentum < 0 || o.momentum >= 1) throw Error("RMSprop", "momentum must be in [0, 1)");
  OptimizerConfig c;
  c.kind = OptimizerKind::rmsprop;
  c.schedule.base = static_cast<float>(o.learning_rate);
  c.rho = o.rho;
  c.momentum = static_cast<float>(o.momentum);
  c.epsilon = static_cast<float>(o.epsilon);
  c.weight_decay = static_cast<float>(o.weight_decay);
  c.clipnorm = static_cast<float>(o.clipnorm);
  c.clipvalue = static_cast<float>(o.clipvalue);
  return c;
}

OptimizerConfig Adagrad(const AdagradOptions& o) {
  check_common("Adagrad", o.learning_rate, o.weight_decay, o.clipnorm, o.clipvalue);
  if (!(o.initial_accumulator_value >= 0))
    throw Error("Adagrad", "initial_accumulator_value must not be negative");
  if (!(o.epsilon > 0)) throw Error("Adagrad", "epsilon must be positive");
  OptimizerConfig c;
  c.kind = OptimizerKind::adagrad;
  c.schedule.base = static_cast<float>(o.learning_rate);
  c.initial_accumulator_value = static_cast<float>(o.initial_accumulator_value);
  c.epsilon = static_cast<float>(o.epsilon);
  c.weight_decay = static_cast<float>(o.weight_decay);
  c.clipnorm = static_cast<float>(o.clipnorm);
  c.clipvalue = static_cast<float>(o.clipvalue);
  return c;
}

OptimizerConfig Adadelta(const AdadeltaOptions& o) {
  check_common("Adadelta", o.learning_rate, o.weight_decay, o.clipnorm, o.clipvalue);
  if (!(o.rho >= 0 && o.rho < 1)) throw Error("Adadelta", "rho must be in [0, 1)");
  if (!(o.epsilon > 0)) throw Error("Adadelta", "epsilon must be positive");
  OptimizerConfig c;
  c.kind = OptimizerKind::adadelta;
  c.schedule.base = static_cast<float>(o.learning_rate);
  c.rho = o.rho;
  c.epsilon = static_cast<float>(o.epsilon);
  c.weight_decay = static_cast<float>(o.weight_decay);
  c.clipnorm = static_cast<float>(o.clipnorm);
  c.clipvalue = static_cast<float>(o.clipvalue);
  return c;
}

OptimizerConfig Nadam(const AdamOptions& o) { return adam_like("Nadam", OptimizerKind::nadam, o); }

OptimizerConfig Adamax(const AdamOptions& o) {
  return adam_like("Adamax", OptimizerKind::adamax, o);
}

OptimizerConfig with_exponential_decay(OptimizerConfig optimizer, int64_t decay_steps,
                                       double decay_rate, bool staircase) {
  if (decay_steps < 1) throw Error("ExponentialDecay", "decay_steps must be at least 1");
  if (!(decay_rate > 0)) throw Error("ExponentialDecay", "decay_rate must be positive");
  optimizer.schedule.decay_steps = decay_steps;
  optimizer.schedule.decay_rate = static_cast<float>(decay_rate);
  optimizer.schedule.staircase = staircase;
  return optimizer;
}

OptimizerConfig optimizer_from_name(std::string_view name) {
  if (name == "adam") return Adam();
  if (name == "adamw") return AdamW();
  if (name == "sgd") return SGD();
  if (name == "rmsprop") return RMSprop();
  if (name == "adagrad") return Adagrad();
  if (name == "adadelta") return Adadelta();
  if (name == "nadam") return Nadam();
  if (name == "adamax") return Adamax();
  throw Error("optimizer",
              "unknown optimizer '" + std::string(name) +
                  "': expected adam, adamw, sgd, rmsprop, adagrad, adadelta, nadam or adamax");
}

std::string_view optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::adam:
      return "adam";
    case OptimizerKind::sgd:
      return "sgd";
    case OptimizerKind::rmsprop:
      return "rmsprop";
    case OptimizerKind::adagrad:
      return "adagrad";
    case OptimizerKind::adadelta:
      return "adadelta";
    case OptimizerKind::nadam:
      return "nadam";
    case OptimizerKind::adamax:
      return "adamax";
  }
  return "adam";
}

std::array<std::string_view, 3> optimizer_slot_names(const OptimizerConfig& c) {
  switch (c.kind) {
    case OptimizerKind::adam:
      return {"momentum", "velocity", c.amsgrad ? "velocity_hat" : ""};
    case OptimizerKind::nadam:
      return {"momentum", "velocity", ""};
    case OptimizerKind::sgd:
      return {c.momentum > 0 ? "momentum" : "", "", ""};
    case OptimizerKind::rmsprop:
      return {"velocity", c.momentum > 0 ? "momentum" : "", ""};
    case OptimizerKind::adagrad:
      return {"accumulator", "", ""};
    case OptimizerKind::adadelta:
      return {"accumulated_grad", "accumulated_delta_var", ""};
    case OptimizerKind::adamax:
      return {"momentum", "norm", ""};
  }
  return {"", "", ""};
}

int optimizer_slot_count(const OptimizerConfig& c) {
  int n = 0;
  for (std::string_view s : optimizer_slot_names(c)) n += s.empty() ? 0 : 1;
  return n;
}

}  // namespace crossover
