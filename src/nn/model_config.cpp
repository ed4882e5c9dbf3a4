// Keras model JSON in and out (Keras 2 and Keras 3 `to_json()` formats).
#include "nn/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "nn/layers.h"
#include "nn/optimizers.h"

namespace crossover {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr std::size_t kMaxJsonBytes = 64u << 20;  // a model description is a few kB
constexpr int64_t kMaxDim = int64_t{1} << 31;
constexpr int64_t kMaxElements = int64_t{1} << 40;  // per tensor: far past any real model

// A string from the input, made safe for a one-line message.
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

// The JSON value, abbreviated, for a message.
std::string brief(const json& v) {
  std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
  return printable(s);
}

json parse_json(std::string_view text, const std::string& where) {
  if (text.size() > kMaxJsonBytes)
    throw Error(where, fmt::format("{} bytes is too large for a model JSON (at most {})",
                                   text.size(), kMaxJsonBytes));
  struct TooDeep {};
  auto limit_depth = [](int depth, json::parse_event_t, json&) -> bool {
    if (depth > 64) throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit_depth);
  } catch (const TooDeep&) {
    throw Error(where, "the JSON is nested more than 64 levels deep: not a Keras model");
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    const auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw Error(where, fmt::format("malformed JSON at byte {}: {}", e.byte, printable(msg)));
  } catch (const json::exception& e) {  // e.g. a number too large for any C++ type
    std::string msg = e.what();
    const auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw Error(where, "malformed JSON: " + printable(msg));
  }
}

// Float values written as their shortest decimal form (0.2, not 0.20000000298023224).
double short_double(float v) { return std::stod(fmt::format("{}", v)); }

// ---- reading ---------------------------------------------------------------------------------

// Where a layer is, for messages.
struct LayerRef {
  const std::string& where;
  std::size_t index;  // 1-based
  std::string name;
  std::string cls;

  std::string label() const {
    if (index == 0) return "model";
    return name.empty() ? fmt::format("layer {} ({})", index, cls) : "layer '" + name + "'";
  }
  [[noreturn]] void fail(std::string_view field, const std::string& why) const {
    throw Error(where, fmt::format("{} field {}: {}", label(), field, why));
  }
};

bool is_null_or_absent(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null();
}

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

// A shape list: [null, 28, 28] with a batch dimension, or [28, 28] without. Also accepts the
// old {"class_name": "TensorShape", "items": [...]} wrapper.
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

