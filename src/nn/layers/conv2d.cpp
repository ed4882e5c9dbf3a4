// Conv2D: y = activation(conv(x, kernel) + bias) on (height, width, channels) samples; and Conv1D,
// the same on (steps, channels) samples taken as one row of an image.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "nn/layers/convolution.h"
#include "nn/layers/window.h"

namespace crossover {

Layer Conv2D(int64_t filters, Size2 kernel_size, std::string_view activation, Size2 strides,
             std::string_view padding, bool use_bias, Size2 dilation_rate) {
  return convolution_layer(LayerType::conv2d, "Conv2D", filters, kernel_size, activation, strides,
                           padding, use_bias, dilation_rate);
}

Layer Conv1D(int64_t filters, int64_t kernel_size, std::string_view activation, int64_t strides,
             std::string_view padding, bool use_bias, int64_t dilation_rate) {
  return convolution_layer(LayerType::conv1d, "Conv1D", filters, Size2(1, kernel_size), activation,
                           Size2(1, strides), padding, use_bias, Size2(1, dilation_rate));
}

namespace {

using namespace keras_config;

class Conv2DKind : public ConvolutionKind {
 public:
  LayerType type() const override { return LayerType::conv2d; }
  std::string_view class_name() const override { return "Conv2D"; }
  std::vector<std::string_view> aliases() const override { return {"Convolution2D"}; }
  std::string_view base_name() const override { return "conv2d"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::keyword, keras_config::required;
    return keras_config::Arguments{
               required("filters", 4), required("kernel_size", {3, 3}), {"strides", {1, 1}},
               {"padding", "valid"},   {"data_format", nullptr},        {"dilation_rate", {1, 1}},
               {"groups", 1},          {"activation", nullptr}} +
           keras_config::kernel_and_bias_arguments() +
           keras_config::Arguments{keyword("lora_rank", nullptr), keyword("lora_alpha", nullptr)};
  }
  std::string_view cli_name() const override { return "conv"; }
  std::string_view cli_syntax() const override {
    return "conv:FILTERS:KERNEL[:ACTIVATION[:PADDING[:STRIDES[:DILATION]]]]";
  }

  // ---- engine ----

  // kernel (kernel_h, kernel_w, in_channels, filters), bias (filters); NHWC samples. The output
  // size and padding are those of the kernel's dilated span (place_kernel).
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const ConvArgs& a = l.args<ConvArgs>();
    require_image(l, b.shape);
    ConvShape& c = b.state.own<ConvShape>();
    place_kernel(l, b.shape, c);
    c.in_c = b.shape[2];
    c.out_c = a.filters;
    b.regularize(b.add_param("kernel", {a.kernel_size.h, a.kernel_size.w, c.in_c, a.filters},
                             a.kernel_initializer),
                 a.kernel_regularizer);
    if (a.use_bias)
      b.regularize(b.add_param("bias", {a.filters}, a.bias_initializer), a.bias_regularizer);
    b.shape = {c.out_h, c.out_w, c.out_c};
  }

  // y(m, out_h, out_w, filters) = act(conv(x, kernel) + bias), bias and relu fused.
  void forward(const ForwardStep& s) const override {
    // Its activation is never deferred (the loss op applies only a Dense's or Activation's).
    const ActivationKind act = s.state.activation.kind;
    const bool fused = act == ActivationKind::linear || act == ActivationKind::relu;
    float* z = activation_needs_input(act) ? static_cast<float*>(s.workspace) : s.y;
    s.backend.conv2d_forward(s.state.own<ConvShape>(), s.x, s.value("kernel"), s.value("bias"), z,
                             s.m, fused ? act : ActivationKind::linear);
    if (!fused)
      s.backend.activation_forward(act, s.state.activation.alpha, z, s.y,
                                   activation_rows(s.state, s.m), activation_cols(s.state));
  }

  // dx (not for the first layer with parameters), dkernel and dbias from g (frozen: dx only).
  void backward(BackwardStep& s) const override {
    const LayerState& li = s.state;
    if (backward_applies_activation(s))
      s.backend.activation_backward(li.activation.kind, li.activation.alpha,
                                    static_cast<const float*>(s.workspace), s.y, s.g, s.g,
                                    activation_rows(s.state, s.m), activation_cols(s.state));
    if (!s.first)
      s.backend.conv2d_backward_input(li.own<ConvShape>(), s.g, s.value("kernel"), s.spare, s.m);
    if (s.trainable)
      s.backend.conv2d_backward_weights(li.own<ConvShape>(), s.x, s.g, s.grad("kernel"),
                                        s.grad("bias"), s.m);
    if (!s.first) s.swap();
    s.activation_done = false;
  }
};

// Conv1D: a Conv2D over one row. Its arguments are held as (1, n) (ConvolutionKind reads and
// writes them as one number each), its kernel (kernel_size, in_channels, filters) is Conv2D's (1,
// kernel_size, in_channels, filters) in the same memory, and the 2-D calls see (1, steps,
// channels) samples: Keras's 'valid' and 'same' along the steps ('causal' is refused).
class Conv1DKind final : public Conv2DKind {
 public:
  LayerType type() const override { return LayerType::conv1d; }
  std::string_view class_name() const override { return "Conv1D"; }
  std::vector<std::string_view> aliases() const override { return {"Convolution1D"}; }
  std::string_view base_name() const override { return "conv1d"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::keyword, keras_config::required;
    return keras_config::Arguments{
               required("filters", 4), required("kernel_size", 3), {"strides", 1},
               {"padding", "valid"},   {"data_format", nullptr},   {"dilation_rate", 1},
               {"groups", 1},          {"activation", nullptr}} +
           keras_config::kernel_and_bias_arguments() +
           keras_config::Arguments{keyword("lora_rank", nullptr), keyword("lora_alpha", nullptr)};
  }
  std::string_view cli_name() const override { return {}; }
  std::string_view cli_syntax() const override { return {}; }
  bool takes_images() const override { return false; }

  // kernel (kernel_size, in_channels, filters), bias (filters); (steps, channels) samples.
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const ConvArgs& a = l.args<ConvArgs>();
    if (b.shape.size() != 2)
      throw Error(l.name, "Conv1D needs (steps, channels) samples, but receives samples of shape " +
                              shape_to_string(b.shape));
    ConvShape& c = b.state.own<ConvShape>();
    place_kernel(l, {1, b.shape[0], b.shape[1]}, c);
    c.in_c = b.shape[1];
    c.out_c = a.filters;
    b.regularize(b.add_param("kernel", {a.kernel_size.w, c.in_c, a.filters}, a.kernel_initializer),
                 a.kernel_regularizer);
    if (a.use_bias)
      b.regularize(b.add_param("bias", {a.filters}, a.bias_initializer), a.bias_regularizer);
    b.shape = {c.out_w, c.out_c};
  }

 protected:
  bool one_d() const override { return true; }
};

}  // namespace

const LayerKind& conv1d_layer_kind() {
  static const Conv1DKind kind;
  return kind;
}

const LayerKind& conv2d_layer_kind() {
  static const Conv2DKind kind;
  return kind;
}

}  // namespace crossover
