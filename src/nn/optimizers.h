// Optimizers, with Keras's names, defaults and formulas: each is a unit of backends/optimizers/
// (its Keras arguments and defaults, its slots, its per-element update, shared by every device);
// this header builds them, by C++ options or by Keras's class name and arguments, and describes
// them (for the formats, the CLI and Python).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/optimizers/visit.h"

namespace crossover {

using AdamOptions = optimizers::Adam::Options;
using SGDOptions = optimizers::SGD::Options;
using RMSpropOptions = optimizers::RMSprop::Options;
using AdagradOptions = optimizers::Adagrad::Options;
using AdadeltaOptions = optimizers::Adadelta::Options;
using NadamOptions = optimizers::Nadam::Options;
using AdamaxOptions = optimizers::Adamax::Options;
using LionOptions = optimizers::Lion::Options;

// Any unit's optimizer from its options: each argument checked against its range (Error names
// the optimizer, the argument and the value), Keras's float32 arguments rounded to float32.
template <class Unit>
OptimizerConfig make_optimizer(const typename Unit::Options& options);

OptimizerConfig Adam(const AdamOptions& options = {});
// Adam with decoupled weight decay, Keras's AdamW defaults (weight_decay 0.004).
OptimizerConfig AdamW(AdamOptions options = {.weight_decay = optimizers::kAdamWWeightDecay});
OptimizerConfig SGD(const SGDOptions& options = {});
OptimizerConfig RMSprop(const RMSpropOptions& options = {});
OptimizerConfig Adagrad(const AdagradOptions& options = {});
OptimizerConfig Adadelta(const AdadeltaOptions& options = {});
OptimizerConfig Nadam(const NadamOptions& options = {});
OptimizerConfig Adamax(const AdamaxOptions& options = {});
OptimizerConfig Lion(const LionOptions& options = {});

// A Keras optimizer by its class name or string identifier ("Adam", "adamw", "SGD", "lion";
// case-insensitive) with arguments by their Keras names: learning_rate, weight_decay, clipnorm
// (per tensor), global_clipnorm, clipvalue and the optimizer's own (flags as 0 or 1). Arguments
// not given take Keras's defaults; an argument the optimizer does not take, or one of its refused
// settings given a true value, throws Error.
using OptimizerArgumentValues = std::map<std::string, double, std::less<>>;
OptimizerConfig make_optimizer(std::string_view class_name,
                               const OptimizerArgumentValues& arguments = {});

// "adam", "adamw", "sgd", "rmsprop", "adagrad", "adadelta", "nadam", "adamax", "lion" with default
// options (Keras's string names); throws Error otherwise.
OptimizerConfig optimizer_from_name(std::string_view name);
// The kind's string identifier ("adam", "sgd").
std::string optimizer_name(OptimizerKind kind);

// One of an optimizer's own arguments, as a config holds it (for Keras's get_config, Python and
// descriptions): a number (float32: Keras keeps it as a float32, written as that float's shortest
// decimal), a flag, or a setting crossover refuses (written as false).
struct OptimizerArgumentValue {
  std::string_view name;
  double value = 0;          // as the config holds it (a float32 one rounded to float32)
  double default_value = 0;  // Keras's, as its signature writes it (1e-7)
  enum class Type { number, float32, flag, refused } type = Type::number;
};
std::vector<OptimizerArgumentValue> optimizer_arguments(const OptimizerConfig& config);

// What Python and the formats list of each optimizer class: Keras's class and default name, the
// learning rate's default, its own arguments with their defaults (optimizer_arguments of a
// default config), and the AdamW alias (Adam's kind, its own weight-decay default).
struct OptimizerClass {
  std::string class_name;    // "Adam", "AdamW"
  std::string default_name;  // Keras's name argument's default ("adam", "SGD")
  std::string alias_of;      // the class this one specialises ("Adam" for AdamW), or empty
  OptimizerKind kind;
  double learning_rate;
  double weight_decay;
  std::vector<OptimizerArgumentValue> arguments;
};
std::vector<OptimizerClass> optimizer_classes();
// "Adam, AdamW, SGD, ...": every class's name (lower case: the string identifiers), for errors.
std::string optimizer_class_names(bool lower_case = false);
// The class of a name ("Adam", "adamw": case-insensitive), or nullptr.
const OptimizerClass* find_optimizer_class(std::string_view name);

// Keras's ExponentialDecay: lr(step) = initial * decay_rate ^ (step / decay_steps), evaluated on
// the device every step. Returns `optimizer` with that schedule.
OptimizerConfig with_exponential_decay(OptimizerConfig optimizer, int64_t decay_steps,
                                       double decay_rate, bool staircase = false);

// Keras's clipnorm (each parameter tensor's gradient clipped to this L2 norm on its own; the
// options' clipnorm is Keras's global_clipnorm). Returns `optimizer` with it; throws Error for a
// negative value, or with clipnorm or clipvalue already set (Keras takes one of the three).
OptimizerConfig with_tensor_clipnorm(OptimizerConfig optimizer, double clipnorm);

}  // namespace crossover
