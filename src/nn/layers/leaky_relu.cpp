// LeakyReLU: y = x where x >= 0, else negative_slope * x (Keras's layer; the activation
// "leaky_relu" in Dense and Activation is the same function with slope 0.2).
#include <fmt/format.h>

#include "core/error.h"
#include "nn/layers/activation_kind.h"

namespace crossover {

Layer LeakyReLU(double negative_slope) {
  if (!(negative_slope >= 0.0))
    throw Error("LeakyReLU",
                fmt::format("negative_slope must be at least 0, got {}", negative_slope));
  Layer l;
  l.type = LayerType::leaky_relu;
  l.args<ActivationArgs>().activation = {ActivationKind::leaky_relu,
                                         static_cast<float>(negative_slope)};
  return l;
}

namespace {

using namespace keras_config;

class LeakyReLUKind final : public AppliesActivationKind {
 public:
  LayerType type() const override { return LayerType::leaky_relu; }
  std::string_view class_name() const override { return "LeakyReLU"; }
  std::string_view base_name() const override { return "leaky_re_lu"; }
  // tf.keras 2's `alpha` is read as negative_slope, as Keras 3.15 does.
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::keyword;
    return keras_config::Arguments{{"negative_slope", 0.3}, keyword("alpha", nullptr)};
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["negative_slope"] = keras_config::decimal(l.args<ActivationArgs>().activation.alpha);
  }

  // Keras 3 writes negative_slope; tf.keras 2 wrote alpha, which Keras 3.15 takes in its place
  // when given (LeakyReLU(alpha=0.1)).
  void from_keras(Reader& cfg, Layer& l) const override {
    const bool alpha = cfg.find("alpha") != nullptr;
    const char* key = alpha ? "alpha" : "negative_slope";
    cfg.accept({"negative_slope", "alpha"});
    const double s = cfg.number(key, 0.3);
    try {
      const Layer made = LeakyReLU(s);
      l.args<ActivationArgs>() = made.args<ActivationArgs>();
    } catch (const Error&) {
      cfg.fail(key, fmt::format("must be at least 0, got {}", s));
    }
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["negative_slope"] = decimal(l.args<ActivationArgs>().activation.alpha);
  }
};

}  // namespace

const LayerKind& leaky_relu_layer_kind() {
  static const LeakyReLUKind kind;
  return kind;
}

}  // namespace crossover