// GlorotUniform for kernels, Zeros for biases: the only initializers crossover runs.
void check_initializer(const json& v, bool kernel, const LayerRef& ref) {
  const char* field = kernel ? "kernel_initializer" : "bias_initializer";
  if (v.is_null()) return;  // the layer's default
  std::string cls;
  const json* cfg = nullptr;
  if (v.is_string()) {
    cls = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    cls = v["class_name"].get<std::string>();
    auto c = v.find("config");
    if (c != v.end() && c->is_object()) cfg = &*c;
    auto rn = v.find("registered_name");
    if (rn != v.end() && rn->is_string() && rn->get<std::string>() != cls)
      ref.fail(field, "the custom initializer '" + printable(rn->get<std::string>()) +
                          "' is not supported");
  } else {
    ref.fail(field, "unreadable initializer " + brief(v));
  }
  std::string low = cls;
  std::transform(low.begin(), low.end(), low.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  bool ok = false;
  if (kernel) {
    ok = low == "glorotuniform" || low == "glorot_uniform";
    if (low == "variancescaling" && cfg) {
      // GlorotUniform as VarianceScaling(scale=1, mode="fan_avg", distribution="uniform").
      auto field = [&](const char* key) -> const json* {
        auto it = cfg->find(key);
        return it == cfg->end() ? nullptr : &*it;
      };
      const json* scale = field("scale");
      const json* mode = field("mode");
      const json* dist = field("distribution");
      ok = (!scale || (scale->is_number() && scale->get<double>() == 1.0)) && mode &&
           *mode == "fan_avg" && dist && *dist == "uniform";
    }
  } else {
    ok = low == "zeros" || low == "zero";
    if (low == "constant" && cfg) {
      auto val = cfg->find("value");
      ok = val != cfg->end() && val->is_number() && val->get<double>() == 0.0;
    }
  }
  if (!ok)
    ref.fail(field,
             fmt::format("initializer {} is not supported: crossover initializes kernels with "
                         "GlorotUniform and biases with Zeros",
                         printable(cls)));
}

// BatchNormalization's initializers: the constant `value` Keras starts the weight with ("zeros" /
// Zeros / Constant(0) for 0, "ones" / Ones / Constant(1) for 1), or null (the default).
void check_constant_initializer(const json& v, const char* field, double value,
                                const LayerRef& ref) {
  if (v.is_null()) return;
  std::string cls;
  const json* cfg = nullptr;
  if (v.is_string()) {
    cls = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    cls = v["class_name"].get<std::string>();
    if (auto c = v.find("config"); c != v.end() && c->is_object()) cfg = &*c;
  } else {
    ref.fail(field, "unreadable initializer " + brief(v));
  }
  std::string low = cls;
  std::transform(low.begin(), low.end(), low.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  bool ok = value == 0.0 ? (low == "zeros" || low == "zero") : (low == "ones" || low == "one");
  if (low == "constant" && cfg) {
    auto val = cfg->find("value");
    ok = val != cfg->end() && val->is_number() && val->get<double>() == value;
  }
  if (!ok)
    ref.fail(field, fmt::format("initializer {} is not supported: only {} (the default)",
                                printable(cls), value == 0.0 ? "Zeros" : "Ones"));
}

ActivationKind parse_layer_activation(const json& v, const LayerRef& ref) {
  if (v.is_null()) return ActivationKind::linear;
  std::string name;
  if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object() && v.contains("config") && v["config"].is_string()) {
    // Keras 3 writes a non-built-in function as {"class_name": "function", "config": "name"}.
    name = v["config"].get<std::string>();
  } else {
    ref.fail("activation", "unreadable activation " + brief(v));
  }
  if (name == "None") return ActivationKind::linear;
  try {
    return parse_activation(name);
  } catch (const Error&) {
    ref.fail("activation",
             "activation '" + printable(name) +
                 "' is not supported: crossover runs linear, relu, sigmoid, tanh and softmax");
  }
}

// What one layer entry of the JSON declares.
struct ParsedLayer {
  Layer layer;
  Shape declared_input;  // batch_input_shape / batch_shape, when given
  bool is_input = false;
};

// An int or a pair of ints, each from 1 to 2^31: Keras's kernel_size, strides, pool_size.
Size2 parse_pair(const json& v, const LayerRef& ref, std::string_view field) {
  auto one = [&](const json& d) {
    if (!d.is_number_integer() || d.get<int64_t>() < 1 || d.get<int64_t>() > kMaxDim)
      ref.fail(field, "expected a whole number from 1 to 2^31 or a pair of them, got " + brief(v));
    return d.get<int64_t>();
  };
  if (v.is_array()) {
    if (v.size() != 2) ref.fail(field, "expected two numbers (height, width), got " + brief(v));
    return {one(v[0]), one(v[1])};
  }
  return one(v);
}

// data_format: channels_last (or null, Keras's default) only.
void check_channels_last(const json& cfg, const LayerRef& ref) {
  if (auto f = cfg.find("data_format"); f != cfg.end() && !f->is_null()) {
    if (!f->is_string() || f->get<std::string>() != "channels_last")
      ref.fail("data_format", "data_format " + brief(*f) + " is not supported: only channels_last");
  }
}

Padding parse_padding_field(const json& cfg, const LayerRef& ref) {
  auto p = cfg.find("padding");
  if (p == cfg.end() || p->is_null()) return Padding::valid;
  std::string text = p->is_string() ? p->get<std::string>() : std::string();
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (text == "valid") return Padding::valid;
  if (text == "same") return Padding::same;
  ref.fail("padding", "padding " + brief(*p) + " is not supported: only valid and same");
}

// Keras's pooling layers' fields: pool_size, strides (null: pool_size), padding, data_format.
void parse_pooling(const json& cfg, const LayerRef& ref, Layer& l, std::set<std::string>& handled) {
  handled.insert({"pool_size", "strides", "padding", "data_format"});
  auto ps = cfg.find("pool_size");
  l.window = ps == cfg.end() || ps->is_null() ? Size2(2) : parse_pair(*ps, ref, "pool_size");
  auto st = cfg.find("strides");
  l.strides = st == cfg.end() || st->is_null() ? l.window : parse_pair(*st, ref, "strides");
  l.padding = parse_padding_field(cfg, ref);
  check_channels_last(cfg, ref);
}

bool flag_is_false(const json& v) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); }

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

  static const char* kSupported =
      "crossover reads InputLayer, Flatten, Dense, Dropout, Activation, Conv2D, MaxPooling2D, "
      "AveragePooling2D, GlobalAveragePooling2D, Reshape, BatchNormalization";
  const bool known = cls == "InputLayer" || cls == "Flatten" || cls == "Dense" ||
                     cls == "Dropout" || cls == "Activation" || cls == "Conv2D" ||
                     cls == "MaxPooling2D" || cls == "AveragePooling2D" ||
                     cls == "GlobalAveragePooling2D" || cls == "Reshape" ||
                     cls == "BatchNormalization";
  const std::string who = name.empty()
                              ? fmt::format("layer {} ({})", index, ref.cls)
                              : fmt::format("layer {} '{}' ({})", index, ref.name, ref.cls);
  if (!known) throw Error(where, who + " is not supported: " + kSupported);
  if (auto rn = entry.find("registered_name"); rn != entry.end() && !rn->is_null()) {
    if (!rn->is_string() || rn->get<std::string>() != cls)
      throw Error(where,
                  who + " is a custom class (registered_name " + brief(*rn) + "): " + kSupported);
  }
  if (auto mod = entry.find("module"); mod != entry.end() && !mod->is_null()) {
    const std::string m = mod->is_string() ? mod->get<std::string>() : std::string();
    if (m.rfind("keras", 0) != 0 && m.rfind("tf_keras", 0) != 0 && m.rfind("tensorflow", 0) != 0)
      throw Error(where, who + " comes from module " + brief(*mod) + ", not Keras: " + kSupported);
  }
  if (name.find('/') != std::string::npos)
    throw Error(where,
                who + ": a layer name must not contain '/' (weights are named layer/kernel)");
  if (!name.empty() && !names.insert(name).second)
    throw Error(where, "layer name '" + ref.name + "' is used twice");

  ParsedLayer out;
  Layer& l = out.layer;
  l.name = name;
  // Fields every layer may carry.
  std::set<std::string> handled = {"name",       "trainable",   "dtype",    "batch_input_shape",
                                   "batch_size", "input_shape", "input_dim"};
  if (auto t = cfg.find("trainable"); t != cfg.end() && !t->is_null()) {
    if (!t->is_boolean()) ref.fail("trainable", "expected true or false, got " + brief(*t));
    if (!t->get<bool>()) ref.fail("trainable", "frozen layers (trainable false) are not supported");
  }
  if (auto d = cfg.find("dtype"); d != cfg.end()) l.dtype_policy = parse_dtype_field(*d, ref);
  if (auto b = cfg.find("batch_input_shape"); b != cfg.end() && !b->is_null())
    out.declared_input = parse_shape(*b, true, ref, "batch_input_shape");
  else if (auto s = cfg.find("input_shape"); s != cfg.end() && !s->is_null())
    out.declared_input = parse_shape(*s, false, ref, "input_shape");
  else if (auto dim = cfg.find("input_dim"); dim != cfg.end() && !dim->is_null())
    out.declared_input = parse_shape(json::array({*dim}), false, ref, "input_dim");

  if (cls == "InputLayer") {
    out.is_input = true;
    l.type = LayerType::input;
    handled.insert({"batch_shape", "shape", "sparse", "ragged", "optional", "input_tensor"});
    if (auto b = cfg.find("batch_shape"); b != cfg.end() && !b->is_null())
      out.declared_input = parse_shape(*b, true, ref, "batch_shape");
    else if (auto s = cfg.find("shape"); s != cfg.end() && !s->is_null())
      out.declared_input = parse_shape(*s, false, ref, "shape");
    for (const char* f : {"sparse", "ragged", "optional"}) {
      auto it = cfg.find(f);
      if (it != cfg.end() && !flag_is_false(*it))
        ref.fail(f, std::string(f) + " inputs are not supported");
    }
    if (!is_null_or_absent(cfg, "input_tensor"))
      ref.fail("input_tensor", "an input tensor is not supported");
    if (out.declared_input.empty())
      ref.fail("batch_shape", "an InputLayer needs its shape (batch_shape or batch_input_shape)");
    // Its "dtype" is its input's (Keras writes "float32" whatever the policy), not a policy.
    if (l.dtype_policy != DTypePolicy::float32)
      ref.fail("dtype", "an InputLayer's dtype is its input's: crossover takes float32 inputs");
    l.dtype_policy = DTypePolicy::float32;
  } else if (cls == "Flatten") {
    l.type = LayerType::flatten;
    handled.insert("data_format");
    if (auto f = cfg.find("data_format"); f != cfg.end() && !f->is_null()) {
      if (!f->is_string() || f->get<std::string>() != "channels_last")
        ref.fail("data_format",
                 "data_format " + brief(*f) + " is not supported: only channels_last");
    }
  } else if (cls == "Dense") {
    l.type = LayerType::dense;
    handled.insert({"units", "activation", "use_bias", "kernel_initializer", "bias_initializer",
                    "kernel_regularizer", "bias_regularizer", "activity_regularizer",
                    "kernel_constraint", "bias_constraint"});
    auto u = cfg.find("units");
    if (u == cfg.end() || u->is_null()) ref.fail("units", "Dense needs units");
    if (!u->is_number_integer() || u->get<int64_t>() < 1 || u->get<int64_t>() > kMaxDim)
      ref.fail("units", "units must be a whole number from 1 to 2^31, got " + brief(*u));
    l.units = u->get<int64_t>();
    if (auto a = cfg.find("activation"); a != cfg.end())
      l.activation = parse_layer_activation(*a, ref);
    if (auto b = cfg.find("use_bias"); b != cfg.end() && !b->is_null()) {
      if (!b->is_boolean()) ref.fail("use_bias", "expected true or false, got " + brief(*b));
      l.use_bias = b->get<bool>();
    }
    if (auto k = cfg.find("kernel_initializer"); k != cfg.end()) check_initializer(*k, true, ref);
    if (auto k = cfg.find("bias_initializer"); k != cfg.end()) check_initializer(*k, false, ref);
    for (const char* f : {"kernel_regularizer", "bias_regularizer", "activity_regularizer"})
      if (!is_null_or_absent(cfg, f)) ref.fail(f, "regularizers are not supported");
    for (const char* f : {"kernel_constraint", "bias_constraint"})
      if (!is_null_or_absent(cfg, f)) ref.fail(f, "constraints are not supported");
  } else if (cls == "Dropout") {
    l.type = LayerType::dropout;
    handled.insert({"rate", "noise_shape", "seed"});
    auto r = cfg.find("rate");
    if (r == cfg.end() || r->is_null()) ref.fail("rate", "Dropout needs a rate");
    if (!r->is_number() || !(r->get<double>() >= 0.0 && r->get<double>() < 1.0))
      ref.fail("rate", "rate must be a number in [0, 1), got " + brief(*r));
    l.rate = static_cast<float>(r->get<double>());
    if (!is_null_or_absent(cfg, "noise_shape"))
      ref.fail("noise_shape", "a dropout noise_shape is not supported");
    // "seed": crossover's dropout masks come from its own seed (--seed / CompileOptions.seed).
  } else if (cls == "Conv2D") {
    l.type = LayerType::conv2d;
    handled.insert({"filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate",
                    "groups", "activation", "use_bias", "kernel_initializer", "bias_initializer",
                    "kernel_regularizer", "bias_regularizer", "activity_regularizer",
                    "kernel_constraint", "bias_constraint"});
    auto f = cfg.find("filters");
    if (f == cfg.end() || f->is_null()) ref.fail("filters", "Conv2D needs filters");
    if (!f->is_number_integer() || f->get<int64_t>() < 1 || f->get<int64_t>() > kMaxDim)
      ref.fail("filters", "filters must be a whole number from 1 to 2^31, got " + brief(*f));
    l.units = f->get<int64_t>();
    auto k = cfg.find("kernel_size");
    if (k == cfg.end() || k->is_null()) ref.fail("kernel_size", "Conv2D needs a kernel_size");
    l.window = parse_pair(*k, ref, "kernel_size");
    if (auto st = cfg.find("strides"); st != cfg.end() && !st->is_null())
      l.strides = parse_pair(*st, ref, "strides");
    l.padding = parse_padding_field(cfg, ref);
    check_channels_last(cfg, ref);
    if (auto d = cfg.find("dilation_rate"); d != cfg.end() && !d->is_null())
      if (parse_pair(*d, ref, "dilation_rate") != Size2(1))
        ref.fail("dilation_rate", "dilation_rate " + brief(*d) + " is not supported: only 1");
    if (auto g = cfg.find("groups"); g != cfg.end() && !g->is_null())
      if (!g->is_number_integer() || g->get<int64_t>() != 1)
        ref.fail("groups", "groups " + brief(*g) + " is not supported: only 1");
    if (auto a = cfg.find("activation"); a != cfg.end())
      l.activation = parse_layer_activation(*a, ref);
    if (auto b = cfg.find("use_bias"); b != cfg.end() && !b->is_null()) {
      if (!b->is_boolean()) ref.fail("use_bias", "expected true or false, got " + brief(*b));
      l.use_bias = b->get<bool>();
    }
    if (auto ki = cfg.find("kernel_initializer"); ki != cfg.end())
      check_initializer(*ki, true, ref);
    if (auto bi = cfg.find("bias_initializer"); bi != cfg.end()) check_initializer(*bi, false, ref);
    for (const char* r : {"kernel_regularizer", "bias_regularizer", "activity_regularizer"})
      if (!is_null_or_absent(cfg, r)) ref.fail(r, "regularizers are not supported");
    for (const char* c : {"kernel_constraint", "bias_constraint"})
      if (!is_null_or_absent(cfg, c)) ref.fail(c, "constraints are not supported");
  } else if (cls == "MaxPooling2D" || cls == "AveragePooling2D") {
    l.type = cls == "MaxPooling2D" ? LayerType::max_pooling2d : LayerType::average_pooling2d;
    parse_pooling(cfg, ref, l, handled);
  } else if (cls == "GlobalAveragePooling2D") {
    l.type = LayerType::global_average_pooling2d;
    handled.insert({"data_format", "keepdims"});
    check_channels_last(cfg, ref);
    // keepdims false (the default) is skipped with the other false fields below.
    if (auto kd = cfg.find("keepdims"); kd != cfg.end() && !flag_is_false(*kd))
      ref.fail("keepdims", "keepdims true is not supported: the output is (channels)");
  } else if (cls == "Reshape") {
    l.type = LayerType::reshape;
    handled.insert("target_shape");
    auto t = cfg.find("target_shape");
    if (t == cfg.end() || !t->is_array() || t->empty())
      ref.fail("target_shape", "Reshape needs a target_shape list");
    for (const json& d : *t) {
      if (!d.is_number_integer() || d.get<int64_t>() == 0 || d.get<int64_t>() < -1 ||
          d.get<int64_t>() > kMaxDim)
        ref.fail("target_shape", "expected dimensions from 1 to 2^31 or -1, got " + brief(*t));
      l.target_shape.push_back(d.get<int64_t>());
    }
  } else if (cls == "BatchNormalization") {
    l.type = LayerType::batch_normalization;
    handled.insert({"axis", "momentum", "epsilon", "center", "scale", "beta_initializer",
                    "gamma_initializer", "moving_mean_initializer", "moving_variance_initializer",
                    "beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
                    "synchronized", "renorm", "renorm_clipping", "renorm_momentum"});
    if (auto a = cfg.find("axis"); a != cfg.end() && !a->is_null()) {
      // Keras 3 writes -1; tf.keras 2 a list such as [3] (the last axis of a built model), which
      // the model checks against its input when it builds.
      const json& one = a->is_array() && a->size() == 1 ? (*a)[0] : *a;
      if (!one.is_number_integer() || one.get<int64_t>() < -1 || one.get<int64_t>() == 0 ||
          one.get<int64_t>() > 8)
        ref.fail("axis", "axis " + brief(*a) + " is not supported: only the last axis (-1)");
      l.axis = one.get<int64_t>();
    }
    auto number = [&](const char* f, double& to) {
      auto it = cfg.find(f);
      if (it == cfg.end() || it->is_null()) return;
      if (!it->is_number()) ref.fail(f, "expected a number, got " + brief(*it));
      to = it->get<double>();
    };
    number("momentum", l.momentum);
    number("epsilon", l.epsilon);
    if (!(l.momentum >= 0.0 && l.momentum <= 1.0))
      ref.fail("momentum", fmt::format("momentum must be in [0, 1], got {}", l.momentum));
    if (!(l.epsilon > 0.0 && l.epsilon < 1e30))
      ref.fail("epsilon", fmt::format("epsilon must be positive, got {}", l.epsilon));
    for (auto [f, to] : {std::pair<const char*, bool*>{"center", &l.center}, {"scale", &l.scale}})
      if (auto it = cfg.find(f); it != cfg.end() && !it->is_null()) {
        if (!it->is_boolean()) ref.fail(f, "expected true or false, got " + brief(*it));
        *to = it->get<bool>();
      }
    for (auto [f, value] : {std::pair<const char*, double>{"beta_initializer", 0.0},
                            {"gamma_initializer", 1.0},
                            {"moving_mean_initializer", 0.0},
                            {"moving_variance_initializer", 1.0}})
      if (auto it = cfg.find(f); it != cfg.end()) check_constant_initializer(*it, f, value, ref);
    for (const char* r : {"beta_regularizer", "gamma_regularizer"})
      if (!is_null_or_absent(cfg, r)) ref.fail(r, "regularizers are not supported");
    for (const char* c : {"beta_constraint", "gamma_constraint"})
      if (!is_null_or_absent(cfg, c)) ref.fail(c, "constraints are not supported");
    for (const char* f : {"synchronized", "renorm"})
      if (auto it = cfg.find(f); it != cfg.end() && !flag_is_false(*it))
        ref.fail(f, std::string(f) + " " + brief(*it) + " is not supported: only false");
    // renorm_clipping and renorm_momentum only matter with renorm; their defaults are accepted.
    if (!is_null_or_absent(cfg, "renorm_clipping"))
      ref.fail("renorm_clipping", "renorm is not supported");
  } else {  // Activation
    l.type = LayerType::activation;
    handled.insert("activation");
    auto a = cfg.find("activation");
    if (a == cfg.end() || a->is_null()) ref.fail("activation", "Activation needs an activation");
    l.activation = parse_layer_activation(*a, ref);
  }
  // Fields crossover does not know: harmless when null or false (features left off, e.g.
  // lora_rank, quantization_config), refused otherwise.
  for (auto it = cfg.begin(); it != cfg.end(); ++it) {
    if (handled.count(it.key()) || flag_is_false(it.value())) continue;
    ref.fail(printable(it.key()),
             "crossover does not support this field (value " + brief(it.value()) + ")");
  }
  return out;
}

