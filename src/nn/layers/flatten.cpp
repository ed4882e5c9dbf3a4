// Flatten: each sample to a vector (the same values); with a shape, it declares the model's input.
#include "nn/layers/flatten.h"

#include "backends/fused_mlp.h"
#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer Flatten(Shape input_shape) {
  shape_size(input_shape, "Flatten");
  Layer l;
  l.type = LayerType::flatten;
  l.input_shape = std::move(input_shape);
  return l;
}

namespace {

using namespace keras_config;

class FlattenKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::flatten; }
  std::string_view class_name() const override { return "Flatten"; }
  std::string_view base_name() const override { return "flatten"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"data_format", nullptr}};
  }
  void describe_fused(const Layer&, FusedLayerView& v) const override {
    v.kind = FusedLayerView::Kind::reshape;
  }
  std::string_view cli_name() const override { return "flatten"; }
  std::string_view cli_syntax() const override { return "flatten"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 1) return std::nullopt;
    return Flatten();
  }
  bool declares_input() const override { return true; }

  void from_keras(Reader& cfg, Layer&) const override { cfg.channels_last(); }
  void to_keras(const Layer&, ojson& c) const override { c["data_format"] = "channels_last"; }
  bool keras_build_config() const override { return true; }

  // ---- engine: the same buffer, one dimension ----
  void build(LayerBuilder& b) const override {
    check_declared_input(b);
    b.shape = {b.state.in_width};
  }
};

}  // namespace

const LayerKind& flatten_layer_kind() {
  static const FlattenKind kind;
  return kind;
}

}  // namespace crossover
