#include "nn/optimizers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "core/error.h"

namespace crossover {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// "must be positive", "must not be negative" or "must be in [0, 1)": where a range lets a number
// lie.
std::string range_text(const optimizers::Range& r) {
  const bool open_above = r.high >= 1e300;
  if (r.low == 0 && open_above) return r.low_open ? "must be positive" : "must not be negative";
  return fmt::format("must be in {}{:g}, {:g}{}", r.low_open ? "(" : "[", r.low, r.high,
                     r.high_open ? ")" : "]");
}

bool in_range(double v, const optimizers::Range& r) {
  if (!std::isfinite(v)) return false;
  if (r.low_open ? !(v > r.low) : !(v >= r.low)) return false;
  return r.high_open ? v < r.high : v <= r.high;
}

template <class Unit>
std::vector<OptimizerArgumentValue> arguments_of(const typename Unit::Options& o) {
  using Type = OptimizerArgumentValue::Type;
  static constexpr typename Unit::Options defaults{};
  std::vector<OptimizerArgumentValue> out;
  for (const auto& a : Unit::arguments) {
    OptimizerArgumentValue v{.name = a.name};
    if (a.number) {
      v.value = o.*a.number;
      v.default_value = defaults.*a.number;  // Keras's (1e-7, not the float it rounds to)
      v.type = a.float32 ? Type::float32 : Type::number;
    } else if (a.flag) {
      v.value = o.*a.flag ? 1 : 0;
      v.default_value = defaults.*a.flag ? 1 : 0;
      v.type = Type::flag;
    } else {
      v.type = Type::refused;
    }
    out.push_back(v);
  }
  return out;
}

// An argument given by Keras name to `o`: true when the unit (or the base optimizer) has it.
template <class Unit>
bool set_argument(typename Unit::Options& o, std::string_view key, double v) {
  if (key == "learning_rate") return o.learning_rate = v, true;
  if (key == "weight_decay") return o.weight_decay = v, true;
  if (key == "global_clipnorm") return o.clipnorm = v, true;
  if (key == "clipvalue") return o.clipvalue = v, true;
  for (const auto& a : Unit::arguments) {
    if (a.name != key) continue;
    if (a.number) {
      o.*a.number = v;
    } else if (a.flag) {
      o.*a.flag = v != 0;
    } else if (v != 0) {
      throw Error(std::string(Unit::class_name), fmt::format("{}: {}", key, a.refusal));
    }
    return true;
  }
  return false;
}

}  // namespace

template <class Unit>
OptimizerConfig make_optimizer(const typename Unit::Options& given) {
  const std::string who(Unit::class_name);
  typename Unit::Options o = given;
  if (!(o.learning_rate > 0.0) || !std::isfinite(o.learning_rate))
    throw Error(who, fmt::format("learning_rate must be positive, got {:g}", o.learning_rate));
  if (!(o.weight_decay >= 0.0 && o.clipnorm >= 0.0 && o.clipvalue >= 0.0))
    throw Error(who, "weight_decay, clipnorm and clipvalue must not be negative");
  for (const auto& a : Unit::arguments) {
    if (!a.number) continue;
    double& v = o.*a.number;
    if (!in_range(v, a.range))
      throw Error(who, fmt::format("{} {}, got {:g}", a.name, range_text(a.range), v));
    if (a.float32) v = static_cast<float>(v);  // what Keras's float32 variable holds
  }
  OptimizerConfig c;
  set_options(c, o);
  c.schedule.base = static_cast<float>(o.learning_rate);
  c.weight_decay = static_cast<float>(o.weight_decay);
  c.clipnorm = static_cast<float>(o.clipnorm);
  c.clipvalue = static_cast<float>(o.clipvalue);
  return c;
}

#define CROSSOVER_INSTANTIATE(kind, Unit) \
  template OptimizerConfig make_optimizer<optimizers::Unit>(const optimizers::Unit::Options&);
CROSSOVER_OPTIMIZERS(CROSSOVER_INSTANTIATE)
#undef CROSSOVER_INSTANTIATE

OptimizerConfig Adam(const AdamOptions& o) { return make_optimizer<optimizers::Adam>(o); }
OptimizerConfig AdamW(AdamOptions o) { return Adam(o); }
OptimizerConfig SGD(const SGDOptions& o) { return make_optimizer<optimizers::SGD>(o); }
OptimizerConfig RMSprop(const RMSpropOptions& o) { return make_optimizer<optimizers::RMSprop>(o); }
OptimizerConfig Adagrad(const AdagradOptions& o) { return make_optimizer<optimizers::Adagrad>(o); }
OptimizerConfig Adadelta(const AdadeltaOptions& o) {
  return make_optimizer<optimizers::Adadelta>(o);
}
OptimizerConfig Nadam(const NadamOptions& o) { return make_optimizer<optimizers::Nadam>(o); }
OptimizerConfig Adamax(const AdamaxOptions& o) { return make_optimizer<optimizers::Adamax>(o); }
OptimizerConfig Lion(const LionOptions& o) { return make_optimizer<optimizers::Lion>(o); }

