#include "nn/layers/keras_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover::keras_config {

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 64) {
      out += "...";
      break;
    }
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return out;
}

std::string brief(const json& v) {
  std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
  return printable(s);
}

bool is_null_or_absent(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null();
}

bool flag_is_false(const json& v) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); }

std::string LayerRef::label() const {
  if (index == 0) return "model";
  return name.empty() ? fmt::format("layer {} ({})", index, cls) : "layer '" + name + "'";
}

void LayerRef::fail(std::string_view field, const std::string& why) const {
  if (alone) throw Error(where, fmt::format("argument {}: {}", field, why));
  throw Error(where, fmt::format("{} field {}: {}", label(), field, why));
}

Shape parse_shape(const json& v, bool has_batch, const LayerRef& ref, std::string_view field) {
  const json* items = &v;
  if (v.is_object()) {
    auto it = v.find("items");
    if (it == v.end()) ref.fail(field, "expected a shape list, got " + brief(v));
    items = &*it;
  }
  if (!items->is_array()) ref.fail(field, "expected a shape list, got " + brief(v));
  const std::size_t first = has_batch ? 1 : 0;
  if (items->size() <= first)
    ref.fail(field, "the shape " + brief(v) + " has no sample dimensions");
  if (items->size() > 9) ref.fail(field, "the shape " + brief(v) + " has too many dimensions");
  if (has_batch) {
    const json& b = (*items)[0];
    if (!b.is_null() && !(b.is_number_integer() && b.get<int64_t>() >= 0))
      ref.fail(field, "the batch dimension must be null or a count, got " + brief(b));
  }
  Shape shape;
  int64_t product = 1;
  for (std::size_t i = first; i < items->size(); ++i) {
    const json& d = (*items)[i];
    if (d.is_null())
      ref.fail(field, "the shape " + brief(v) +
                          " has an unknown (null) sample dimension: crossover needs fixed sizes");
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > kMaxDim)
      ref.fail(field, "the shape " + brief(v) + " has an invalid dimension " + brief(d));
    const int64_t n = d.get<int64_t>();
    if (product > kMaxElements / n) ref.fail(field, "the shape " + brief(v) + " is absurdly large");
    product *= n;
    shape.push_back(n);
  }
  return shape;
}

namespace {
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}
}  // namespace

const json* Reader::find(const char* key) {
  read_.insert(key);
  auto it = cfg_.find(key);
  return it == cfg_.end() || it->is_null() ? nullptr : &*it;
}

void Reader::accept(std::initializer_list<const char*> keys) {
  for (const char* k : keys) read_.insert(k);
}

int64_t Reader::count(const char* key, const std::string& missing) {
  const json* v = find(key);
  if (!v) fail(key, missing);
  if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > kMaxDim)
    fail(key, std::string(key) + " must be a whole number from 1 to 2^31, got " + brief(*v));
  return v->get<int64_t>();
}

std::optional<Size2> Reader::pair(const char* key) {
  const json* p = find(key);
  if (!p) return std::nullopt;
  const json& v = *p;
  auto one = [&](const json& d) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > kMaxDim)
      fail(key, "expected a whole number from 1 to 2^31 or a pair of them, got " + brief(v));
    return d.get<int64_t>();
  };
  if (v.is_array()) {
    if (v.size() != 2) fail(key, "expected two numbers (height, width), got " + brief(v));
    return Size2(one(v[0]), one(v[1]));
  }
  return Size2(one(v));
}

std::optional<int64_t> Reader::single(const char* key) {
  const json* p = find(key);
  if (!p) return std::nullopt;
  const json& v = p->is_array() && p->size() == 1 ? (*p)[0] : *p;
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxDim)
    fail(key, "expected a whole number from 1 to 2^31, or a list of one, got " + brief(*p));
  return v.get<int64_t>();
}

