// LayerNormalization over the last axis: each sample's last-axis vector of n features becomes
// y = (x - mean) / sqrt(variance + epsilon) * gamma + beta, with that vector's own mean and biased
// variance, the same in fit, evaluate and predict (no moving statistics).
#include "nn/layers/layer_normalization.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer LayerNormalization(double epsilon, bool center, bool scale) {
  if (!(epsilon > 0.0 && epsilon < 1e30))
    throw Error("LayerNormalization", "epsilon must be positive, got " + std::to_string(epsilon));
  Layer l;
  l.type = LayerType::layer_normalization;
  LayerNormArgs& a = l.args<LayerNormArgs>();
  a.epsilon = epsilon;
  a.center = center;
  a.scale = scale;
  return l;
}

namespace {

using namespace keras_config;

class LayerNormalizationKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::layer_normalization; }
  std::string_view class_name() const override { return "LayerNormalization"; }
  std::string_view base_name() const override { return "layer_normalization"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::keyword;
    return keras_config::Arguments{{"axis", -1},
                                   {"epsilon", 0.001},
                                   {"center", true},
                                   {"scale", true},
                                   {"beta_initializer", "zeros"},
                                   {"gamma_initializer", "ones"},
                                   {"beta_regularizer", nullptr},
                                   {"gamma_regularizer", nullptr},
                                   {"beta_constraint", nullptr},
                                   {"gamma_constraint", nullptr},
                                   keyword("rms_scaling", false)};
  }
  bool keeps_shape() const override { return true; }
  std::vector<std::string> weight_names(const Layer& l) const override {
    std::vector<std::string> names;
    const LayerNormArgs& a = l.args<LayerNormArgs>();
    if (a.scale) names.push_back(l.name + "/gamma");
    if (a.center) names.push_back(l.name + "/beta");
    return names;
  }

  // ---- command line: layernorm[:EPSILON] ----
  std::string_view cli_name() const override { return "layernorm"; }
  std::string_view cli_syntax() const override { return "layernorm[:EPSILON]"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() > 2) return std::nullopt;
    return LayerNormalization(f.number(1, 1e-3));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const LayerNormArgs& a = l.args<LayerNormArgs>();
    j["epsilon"] = a.epsilon;
    j["center"] = a.center;
    j["scale"] = a.scale;
  }

  // ---- Keras config (Keras 3: axis -1, or [-1] once built; tf.keras 2: [last axis]) ----
  void from_keras(Reader& cfg, Layer& l) const override {
    LayerNormArgs& a = l.args<LayerNormArgs>();
    a.axis = cfg.last_axis();
    a.epsilon = cfg.number("epsilon", a.epsilon);
    if (!(a.epsilon > 0.0 && a.epsilon < 1e30))
      cfg.fail("epsilon", fmt::format("epsilon must be positive, got {}", a.epsilon));
    a.center = cfg.flag("center", a.center);
    a.scale = cfg.flag("scale", a.scale);
    cfg.refuse_true("rms_scaling", "rms_scaling true is not supported: only false");
    a.beta_initializer = cfg.initializer("beta_initializer", Zeros());
    a.gamma_initializer = cfg.initializer("gamma_initializer", Ones());
    cfg.weight_regularizers({{"beta", &a.beta_regularizer}, {"gamma", &a.gamma_regularizer}});
  }
  // As Keras 3.15 writes a built layer (its build() turns axis -1 into [-1]).
  void to_keras(const Layer& l, ojson& c) const override {
    const LayerNormArgs& a = l.args<LayerNormArgs>();
    c["axis"] = ojson::array({-1});
    c["epsilon"] = a.epsilon;
    c["center"] = a.center;
    c["scale"] = a.scale;
    c["rms_scaling"] = false;
    c["beta_initializer"] = initializer_json(a.beta_initializer);
    c["gamma_initializer"] = initializer_json(a.gamma_initializer);
    write_weight_regularizers(c, {{"beta", &a.beta_regularizer}, {"gamma", &a.gamma_regularizer}});
  }
  bool keras_build_config() const override { return true; }

  // ---- engine ----
  // gamma (when scale), beta (when center): (n,) each, n the last axis.
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const LayerNormArgs& a = l.args<LayerNormArgs>();
    if (a.axis != -1 && a.axis != static_cast<int64_t>(b.shape.size()))
      throw Error(l.name, fmt::format("LayerNormalization axis {} is not supported on samples "
                                      "of shape {}: only the last axis (-1)",
                                      a.axis, shape_to_string(b.shape)));
    const int64_t n = b.shape.back();
    LayerState& li = b.state;
    // norm.spatial: the rows of n features per sample.
    li.own<BatchNormShape>() = {.spatial = li.in_width / n,
                                .channels = n,
                                .epsilon = static_cast<float>(a.epsilon),
                                .scale = a.scale,
                                .center = a.center};
    if (a.scale) b.regularize(b.add_param("gamma", {n}, a.gamma_initializer), a.gamma_regularizer);
    if (a.center) b.regularize(b.add_param("beta", {n}, a.beta_initializer), a.beta_regularizer);
  }
  // Each row's mean and 1 / sqrt(variance + epsilon), which the backward pass reads.
  std::size_t workspace_bytes(const Layer&, const LayerState& li, Backend&,
                              int64_t batch) const override {
    return 2 * static_cast<std::size_t>(batch * li.own<BatchNormShape>().spatial) * sizeof(float);
  }

  // x, y: (m * spatial, n). Training keeps the rows' statistics for the backward pass.
  void forward(const ForwardStep& s) const override {
    const BatchNormShape& norm = s.state.own<BatchNormShape>();
    const int64_t rows = s.m * norm.spatial;
    auto* stats = s.training ? static_cast<float*>(s.workspace) : nullptr;
    s.backend.layernorm_forward(s.x, s.value("gamma"), s.value("beta"), s.y, stats,
                                stats ? stats + rows : nullptr, rows, norm.channels, norm.epsilon);
  }
  // dx (into the spare buffer), dgamma, dbeta (not when frozen) from the saved row statistics.
  void backward(BackwardStep& s) const override {
    const BatchNormShape& norm = s.state.own<BatchNormShape>();
    const int64_t rows = s.m * norm.spatial;
    const auto* stats = static_cast<const float*>(s.workspace);
    s.backend.layernorm_backward(s.x, s.g, s.value("gamma"), stats, stats + rows, s.spare,
                                 s.trainable ? s.grad("gamma") : nullptr,
                                 s.trainable ? s.grad("beta") : nullptr, rows, norm.channels);
    s.swap();
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& layer_normalization_layer_kind() {
  static const LayerNormalizationKind kind;
  return kind;
}

}  // namespace crossover
