// What Conv2D and the pooling layers share: a 2-D window over (height, width, channels) samples.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/backend.h"
#include "core/error.h"
#include "nn/layer.h"

namespace crossover {

inline void require_positive(Size2 s, const char* layer, const char* argument) {
  if (s.h < 1 || s.w < 1)
    throw Error(layer, std::string(argument) + " must be at least 1, got (" + std::to_string(s.h) +
                           ", " + std::to_string(s.w) + ")");
}

// One spatial dimension of a convolution or pooling window, as Keras computes it: the output
// length and the padding before and after ('same': ceil(in / stride) outputs, the odd row or
// column of padding at the end, as TensorFlow puts it). out is 0 when a 'valid' window does not
// fit.
struct Extent {
  int64_t out = 0, before = 0, after = 0;
};
inline Extent spatial_extent(int64_t in, int64_t window, int64_t stride, Padding padding) {
  if (padding == Padding::valid) {
    if (in < window) return {};
    return {(in - window) / stride + 1, 0, 0};
  }
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + window - in, 0);
  return {out, total / 2, total - total / 2};
}

// The 2-D window of a Conv2D or pooling layer on (height, width, channels) samples.
template <class WindowShape>
void place_window(const Layer& l, Size2 window, Size2 strides, Padding padding, const Shape& in,
                  WindowShape& s) {
  const Extent h = spatial_extent(in[0], window.h, strides.h, padding);
  const Extent w = spatial_extent(in[1], window.w, strides.w, padding);
  if (h.out < 1 || w.out < 1)
    throw Error(l.name, fmt::format("the {}x{} window does not fit in the {}x{} input with padding "
                                    "'valid': use padding 'same' or a smaller window",
                                    window.h, window.w, in[0], in[1]));
  s.in_h = in[0], s.in_w = in[1];
  s.out_h = h.out, s.out_w = w.out;
  s.stride_h = strides.h, s.stride_w = strides.w;
  s.pad_top = h.before, s.pad_bottom = h.after;
  s.pad_left = w.before, s.pad_right = w.after;
}

inline void require_image(const Layer& l, const Shape& shape) {
  if (shape.size() != 3)
    throw Error(l.name,
                std::string(layer_type_name(l.type)) +
                    " needs samples of shape (height, width, channels), but receives " +
                    shape_to_string(shape) +
                    (shape.size() == 2 ? ": declare Input((h, w, 1)) for one channel" : ""));
}

// Conv2D and the pooling layers run on a backend with convolutions.
inline void require_conv2d(const Layer& l, const Backend& backend) {
  if (!backend.has_conv2d())
    throw Error(l.name, std::string(layer_type_name(l.type)) + " is not available on " +
                            backend.device_name() + " (its backend has no convolutions)");
}

}  // namespace crossover