Padding Reader::padding() {
  const json* p = find("padding");
  if (!p) return Padding::valid;
  const std::string text = lower(p->is_string() ? p->get<std::string>() : std::string());
  if (text == "valid") return Padding::valid;
  if (text == "same") return Padding::same;
  fail("padding", "padding " + brief(*p) + " is not supported: only valid and same");
}

void Reader::channels_last() {
  if (const json* f = find("data_format")) {
    // Any case, as Keras's standardize_data_format lowers it.
    std::string name = f->is_string() ? f->get<std::string>() : std::string();
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name != "channels_last")
      fail("data_format", "data_format " + brief(*f) + " is not supported: only channels_last");
  }
}

void Reader::activation(LayerActivation& l, const char* key) {
  l.kind = ActivationKind::linear;
  l.alpha = 0.0f;
  const json* p = find(key);
  if (!p) return;
  const json& v = *p;
  std::string name;
  if (v.is_object() && v.contains("class_name") &&
      (v["class_name"] == "LeakyReLU" || v["class_name"] == "ELU")) {
    // A layer given as the activation (Dense(activation=keras.layers.LeakyReLU(0.2))).
    const bool leaky = v["class_name"] == "LeakyReLU";
    const json* c = v.contains("config") && v["config"].is_object() ? &v["config"] : nullptr;
    // Keras 3 writes LeakyReLU's negative_slope, tf.keras 2 its alpha.
    const char* field = leaky && c && c->contains("negative_slope") ? "negative_slope" : "alpha";
    double a = leaky ? 0.3 : 1.0;
    if (c && c->contains(field)) {
      if (!(*c)[field].is_number()) fail(key, std::string(field) + " must be a number");
      a = (*c)[field].get<double>();
    }
    if (!(a >= 0.0)) fail(key, fmt::format("{} must be at least 0, got {}", field, a));
    l.kind = leaky ? ActivationKind::leaky_relu : ActivationKind::elu;
    l.alpha = static_cast<float>(a);
    return;
  }
  if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object() && v.contains("config") && v["config"].is_string()) {
    // Keras 3 writes a non-built-in function as {"class_name": "function", "config": "name"}.
    name = v["config"].get<std::string>();
  } else {
    fail(key, "unreadable activation " + brief(v));
  }
  if (name == "None") return;
  try {
    l.kind = parse_activation(name);
  } catch (const Error&) {
    fail(key, "activation '" + printable(name) +
                  "' is not supported: crossover runs linear, relu, sigmoid, tanh, softmax, elu, "
                  "selu, leaky_relu, gelu, softplus, swish (silu) and exponential");
  }
  l.alpha = default_activation_alpha(l.kind);
}

ojson activation_json(const LayerActivation& l) {
  const ActivationKind a = l.kind;
  if (a == ActivationKind::sqrt)
    throw Error("sqrt",
                "an op of a custom layer's call() (sqrt) has no Keras layer class: "
                "writing it in a Keras model file is not supported (yet); save the "
                "weights instead");
  if ((a != ActivationKind::leaky_relu && a != ActivationKind::elu) ||
      l.alpha == default_activation_alpha(a))
    return std::string(activation_name(a));
  const bool leaky = a == ActivationKind::leaky_relu;
  ojson config{{"name", leaky ? "leaky_re_lu" : "elu"}};
  config[leaky ? "negative_slope" : "alpha"] = decimal(l.alpha);
  return ojson{{"module", "keras.layers"},
               {"class_name", leaky ? "LeakyReLU" : "ELU"},
               {"config", std::move(config)},
               {"registered_name", nullptr}};
}

int64_t Reader::last_axis() {
  const json* a = find("axis");
  if (!a) return -1;
  const json& one = a->is_array() && a->size() == 1 ? (*a)[0] : *a;
  if (!one.is_number_integer() || one.get<int64_t>() < -1 || one.get<int64_t>() == 0 ||
      one.get<int64_t>() > 8)
    fail("axis", "axis " + brief(*a) + " is not supported: only the last axis (-1)");
  return one.get<int64_t>();
}

