// Keras's 1-D poolings over (steps, channels) samples: their constructors (their arguments are
// PoolingArgs, held as one row: (1, n)).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "nn/layer.h"

namespace crossover {

// The maximum or the mean over each pool_size window of steps of each channel; strides default to
// pool_size; padding "valid" or "same" (padded steps not counted in the mean, as in Keras).
Layer MaxPooling1D(int64_t pool_size = 2, std::optional<int64_t> strides = std::nullopt,
                   std::string_view padding = "valid");
Layer AveragePooling1D(int64_t pool_size = 2, std::optional<int64_t> strides = std::nullopt,
                       std::string_view padding = "valid");
// (steps, channels) -> (channels): the mean or the maximum of each channel over the steps.
Layer GlobalAveragePooling1D();
Layer GlobalMaxPooling1D();

}  // namespace crossover
