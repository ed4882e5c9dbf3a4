// Keras's compile_config (the optimizer, the loss and the metrics that compile() was given) in
// and out of model JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "backends/losses/list.h"
#include "core/error.h"
#include "formats/model_config.h"
#include "formats/model_config_internal.h"
#include "nn/layers/keras_config.h"
#include "nn/metrics.h"
#include "nn/optimizers.h"

namespace crossover {

using model_config_detail::compile_config_json;
using model_config_detail::parse_json;

namespace {

using namespace keras_config;

// ---- reading ---------------------------------------------------------------------------------

double number_field(const json& cfg, const char* key, double fallback, const std::string& where,
                    const std::string& who) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  if (!it->is_number())
    throw Error(where, fmt::format("{} field {}: expected a number, got {}", who, key, brief(*it)));
  return it->get<double>();
}

OptimizerConfig parse_optimizer(const json& v, const std::string& where) {
  if (v.is_string()) {
    std::string n = v.get<std::string>();
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    try {
      return optimizer_from_name(n);
    } catch (const Error& e) {
      throw Error(where, std::string("compile_config field optimizer: ") + e.what());
    }
  }
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string())
    throw Error(where, "compile_config field optimizer: unreadable optimizer " + brief(v));
  std::string cls = v["class_name"].get<std::string>();
  const json empty = json::object();
  const json& cfg = v.contains("config") && v["config"].is_object() ? v["config"] : empty;
  const std::string who = "optimizer " + printable(cls);
  // Settings crossover cannot honour.
  auto refuse_if = [&](const char* key, bool bad, const char* why) {
    if (bad) throw Error(where, fmt::format("{} field {}: {}", who, key, why));
  };
  auto truthy = [&](const char* key) {
    auto it = cfg.find(key);
    return it != cfg.end() && !flag_is_false(*it) && !(it->is_number() && it->get<double>() == 0);
  };
  const OptimizerClass* unit = find_optimizer_class(cls);
  if (!unit) {
    throw Error(where, "compile_config field optimizer: " + printable(cls) +
                           " is not supported: crossover runs " + optimizer_class_names());
  }
  refuse_if("use_ema", truthy("use_ema"), "EMA of the weights is not supported");
  refuse_if("gradient_accumulation_steps", truthy("gradient_accumulation_steps"),
            "gradient accumulation is not supported");
  refuse_if("decay", truthy("decay"), "the legacy decay argument is not supported");
  // Another optimizer's argument, set: this one has no such thing (Nadam's amsgrad).
  for (const OptimizerClass& other : optimizer_classes())
    for (const OptimizerArgumentValue& a : other.arguments) {
      const std::string key(a.name);
      const bool own = std::any_of(unit->arguments.begin(), unit->arguments.end(),
                                   [&](const OptimizerArgumentValue& b) { return b.name == key; });
      refuse_if(key.c_str(), !own && truthy(key.c_str()),
                fmt::format("{} is {}'s argument; Keras's {} has none", key, other.class_name,
                            unit->class_name)
                    .c_str());
    }

  OptimizerArgumentValues args;
  int64_t decay_steps = 0;
  double decay_rate = 1;
  bool staircase = false;
  if (auto it = cfg.find("learning_rate"); it != cfg.end() && !it->is_null()) {
    if (it->is_number()) {
      args["learning_rate"] = it->get<double>();
    } else if (it->is_object() && it->contains("class_name") &&
               (*it)["class_name"] == "ExponentialDecay" && it->contains("config") &&
               (*it)["config"].is_object()) {
      const json& s = (*it)["config"];
      const std::string sw = who + " learning_rate";
      args["learning_rate"] = number_field(s, "initial_learning_rate", -1, where, sw);
      const double ds = number_field(s, "decay_steps", 0, where, sw);
      if (!(ds >= 1 && ds <= 9e15 && ds == std::floor(ds)))
        throw Error(where, sw + " field decay_steps: must be a whole number >= 1");
      decay_steps = static_cast<int64_t>(ds);
      decay_rate = number_field(s, "decay_rate", 1, where, sw);
      auto st = s.find("staircase");
      staircase = st != s.end() && st->is_boolean() && st->get<bool>();
    } else {
      throw Error(where,
                  who +
                      " field learning_rate: only a number or ExponentialDecay is supported, got " +
                      brief(*it));
    }
  }
  // The base optimizer's numbers and the optimizer's own arguments, where given (null: Keras's
  // default).
  for (const char* key : {"weight_decay", "global_clipnorm", "clipvalue", "clipnorm"})
    if (auto it = cfg.find(key); it != cfg.end() && !it->is_null())
      args[key] = number_field(cfg, key, 0, where, who);
  for (const OptimizerArgumentValue& a : unit->arguments) {
    const std::string key(a.name);
    auto it = cfg.find(key);
    if (it == cfg.end() || it->is_null()) continue;
    if (a.type == OptimizerArgumentValue::Type::flag ||
        a.type == OptimizerArgumentValue::Type::refused)
      args[key] = truthy(key.c_str()) ? 1 : 0;
    else
      args[key] = number_field(cfg, key.c_str(), 0, where, who);
  }
  OptimizerConfig out;
  try {
    out = make_optimizer(cls, args);
    if (decay_steps > 0) out = with_exponential_decay(out, decay_steps, decay_rate, staircase);
  } catch (const Error& e) {
    const std::string m = e.what();
    if (m.rfind(where, 0) == 0) throw;
    throw Error(where, "compile_config field optimizer: " + m);
  }
  return out;
}