void Reader::kernel_and_bias(bool& use_bias, Initializer& kernel, Initializer& bias,
                             Regularizer& kernel_regularizer, Regularizer& bias_regularizer) {
  use_bias = flag("use_bias", use_bias);
  kernel = initializer("kernel_initializer", kernel);
  bias = initializer("bias_initializer", bias);
  weight_regularizers({{"kernel", &kernel_regularizer}, {"bias", &bias_regularizer}});
}

void Reader::weight_regularizers(
    std::initializer_list<std::pair<const char*, Regularizer*>> weights) {
  for (const auto& [w, r] : weights) *r = regularizer((std::string(w) + "_regularizer").c_str());
  for (const auto& [w, r] : weights)
    refuse_set((std::string(w) + "_constraint").c_str(), "constraints are not supported");
}

Regularizer Reader::regularizer(const char* key) {
  const json* v = find(key);
  if (!v) return {};
  Regularizer r;
  // Keras's names (keras.regularizers.get): the classes and their snake-case aliases, each with
  // its own defaults (L1(0.01), L2(0.01), L1L2(0, 0)).
  const auto of_class = [&](const std::string& cls) {
    if (cls == "L1" || cls == "l1") {
      r.kind = Regularizer::Kind::l1;
      r.l1 = 0.01;
    } else if (cls == "L2" || cls == "l2") {
      r.kind = Regularizer::Kind::l2;
      r.l2 = 0.01;
    } else if (cls == "L1L2" || cls == "l1_l2") {
      r.kind = Regularizer::Kind::l1_l2;
    } else {
      fail(key, "regularizer " + brief(*v) +
                    " is not supported: L1, L2 and L1L2 (keras.regularizers) only");
    }
  };
  if (v->is_string()) {
    of_class(v->get<std::string>());
    return r;
  }
  const auto cls = v->is_object() ? v->find("class_name") : v->end();
  if (cls == v->end() || !cls->is_string())
    fail(key, "expected a regularizer (\"l2\" or a serialized L1, L2 or L1L2), got " + brief(*v));
  of_class(cls->get<std::string>());
  if (auto cfg = v->find("config"); cfg != v->end() && cfg->is_object()) {
    for (auto it = cfg->begin(); it != cfg->end(); ++it) {
      const bool l1 = it.key() == "l1", l2 = it.key() == "l2";
      if ((!l1 && !l2) || (l1 && r.kind == Regularizer::Kind::l2) ||
          (l2 && r.kind == Regularizer::Kind::l1))
        fail(key, "regularizer " + brief(*v) + ": unexpected field " + printable(it.key()));
      if (it->is_null()) continue;  // Keras's None: the class's default
      if (!it->is_number() || !(it->get<double>() >= 0.0) || !std::isfinite(it->get<double>()))
        fail(key, "regularizer " + brief(*v) + ": " + it.key() + " must be a number >= 0, got " +
                      brief(*it));
      (l1 ? r.l1 : r.l2) = it->get<double>();
    }
  }
  return r;
}

Arguments kernel_and_bias_arguments() {
  return {{"use_bias", true},
          {"kernel_initializer", "glorot_uniform"},
          {"bias_initializer", "zeros"},
          {"kernel_regularizer", nullptr},
          {"bias_regularizer", nullptr},
          {"activity_regularizer", nullptr},
          {"kernel_constraint", nullptr},
          {"bias_constraint", nullptr}};
}