// Validates shapes as the model would build them, before Sequential multiplies anything.
void check_sizes(const std::vector<Layer>& layers, const Shape& input, const std::string& where) {
  int64_t width = 1;
  for (int64_t d : input) width *= d;  // bounded by parse_shape
  for (const Layer& l : layers) {
    if (l.type == LayerType::conv2d &&
        l.window.h * l.window.w > kMaxElements / l.units / std::max<int64_t>(input.back(), 1))
      throw Error(where, fmt::format("layer '{}': a {}x{} kernel of {} filters is absurdly large",
                                     printable(l.name), l.window.h, l.window.w, l.units));
    if (l.type != LayerType::dense) continue;
    if (width > kMaxElements / l.units)
      throw Error(where, fmt::format("layer '{}' field units: a {} x {} kernel is absurdly large",
                                     printable(l.name), width, l.units));
    width = l.units;
  }
}

Sequential sequential_from_doc(const json& doc, const std::string& where) {
  if (!doc.is_object())
    throw Error(where,
                "a Keras model JSON is an object with class_name and config, got " + brief(doc));
  auto cn = doc.find("class_name");
  if (cn == doc.end() || !cn->is_string())
    throw Error(where, "no class_name: this is not what Keras's model.to_json() writes");
  const std::string cls = cn->get<std::string>();
  if (cls != "Sequential")
    throw Error(where,
                "class_name " + printable(cls) + " is not supported: only Sequential models");
  auto cfg_it = doc.find("config");
  if (cfg_it == doc.end()) throw Error(where, "the model has no config");
  const json* layers_json = nullptr;
  std::string model_name = "sequential";
  Shape build_shape;
  const LayerRef model_ref{where, 0, "", "Sequential"};
  if (cfg_it->is_array()) {  // Keras 1 / early Keras 2: config is the layer list
    layers_json = &*cfg_it;
  } else if (cfg_it->is_object()) {
    const json& cfg = *cfg_it;
    auto l = cfg.find("layers");
    if (l == cfg.end() || !l->is_array())
      throw Error(where, "the model's config has no layers list");
    layers_json = &*l;
    if (auto n = cfg.find("name");
        n != cfg.end() && n->is_string() && !n->get<std::string>().empty())
      model_name = n->get<std::string>();
    if (auto t = cfg.find("trainable"); t != cfg.end() && t->is_boolean() && !t->get<bool>())
      throw Error(where,
                  "model field trainable: a frozen model (trainable false) is not supported");
    // The model's own "dtype" (the global policy when Keras made it) is not read: Keras's
    // Sequential.from_config ignores it too; the layers' policies decide.
    if (auto b = cfg.find("build_input_shape"); b != cfg.end() && !b->is_null())
      build_shape = parse_shape(*b, true, model_ref, "build_input_shape");
  } else {
    throw Error(where, "the model's config is neither an object nor a layer list");
  }
  if (build_shape.empty()) {
    auto bc = doc.find("build_config");
    if (bc != doc.end() && bc->is_object()) {
      auto s = bc->find("input_shape");
      if (s != bc->end() && !s->is_null())
        build_shape = parse_shape(*s, true, model_ref, "build_config");
    }
  }
  if (layers_json->empty()) throw Error(where, "the model has no layers");
  if (layers_json->size() > 10000) throw Error(where, "the model has too many layers");

  std::vector<Layer> layers;
  std::set<std::string> names;
  Shape input;  // the model's declared per-sample input shape
  for (std::size_t i = 0; i < layers_json->size(); ++i) {
    ParsedLayer p = parse_layer((*layers_json)[i], i + 1, where, names);
    if (p.is_input) {
      if (i != 0)
        throw Error(where, fmt::format("layer {} '{}' (InputLayer): an InputLayer can only be the "
                                       "first layer",
                                       i + 1, printable(p.layer.name)));
      input = p.declared_input;
      p.layer.input_shape = input;
      layers.push_back(std::move(p.layer));
      continue;
    }
    const bool first_real =
        layers.empty() || (layers.size() == 1 && layers[0].type == LayerType::input);
    if (first_real && !p.declared_input.empty()) {
      if (!input.empty() && input != p.declared_input)
        throw Error(where, fmt::format("layer '{}' field batch_input_shape: {} disagrees with the "
                                       "InputLayer's {}",
                                       printable(p.layer.name), shape_to_string(p.declared_input),
                                       shape_to_string(input)));
      if (input.empty()) {
        input = p.declared_input;
        if (p.layer.type != LayerType::flatten) {
          Layer in = Input(input);
          in.name = p.layer.name.empty() ? "input_layer" : p.layer.name + "_input";
          if (names.count(in.name)) in.name += "_0";
          names.insert(in.name);
          layers.push_back(std::move(in));
        }
      }
    }
    layers.push_back(std::move(p.layer));
  }
  if (input.empty() && !build_shape.empty()) {
    input = build_shape;
    if (layers[0].type != LayerType::flatten) {
      Layer in = Input(input);
      in.name = names.count("input_layer") ? "input_layer_0" : "input_layer";
      layers.insert(layers.begin(), std::move(in));
    }
  }
  // InputLayer then Flatten: one Flatten that declares the input, as Keras's summary shows it.
  if (layers.size() >= 2 && layers[0].type == LayerType::input &&
      layers[1].type == LayerType::flatten) {
    layers.erase(layers.begin());
  }
  if (!input.empty() && layers[0].type == LayerType::flatten) layers[0].input_shape = input;
  if (!input.empty()) check_sizes(layers, input, where);
  for (const Layer& l : layers)
    if (l.type == LayerType::dense && l.units < 1) throw Error(where, "Dense needs units");
  try {
    return Sequential(std::move(layers), model_name);
  } catch (const Error& e) {
    throw Error(where, e.what());
  }
}

