// Keras's ZeroPadding2D and Cropping2D, and their 1D siblings ZeroPadding1D and Cropping1D: their
// arguments and constructors.
#pragma once

#include <cstdint>

#include "nn/layer.h"

namespace crossover {

// Rows and columns added (ZeroPadding2D) or removed (Cropping2D) on each side of a (height,
// width, channels) sample: Keras's ((top, bottom), (left, right)).
struct Margins2 {
  int64_t top = 0, bottom = 0, left = 0, right = 0;
  bool operator==(const Margins2&) const = default;
};

struct ZeroPaddingArgs {
  Margins2 padding{1, 1, 1, 1};
};

struct CroppingArgs {
  Margins2 cropping{0, 0, 0, 0};
};

// The 1D layers' margins on a (steps, features) sample: Keras's (left, right) steps, held as
// Margins2's (top, bottom) with no columns (left = right = 0).
struct ZeroPadding1DArgs {
  Margins2 padding{1, 1, 0, 0};
};

struct Cropping1DArgs {
  Margins2 cropping{1, 1, 0, 0};
};

// Keras's ZeroPadding2D (channels_last): zeros added around each sample, giving (top + height +
// bottom, left + width + right, channels); no weights. Margins must be >= 0.
Layer ZeroPadding2D(Margins2 padding = {1, 1, 1, 1});

// Keras's Cropping2D (channels_last): rows and columns removed from each side, giving (height -
// top - bottom, width - left - right, channels); no weights. Margins must be >= 0 and leave at
// least one row and one column (checked when the layer is built).
Layer Cropping2D(Margins2 cropping = {0, 0, 0, 0});

// Keras's ZeroPadding1D (channels_last): `left` and `right` zero steps added to each (steps,
// features) sample; Cropping1D: that many steps removed (at least one left, checked when built).
// No weights; margins must be >= 0.
Layer ZeroPadding1D(int64_t left = 1, int64_t right = 1);
Layer Cropping1D(int64_t left = 1, int64_t right = 1);

}  // namespace crossover
