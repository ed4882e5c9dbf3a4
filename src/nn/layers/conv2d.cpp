// Conv2D: y = activation(conv(x, kernel) + bias) on (height, width, channels) samples.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "nn/layers/kind.h"
#include "nn/layers/window.h"

namespace crossover {

Layer Conv2D(int64_t filters, Size2 kernel_size, std::string_view activation, Size2 strides,
             std::string_view padding, bool use_bias) {
  if (filters < 1)
    throw Error("Conv2D", "filters must be at least 1, got " + std::to_string(filters));
  require_positive(kernel_size, "Conv2D", "kernel_size");
  require_positive(strides, "Conv2D", "strides");
  Layer l;
  l.type = LayerType::conv2d;
  l.units = filters;
  l.window = kernel_size;
  l.strides = strides;
  l.padding = parse_padding(padding, "Conv2D");
  l.activation = parse_activation(activation);
  l.activation_alpha = default_activation_alpha(l.activation);
  l.use_bias = use_bias;
  return l;
}

namespace {

using namespace keras_config;

class Conv2DKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::conv2d; }
  std::string_view class_name() const override { return "Conv2D"; }
  std::string_view base_name() const override { return "conv2d"; }
  bool takes_images() const override { return true; }
  bool has_matrix_products() const override { return true; }
  std::vector<std::string> weight_names(const Layer& l) const override {
    if (!l.use_bias) return {l.name + "/kernel"};
    return {l.name + "/kernel", l.name + "/bias"};
  }