std::string parse_loss_name(const json& v, const std::string& where, bool& from_logits,
                            double& parameter) {
  std::string name;
  from_logits = false;
  if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    const std::string cls = v["class_name"].get<std::string>();
    const json& cfg =
        v.contains("config") && v["config"].is_object() ? v["config"] : json::object();
    if (auto f = cfg.find("from_logits"); f != cfg.end() && !f->is_null()) {
      if (!f->is_boolean())
        throw Error(where, "compile_config field loss: from_logits must be true or false, got " +
                               brief(*f));
      from_logits = f->get<bool>();
    }
    name = cls;
    for (const LossKind kind : all_loss_kinds()) {
      const losses::LossRules& r = loss_rules(kind);
      if (r.class_name != cls) continue;
      name = r.name;
      // Its one argument (Huber's delta), where the object's config gives it.
      if (r.parameter.empty()) continue;
      if (auto a = cfg.find(std::string(r.parameter)); a != cfg.end() && !a->is_null()) {
        if (!a->is_number())
          throw Error(where, fmt::format("compile_config field loss: {} must be a number, got {}",
                                         r.parameter, brief(*a)));
        parameter = a->get<double>();
        if (const std::string why = loss_parameter_problem(r, parameter); !why.empty())
          throw Error(where, fmt::format("compile_config field loss: {} {}", r.class_name, why));
      }
    }
  } else {
    throw Error(where, "compile_config field loss: unreadable loss " + brief(v));
  }
  const std::optional<LossKind> kind = find_loss(name);
  if (!kind)
    throw Error(where, "compile_config field loss: loss '" + printable(name) +
                           "' is not supported: crossover trains with " + loss_names());
  return std::string(loss_rules(*kind).name);
}

void collect_metrics(const json& v, std::vector<MetricSpec>& out, const std::string& where,
                     int depth) {
  if (v.is_null()) return;
  if (v.is_array()) {
    if (depth > 2) throw Error(where, "compile_config field metrics: nested too deeply");
    for (const json& m : v) collect_metrics(m, out, where, depth + 1);
    return;
  }
  std::string name;
  const json* config = nullptr;  // a metric object's "config"
  if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    name = v["class_name"].get<std::string>();
    if (auto c = v.find("config"); c != v.end() && c->is_object()) config = &*c;
  } else {
    throw Error(where, "compile_config field metrics: unreadable metric " + brief(v));
  }
  const auto given = [&](const std::string& key) {
    return std::any_of(out.begin(), out.end(), [&](const MetricSpec& s) {
      return (s.loss_accuracy ? std::string("accuracy") : s.name) == key;
    });
  };
  // The accuracies Keras's "accuracy" picks by the loss read as it (the engine's, counted by the
  // loss); Keras's Accuracy (exact equality) is not computed, but was read as it before.
  if (name == "accuracy" || name == "acc" || name == "Accuracy" ||
      name == "sparse_categorical_accuracy" || name == "SparseCategoricalAccuracy" ||
      name == "categorical_accuracy" || name == "CategoricalAccuracy") {
    if (!given("accuracy")) out.push_back(metric_spec("accuracy"));
    return;
  }
  MetricSpec spec;
  try {
    spec = metric_spec(name);
  } catch (const Error&) {
    throw Error(where, "compile_config field metrics: metric '" + printable(name) +
                           "' is not supported: crossover computes " + supported_metric_names());
  }
  if (config) {
    // Keras reports an object under its own name (MeanSquaredError's is "mean_squared_error";
    // RootMeanSquaredError(name="err")'s "err"), and its k or threshold is the class's argument.
    if (auto n = config->find("name"); n != config->end() && !n->is_null()) {
      if (!n->is_string() || n->get<std::string>().empty())
        throw Error(where, "compile_config field metrics: metric '" + printable(name) +
                               "': its name must be a non-empty string, got " + brief(*n));
      spec.name = n->get<std::string>();
    }
    if (const char* argument = metric_parameter_name(spec.kind)) {
      if (auto a = config->find(argument); a != config->end() && !a->is_null()) {
        if (!a->is_number())
          throw Error(where, "compile_config field metrics: metric '" + printable(spec.name) +
                                 "': " + argument + " must be a number, got " + brief(*a));
        set_metric_parameter(spec, a->get<double>(), where);
      }
    }
    // The other fields Keras's classes take change nothing crossover computes ("dtype": the
    // engine sums in double and reports a float) or are refused.
    for (const auto& [key, value] : config->items()) {
      if (key == "name" || key == "dtype" ||
          (metric_parameter_name(spec.kind) && key == metric_parameter_name(spec.kind)))
        continue;
      if (key == "from_sorted_ids" && value.is_boolean() && !value.get<bool>()) continue;
      throw Error(where, "compile_config field metrics: metric '" + printable(spec.name) +
                             "': " + printable(key) + " " + brief(value) + " is not supported");
    }
  }
  if (!given(spec.name)) out.push_back(std::move(spec));
}

