// Keras's Conv2D and Conv2DTranspose: their shared arguments and defaults, and their
// constructors.
#pragma once

#include <cstdint>
#include <string_view>

#include "nn/initializers.h"
#include "nn/layer.h"
#include "nn/regularizers.h"

namespace crossover {

struct ConvArgs {
  int64_t filters = 0;
  Size2 kernel_size = 0;
  Size2 strides = 1;
  Padding padding = Padding::valid;
  Size2 dilation_rate = 1;  // the kernel's taps this far apart; above 1 only with strides (1, 1)
  LayerActivation activation;
  bool use_bias = true;
  Initializer kernel_initializer = GlorotUniform();
  Initializer bias_initializer = Zeros();
  Regularizer kernel_regularizer, bias_regularizer;  // Keras's kernel_regularizer, bias_regularizer
};

// 2-D convolution over (height, width, channels) samples: y = activation(conv(x, kernel) + bias);
// kernel (kernel_h, kernel_w, in_channels, filters) glorot-uniform with Keras's receptive-field
// fans (fan_in = kernel_h * kernel_w * in_channels, fan_out = kernel_h * kernel_w * filters),
// bias (filters) zeros. Requires filters, kernel_size, strides and dilation_rate >= 1, and, as
// Keras does, strides (1, 1) when either dilation_rate is above 1; padding "valid" or "same".
// dilation_rate (atrous convolution) spaces the kernel's taps apart: it spans (kernel - 1) *
// dilation + 1 rows and columns, which 'valid' must fit in and 'same' pads for (TensorFlow's
// padding of that span). (Keras's groups is 1; nothing else is supported.)
Layer Conv2D(int64_t filters, Size2 kernel_size, std::string_view activation = "linear",
             Size2 strides = 1, std::string_view padding = "valid", bool use_bias = true,
             Size2 dilation_rate = 1);
// Keras's Conv1D (channels_last) over (steps, channels) samples: the 2-D convolution of one row,
// kernel (kernel_size, in_channels, filters), bias (filters); padding "valid" or "same" (Keras's
// "causal" is not supported); the output (steps', filters), steps' as Conv2D's width.
Layer Conv1D(int64_t filters, int64_t kernel_size, std::string_view activation = "linear",
             int64_t strides = 1, std::string_view padding = "valid", bool use_bias = true,
             int64_t dilation_rate = 1);
// Keras's Conv2DTranspose (channels_last): the transposed 2-D convolution, y = activation(
// conv_transpose(x, kernel) + bias), the input gradient of the Conv2D that would map y's shape to
// x's; kernel (kernel_h, kernel_w, filters, in_channels) as Keras keeps it, glorot-uniform with
// Keras's fans (fan_in = kernel_h * kernel_w * filters, fan_out = kernel_h * kernel_w *
// in_channels), bias (filters) zeros. Output size, Keras's with output_padding None: 'valid'
// (in - 1) * stride + max(kernel, stride), 'same' in * stride, where kernel is its dilated span,
// (kernel - 1) * dilation + 1. Requires filters, kernel_size, strides and dilation_rate >= 1, and
// strides (1, 1) when either dilation_rate is above 1 (Keras's rule). (Keras's output_padding is
// None; nothing else is supported.)
Layer Conv2DTranspose(int64_t filters, Size2 kernel_size, std::string_view activation = "linear",
                      Size2 strides = 1, std::string_view padding = "valid", bool use_bias = true,
                      Size2 dilation_rate = 1);

}  // namespace crossover
