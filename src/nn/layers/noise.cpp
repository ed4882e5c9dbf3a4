// GaussianNoise, GaussianDropout and SpatialDropout2D: noise drawn in training from the noise
// stream of the model's seed (core/philox.h; Backend::noise_forward), per value or per sample and
// channel; the identity in evaluate and predict (the output is then the input's buffer), as
// Dropout. A multiplicative layer keeps its factors (m * n floats) for the backward pass, which
// multiplies the gradient by them (binary_forward); GaussianNoise's gradient is the identity. At
// stddev or rate 0 a training pass copies the input and draws nothing. No weights.
#include "nn/layers/noise.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "nn/layers/kind.h"
#include "nn/layers/window.h"

namespace crossover {
namespace {

// `value` in [0, 1] (inclusive: GaussianNoise's stddev) or [0, 1).
void require_fraction(double value, bool one_allowed, const char* layer, const char* argument) {
  if (!(value >= 0.0 && (one_allowed ? value <= 1.0 : value < 1.0)))
    throw Error(layer, fmt::format("{} must be in [0, 1{}, got {}", argument,
                                   one_allowed ? "]" : ")", value));
}

}  // namespace

Layer GaussianNoise(double stddev) {
  require_fraction(stddev, true, "GaussianNoise", "stddev");
  Layer l;
  l.type = LayerType::gaussian_noise;
  l.args<GaussianNoiseArgs>().stddev = static_cast<float>(stddev);
  return l;
}

Layer GaussianDropout(double rate) {
  require_fraction(rate, false, "GaussianDropout", "rate");
  Layer l;
  l.type = LayerType::gaussian_dropout;
  l.args<GaussianDropoutArgs>().rate = static_cast<float>(rate);
  return l;
}

Layer SpatialDropout2D(double rate) {
  require_fraction(rate, false, "SpatialDropout2D", "rate");
  Layer l;
  l.type = LayerType::spatial_dropout2d;
  l.args<SpatialDropoutArgs>().rate = static_cast<float>(rate);
  return l;
}

namespace {

using namespace keras_config;

// The config's number `key`, required, in [0, 1] or [0, 1).
float read_fraction(Reader& cfg, const char* key, bool one_allowed, const char* layer) {
  const json* v = cfg.find(key);
  if (!v) cfg.fail(key, fmt::format("{} needs a {}", layer, key));
  const bool fits = v->is_number() && v->get<double>() >= 0.0 &&
                    (one_allowed ? v->get<double>() <= 1.0 : v->get<double>() < 1.0);
  if (!fits)
    cfg.fail(key, fmt::format("{} must be a number in [0, 1{}, got {}", key,
                              one_allowed ? "]" : ")", brief(*v)));
  return static_cast<float>(v->get<double>());
}

// What the three share: training-only noise, the identity outside training.
class NoiseKindBase : public LayerKind {
 public:
  bool identity_outside_training(const Layer&) const override { return true; }
  bool random_in_training(const Layer& l) const override { return amount(l) > 0.0f; }
  // The factors the backward multiplies by (none for additive noise, none at 0).
  std::size_t workspace_bytes(const Layer& l, const LayerState& li, Backend&,
                              int64_t batch) const override {
    if (!multiplies() || amount(l) == 0.0f) return 0;
    return static_cast<std::size_t>(batch * li.out_width) * sizeof(float);
  }

  // In training: y = x + noise (GaussianNoise) or x * factor (the others); a copy of x at 0.
  void forward(const ForwardStep& s) const override {
    if (!s.training) return;  // the output is the input's buffer
    const int64_t n = s.state.out_width;
    if (amount(s.layer) == 0.0f) {
      s.backend.copy_columns(s.x, n, 0, s.y, n, 0, s.m, n);
      return;
    }
    s.backend.noise_forward(noise_kind(), s.x, s.y, static_cast<float*>(s.workspace), s.m, n,
                            channels(s.state), backend_amount(s.layer), s.seed, s.index, s.counters,
                            s.first_row);
  }
  // dx = g * factor; the identity for additive noise and at 0.
  void backward(BackwardStep& s) const override {
    s.activation_done = false;
    if (!multiplies() || amount(s.layer) == 0.0f) return;
    BinaryShape shape;
    shape.rows = s.m;
    shape.cols = s.state.out_width;
    s.backend.binary_forward(BinaryOp::multiply, shape, s.g, static_cast<const float*>(s.workspace),
                             s.spare);
    s.swap();
  }

 protected:
  virtual float amount(const Layer& l) const = 0;  // stddev or rate
  virtual bool multiplies() const { return true; }
  virtual NoiseKind noise_kind() const = 0;
  // What noise_forward takes as its amount.
  virtual float backend_amount(const Layer& l) const { return amount(l); }
  virtual int64_t channels(const LayerState&) const { return 1; }
};

class GaussianNoiseKind final : public NoiseKindBase {
 public:
  LayerType type() const override { return LayerType::gaussian_noise; }
  std::string_view class_name() const override { return "GaussianNoise"; }
  std::string_view base_name() const override { return "gaussian_noise"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{required("stddev", 0.1), {"seed", nullptr}};
  }
  bool keeps_shape() const override { return true; }