// ---- compile config --------------------------------------------------------------------------

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
  std::string low = cls;
  std::transform(low.begin(), low.end(), low.begin(),
                 [](unsigned char c) { return std::tolower(c); });
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
  refuse_if(
      "clipnorm", truthy("clipnorm"),
      "per-variable clipnorm is not supported (crossover clips the global norm: global_clipnorm)");
  refuse_if("amsgrad", truthy("amsgrad"), "AMSGrad is not supported");
  refuse_if("use_ema", truthy("use_ema"), "EMA of the weights is not supported");
  refuse_if("centered", truthy("centered"), "centered RMSprop is not supported");
  refuse_if("gradient_accumulation_steps", truthy("gradient_accumulation_steps"),
            "gradient accumulation is not supported");
  refuse_if("decay", truthy("decay"), "the legacy decay argument is not supported");

  double lr = -1;
  int64_t decay_steps = 0;
  double decay_rate = 1;
  bool staircase = false;
  if (auto it = cfg.find("learning_rate"); it != cfg.end() && !it->is_null()) {
    if (it->is_number()) {
      lr = it->get<double>();
    } else if (it->is_object() && it->contains("class_name") &&
               (*it)["class_name"] == "ExponentialDecay" && it->contains("config") &&
               (*it)["config"].is_object()) {
      const json& s = (*it)["config"];
      const std::string sw = who + " learning_rate";
      lr = number_field(s, "initial_learning_rate", -1, where, sw);
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
  const double wd = number_field(cfg, "weight_decay", 0, where, who);
  const double clip = number_field(cfg, "global_clipnorm", 0, where, who);
  const double clipvalue = number_field(cfg, "clipvalue", 0, where, who);
  OptimizerConfig out;
  try {
    if (low == "adam" || low == "adamw") {
      AdamOptions o;
      if (lr >= 0) o.learning_rate = lr;
      o.beta_1 = number_field(cfg, "beta_1", o.beta_1, where, who);
      o.beta_2 = number_field(cfg, "beta_2", o.beta_2, where, who);
      o.epsilon = number_field(cfg, "epsilon", o.epsilon, where, who);
      o.weight_decay = low == "adamw" ? number_field(cfg, "weight_decay", 0.004, where, who) : wd;
      o.clipnorm = clip;
      o.clipvalue = clipvalue;
      out = Adam(o);
    } else if (low == "sgd") {
      SGDOptions o;
      if (lr >= 0) o.learning_rate = lr;
      o.momentum = number_field(cfg, "momentum", 0, where, who);
      if (auto n = cfg.find("nesterov"); n != cfg.end() && n->is_boolean())
        o.nesterov = n->get<bool>();
      o.weight_decay = wd;
      o.clipnorm = clip;
      o.clipvalue = clipvalue;
      out = SGD(o);
    } else if (low == "rmsprop") {
      RMSpropOptions o;
      if (lr >= 0) o.learning_rate = lr;
      o.rho = number_field(cfg, "rho", o.rho, where, who);
      o.momentum = number_field(cfg, "momentum", 0, where, who);
      o.epsilon = number_field(cfg, "epsilon", o.epsilon, where, who);
      o.weight_decay = wd;
      o.clipnorm = clip;
      o.clipvalue = clipvalue;
      out = RMSprop(o);
    } else {
      throw Error(where, "compile_config field optimizer: " + printable(cls) +
                             " is not supported: crossover runs Adam, AdamW, SGD and RMSprop");
    }
    if (decay_steps > 0) out = with_exponential_decay(out, decay_steps, decay_rate, staircase);
  } catch (const Error& e) {
    const std::string m = e.what();
    if (m.rfind(where, 0) == 0) throw;
    throw Error(where, "compile_config field optimizer: " + m);
  }
  return out;
}

std::string parse_loss_name(const json& v, const std::string& where) {
  std::string name;
  if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    const std::string cls = v["class_name"].get<std::string>();
    const json& cfg =
        v.contains("config") && v["config"].is_object() ? v["config"] : json::object();
    if (auto f = cfg.find("from_logits"); f != cfg.end() && f->is_boolean() && f->get<bool>())
      throw Error(where,
                  "compile_config field loss: from_logits=True is not supported (end the model "
                  "with a softmax or sigmoid)");
    if (cls == "SparseCategoricalCrossentropy")
      name = "sparse_categorical_crossentropy";
    else if (cls == "CategoricalCrossentropy")
      name = "categorical_crossentropy";
    else if (cls == "BinaryCrossentropy")
      name = "binary_crossentropy";
    else if (cls == "MeanSquaredError")
      name = "mean_squared_error";
    else
      name = cls;
  } else {
    throw Error(where, "compile_config field loss: unreadable loss " + brief(v));
  }
  if (name == "mse") name = "mean_squared_error";
  if (name != "sparse_categorical_crossentropy" && name != "categorical_crossentropy" &&
      name != "binary_crossentropy" && name != "mean_squared_error")
    throw Error(where,
                "compile_config field loss: loss '" + printable(name) +
                    "' is not supported: crossover trains with sparse_categorical_crossentropy, "
                    "categorical_crossentropy, binary_crossentropy or mean_squared_error");
  return name;
}

