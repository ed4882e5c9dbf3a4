// GlobalAveragePooling2D and GlobalMaxPooling2D: (height, width, channels) -> (channels), the
// mean or the maximum of each channel: a pooling whose window is the whole image.
#include "nn/layers/global_pooling2d.h"

#include "core/error.h"
#include "nn/layers/pooling_kind.h"

namespace crossover {

Layer GlobalAveragePooling2D() {
  Layer l;
  l.type = LayerType::global_average_pooling2d;
  return l;
}

Layer GlobalMaxPooling2D() {
  Layer l;
  l.type = LayerType::global_max_pooling2d;
  return l;
}

namespace {

using namespace keras_config;

class GlobalPooling2DKind final : public PoolingKind {
 public:
  explicit GlobalPooling2DKind(bool max) : PoolingKind(max) {}
  LayerType type() const override {
    return max_ ? LayerType::global_max_pooling2d : LayerType::global_average_pooling2d;
  }
  std::string_view class_name() const override {
    return max_ ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D";
  }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"data_format", nullptr}, {"keepdims", false}};
  }
  std::vector<std::string_view> aliases() const override {
    return {max_ ? "GlobalMaxPool2D" : "GlobalAvgPool2D"};
  }
  std::string_view base_name() const override {
    return max_ ? "global_max_pooling2d" : "global_average_pooling2d";
  }

  // ---- command line: globalavgpool, globalmaxpool ----
  std::string_view cli_name() const override { return max_ ? "globalmaxpool" : "globalavgpool"; }
  std::string_view cli_syntax() const override { return cli_name(); }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 1) return std::nullopt;
    return max_ ? GlobalMaxPooling2D() : GlobalAveragePooling2D();
  }

  // ---- Keras config ----
  void from_keras(Reader& cfg, Layer&) const override {
    cfg.channels_last();
    cfg.refuse_true("keepdims", "keepdims true is not supported: the output is (channels)");
  }
  void to_keras(const Layer&, ojson& c) const override {
    c["data_format"] = "channels_last";
    c["keepdims"] = false;
  }

  // ---- engine: a pooling whose window is the whole image; the calls are PoolingKind's ----
  void build(LayerBuilder& b) const override {
    require_image(b.layer, b.shape);
    const Shape& in = b.shape;
    b.state.own<PoolShape>() = whole_sample(in[0], in[1], in[2]);
    b.shape = {in[2]};
  }
};

}  // namespace

const LayerKind& global_average_pooling2d_layer_kind() {
  static const GlobalPooling2DKind kind(false);
  return kind;
}

const LayerKind& global_max_pooling2d_layer_kind() {
  static const GlobalPooling2DKind kind(true);
  return kind;
}

}  // namespace crossover