  // ---- command line: conv:FILTERS:KERNEL[:ACTIVATION[:PADDING[:STRIDES]]] ----
  std::string_view cli_name() const override { return "conv"; }
  std::string_view cli_syntax() const override {
    return "conv:FILTERS:KERNEL[:ACTIVATION[:PADDING[:STRIDES]]]";
  }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() < 3 || f.size() > 6) return std::nullopt;
    return Conv2D(f.whole(1), f.size2(2), f.text_or(3, "linear"),
                  f.size() > 5 ? f.size2(5) : Size2(1), f.text_or(4, "valid"));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["filters"] = l.units;
    j["kernel_size"] = {l.window.h, l.window.w};
    j["strides"] = {l.strides.h, l.strides.w};
    j["padding"] = padding_name(l.padding);
    j["activation"] = activation_name(l.activation);
    j["use_bias"] = l.use_bias;
  }

  // ---- Keras config ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.units = cfg.count("filters", "Conv2D needs filters");
    const std::optional<Size2> kernel = cfg.pair("kernel_size");
    if (!kernel) cfg.fail("kernel_size", "Conv2D needs a kernel_size");
    l.window = *kernel;
    l.strides = cfg.pair("strides").value_or(Size2(1));
    l.padding = cfg.padding();
    cfg.channels_last();
    if (const std::optional<Size2> d = cfg.pair("dilation_rate"); d && *d != Size2(1))
      cfg.fail("dilation_rate",
               "dilation_rate " + brief(*cfg.find("dilation_rate")) + " is not supported: only 1");
    if (const json* g = cfg.find("groups"))
      if (!g->is_number_integer() || g->get<int64_t>() != 1)
        cfg.fail("groups", "groups " + brief(*g) + " is not supported: only 1");
    cfg.activation(l);
    l.use_bias = cfg.flag("use_bias", true);
    l.kernel_initializer = cfg.initializer("kernel_initializer", GlorotUniform());
    l.bias_initializer = cfg.initializer("bias_initializer", Zeros());
    for (const char* r : {"kernel_regularizer", "bias_regularizer", "activity_regularizer"})
      cfg.refuse_set(r, "regularizers are not supported");
    for (const char* c : {"kernel_constraint", "bias_constraint"})
      cfg.refuse_set(c, "constraints are not supported");
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["filters"] = l.units;
    c["kernel_size"] = ojson::array({l.window.h, l.window.w});
    c["strides"] = ojson::array({l.strides.h, l.strides.w});
    c["padding"] = std::string(padding_name(l.padding));
    c["data_format"] = "channels_last";
    c["dilation_rate"] = ojson::array({1, 1});
    c["groups"] = 1;
    c["activation"] = activation_json(l);
    c["use_bias"] = l.use_bias;
    c["kernel_initializer"] = initializer_json(l.kernel_initializer);
    c["bias_initializer"] = initializer_json(l.bias_initializer);
    c["kernel_regularizer"] = nullptr;
    c["bias_regularizer"] = nullptr;
    c["activity_regularizer"] = nullptr;
    c["kernel_constraint"] = nullptr;
    c["bias_constraint"] = nullptr;
  }
  bool keras_build_config() const override { return true; }
  int64_t check_size(const Layer& l, int64_t width, int64_t channels,
                     const std::string& where) const override {
    if (l.window.h * l.window.w > kMaxElements / l.units / std::max<int64_t>(channels, 1))
      throw Error(where, fmt::format("layer '{}': a {}x{} kernel of {} filters is absurdly large",
                                     printable(l.name), l.window.h, l.window.w, l.units));
    return width;
  }

  // ---- engine ----
  bool applies_activation() const override { return true; }
  void check_device(const Layer& l, const Backend& backend, int) const override {
    require_conv2d(l, backend);
  }

  // kernel (kernel_h, kernel_w, in_channels, filters), bias (filters); NHWC samples.
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    require_image(l, b.shape);
    ConvShape& c = b.state.conv;
    place_window(l, b.shape, c);
    c.in_c = b.shape[2];
    c.out_c = l.units;
    c.kernel_h = l.window.h, c.kernel_w = l.window.w;
    b.state.kernel =
        b.add_param("kernel", {l.window.h, l.window.w, c.in_c, l.units}, l.kernel_initializer);
    if (l.use_bias) b.state.bias = b.add_param("bias", {l.units}, l.bias_initializer);
    b.shape = {c.out_h, c.out_w, c.out_c};
  }

  // gelu's and swish's pre-activation output, which their gradient needs.
  std::size_t workspace_bytes(const Layer& l, const LayerState& li, Backend&,
                              int64_t batch) const override {
    return pre_activation_bytes(l, li, batch);
  }

  // y(m, out_h, out_w, filters) = act(conv(x, kernel) + bias), bias and relu fused.
  void forward(const ForwardStep& s) const override {
    // Its activation is never deferred (the loss op applies only a Dense's or Activation's).
    const ActivationKind act = s.layer.activation;
    const bool fused = act == ActivationKind::linear || act == ActivationKind::relu;
    float* z = activation_needs_input(act) ? static_cast<float*>(s.workspace) : s.y;
    s.backend.conv2d_forward(s.state.conv, s.x, s.value(s.state.kernel), s.value(s.state.bias), z,
                             s.m, fused ? act : ActivationKind::linear);
    if (!fused)
      s.backend.activation_forward(act, s.layer.activation_alpha, z, s.y, s.m, s.state.out_width);
  }

  // dx (not for the first layer with parameters), dkernel and dbias from g (frozen: dx only).
  void backward(BackwardStep& s) const override {
    const LayerState& li = s.state;
    if (backward_applies_activation(s))
      s.backend.activation_backward(s.layer.activation, s.layer.activation_alpha,
                                    static_cast<const float*>(s.workspace), s.y, s.g, s.g, s.m,
                                    li.out_width);
    if (!s.first) s.backend.conv2d_backward_input(li.conv, s.g, s.value(li.kernel), s.spare, s.m);
    if (s.trainable)
      s.backend.conv2d_backward_weights(li.conv, s.x, s.g, s.grad(li.kernel), s.grad(li.bias), s.m);
    if (!s.first) s.swap();
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& conv2d_layer_kind() {
  static const Conv2DKind kind;
  return kind;
}

}  // namespace crossover