void collect_metrics(const json& v, std::vector<std::string>& out, const std::string& where,
                     int depth) {
  if (v.is_null()) return;
  if (v.is_array()) {
    if (depth > 2) throw Error(where, "compile_config field metrics: nested too deeply");
    for (const json& m : v) collect_metrics(m, out, where, depth + 1);
    return;
  }
  std::string name;
  if (v.is_string())
    name = v.get<std::string>();
  else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string())
    name = v["class_name"].get<std::string>();
  else
    throw Error(where, "compile_config field metrics: unreadable metric " + brief(v));
  if (name == "accuracy" || name == "acc" || name == "Accuracy" ||
      name == "sparse_categorical_accuracy" || name == "SparseCategoricalAccuracy" ||
      name == "categorical_accuracy" || name == "CategoricalAccuracy") {
    if (std::find(out.begin(), out.end(), "accuracy") == out.end()) out.push_back("accuracy");
    return;
  }
  throw Error(where, "compile_config field metrics: metric '" + printable(name) +
                         "' is not supported: crossover reports accuracy");
}

// ---- writing ---------------------------------------------------------------------------------

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

ojson initializer(const char* cls) {
  return ojson{{"module", "keras.initializers"},
               {"class_name", cls},
               // The constant initializers (Zeros, Ones) take no seed; Keras refuses one.
               {"config", std::string(cls) == "Zeros" || std::string(cls) == "Ones"
                              ? ojson::object()
                              : ojson{{"seed", nullptr}}},
               {"registered_name", nullptr}};
}

