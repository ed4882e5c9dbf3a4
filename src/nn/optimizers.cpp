#include "nn/optimizers.h"

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

}  // namespace

OptimizerConfig Adam(const AdamOptions& o) {
  check_common("Adam", o.learning_rate, o.weight_decay, o.clipnorm, o.clipvalue);
  if (!(o.beta_1 >= 0 && o.beta_1 < 1 && o.beta_2 >= 0 && o.beta_2 < 1))
    throw Error("Adam", "beta_1 and beta_2 must be in [0, 1)");
  if (!(o.epsilon > 0)) throw Error("Adam", "epsilon must be positive");
  OptimizerConfig c;
  c.kind = OptimizerKind::adam;
  c.schedule.base = static_cast<float>(o.learning_rate);
  c.beta1 = o.beta_1;
  c.beta2 = o.beta_2;
  c.epsilon = static_cast<float>(o.epsilon);
  c.weight_decay = static_cast<float>(o.weight_decay);
  c.clipnorm = static_cast<float>(o.clipnorm);
  c.clipvalue = static_cast<float>(o.clipvalue);
  return c;
}

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
  throw Error("optimizer", "unknown optimizer '" + std::string(name) +
                               "': expected adam, adamw, sgd or rmsprop");
}

std::string_view optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::adam:
      return "adam";
    case OptimizerKind::sgd:
      return "sgd";
    case OptimizerKind::rmsprop:
      return "rmsprop";
  }
  return "adam";
}

}  // namespace crossover