// ---- writing ---------------------------------------------------------------------------------

ojson optimizer_json(const OptimizerConfig& o) {
  // Keras's class and the name its get_config writes (the unit's: the snake-case class).
  std::string cls, name;
  visit_optimizer(o.kind, [&]<class Unit>() {
    cls = Unit::class_name;
    name = Unit::name;
  });
  ojson lr;
  if (o.schedule.decay_steps > 0) {
    lr = ojson{{"module", "keras.optimizers.schedules"},
               {"class_name", "ExponentialDecay"},
               {"config",
                {{"initial_learning_rate", keras_config::decimal(o.schedule.base)},
                 {"decay_steps", o.schedule.decay_steps},
                 {"decay_rate", keras_config::decimal(o.schedule.decay_rate)},
                 {"staircase", o.schedule.staircase},
                 {"name", "ExponentialDecay"}}},
               {"registered_name", nullptr}};
  } else {
    lr = keras_config::decimal(o.schedule.base);
  }
  auto opt_num = [](float v) -> ojson {
    return v > 0 ? ojson(keras_config::decimal(v)) : ojson(nullptr);
  };
  ojson c{{"name", name},
          {"learning_rate", lr},
          {"weight_decay", opt_num(o.weight_decay)},
          {"clipnorm", opt_num(o.tensor_clipnorm)},
          {"global_clipnorm", opt_num(o.clipnorm)},
          {"clipvalue", opt_num(o.clipvalue)},
          {"use_ema", false},
          {"ema_momentum", 0.99},
          {"ema_overwrite_frequency", nullptr},
          {"loss_scale_factor", nullptr},
          {"gradient_accumulation_steps", nullptr}};
  for (const OptimizerArgumentValue& a : optimizer_arguments(o)) {
    const std::string key(a.name);
    switch (a.type) {
      case OptimizerArgumentValue::Type::number:
        c[key] = a.value;
        break;
      case OptimizerArgumentValue::Type::float32:
        c[key] = keras_config::decimal(static_cast<float>(a.value));
        break;
      case OptimizerArgumentValue::Type::flag:
        c[key] = a.value != 0;
        break;
      case OptimizerArgumentValue::Type::refused:
        c[key] = false;
        break;
    }
  }
  return ojson{{"module", "keras.optimizers"},
               {"class_name", cls},
               {"config", c},
               {"registered_name", nullptr}};
}

// The loss as compile was given it: its name, or with from_logits the Keras loss object.
ojson loss_json(const Sequential& model) {
  const std::string& name = model.loss_name();
  // A loss with its argument (Huber's delta): Keras's object, with its config's name.
  for (const LossKind kind : all_loss_kinds()) {
    const losses::LossRules& r = loss_rules(kind);
    if (r.name != name || r.parameter.empty()) continue;
    const double v = model.loss_parameter();
    if (v == static_cast<double>(static_cast<float>(r.parameter_default))) return name;
    ojson c{{"name", std::string(r.name) + "_loss"}, {"reduction", "sum_over_batch_size"}};
    c[std::string(r.parameter)] = keras_config::decimal(static_cast<float>(v));
    return ojson{{"module", "keras.losses"},
                 {"class_name", r.class_name},
                 {"config", c},
                 {"registered_name", nullptr}};
  }
  if (!model.from_logits()) return name;
  ojson c{{"name", name}, {"reduction", "sum_over_batch_size"}, {"from_logits", true}};
  std::string cls;
  if (name == "sparse_categorical_crossentropy") {
    cls = "SparseCategoricalCrossentropy";
    c["ignore_class"] = nullptr;
  } else {
    cls = name == "binary_crossentropy" ? "BinaryCrossentropy" : "CategoricalCrossentropy";
    c["label_smoothing"] = 0.0;
    c["axis"] = -1;
  }
  return ojson{
      {"module", "keras.losses"}, {"class_name", cls}, {"config", c}, {"registered_name", nullptr}};
}