Arguments operator+(Arguments a, const Arguments& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void write_null_regularizers(ojson& c, std::initializer_list<const char*> weights, bool activity) {
  for (const char* w : weights) c[std::string(w) + "_regularizer"] = nullptr;
  // A layer's own (layer_config wrote it first, where Keras's base config has it).
  if (activity && !c.contains("activity_regularizer")) c["activity_regularizer"] = nullptr;
  for (const char* w : weights) c[std::string(w) + "_constraint"] = nullptr;
}

ojson regularizer_json(const Regularizer& r) {
  ojson config = ojson::object();
  const char* cls = "L1L2";
  switch (r.kind) {
    case Regularizer::Kind::none:
      return nullptr;
    case Regularizer::Kind::l1:  // Keras's L1 keeps its factor as a float32 tensor
      cls = "L1";
      config["l1"] = static_cast<double>(static_cast<float>(r.l1));
      break;
    case Regularizer::Kind::l2:
      cls = "L2";
      config["l2"] = r.l2;
      break;
    case Regularizer::Kind::l1_l2:
      config["l1"] = r.l1;
      config["l2"] = r.l2;
      break;
  }
  return ojson{{"module", "keras.regularizers"},
               {"class_name", cls},
               {"config", config},
               {"registered_name", nullptr}};
}

Regularizer regularizer_from_keras_json(std::string_view text, const std::string& where) {
  json value;
  try {
    value = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(where, std::string("argument regularizer: not JSON: ") + e.what());
  }
  const json cfg = json{{"regularizer", value}};
  const LayerRef ref{where, 0, "", "", true};
  Reader reader(cfg, ref);
  return reader.regularizer("regularizer");
}

void write_weight_regularizers(
    ojson& c, std::initializer_list<std::pair<const char*, const Regularizer*>> weights) {
  for (const auto& [w, r] : weights) c[std::string(w) + "_regularizer"] = regularizer_json(*r);
  for (const auto& [w, r] : weights) c[std::string(w) + "_constraint"] = nullptr;
}

void write_kernel_and_bias(ojson& c, bool use_bias, const Initializer& kernel,
                           const Initializer& bias, const Regularizer& kernel_regularizer,
                           const Regularizer& bias_regularizer, bool activity) {
  c["use_bias"] = use_bias;
  c["kernel_initializer"] = initializer_json(kernel);
  c["bias_initializer"] = initializer_json(bias);
  write_null_regularizers(c, {"kernel", "bias"}, activity);
  c["kernel_regularizer"] = regularizer_json(kernel_regularizer);
  c["bias_regularizer"] = regularizer_json(bias_regularizer);
}

bool Reader::flag(const char* key, bool fallback) {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key, "expected true or false, got " + brief(*v));
  return v->get<bool>();
}

double Reader::number(const char* key, double fallback) {
  const json* v = find(key);
  if (!v) return fallback;
  if (!v->is_number()) fail(key, "expected a number, got " + brief(*v));
  return v->get<double>();
}

namespace {
[[noreturn]] void bad(const std::string& why) { throw std::invalid_argument(why); }

double config_number(const json& cfg, const char* key, double fallback) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  if (!it->is_number()) bad(fmt::format("{} must be a number, got {}", key, brief(*it)));
  return it->get<double>();
}

std::string config_text(const json& cfg, const char* key, const char* fallback) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  if (!it->is_string()) bad(fmt::format("{} must be a string, got {}", key, brief(*it)));
  return lower(it->get<std::string>());
}

// The config fields each Keras class writes (get_config).
std::set<std::string> config_fields(InitializerKind k) {
  switch (k) {
    case InitializerKind::zeros:
    case InitializerKind::ones:
      return {};
    case InitializerKind::constant:
      return {"value"};
    case InitializerKind::random_normal:
    case InitializerKind::truncated_normal:
      return {"mean", "stddev", "seed"};
    case InitializerKind::random_uniform:
      return {"minval", "maxval", "seed"};
    case InitializerKind::variance_scaling:
      return {"scale", "mode", "distribution", "seed", "input_axes", "output_axes"};
    case InitializerKind::identity:
      return {"gain"};
    case InitializerKind::orthogonal:
      return {"gain", "seed"};
    default:  // the named VarianceScaling forms
      return {"seed", "input_axes", "output_axes"};
  }
}
}  // namespace

