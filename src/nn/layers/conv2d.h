// Keras's Conv2D and Conv2DTranspose: their shared arguments and defaults, and their
// constructors.
#pragma once

#include <cstdint>
#include <string_view>

#include "nn/initializers.h"
#include "nn/layer.h"

namespace crossover {

struct ConvArgs {
  int64_t filters = 0;
  Size2 kernel_size = 0;
  Size2 strides = 1;
  Padding padding = Padding::valid;
  LayerActivation activation;
  bool use_bias = true;
  Initializer kernel_initializer = GlorotUniform();
  Initializer bias_initializer = Zeros();
};

// 2-D convolution over (height, width, channels) samples: y = activation(conv(x, kernel) + bias);
// kernel (kernel_h, kernel_w, in_channels, filters) glorot-uniform with Keras's receptive-field
// fans (fan_in = kernel_h * kernel_w * in_channels, fan_out = kernel_h * kernel_w * filters),
// bias (filters) zeros. Requires filters, kernel_size and strides >= 1; padding "valid" or
// "same". (Keras's dilation_rate and groups are 1; nothing else is supported.)
Layer Conv2D(int64_t filters, Size2 kernel_size, std::string_view activation = "linear",
             Size2 strides = 1, std::string_view padding = "valid", bool use_bias = true);
// Keras's Conv2DTranspose (channels_last): the transposed 2-D convolution, y = activation(
// conv_transpose(x, kernel) + bias), the input gradient of the Conv2D that would map y's shape to
// x's; kernel (kernel_h, kernel_w, filters, in_channels) as Keras keeps it, glorot-uniform with
// Keras's fans (fan_in = kernel_h * kernel_w * filters, fan_out = kernel_h * kernel_w *
// in_channels), bias (filters) zeros. Output size, Keras's with output_padding None: 'valid'
// (in - 1) * stride + max(kernel, stride), 'same' in * stride. Requires filters, kernel_size and
// strides >= 1. (Keras's output_padding is None and dilation_rate 1; nothing else is supported.)
Layer Conv2DTranspose(int64_t filters, Size2 kernel_size, std::string_view activation = "linear",
                      Size2 strides = 1, std::string_view padding = "valid", bool use_bias = true);

}  // namespace crossover