// A metric as Keras 3 writes it in compile_config: its name ("mae", "accuracy"), or, renamed or
// with a k or threshold other than the class's default, the metric object.
ojson metric_json(const MetricSpec& spec) {
  if (metric_is_plain(spec)) return metric_identifier(spec);
  ojson config{{"name", spec.name}, {"dtype", "float32"}};
  if (const char* argument = metric_parameter_name(spec.kind)) {
    if (std::string_view(argument) == "k")
      config[argument] = static_cast<int64_t>(spec.parameter);
    else
      config[argument] = static_cast<double>(spec.parameter);
  }
  return ojson{{"module", "keras.metrics"},
               {"class_name", metric_class_name(spec)},
               {"config", config},
               {"registered_name", nullptr}};
}

}  // namespace

namespace model_config_detail {

ojson compile_config_json(const Sequential& model) {
  ojson metrics = ojson::array();
  for (const MetricSpec& m : model.metric_specs()) metrics.push_back(metric_json(m));
  return ojson{{"optimizer", optimizer_json(model.optimizer())},
               {"loss", loss_json(model)},
               {"loss_weights", nullptr},
               {"metrics", metrics},
               {"weighted_metrics", nullptr},
               {"run_eagerly", false},
               {"steps_per_execution", 1},
               {"jit_compile", false}};
}

}  // namespace model_config_detail

std::string training_config_to_json(const Sequential& model) {
  if (!model.compiled())
    throw Error(model.name(), "the model is not compiled: it has no training configuration");
  return compile_config_json(model).dump();
}

namespace {
std::optional<TrainingConfig> training_config_from_doc(const json& doc, const std::string& where);
}

std::optional<TrainingConfig> training_config_from_json(std::string_view text,
                                                        std::string_view where_sv) {
  const std::string where(where_sv);
  const json doc = parse_json(text, where);
  try {
    return training_config_from_doc(doc, where);
  } catch (const json::exception& e) {
    throw Error(where, std::string("unexpected JSON: ") + printable(e.what()));
  }
}

namespace {
std::optional<TrainingConfig> training_config_from_doc(const json& doc, const std::string& where) {
  if (!doc.is_object()) return std::nullopt;
  const json* cc = nullptr;
  if (auto it = doc.find("compile_config"); it != doc.end()) {
    // A model that was never compiled: null, or the empty object {} (what the issue saw a Keras 3
    // to_json() write; Keras's own get_compile_config returns None then, and the key is absent).
    if (it->is_null() || (it->is_object() && it->empty())) return std::nullopt;
    cc = &*it;
  } else if (doc.contains("optimizer") && doc.contains("loss")) {
    cc = &doc;
  } else {
    return std::nullopt;
  }
  if (!cc->is_object()) throw Error(where, "compile_config is not an object");
  TrainingConfig t;
  auto opt = cc->find("optimizer");
  t.optimizer = (opt == cc->end() || opt->is_null()) ? RMSprop() : parse_optimizer(*opt, where);
  auto loss = cc->find("loss");
  if (loss == cc->end() || loss->is_null())
    throw Error(where, "compile_config field loss: the model was compiled without a loss");
  t.loss = parse_loss_name(*loss, where, t.from_logits, t.loss_parameter);
  for (const LossKind kind : all_loss_kinds())
    if (t.from_logits && t.loss == loss_rules(kind).name &&
        loss_rules(kind).logits == ActivationKind::linear)
      throw Error(where,
                  "compile_config field loss: from_logits applies to the cross-entropies, "
                  "not " +
                      t.loss);
  if (auto m = cc->find("metrics"); m != cc->end()) collect_metrics(*m, t.metrics, where, 0);
  for (const char* f : {"loss_weights", "weighted_metrics"})
    if (!is_null_or_absent(*cc, f))
      throw Error(where, std::string("compile_config field ") + f + ": not supported");
  return t;
}
}  // namespace

}  // namespace crossover
