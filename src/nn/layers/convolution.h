// What Conv2D and Conv2DTranspose share, written once: their Keras arguments (filters,
// kernel_size, strides, padding, activation, use_bias, the initializers) with their checks, the
// Keras config read and written, the command line, and the traits of a layer whose products the
// backend computes as convolutions. Each kind's file keeps its shape rule and its calls.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nn/layers/conv2d.h"
#include "nn/layers/kind.h"

namespace crossover {

// A convolution layer of `type` (conv2d or conv2d_transpose), its arguments checked as Keras's
// class `cls` names them (strides above 1 with a dilation_rate above 1 refused as Keras does).
Layer convolution_layer(LayerType type, std::string_view cls, int64_t filters, Size2 kernel_size,
                        std::string_view activation, Size2 strides, std::string_view padding,
                        bool use_bias, Size2 dilation_rate);

class ConvolutionKind : public LayerKind {
 public:
  bool takes_images() const override { return true; }
  bool has_matrix_products() const override { return true; }
  std::vector<std::string> weight_names(const Layer& l) const override;
  std::optional<Layer> from_cli(const CliFields& f) const override;
  void describe(const Layer& l, nlohmann::json& j) const override;
  // Conv2D's `groups` must be 1, Conv2DTranspose's `output_padding` None; both channels_last,
  // no regularizers or constraints; strides and dilation_rate not both above 1 (Keras's rule).
  void from_keras(keras_config::Reader& cfg, Layer& l) const override;
  // In Keras's key order (`output_padding` after `padding`, `groups` after `dilation_rate`).
  void to_keras(const Layer& l, keras_config::ojson& c) const override;
  bool keras_build_config() const override { return true; }
  int64_t check_size(const Layer& l, int64_t width, int64_t channels,
                     const std::string& where) const override;
  bool applies_activation() const override { return true; }
  LayerActivation activation(const Layer& l) const override;
  void check_device(const Layer& l, const Backend& backend, int) const override;
  // gelu's and swish's pre-activation output, which their gradient needs.
  std::size_t workspace_bytes(const Layer& l, const LayerState& li, Backend&,
                              int64_t batch) const override;

 protected:
  // Conv1D: its arguments are one number each (kernel_size [3], strides [1]), held as (1, n).
  virtual bool one_d() const { return false; }
  // The rows and columns the kernel spans, (kernel - 1) * dilation + 1 (an Error where absurd).
  Size2 dilated_span(const Layer& l) const;
  // The convolution's window on `in` (height, width, channels) into c: its output size and
  // padding for the kernel's dilated span, (kernel - 1) * dilation + 1 (TensorFlow pads 'same'
  // for that span), and the kernel's size and dilation; a span that does not fit is an Error.
  void place_kernel(const Layer& l, const Shape& in, ConvShape& c) const;

 private:
  bool transposed() const { return type() == LayerType::conv2d_transpose; }
};

}  // namespace crossover