ojson optimizer_json(const OptimizerConfig& o) {
  const char* cls = o.kind == OptimizerKind::adam  ? "Adam"
                    : o.kind == OptimizerKind::sgd ? "SGD"
                                                   : "RMSprop";
  const char* name = o.kind == OptimizerKind::adam  ? "adam"
                     : o.kind == OptimizerKind::sgd ? "SGD"
                                                    : "rmsprop";
  ojson lr;
  if (o.schedule.decay_steps > 0) {
    lr = ojson{{"module", "keras.optimizers.schedules"},
               {"class_name", "ExponentialDecay"},
               {"config",
                {{"initial_learning_rate", short_double(o.schedule.base)},
                 {"decay_steps", o.schedule.decay_steps},
                 {"decay_rate", short_double(o.schedule.decay_rate)},
                 {"staircase", o.schedule.staircase},
                 {"name", "ExponentialDecay"}}},
               {"registered_name", nullptr}};
  } else {
    lr = short_double(o.schedule.base);
  }
  auto opt_num = [](float v) -> ojson { return v > 0 ? ojson(short_double(v)) : ojson(nullptr); };
  ojson c{{"name", name},
          {"learning_rate", lr},
          {"weight_decay", opt_num(o.weight_decay)},
          {"clipnorm", nullptr},
          {"global_clipnorm", opt_num(o.clipnorm)},
          {"clipvalue", opt_num(o.clipvalue)},
          {"use_ema", false},
          {"ema_momentum", 0.99},
          {"ema_overwrite_frequency", nullptr},
          {"loss_scale_factor", nullptr},
          {"gradient_accumulation_steps", nullptr}};
  switch (o.kind) {
    case OptimizerKind::adam:
      c["beta_1"] = o.beta1;
      c["beta_2"] = o.beta2;
      c["epsilon"] = short_double(o.epsilon);
      c["amsgrad"] = false;
      break;
    case OptimizerKind::sgd:
      c["momentum"] = short_double(o.momentum);
      c["nesterov"] = o.nesterov;
      break;
    case OptimizerKind::rmsprop:
      c["rho"] = o.rho;
      c["momentum"] = short_double(o.momentum);
      c["epsilon"] = short_double(o.epsilon);
      c["centered"] = false;
      break;
  }
  return ojson{{"module", "keras.optimizers"},
               {"class_name", cls},
               {"config", c},
               {"registered_name", nullptr}};
}

