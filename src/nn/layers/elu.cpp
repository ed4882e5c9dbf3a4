// ELU: y = x where x > 0, else alpha * (exp(x) - 1) (Keras's layer; the activation "elu" in
// Dense and Activation is the same function with alpha 1).
#include <fmt/format.h>

#include "core/error.h"
#include "nn/layers/activation_kind.h"

namespace crossover {

Layer ELU(double alpha) {
  // The gradient is taken from the output (alpha * exp(x) = y + alpha), which needs alpha >= 0.
  if (!(alpha >= 0.0)) throw Error("ELU", fmt::format("alpha must be at least 0, got {}", alpha));
  Layer l;
  l.type = LayerType::elu;
  l.args<ActivationArgs>().activation = {ActivationKind::elu, static_cast<float>(alpha)};
  return l;
}

namespace {

using namespace keras_config;

class ELUKind final : public AppliesActivationKind {
 public:
  LayerType type() const override { return LayerType::elu; }
  std::string_view class_name() const override { return "ELU"; }
  std::string_view base_name() const override { return "elu"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"alpha", 1.0}};
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["alpha"] = keras_config::decimal(l.args<ActivationArgs>().activation.alpha);
  }

  void from_keras(Reader& cfg, Layer& l) const override {
    const double a = cfg.number("alpha", 1.0);
    try {
      const Layer made = ELU(a);
      l.args<ActivationArgs>() = made.args<ActivationArgs>();
    } catch (const Error&) {
      cfg.fail("alpha", fmt::format("must be at least 0, got {}", a));
    }
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["alpha"] = decimal(l.args<ActivationArgs>().activation.alpha);
  }
};

}  // namespace

const LayerKind& elu_layer_kind() {
  static const ELUKind kind;
  return kind;
}

}  // namespace crossover
