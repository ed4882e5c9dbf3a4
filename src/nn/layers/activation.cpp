// Activation: applies an activation on its own.
#include "nn/layers/activation.h"

#include "core/error.h"
#include "nn/layers/activation_kind.h"

namespace crossover {

Layer Activation(std::string_view activation) {
  Layer l;
  l.type = LayerType::activation;
  l.args<ActivationArgs>().activation = layer_activation(activation);
  return l;
}

Layer Sqrt() {
  Layer l;
  l.type = LayerType::activation;
  l.args<ActivationArgs>().activation = {ActivationKind::sqrt, 0.0f};
  return l;
}

void AppliesActivationKind::forward(const ForwardStep& s) const {
  s.backend.activation_forward(forward_activation(s), s.state.activation.alpha, s.x, s.y,
                               activation_rows(s.state, s.m), activation_cols(s.state));
}

// In place on g, unless the loss op (or a fused dropout) applied it; from the layer's input x
// where the gradient needs it (gelu, swish).
void AppliesActivationKind::backward(BackwardStep& s) const {
  if (backward_applies_activation(s))
    s.backend.activation_backward(s.state.activation.kind, s.state.activation.alpha, s.x, s.y, s.g,
                                  s.g, activation_rows(s.state, s.m), activation_cols(s.state));
  s.activation_done = false;
}

namespace {

using namespace keras_config;

class ActivationLayerKind final : public AppliesActivationKind {
 public:
  LayerType type() const override { return LayerType::activation; }
  std::string_view class_name() const override { return "Activation"; }
  std::string_view base_name() const override { return "activation"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{required("activation", "relu")};
  }

  // ---- command line: activation:NAME ----
  std::string_view cli_name() const override { return "activation"; }
  std::string_view cli_syntax() const override { return "activation:NAME"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 2) return std::nullopt;
    return Activation(f.text(1));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["activation"] = activation_name(l.args<ActivationArgs>().activation.kind);
  }

  // ---- Keras config ----
  void from_keras(Reader& cfg, Layer& l) const override {
    if (!cfg.find("activation")) cfg.fail("activation", "Activation needs an activation");
    cfg.activation(l.args<ActivationArgs>().activation);
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["activation"] = activation_json(l.args<ActivationArgs>().activation);
  }
};

}  // namespace

const LayerKind& activation_layer_kind() {
  static const ActivationLayerKind kind;
  return kind;
}

}  // namespace crossover