Initializer parse_initializer(const json& v) {
  std::string cls;
  const json* cfg = nullptr;
  if (v.is_string()) {
    cls = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    cls = v["class_name"].get<std::string>();
    if (auto c = v.find("config"); c != v.end() && !c->is_null()) {
      if (!c->is_object()) bad("unreadable initializer config " + brief(*c));
      cfg = &*c;
    }
    if (auto rn = v.find("registered_name");
        rn != v.end() && rn->is_string() && rn->get<std::string>() != cls)
      bad("the custom initializer '" + printable(rn->get<std::string>()) + "' is not supported");
  } else {
    bad("unreadable initializer " + brief(v));
  }
  const std::optional<InitializerKind> kind = initializer_kind_from_name(cls);
  if (!kind)
    bad(
        fmt::format("initializer {} is not supported: crossover has Keras's GlorotUniform, "
                    "GlorotNormal, HeNormal, HeUniform, LecunNormal, LecunUniform, "
                    "VarianceScaling, RandomNormal, RandomUniform, TruncatedNormal, Zeros, Ones, "
                    "Constant, Identity and Orthogonal",
                    printable(cls)));
  Initializer init = with_kind_defaults(*kind);
  if (!cfg) return init;
  const std::set<std::string> known = config_fields(*kind);
  for (auto it = cfg->begin(); it != cfg->end(); ++it)
    if (!known.count(it.key()) && !it->is_null())
      bad(fmt::format("{} has no field {} crossover knows (value {})",
                      initializer_class_name(*kind), printable(it.key()), brief(it.value())));
  for (const char* axes : {"input_axes", "output_axes"})
    if (auto a = cfg->find(axes); a != cfg->end() && !a->is_null())
      bad(fmt::format("{} {} is not supported: crossover computes Keras's default fans (null)",
                      axes, brief(*a)));
  if (auto seed = cfg->find("seed"); seed != cfg->end() && !seed->is_null()) {
    if (!seed->is_number_integer()) bad("seed must be an integer or null, got " + brief(*seed));
    init.seed = seed->get<int64_t>();
  }
  init.value = config_number(*cfg, "value", init.value);
  init.mean = config_number(*cfg, "mean", init.mean);
  init.stddev = config_number(*cfg, "stddev", init.stddev);
  init.minval = config_number(*cfg, "minval", init.minval);
  init.maxval = config_number(*cfg, "maxval", init.maxval);
  init.gain = config_number(*cfg, "gain", init.gain);
  if (*kind == InitializerKind::variance_scaling) {
    init.scale = config_number(*cfg, "scale", 1.0);
    if (!(init.scale > 0.0))
      bad(fmt::format("VarianceScaling's scale must be positive, got {}", init.scale));
    const std::string mode = config_text(*cfg, "mode", "fan_in");
    if (mode == "fan_in")
      init.mode = FanMode::fan_in;
    else if (mode == "fan_out")
      init.mode = FanMode::fan_out;
    else if (mode == "fan_avg")
      init.mode = FanMode::fan_avg;
    else
      bad("VarianceScaling's mode must be fan_in, fan_out or fan_avg, got " + printable(mode));
    const std::string dist = config_text(*cfg, "distribution", "truncated_normal");
    // Keras reads "normal" as "truncated_normal".
    if (dist == "truncated_normal" || dist == "normal")
      init.distribution = Distribution::truncated_normal;
    else if (dist == "untruncated_normal")
      init.distribution = Distribution::untruncated_normal;
    else if (dist == "uniform")
      init.distribution = Distribution::uniform;
    else
      bad("VarianceScaling's distribution must be truncated_normal, untruncated_normal or "
          "uniform, got " +
          printable(dist));
  }
  if ((*kind == InitializerKind::random_normal || *kind == InitializerKind::truncated_normal) &&
      !(init.stddev >= 0.0))
    bad(fmt::format("stddev must be a non-negative number, got {}", init.stddev));
  return init;
}