std::vector<OptimizerArgumentValue> optimizer_arguments(const OptimizerConfig& c) {
  return visit_optimizer(c.kind,
                         [&]<class Unit>() { return arguments_of<Unit>(options_of<Unit>(c)); });
}

std::vector<OptimizerClass> optimizer_classes() {
  std::vector<OptimizerClass> out;
  const auto add = [&]<class Unit>(OptimizerKind kind) {
    const typename Unit::Options o{};
    out.push_back({.class_name = std::string(Unit::class_name),
                   .default_name = std::string(Unit::name),
                   .kind = kind,
                   .learning_rate = o.learning_rate,
                   .weight_decay = o.weight_decay,
                   .arguments = arguments_of<Unit>(o)});
  };
#define CROSSOVER_CLASS(kind, Unit) add.template operator()<optimizers::Unit>(OptimizerKind::kind);
  CROSSOVER_OPTIMIZERS(CROSSOVER_CLASS)
#undef CROSSOVER_CLASS
  // Keras's AdamW: Adam's kind and arguments, its own default weight decay and name.
  OptimizerClass adamw =
      *std::find_if(out.begin(), out.end(), [](const auto& c) { return c.class_name == "Adam"; });
  adamw.class_name = "AdamW";
  adamw.default_name = "adamw";
  adamw.alias_of = "Adam";
  adamw.weight_decay = optimizers::kAdamWWeightDecay;
  out.push_back(std::move(adamw));
  return out;
}

const OptimizerClass* find_optimizer_class(std::string_view name) {
  static const std::vector<OptimizerClass> classes = optimizer_classes();
  const std::string low = lower(name);
  for (const OptimizerClass& c : classes)
    if (lower(c.class_name) == low) return &c;
  return nullptr;
}

OptimizerConfig make_optimizer(std::string_view class_name,
                               const OptimizerArgumentValues& arguments) {
  const OptimizerClass* cls = find_optimizer_class(class_name);
  if (!cls) {
    throw Error("optimizer", fmt::format("unknown optimizer '{}': crossover runs {}", class_name,
                                         optimizer_class_names()));
  }
  double tensor_clipnorm = 0;
  OptimizerConfig out = visit_optimizer(cls->kind, [&]<class Unit>() {
    typename Unit::Options o{};
    o.weight_decay = cls->weight_decay;
    for (const auto& [key, value] : arguments) {
      if (key == "clipnorm") {
        tensor_clipnorm = value;
      } else if (!set_argument<Unit>(o, key, value)) {
        throw Error(cls->class_name, fmt::format("unknown argument '{}'", key));
      }
    }
    return make_optimizer<Unit>(o);
  });
  return with_tensor_clipnorm(out, tensor_clipnorm);
}

OptimizerConfig optimizer_from_name(std::string_view name) {
  if (find_optimizer_class(name)) return make_optimizer(name);
  throw Error("optimizer", fmt::format("unknown optimizer '{}': expected one of {}", name,
                                       optimizer_class_names(true)));
}

std::string optimizer_class_names(bool lower_case) {
  std::string out;
  for (const OptimizerClass& c : optimizer_classes())
    out += (out.empty() ? "" : ", ") + (lower_case ? lower(c.class_name) : c.class_name);
  return out;
}

std::string optimizer_name(OptimizerKind kind) {
  return visit_optimizer(kind, []<class Unit>() { return lower(Unit::class_name); });
}

OptimizerConfig with_tensor_clipnorm(OptimizerConfig optimizer, double clipnorm) {
  if (!(clipnorm >= 0.0) || !std::isfinite(clipnorm))
    throw Error("clipnorm",
                "must be a finite number of 0 or more, got " + std::to_string(clipnorm));
  if (clipnorm > 0.0 && (optimizer.clipnorm > 0.0f || optimizer.clipvalue > 0.0f))
    throw Error("clipnorm", "only one of clipnorm, clipvalue and global_clipnorm can be set");
  optimizer.tensor_clipnorm = static_cast<float>(clipnorm);
  return optimizer;
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

}  // namespace crossover