  // ---- command line: gnoise:STDDEV ----
  std::string_view cli_name() const override { return "gnoise"; }
  std::string_view cli_syntax() const override { return "gnoise:STDDEV"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 2) return std::nullopt;
    return GaussianNoise(f.number(1, 0.0));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["stddev"] = l.args<GaussianNoiseArgs>().stddev;
  }

  // ---- Keras config: stddev, seed ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.args<GaussianNoiseArgs>().stddev = read_fraction(cfg, "stddev", true, "GaussianNoise");
    // "seed": crossover's noise comes from its own seed (--seed / CompileOptions.seed), as
    // Dropout's masks.
    cfg.accept({"seed"});
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["stddev"] = decimal(l.args<GaussianNoiseArgs>().stddev);
    c["seed"] = nullptr;
  }

 protected:
  float amount(const Layer& l) const override { return l.args<GaussianNoiseArgs>().stddev; }
  bool multiplies() const override { return false; }
  NoiseKind noise_kind() const override { return NoiseKind::gaussian_noise; }
};

class GaussianDropoutKind final : public NoiseKindBase {
 public:
  LayerType type() const override { return LayerType::gaussian_dropout; }
  std::string_view class_name() const override { return "GaussianDropout"; }
  std::string_view base_name() const override { return "gaussian_dropout"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{required("rate", 0.1), {"seed", nullptr}};
  }
  bool keeps_shape() const override { return true; }

  // ---- command line: gdropout:RATE ----
  std::string_view cli_name() const override { return "gdropout"; }
  std::string_view cli_syntax() const override { return "gdropout:RATE"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 2) return std::nullopt;
    return GaussianDropout(f.number(1, 0.0));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["rate"] = l.args<GaussianDropoutArgs>().rate;
  }

  // ---- Keras config: rate, seed ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.args<GaussianDropoutArgs>().rate = read_fraction(cfg, "rate", false, "GaussianDropout");
    cfg.accept({"seed"});  // as Dropout's
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["rate"] = decimal(l.args<GaussianDropoutArgs>().rate);
    c["seed"] = nullptr;
  }

 protected:
  float amount(const Layer& l) const override { return l.args<GaussianDropoutArgs>().rate; }
  NoiseKind noise_kind() const override { return NoiseKind::gaussian_dropout; }
  // The noise's standard deviation, sqrt(rate / (1 - rate)), computed in double as Python's
  // math.sqrt computes Keras's.
  float backend_amount(const Layer& l) const override {
    const double rate = l.args<GaussianDropoutArgs>().rate;
    return static_cast<float>(std::sqrt(rate / (1.0 - rate)));
  }
};

class SpatialDropout2DKind final : public NoiseKindBase {
 public:
  LayerType type() const override { return LayerType::spatial_dropout2d; }
  std::string_view class_name() const override { return "SpatialDropout2D"; }
  std::string_view base_name() const override { return "spatial_dropout2d"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{
        required("rate", 0.1), {"data_format", nullptr}, {"seed", nullptr}};
  }
  bool takes_images() const override { return true; }

  // ---- command line: sdropout:RATE ----
  std::string_view cli_name() const override { return "sdropout"; }
  std::string_view cli_syntax() const override { return "sdropout:RATE"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 2) return std::nullopt;
    return SpatialDropout2D(f.number(1, 0.0));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["rate"] = l.args<SpatialDropoutArgs>().rate;
  }

  // ---- Keras config: rate, seed, data_format. Keras 3.15's get_config is its own: rate, seed,
  // name, dtype (the variables' dtype, "float32", not a policy), data_format; no "trainable", which
  // its constructor does not take ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.args<SpatialDropoutArgs>().rate = read_fraction(cfg, "rate", false, "SpatialDropout2D");
    cfg.channels_last();
    cfg.accept({"seed"});  // as Dropout's
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c = ojson{{"rate", decimal(l.args<SpatialDropoutArgs>().rate)},
              {"seed", nullptr},
              {"name", l.name},
              {"dtype", "float32"},
              {"data_format", "channels_last"}};
  }

  // ---- engine ----
  // Whole channels of (height, width, channels) samples.
  void build(LayerBuilder& b) const override { require_image(b.layer, b.shape); }

 protected:
  float amount(const Layer& l) const override { return l.args<SpatialDropoutArgs>().rate; }
  NoiseKind noise_kind() const override { return NoiseKind::spatial_dropout; }
  int64_t channels(const LayerState& s) const override { return s.out_shape.back(); }
};

}  // namespace

const LayerKind& gaussian_noise_layer_kind() {
  static const GaussianNoiseKind kind;
  return kind;
}

const LayerKind& gaussian_dropout_layer_kind() {
  static const GaussianDropoutKind kind;
  return kind;
}

const LayerKind& spatial_dropout2d_layer_kind() {
  static const SpatialDropout2DKind kind;
  return kind;
}

}  // namespace crossover
