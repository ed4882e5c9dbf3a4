// BatchNormalization over the last axis: y = gamma * (x - mean) / sqrt(variance + epsilon) + beta,
// the batch's statistics in fit, the moving ones in evaluate and predict.
#include "nn/layers/batch_normalization.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer BatchNormalization(double momentum, double epsilon, bool center, bool scale) {
  if (!(momentum >= 0.0 && momentum <= 1.0))
    throw Error("BatchNormalization",
                "momentum must be in [0, 1], got " + std::to_string(momentum));
  if (!(epsilon > 0.0 && epsilon < 1e30))
    throw Error("BatchNormalization", "epsilon must be positive, got " + std::to_string(epsilon));
  Layer l;
  l.type = LayerType::batch_normalization;
  BatchNormArgs& a = l.args<BatchNormArgs>();
  a.momentum = momentum;
  a.epsilon = epsilon;
  a.center = center;
  a.scale = scale;
  return l;
}

namespace {

using namespace keras_config;

// A frozen layer's backward pass: the inference pass without beta (dx = g * gamma / sqrt(variance
// + epsilon) when given a zero mean).
BatchNormShape frozen_gradient_shape(BatchNormShape s) {
  s.center = false;
  return s;
}

class BatchNormalizationKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::batch_normalization; }
  std::string_view class_name() const override { return "BatchNormalization"; }
  std::string_view base_name() const override { return "batch_normalization"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"axis", -1},
                                   {"momentum", 0.99},
                                   {"epsilon", 0.001},
                                   {"center", true},
                                   {"scale", true},
                                   {"beta_initializer", "zeros"},
                                   {"gamma_initializer", "ones"},
                                   {"moving_mean_initializer", "zeros"},
                                   {"moving_variance_initializer", "ones"},
                                   {"beta_regularizer", nullptr},
                                   {"gamma_regularizer", nullptr},
                                   {"beta_constraint", nullptr},
                                   {"gamma_constraint", nullptr},
                                   {"renorm", false},
                                   {"renorm_clipping", nullptr},
                                   {"renorm_momentum", 0.99},
                                   {"synchronized", false}};
  }
  bool keeps_shape() const override { return true; }
  // Keras saves a layer's trainable variables, then its non-trainable ones.
  std::vector<std::string> weight_names(const Layer& l) const override {
    std::vector<std::string> names;
    const BatchNormArgs& a = l.args<BatchNormArgs>();
    if (a.scale) names.push_back(l.name + "/gamma");
    if (a.center) names.push_back(l.name + "/beta");
    names.push_back(l.name + "/moving_mean");
    names.push_back(l.name + "/moving_variance");
    return names;
  }

  // ---- command line: batchnorm[:MOMENTUM[:EPSILON]] ----
  std::string_view cli_name() const override { return "batchnorm"; }
  std::string_view cli_syntax() const override { return "batchnorm[:MOMENTUM[:EPSILON]]"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() > 3) return std::nullopt;
    return BatchNormalization(f.number(1, 0.99), f.number(2, 1e-3));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const BatchNormArgs& a = l.args<BatchNormArgs>();
    j["momentum"] = a.momentum;
    j["epsilon"] = a.epsilon;
    j["center"] = a.center;
    j["scale"] = a.scale;
  }

  // ---- Keras config ----
  void from_keras(Reader& cfg, Layer& l) const override {
    BatchNormArgs& a = l.args<BatchNormArgs>();
    a.axis = cfg.last_axis();
    a.momentum = cfg.number("momentum", a.momentum);
    a.epsilon = cfg.number("epsilon", a.epsilon);
    if (!(a.momentum >= 0.0 && a.momentum <= 1.0))
      cfg.fail("momentum", fmt::format("momentum must be in [0, 1], got {}", a.momentum));
    if (!(a.epsilon > 0.0 && a.epsilon < 1e30))
      cfg.fail("epsilon", fmt::format("epsilon must be positive, got {}", a.epsilon));
    a.center = cfg.flag("center", a.center);
    a.scale = cfg.flag("scale", a.scale);
    a.beta_initializer = cfg.initializer("beta_initializer", Zeros());
    a.gamma_initializer = cfg.initializer("gamma_initializer", Ones());
    a.moving_mean_initializer = cfg.initializer("moving_mean_initializer", Zeros());
    a.moving_variance_initializer = cfg.initializer("moving_variance_initializer", Ones());
    cfg.weight_regularizers({{"beta", &a.beta_regularizer}, {"gamma", &a.gamma_regularizer}});
    for (const char* f : {"synchronized", "renorm"})
      if (const json* v = cfg.find(f); v && !flag_is_false(*v))
        cfg.fail(f, std::string(f) + " " + brief(*v) + " is not supported: only false");
    // renorm_clipping and renorm_momentum only matter with renorm; their defaults are accepted.
    cfg.refuse_set("renorm_clipping", "renorm is not supported");
    cfg.accept({"renorm_momentum"});
  }
  void to_keras(const Layer& l, ojson& c) const override {
    const BatchNormArgs& a = l.args<BatchNormArgs>();
    c["axis"] = -1;
    c["momentum"] = a.momentum;
    c["epsilon"] = a.epsilon;
    c["center"] = a.center;
    c["scale"] = a.scale;
    c["beta_initializer"] = initializer_json(a.beta_initializer);
    c["gamma_initializer"] = initializer_json(a.gamma_initializer);
    c["moving_mean_initializer"] = initializer_json(a.moving_mean_initializer);
    c["moving_variance_initializer"] = initializer_json(a.moving_variance_initializer);
    write_weight_regularizers(c, {{"beta", &a.beta_regularizer}, {"gamma", &a.gamma_regularizer}});
    c["synchronized"] = false;
    c["renorm"] = false;
    c["renorm_clipping"] = nullptr;
    c["renorm_momentum"] = 0.99;
  }
  bool keras_build_config() const override { return true; }

  // ---- engine ----
  void check_device(const Layer& l, const Backend& backend, int ranks) const override {
    if (ranks > 1)
      throw Error(l.name, fmt::format("BatchNormalization over {} ranks is not supported yet: each "
                                      "rank's batch statistics would differ from one process's",
                                      ranks));
    if (!backend.has_batch_norm())
      throw Error(l.name, std::string(class_name()) + " is not available on " +
                              backend.device_name() + " (its backend has no batch normalization)");
  }

  // gamma (when scale), beta (when center), moving_mean, moving_variance: (channels,) each.
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const BatchNormArgs& a = l.args<BatchNormArgs>();
    // Keras's axis -1: one mean and variance per last-axis entry, over everything else.
    if (a.axis != -1 && a.axis != static_cast<int64_t>(b.shape.size()))
      throw Error(l.name, fmt::format("BatchNormalization axis {} is not supported on samples "
                                      "of shape {}: only the last axis (-1)",
                                      a.axis, shape_to_string(b.shape)));
    const int64_t channels = b.shape.back();
    LayerState& li = b.state;
    li.own<BatchNormShape>() = {.spatial = li.in_width / channels,
                                .channels = channels,
                                .epsilon = static_cast<float>(a.epsilon),
                                .scale = a.scale,
                                .center = a.center};
    if (a.scale)
      b.regularize(b.add_param("gamma", {channels}, a.gamma_initializer), a.gamma_regularizer);
    if (a.center)
      b.regularize(b.add_param("beta", {channels}, a.beta_initializer), a.beta_regularizer);
    b.add_param("moving_mean", {channels}, a.moving_mean_initializer, false);
    b.add_param("moving_variance", {channels}, a.moving_variance_initializer, false);
  }
  // The batch's mean and variance (channels each), which the backward pass reads; frozen, a
  // channel of zeros (the backward pass's mean).
  std::size_t workspace_bytes(const Layer& l, const LayerState& li, Backend& backend,
                              int64_t batch) const override {
    const BatchNormShape& norm = li.own<BatchNormShape>();
    backend.batchnorm_prepare(norm, batch);
    if (!l.trainable) backend.batchnorm_prepare(frozen_gradient_shape(norm), batch);
    return 2 * static_cast<std::size_t>(norm.channels) * sizeof(float);
  }

  // Training: normalized by the batch's statistics (saved); otherwise, and in training when the
  // layer is frozen (Keras's inference mode of a BatchNormalization with trainable=False), by
  // the moving ones.
  void forward(const ForwardStep& s) const override {
    const BatchNormShape& norm = s.state.own<BatchNormShape>();
    if (s.training && s.trainable) {
      auto* stats = static_cast<float*>(s.workspace);
      s.backend.batchnorm_forward_training(norm, s.x, s.value("gamma"), s.value("beta"), s.y, stats,
                                           stats + norm.channels, s.m);
    } else {
      s.backend.batchnorm_forward_inference(norm, s.x, s.value("gamma"), s.value("beta"),
                                            s.value("moving_mean"), s.value("moving_variance"), s.y,
                                            s.m);
    }
  }
  // moving = moving * momentum + batch * (1 - momentum), after the training forward pass (Keras
  // updates them in the layer's call).
  bool has_moving_statistics() const override { return true; }
  void update_moving_statistics(const LayerStep& s) const override {
    if (!s.trainable) return;  // frozen: inference mode, the statistics kept
    const BatchNormShape& norm = s.state.own<BatchNormShape>();
    const auto* stats = static_cast<const float*>(s.workspace);
    s.backend.batchnorm_update_moving(norm, stats, stats + norm.channels, s.value("moving_mean"),
                                      s.value("moving_variance"),
                                      s.layer.args<BatchNormArgs>().momentum);
  }
  // dx, dgamma, dbeta from the saved batch statistics; dx even for the first layer with
  // parameters (the same primitive makes all three), into the spare buffer.
  // Frozen, the layer is y = x * gamma / sqrt(moving_variance + epsilon) + (constants): dx = g *
  // gamma / sqrt(moving_variance + epsilon), which is the inference pass applied to g with a
  // zero mean and no beta; no dgamma or dbeta.
  void backward(BackwardStep& s) const override {
    const BatchNormShape& norm = s.state.own<BatchNormShape>();
    if (!s.trainable) {
      auto* zeros = static_cast<float*>(s.workspace);
      s.backend.fill(zeros, 0.0f, norm.channels);
      s.backend.batchnorm_forward_inference(frozen_gradient_shape(norm), s.g, s.value("gamma"),
                                            nullptr, zeros, s.value("moving_variance"), s.spare,
                                            s.m);
      s.swap();
      s.activation_done = false;
      return;
    }
    const auto* stats = static_cast<const float*>(s.workspace);
    s.backend.batchnorm_backward(norm, s.x, s.g, s.value("gamma"), stats, stats + norm.channels,
                                 s.spare, s.grad("gamma"), s.grad("beta"), s.m);
    s.swap();
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& batch_normalization_layer_kind() {
  static const BatchNormalizationKind kind;
  return kind;
}

}  // namespace crossover