Initializer Reader::initializer(const char* key, const Initializer& fallback) {
  const json* p = find(key);
  if (!p) return fallback;
  try {
    return parse_initializer(*p);
  } catch (const std::invalid_argument& e) {
    fail(key, e.what());
  }
}

void Reader::refuse_set(const char* key, const std::string& why) {
  if (find(key)) fail(key, why);
}

void Reader::refuse_true(const char* key, const std::string& why) {
  read_.insert(key);
  auto it = cfg_.find(key);
  if (it != cfg_.end() && !flag_is_false(*it)) fail(key, why);
}

void Reader::refuse_unread() const {
  // Fields crossover does not know: harmless when null or false (features left off, e.g.
  // lora_rank, quantization_config), refused otherwise.
  for (auto it = cfg_.begin(); it != cfg_.end(); ++it) {
    if (read_.count(it.key()) || flag_is_false(it.value())) continue;
    fail(printable(it.key()),
         "crossover does not support this field (value " + brief(it.value()) + ")");
  }
}

ojson initializer_json(const Initializer& init) {
  // Each class's get_config in Keras 3.15, in its order (the seed, from the base class, first).
  ojson config = ojson::object();
  const ojson seed = init.seed ? ojson(*init.seed) : ojson(nullptr);
  switch (init.kind) {
    case InitializerKind::zeros:
    case InitializerKind::ones:
      break;  // Keras refuses a seed for them
    case InitializerKind::constant:
      config["value"] = init.value;
      break;
    case InitializerKind::random_normal:
    case InitializerKind::truncated_normal:
      config["seed"] = seed;
      config["mean"] = init.mean;
      config["stddev"] = init.stddev;
      break;
    case InitializerKind::random_uniform:
      config["seed"] = seed;
      config["minval"] = init.minval;
      config["maxval"] = init.maxval;
      break;
    case InitializerKind::variance_scaling:
      config["seed"] = seed;
      config["scale"] = init.scale;
      config["mode"] = std::string(fan_mode_name(init.mode));
      config["distribution"] = std::string(distribution_name(init.distribution));
      config["input_axes"] = nullptr;
      config["output_axes"] = nullptr;
      break;
    case InitializerKind::identity:
      // Keras 3.15 writes no field (its gain is lost); crossover keeps a gain other than 1.
      if (init.gain != 1.0) config["gain"] = init.gain;
      break;
    case InitializerKind::orthogonal:
      config["seed"] = seed;
      config["gain"] = init.gain;
      break;
    default:  // GlorotUniform, HeNormal, ...
      config["seed"] = seed;
      config["input_axes"] = nullptr;
      config["output_axes"] = nullptr;
      break;
  }
  return ojson{{"module", "keras.initializers"},
               {"class_name", std::string(initializer_class_name(init.kind))},
               {"config", std::move(config)},
               {"registered_name", nullptr}};
}

double decimal(float f) { return std::stod(fmt::format("{}", f)); }

// A layer's "dtype", as Keras writes it: Keras 3.4 on {"module": "keras", "class_name":
// "DTypePolicy" (3.4-3.6 also "FloatDTypePolicy"), "config": {"name": "mixed_bfloat16"},
// "registered_name": null}; tf.keras 2 {"class_name": "Policy", "config": {"name": ...}} (2.13 on
// with "module": "keras.mixed_precision"), or the plain name "float32" for a float policy; Keras
// 3.0-3.3 the plain name of any policy. null: float32 (Keras's global policy, unless set).
// Quantized policies (QuantizedDTypePolicy, ..., and a DTypePolicyMap of them) carry a "mode"
// instead of a name, and are refused as such.
DTypePolicy parse_dtype_field(const json& v, const LayerRef& ref) {
  if (v.is_null()) return DTypePolicy::float32;
  std::string name;
  if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object()) {
    auto c = v.find("config");
    if (c != v.end() && c->is_object()) {
      if (auto n = c->find("name"); n != c->end() && n->is_string()) {
        name = n->get<std::string>();
      } else if (auto m = c->find("mode"); m != c->end() && m->is_string()) {
        name = m->get<std::string>();  // a quantized policy: refused below, by its mode
        if (name.empty()) name = "int8";
      }
    }
    if (name.empty()) ref.fail("dtype", "unreadable dtype policy " + brief(v));
  } else {
    ref.fail("dtype", "expected a dtype policy, got " + brief(v));
  }
  if (name.empty()) ref.fail("dtype", "an empty dtype policy name");
  const std::string why = dtype_policy_problem(name);
  if (!why.empty())
    ref.fail("dtype",
             "the dtype policy '" + printable(name) + "' is not supported by crossover: " + why);
  return parse_dtype_policy(name, ref.where);  // one of the two: why is empty
}

