// GlobalAveragePooling2D: (height, width, channels) -> (channels), the mean of each channel.
#include "nn/layers/global_average_pooling2d.h"

#include "core/error.h"
#include "nn/layers/kind.h"
#include "nn/layers/window.h"

namespace crossover {

Layer GlobalAveragePooling2D() {
  Layer l;
  l.type = LayerType::global_average_pooling2d;
  return l;
}

namespace {

using namespace keras_config;

class GlobalAveragePooling2DKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::global_average_pooling2d; }
  std::string_view class_name() const override { return "GlobalAveragePooling2D"; }
  std::vector<std::string_view> aliases() const override { return {"GlobalAvgPool2D"}; }
  std::string_view base_name() const override { return "global_average_pooling2d"; }
  bool takes_images() const override { return true; }

  // ---- command line: globalavgpool ----
  std::string_view cli_name() const override { return "globalavgpool"; }
  std::string_view cli_syntax() const override { return "globalavgpool"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 1) return std::nullopt;
    return GlobalAveragePooling2D();
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

  // ---- engine: an average pooling whose window is the whole image ----
  void check_device(const Layer& l, const Backend& backend, int) const override {
    require_conv2d(l, backend);
  }
  void build(LayerBuilder& b) const override {
    require_image(b.layer, b.shape);
    const Shape& in = b.shape;
    b.state.pool = {.kind = PoolKind::average,
                    .in_h = in[0],
                    .in_w = in[1],
                    .channels = in[2],
                    .out_h = 1,
                    .out_w = 1,
                    .window_h = in[0],
                    .window_w = in[1],
                    .stride_h = in[0],
                    .stride_w = in[1]};
    b.shape = {in[2]};
  }
  void forward(const ForwardStep& s) const override {
    s.backend.pool2d_forward(s.state.pool, s.x, s.y, nullptr, s.m);
  }
  void backward(BackwardStep& s) const override {
    s.backend.pool2d_backward(s.state.pool, s.g, s.workspace, s.spare, s.m);
    s.swap();
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& global_average_pooling2d_layer_kind() {
  static const GlobalAveragePooling2DKind kind;
  return kind;
}

}  // namespace crossover
