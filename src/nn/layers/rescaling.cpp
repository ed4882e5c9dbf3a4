// Rescaling: y = x * scale + offset (Keras's preprocessing layer, applied in training and
// inference alike); the backward is g * scale. No weights, no kernels of its own: the backends'
// element-wise binary_forward and binary_backward with a constant operand.
#include "nn/layers/rescaling.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer Rescaling(double scale, double offset) {
  if (!std::isfinite(scale) || !std::isfinite(offset))
    throw Error("Rescaling", fmt::format("scale and offset must be finite numbers, got {} and {}",
                                         scale, offset));
  Layer l;
  l.type = LayerType::rescaling;
  RescalingArgs& a = l.args<RescalingArgs>();
  a.scale = scale;
  a.offset = offset;
  return l;
}

namespace {

using namespace keras_config;

// All of a step's values as one (rows, cols) matrix, with `constant` as the other operand.
BinaryShape with_constant(const LayerStep& s, double constant) {
  BinaryShape shape;
  shape.rows = s.m;
  shape.cols = s.state.out_width;
  shape.b = Broadcast::scalar;
  shape.b_value = static_cast<float>(constant);
  return shape;
}

class RescalingKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::rescaling; }
  std::string_view class_name() const override { return "Rescaling"; }
  std::string_view base_name() const override { return "rescaling"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{required("scale", 0.5), {"offset", 0.0}};
  }
  bool keeps_shape() const override { return true; }

  // ---- command line: rescale:SCALE[:OFFSET] ----
  std::string_view cli_name() const override { return "rescale"; }
  std::string_view cli_syntax() const override { return "rescale:SCALE[:OFFSET]"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() < 2 || f.size() > 3) return std::nullopt;
    return Rescaling(f.number(1, 1.0), f.number(2, 0.0));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const RescalingArgs& a = l.args<RescalingArgs>();
    j["scale"] = a.scale;
    j["offset"] = a.offset;
  }

  // ---- Keras config: scale (required) and offset, numbers (Keras also takes arrays) ----
  void from_keras(Reader& cfg, Layer& l) const override {
    if (!cfg.find("scale")) cfg.fail("scale", "Rescaling needs a scale");
    for (const char* key : {"scale", "offset"})
      if (const json* v = cfg.find(key); v && v->is_array())
        cfg.fail(key, "an array (per channel) is not supported (yet): give one number");
    const double scale = cfg.number("scale", 1.0), offset = cfg.number("offset", 0.0);
    try {
      l.args<RescalingArgs>() = Rescaling(scale, offset).args<RescalingArgs>();
    } catch (const Error&) {
      cfg.fail(std::isfinite(scale) ? "offset" : "scale", "must be a finite number");
    }
  }
  void to_keras(const Layer& l, ojson& c) const override {
    const RescalingArgs& a = l.args<RescalingArgs>();
    c["scale"] = a.scale;
    c["offset"] = a.offset;
  }

  // ---- engine: x * scale, then + offset in place (as Keras computes it: two roundings) ----
  void forward(const ForwardStep& s) const override {
    const RescalingArgs& a = s.layer.args<RescalingArgs>();
    s.backend.binary_forward(BinaryOp::multiply, with_constant(s, a.scale), s.x, nullptr, s.y);
    if (a.offset != 0.0)
      s.backend.binary_forward(BinaryOp::add, with_constant(s, a.offset), s.y, nullptr, s.y);
  }
  // dx = g * scale (the offset has no gradient); none for the model's first layer.
  void backward(BackwardStep& s) const override {
    if (!s.first) {
      const BinaryShape shape = with_constant(s, s.layer.args<RescalingArgs>().scale);
      s.backend.binary_backward(BinaryOp::multiply, shape, s.x, nullptr, s.g, s.spare, nullptr);
      s.swap();
    }
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& rescaling_layer_kind() {
  static const RescalingKind kind;
  return kind;
}

}  // namespace crossover