ParsedLayer parse_layer(const json& entry, std::size_t index, const std::string& where,
                        std::set<std::string>& names) {
  if (!entry.is_object())
    throw Error(where, fmt::format("layer {} is not a JSON object: {}", index, brief(entry)));
  auto cn = entry.find("class_name");
  if (cn == entry.end() || !cn->is_string())
    throw Error(where, fmt::format("layer {} has no class_name", index));
  const std::string cls = cn->get<std::string>();
  const json empty = json::object();
  const json* cfgp = &empty;
  if (auto c = entry.find("config"); c != entry.end()) {
    if (!c->is_object())
      throw Error(where,
                  fmt::format("layer {} ({}): config is not an object", index, printable(cls)));
    cfgp = &*c;
  }
  const json& cfg = *cfgp;
  std::string name;
  if (auto n = cfg.find("name"); n != cfg.end() && !n->is_null()) {
    if (!n->is_string())
      throw Error(where, fmt::format("layer {} ({}): name is not a string", index, printable(cls)));
    name = n->get<std::string>();
  } else if (auto n2 = entry.find("name"); n2 != entry.end() && n2->is_string()) {
    name = n2->get<std::string>();
  }
  LayerRef ref{where, index, printable(name), printable(cls)};

  std::string supported = "crossover reads";
  for (const LayerKind* k : layer_kinds())
    supported +=
        std::string(k == layer_kinds().front() ? " " : ", ") + std::string(k->class_name());
  const LayerKind* kind = find_keras_layer_kind(cls);
  const std::string who = name.empty()
                              ? fmt::format("layer {} ({})", index, ref.cls)
                              : fmt::format("layer {} '{}' ({})", index, ref.name, ref.cls);
  if (!kind) throw Error(where, who + " is not supported: " + supported);
  if (auto rn = entry.find("registered_name"); rn != entry.end() && !rn->is_null()) {
    if (!rn->is_string() || rn->get<std::string>() != cls)
      throw Error(where,
                  who + " is a custom class (registered_name " + brief(*rn) + "): " + supported);
  }
  if (auto mod = entry.find("module"); mod != entry.end() && !mod->is_null()) {
    const std::string m = mod->is_string() ? mod->get<std::string>() : std::string();
    if (m.rfind("keras", 0) != 0 && m.rfind("tf_keras", 0) != 0 && m.rfind("tensorflow", 0) != 0)
      throw Error(where, who + " comes from module " + brief(*mod) + ", not Keras: " + supported);
  }
  if (name.find('/') != std::string::npos)
    throw Error(where,
                who + ": a layer name must not contain '/' (weights are named layer/kernel)");
  if (!name.empty() && !names.insert(name).second)
    throw Error(where, "layer name '" + ref.name + "' is used twice");

  ParsedLayer out;
  out.layer.name = name;
  read_layer_config(*kind, cfg, ref, out);
  return out;
}

