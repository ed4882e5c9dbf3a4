// Conv2DTranspose: y = activation(conv_transpose(x, kernel) + bias) on (height, width, channels)
// samples, as Keras computes it (TensorFlow's conv2d_transpose): the input gradient of the Conv2D
// that maps y's shape to x's, whose kernel (kernel_h, kernel_w, filters, in_channels) is Keras's
// Conv2DTranspose kernel as it stands. The layer keeps that convolution's ConvShape: its input is
// this layer's output (filters channels), its output this layer's input.
#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "nn/layers/convolution.h"
#include "nn/layers/window.h"

namespace crossover {

Layer Conv2DTranspose(int64_t filters, Size2 kernel_size, std::string_view activation,
                      Size2 strides, std::string_view padding, bool use_bias, Size2 dilation_rate) {
  return convolution_layer(LayerType::conv2d_transpose, "Conv2DTranspose", filters, kernel_size,
                           activation, strides, padding, use_bias, dilation_rate);
}

namespace {

using namespace keras_config;

// Keras's output length with output_padding None (compute_conv_transpose_output_length):
// 'valid' in * stride + max(kernel - stride, 0), 'same' in * stride, where kernel is the
// kernel's dilated span, (kernel - 1) * dilation + 1.
int64_t transposed_length(int64_t in, int64_t kernel, int64_t stride, Padding padding) {
  return in * stride + (padding == Padding::valid ? std::max<int64_t>(kernel - stride, 0) : 0);
}

class Conv2DTransposeKind final : public ConvolutionKind {
 public:
  LayerType type() const override { return LayerType::conv2d_transpose; }
  std::string_view class_name() const override { return "Conv2DTranspose"; }
  std::vector<std::string_view> aliases() const override { return {"Convolution2DTranspose"}; }
  std::string_view base_name() const override { return "conv2d_transpose"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{required("filters", 4),      required("kernel_size", {3, 3}),
                                   {"strides", {1, 1}},         {"padding", "valid"},
                                   {"output_padding", nullptr}, {"data_format", nullptr},
                                   {"dilation_rate", {1, 1}},   {"activation", nullptr}} +
           keras_config::kernel_and_bias_arguments();
  }
  std::string_view cli_name() const override { return "conv_transpose"; }
  std::string_view cli_syntax() const override {
    return "conv_transpose:FILTERS:KERNEL[:ACTIVATION[:PADDING[:STRIDES[:DILATION]]]]";
  }

  // ---- engine ----

  // kernel (kernel_h, kernel_w, filters, in_channels), bias (filters); NHWC samples. The
  // convolution it transposes runs from (out_h, out_w, filters) to this input's shape, with
  // Keras's padding of that output size (TensorFlow's conv2d_transpose pads so).
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const ConvArgs& a = l.args<ConvArgs>();
    require_image(l, b.shape);
    const int64_t in_h = b.shape[0], in_w = b.shape[1], in_c = b.shape[2];
    const Size2 span = dilated_span(l);
    const int64_t out_h = transposed_length(in_h, span.h, a.strides.h, a.padding);
    const int64_t out_w = transposed_length(in_w, span.w, a.strides.w, a.padding);
    if (out_h > kMaxElements / std::max<int64_t>(out_w, 1) / a.filters)
      throw Error(l.name, fmt::format("the output of {}x{}x{} values is absurdly large", out_h,
                                      out_w, a.filters));
    ConvShape& c = b.state.own<ConvShape>();
    place_kernel(l, {out_h, out_w, a.filters}, c);
    if (c.out_h != in_h || c.out_w != in_w)
      throw Error(l.name, fmt::format("internal: the transposed {}x{} output maps back to {}x{}, "
                                      "not the {}x{} input",
                                      out_h, out_w, c.out_h, c.out_w, in_h, in_w));
    c.in_c = a.filters;
    c.out_c = in_c;
    b.regularize(b.add_param("kernel", {a.kernel_size.h, a.kernel_size.w, a.filters, in_c},
                             a.kernel_initializer),
                 a.kernel_regularizer);
    if (a.use_bias)
      b.regularize(b.add_param("bias", {a.filters}, a.bias_initializer), a.bias_regularizer);
    b.shape = {out_h, out_w, a.filters};
  }

  // y(m, out_h, out_w, filters) = act(conv_transpose(x, kernel) + bias).
  void forward(const ForwardStep& s) const override {
    // Its activation is never deferred (the loss op applies only a Dense's or Activation's).
    const ActivationKind act = s.state.activation.kind;
    float* z = activation_needs_input(act) ? static_cast<float*>(s.workspace) : s.y;
    s.backend.conv2d_transpose_forward(s.state.own<ConvShape>(), s.x, s.value("kernel"),
                                       s.value("bias"), z, s.m);
    if (act != ActivationKind::linear)
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
      s.backend.conv2d_transpose_backward_input(li.own<ConvShape>(), s.g, s.value("kernel"),
                                                s.spare, s.m);
    if (s.trainable)
      s.backend.conv2d_transpose_backward_weights(li.own<ConvShape>(), s.x, s.g, s.grad("kernel"),
                                                  s.grad("bias"), s.m);
    if (!s.first) s.swap();
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& conv2d_transpose_layer_kind() {
  static const Conv2DTransposeKind kind;
  return kind;
}

}  // namespace crossover
