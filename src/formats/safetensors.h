// The safetensors format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON header, then the raw little-endian tensor data. Python's
// `safetensors` reads the files:
//
//   from safetensors.numpy import load_file
//   w = load_file("model.safetensors")   # {"dense/kernel": (784, 128) float32, ...}
//
// Tensors are named and shaped as Keras stores them ("dense/kernel" of shape (inputs, units),
// "dense/bias"), in F32. save_weights (formats/weights_io.h) writes "__metadata__" with
// "format": "crossover", "contents": "weights" and "architecture": the model's Keras 3 JSON
// (formats/model_config.h), including its compile_config when the model was compiled.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/sequential.h"

namespace crossover {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // "F32", "F16", "I64", ...
  Shape shape;
  uint64_t begin = 0, end = 0;  // byte offsets within the data section
};

struct SafetensorsHeader {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<SafetensorsEntry> tensors;        // sorted by begin offset
  uint64_t data_offset = 0;                     // 8 + header length
  uint64_t data_bytes = 0;                      // the data section's size
};

// Parses and validates a whole safetensors file held in memory: the header length against the
// size, the JSON (well formed, no duplicate names), every dtype, shape and offset pair
// (shape x element size == end - begin), and that the tensors tile the data section exactly
// (no overlap, no gap, nothing past the end, nothing after the last tensor). Throws
// Error(where, ...) naming what is wrong. Never allocates more than the input's size.
SafetensorsHeader parse_safetensors(std::span<const uint8_t> file,
                                    const std::string& where = "safetensors");

// A parsed file with its F32 tensors decoded (any other dtype is refused, naming the tensor).
struct SafetensorsFile {
  SafetensorsHeader header;
  std::vector<NamedTensor> tensors;  // in the header's data order
  const Tensor* find(const std::string& name) const;
};
SafetensorsFile read_safetensors(const std::string& path);
// load_weights on a file already read (load_named_weights: tensors named "optimizer/..." are
// ignored); `path` names it in messages.
void load_weights(Sequential& model, const SafetensorsFile& file, const std::string& path);

// Writes F32 tensors and metadata as a safetensors file, atomically as save_weights does.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace crossover
