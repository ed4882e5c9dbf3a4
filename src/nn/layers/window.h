// What Conv2D and the pooling layers share: a 2-D window over (height, width, channels) samples.
#pragma once

#include <string>

#include "core/error.h"
#include "nn/layers.h"

namespace crossover {

inline void require_positive(Size2 s, const char* layer, const char* argument) {
  if (s.h < 1 || s.w < 1)
    throw Error(layer, std::string(argument) + " must be at least 1, got (" + std::to_string(s.h) +
                           ", " + std::to_string(s.w) + ")");
}

}  // namespace crossover
