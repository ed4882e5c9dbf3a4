// GlobalAveragePooling2D and GlobalMaxPooling2D: (height, width, channels) -> (channels), the
// mean or the maximum of each channel: a pooling whose window is the whole image.
#include "nn/layers/global_pooling2d.h"

#include "core/error.h"
#include "nn/layers/kind.h"
#include "nn/layers/window.h"

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

class GlobalPooling2DKind final : public LayerKind {
 public:
  explicit GlobalPooling2DKind(bool max) : max_(max) {}
  LayerType type() const override {
    return max_ ? LayerType::global_max_pooling2d : LayerType::global_average_pooling2d;
  }
  std::string_view class_name() const override {
    return max_ ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D";
  }
  std::vector<std::string_view> aliases() const override {
    return {max_ ? "GlobalMaxPool2D" : "GlobalAvgPool2D"};
  }
  std::string_view base_name() const override {
    return max_ ? "global_max_pooling2d" : "global_average_pooling2d";
  }
  bool takes_images() const override { return true; }

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

  // ---- engine: a pooling whose window is the whole image ----
  void check_device(const Layer& l, const Backend& backend, int) const override {
    require_conv2d(l, backend);
  }
  void build(LayerBuilder& b) const override {
    require_image(b.layer, b.shape);
    const Shape& in = b.shape;
    b.state.pool = {.kind = max_ ? PoolKind::max : PoolKind::average,
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
  // The maximum's workspace: where each maximum came from, for the backward pass (as the backend
  // sizes it; MaxPooling2D's).
  std::size_t workspace_bytes(const Layer&, const LayerState& li, Backend& backend,
                              int64_t batch) const override {
    return max_ ? backend.pool2d_workspace_bytes(li.pool, batch) : 0;
  }
  void forward(const ForwardStep& s) const override {
    s.backend.pool2d_forward(s.state.pool, s.x, s.y, max_ && s.training ? s.workspace : nullptr,
                             s.m);
  }
  void backward(BackwardStep& s) const override {
    s.backend.pool2d_backward(s.state.pool, s.g, s.workspace, s.spare, s.m);
    s.swap();
    s.activation_done = false;
  }

 private:
  bool max_;
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
