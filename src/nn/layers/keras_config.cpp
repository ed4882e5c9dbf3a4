#include "nn/layers/keras_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

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
    if (!f->is_string() || f->get<std::string>() != "channels_last")
      fail("data_format", "data_format " + brief(*f) + " is not supported: only channels_last");
  }
}

ActivationKind Reader::activation(const char* key) {
  const json* p = find(key);
  if (!p) return ActivationKind::linear;
  const json& v = *p;
  std::string name;
  if (v.is_string()) {
    name = v.get<std::string>();
  } else if (v.is_object() && v.contains("config") && v["config"].is_string()) {
    // Keras 3 writes a non-built-in function as {"class_name": "function", "config": "name"}.
    name = v["config"].get<std::string>();
  } else {
    fail(key, "unreadable activation " + brief(v));
  }
  if (name == "None") return ActivationKind::linear;
  try {
    return parse_activation(name);
  } catch (const Error&) {
    fail(key, "activation '" + printable(name) +
                  "' is not supported: crossover runs linear, relu, sigmoid, tanh and softmax");
  }
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
// An initializer as a model file writes it: a name ("zeros") or {"class_name", "config",
// "registered_name"}; anything else is refused at `key`.
struct InitializerSpec {
  std::string cls;
  const json* cfg = nullptr;         // its "config" object, when given
  const json* registered = nullptr;  // its "registered_name" string, when given
};

InitializerSpec read_initializer(const Reader& r, const char* key, const json& v) {
  InitializerSpec spec;
  if (v.is_string()) {
    spec.cls = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    spec.cls = v["class_name"].get<std::string>();
    if (auto c = v.find("config"); c != v.end() && c->is_object()) spec.cfg = &*c;
    if (auto rn = v.find("registered_name"); rn != v.end() && rn->is_string())
      spec.registered = &*rn;
  } else {
    r.fail(key, "unreadable initializer " + brief(v));
  }
  return spec;
}
}  // namespace

void Reader::initializer(const char* key, bool kernel) {
  const json* p = find(key);
  if (!p) return;  // the layer's default
  const auto [cls, cfg, registered] = read_initializer(*this, key, *p);
  if (registered && registered->get<std::string>() != cls)
    fail(key, "the custom initializer '" + printable(registered->get<std::string>()) +
                  "' is not supported");
  const std::string low = lower(cls);
  bool ok = false;
  if (kernel) {
    ok = low == "glorotuniform" || low == "glorot_uniform";
    if (low == "variancescaling" && cfg) {
      // GlorotUniform as VarianceScaling(scale=1, mode="fan_avg", distribution="uniform").
      // (a structured binding captured by a lambda is C++20 that clang 14 refuses: copy it)
      auto field = [c = cfg](const char* name) -> const json* {
        auto it = c->find(name);
        return it == c->end() ? nullptr : &*it;
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
    fail(key, fmt::format("initializer {} is not supported: crossover initializes kernels with "
                          "GlorotUniform and biases with Zeros",
                          printable(cls)));
}

void Reader::constant_initializer(const char* key, double value) {
  const json* p = find(key);
  if (!p) return;
  const auto [cls, cfg, registered] = read_initializer(*this, key, *p);
  const std::string low = lower(cls);
  bool ok = value == 0.0 ? (low == "zeros" || low == "zero") : (low == "ones" || low == "one");
  if (low == "constant" && cfg) {
    auto val = cfg->find("value");
    ok = val != cfg->end() && val->is_number() && val->get<double>() == value;
  }
  if (!ok)
    fail(key, fmt::format("initializer {} is not supported: only {} (the default)", printable(cls),
                          value == 0.0 ? "Zeros" : "Ones"));
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

ojson initializer_json(const char* cls) {
  return ojson{{"module", "keras.initializers"},
               {"class_name", cls},
               // The constant initializers (Zeros, Ones) take no seed; Keras refuses one.
               {"config", std::string(cls) == "Zeros" || std::string(cls) == "Ones"
                              ? ojson::object()
                              : ojson{{"seed", nullptr}}},
               {"registered_name", nullptr}};
}

}  // namespace crossover::keras_config
