// The files every weight format shares (the bottom of the formats room: it includes no other
// format): whole-file reads, atomic writes, and the checked load of named tensors into a model.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "nn/sequential.h"

namespace crossover {

// The model's weights (names and shapes) that loading `path` into it must replace: Error(path,
// why) when the model is not compiled or its input shape is not known yet.
std::vector<NamedTensor> weights_to_load(const Sequential& model, const std::string& path);

// The whole file (Error(path, why) when it cannot be read, or is a folder).
std::vector<uint8_t> read_file_bytes(const std::string& path);
// Writes the pieces to `path` through a temporary file in the same folder, flushed and synced,
// then renamed over the target. On failure the temporary file is removed and the target is
// untouched.
void write_file_atomic(const std::string& path,
                       const std::vector<std::span<const uint8_t>>& pieces);

// Loads `tensors` (named as the model names its weights; any named "optimizer/..." are ignored:
// a checkpoint's state) into the model after checking everything first: each of the model's
// weights is there with its shape and nothing else is, else Error(path, ...) naming the first
// difference, e.g. "tensor dense/kernel has shape (784, 64) in the file but (784, 128) in the
// model". NaN or Inf values are loaded but reported on stderr:
// "warning: <path>: tensor dense/kernel holds N NaN/Inf values".
void load_named_weights(Sequential& model, const std::vector<NamedTensor>& tensors,
                        const std::string& path);

// A name read from a file, safe for a one-line message: ASCII only (anything else, and control
// characters, as '?'), at most 80 characters.
std::string printable_name(std::string_view s);

}  // namespace crossover