// A layer's config, as its kind reads it, after the fields every layer may carry.
void read_layer_config(const LayerKind& kind, const json& cfg, const LayerRef& ref,
                       ParsedLayer& out) {
  Layer& l = out.layer;
  l.type = kind.type();
  Reader reader(cfg, ref);
  if (const json* t = reader.find("trainable")) {
    if (!t->is_boolean()) ref.fail("trainable", "expected true or false, got " + brief(*t));
    l.trainable = t->get<bool>();
  }
  reader.accept({"name", "dtype", "batch_size"});
  if (auto d = cfg.find("dtype"); d != cfg.end()) l.dtype_policy = parse_dtype_field(*d, ref);
  if (const json* b = reader.find("batch_input_shape"))
    out.declared_input = parse_shape(*b, true, ref, "batch_input_shape");
  else if (const json* s = reader.find("input_shape"))
    out.declared_input = parse_shape(*s, false, ref, "input_shape");
  else if (const json* dim = reader.find("input_dim"))
    out.declared_input = parse_shape(json::array({*dim}), false, ref, "input_dim");
  reader.accept({"input_shape", "input_dim"});
  // Keras's base Layer takes an activity_regularizer for every class but InputLayer.
  if (!kind.is_model_input()) l.activity = reader.regularizer("activity_regularizer");
  reader.declared_input = out.declared_input;
  kind.from_keras(reader, l);
  reader.refuse_unread();
  if (kind.is_model_input()) {
    out.is_input = true;
    out.declared_input = l.input_shape;
  }
}

// Keras 3's form of a layer's dtype policy (parse_dtype_field reads it and the older ones).
ojson dtype_policy_json(DTypePolicy p) {
  return ojson{{"module", "keras"},
               {"class_name", "DTypePolicy"},
               {"config", {{"name", std::string(dtype_policy_name(p))}}},
               {"registered_name", nullptr}};
}

ojson batch_shape(const Shape& s) {
  ojson a = ojson::array({nullptr});
  for (int64_t d : s) a.push_back(d);
  return a;
}

// One layer's Keras "config": its name, trainable and dtype policy, then its kind's arguments (an
// InputLayer's is its shape and name only: its dtype is its input's, not a policy).
ojson layer_config(const Layer& l) {
  const LayerKind& kind = layer_kind(l);
  ojson c;
  if (!kind.is_model_input())
    c = ojson{
        {"name", l.name}, {"trainable", l.trainable}, {"dtype", dtype_policy_json(l.dtype_policy)}};
  // Keras's base config holds a layer's activity_regularizer when it has one (the kinds that
  // list it write null in their place otherwise).
  if (l.activity.kind != Regularizer::Kind::none && !kind.is_model_input())
    c["activity_regularizer"] = regularizer_json(l.activity);
  kind.to_keras(l, c);
  return c;
}

ojson layer_json(const Layer& l, const Shape& input) {
  const LayerKind& kind = layer_kind(l);
  ojson e{{"module", "keras.layers"},
          {"class_name", std::string(kind.class_name())},
          {"config", layer_config(l)},
          {"registered_name", nullptr}};
  if (!input.empty() && kind.keras_build_config())
    e["build_config"] = ojson{{"input_shape", batch_shape(input)}};
  return e;
}

Layer Reader::layer(const char* key, const std::string& missing) {
  const json* v = find(key);
  if (!v) fail(key, missing);
  std::set<std::string> names;
  // Its messages: "<this layer> field <key>: <the inner entry's message>".
  Layer inner;
  try {
    inner = parse_layer(*v, ref_.index, ref_.where, names).layer;
  } catch (const Error& e) {
    std::string why = e.what();
    const std::string prefix = ref_.where + ": ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    fail(key, why);
  }
  // Keras divides its penalty by the rows the wrapper hands it (batch x steps), not the batch.
  if (inner.activity.kind != Regularizer::Kind::none)
    fail(key, "an inner layer's activity_regularizer is not supported (yet)");
  return inner;
}

}  // namespace crossover::keras_config