ojson compile_config_json(const Sequential& model) {
  ojson metrics = ojson::array();
  for (const std::string& m : model.metrics()) metrics.push_back(m);
  return ojson{{"optimizer", optimizer_json(model.optimizer())},
               {"loss", model.loss_name()},
               {"loss_weights", nullptr},
               {"metrics", metrics},
               {"weighted_metrics", nullptr},
               {"run_eagerly", false},
               {"steps_per_execution", 1},
               {"jit_compile", false}};
}

}  // namespace

std::string model_to_json(const Sequential& model) {
  const std::vector<Layer>& layers = model.layers();
  const std::vector<Shape> output_shapes = model.layer_output_shapes();
  const Shape input = model.input_shape();
  const bool built = !input.empty();
  ojson out_layers = ojson::array();
  std::set<std::string> names;
  for (const Layer& l : layers) names.insert(l.name);

  // Keras 3 always lists the InputLayer first once the input shape is known.
  Shape shape = input;  // per sample, as it flows
  if (built && layers.front().type != LayerType::input) {
    std::string in_name = "input_layer";
    for (int k = 1; names.count(in_name); ++k) in_name = "input_layer_" + std::to_string(k);
    out_layers.push_back(ojson{{"module", "keras.layers"},
                               {"class_name", "InputLayer"},
                               {"config",
                                {{"batch_shape", batch_shape(input)},
                                 {"dtype", "float32"},
                                 {"sparse", false},
                                 {"ragged", false},
                                 {"name", in_name}}},
                               {"registered_name", nullptr}});
  }
  for (const Layer& l : layers) {
    ojson e{{"module", "keras.layers"}, {"class_name", std::string(layer_type_name(l.type))}};
    ojson c;
    if (l.type == LayerType::input) {
      c = ojson{{"batch_shape", batch_shape(l.input_shape)},
                {"dtype", "float32"},
                {"sparse", false},
                {"ragged", false},
                {"name", l.name}};
      e["config"] = c;
      e["registered_name"] = nullptr;
      out_layers.push_back(e);
      continue;
    }
    c = ojson{{"name", l.name}, {"trainable", true}, {"dtype", dtype_policy_json(l.dtype_policy)}};
    Shape next = shape;
    if (built) next = output_shapes[static_cast<std::size_t>(&l - layers.data())];
    switch (l.type) {
      case LayerType::flatten: {
        c["data_format"] = "channels_last";
        if (!shape.empty()) {
          int64_t n = 1;
          for (int64_t d : shape) n *= d;
          next = {n};
        }
        break;
      }
      case LayerType::dense:
        c["units"] = l.units;
        c["activation"] = std::string(activation_name(l.activation));
        c["use_bias"] = l.use_bias;
        c["kernel_initializer"] = initializer("GlorotUniform");
        c["bias_initializer"] = initializer("Zeros");
        c["kernel_regularizer"] = nullptr;
        c["bias_regularizer"] = nullptr;
        c["kernel_constraint"] = nullptr;
        c["bias_constraint"] = nullptr;
        if (!shape.empty()) next = {l.units};
        break;
      case LayerType::dropout:
        c["rate"] = short_double(l.rate);
        c["seed"] = nullptr;
        c["noise_shape"] = nullptr;
        break;
      case LayerType::activation:
        c["activation"] = std::string(activation_name(l.activation));
        break;
      case LayerType::conv2d:
        c["filters"] = l.units;
        c["kernel_size"] = ojson::array({l.window.h, l.window.w});
        c["strides"] = ojson::array({l.strides.h, l.strides.w});
        c["padding"] = std::string(padding_name(l.padding));
        c["data_format"] = "channels_last";
        c["dilation_rate"] = ojson::array({1, 1});
        c["groups"] = 1;
        c["activation"] = std::string(activation_name(l.activation));
        c["use_bias"] = l.use_bias;
        c["kernel_initializer"] = initializer("GlorotUniform");
        c["bias_initializer"] = initializer("Zeros");
        c["kernel_regularizer"] = nullptr;
        c["bias_regularizer"] = nullptr;
        c["activity_regularizer"] = nullptr;
        c["kernel_constraint"] = nullptr;
        c["bias_constraint"] = nullptr;
        break;
      case LayerType::max_pooling2d:
      case LayerType::average_pooling2d:
        c["pool_size"] = ojson::array({l.window.h, l.window.w});
        c["padding"] = std::string(padding_name(l.padding));
        c["strides"] = ojson::array({l.strides.h, l.strides.w});
        c["data_format"] = "channels_last";
        break;
      case LayerType::global_average_pooling2d:
        c["data_format"] = "channels_last";
        c["keepdims"] = false;
        break;
      case LayerType::reshape:
        c["target_shape"] = l.target_shape;
        break;
      case LayerType::batch_normalization:
        c["axis"] = -1;
        c["momentum"] = l.momentum;
        c["epsilon"] = l.epsilon;
        c["center"] = l.center;
        c["scale"] = l.scale;
        c["beta_initializer"] = initializer("Zeros");
        c["gamma_initializer"] = initializer("Ones");
        c["moving_mean_initializer"] = initializer("Zeros");
        c["moving_variance_initializer"] = initializer("Ones");
        c["beta_regularizer"] = nullptr;
        c["gamma_regularizer"] = nullptr;
        c["beta_constraint"] = nullptr;
        c["gamma_constraint"] = nullptr;
        c["synchronized"] = false;
        c["renorm"] = false;
        c["renorm_clipping"] = nullptr;
        c["renorm_momentum"] = 0.99;
        break;
      case LayerType::input:
        break;
    }
    e["config"] = c;
    e["registered_name"] = nullptr;
    // As Keras 3 writes it: a build_config for Flatten, Dense, Conv2D and BatchNormalization,
    // none for the layers whose build() does nothing (InputLayer, Dropout, Activation, pooling,
    // Reshape).
    const bool builds = l.type == LayerType::flatten || l.type == LayerType::dense ||
                        l.type == LayerType::conv2d || l.type == LayerType::batch_normalization;
    if (!shape.empty() && builds) e["build_config"] = ojson{{"input_shape", batch_shape(shape)}};
    out_layers.push_back(e);
    shape = next;
  }
  // The model's own policy: Keras writes the global one of when the model was made; crossover,
  // which has no global policy, its matrix layers' (float32 if they differ, which Keras allows).
  DTypePolicy model_policy = DTypePolicy::float32;
  try {
    model_policy = model_dtype_policy(layers);
  } catch (const Error&) {
  }
  ojson cfg{{"name", model.name()},
            {"trainable", true},
            {"dtype", dtype_policy_json(model_policy)},
            {"layers", out_layers}};
  if (built) cfg["build_input_shape"] = batch_shape(input);
  ojson doc{{"module", "keras"},
            {"class_name", "Sequential"},
            {"config", cfg},
            {"registered_name", nullptr}};
  if (built) doc["build_config"] = ojson{{"input_shape", batch_shape(input)}};
  if (model.compiled()) doc["compile_config"] = compile_config_json(model);
  return doc.dump();
}

Sequential model_from_json(std::string_view text, std::string_view where_sv) {
  const std::string where(where_sv);
  const json doc = parse_json(text, where);
  try {
    return sequential_from_doc(doc, where);
  } catch (const json::exception& e) {
    throw Error(where, std::string("unexpected JSON: ") + printable(e.what()));
  }
}

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
  t.loss = parse_loss_name(*loss, where);
  if (auto m = cc->find("metrics"); m != cc->end()) collect_metrics(*m, t.metrics, where, 0);
  for (const char* f : {"loss_weights", "weighted_metrics"})
    if (!is_null_or_absent(*cc, f))
      throw Error(where, std::string("compile_config field ") + f + ": not supported");
  return t;
}
}  // namespace

}  // namespace crossover
