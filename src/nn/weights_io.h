// Saving and loading a model's weights in the safetensors format
// (https://huggingface.co/docs/safetensors): an 8-byte little-endian header length N, N bytes of
// JSON header, then the raw little-endian tensor data. Python's `safetensors` reads the files:
//
//   from safetensors.numpy import load_file
//   w = load_file("model.safetensors")   # {"dense/kernel": (784, 128) float32, ...}
//
// Tensors are named and shaped as Keras stores them ("dense/kernel" of shape (inputs, units),
// "dense/bias"), in F32. The header's "__metadata__" holds "format": "crossover", "contents":
// "weights" and "architecture": the model's Keras 3 JSON (nn/model_config.h), including its
// compile_config when the model was compiled.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/sequential.h"

namespace crossover {

// Writes the model's weights to `path` (safetensors, or Keras 3's .weights.h5: weights_format_of)
// atomically (a temporary file in the same folder, flushed
// and synced, then renamed over the target): a failed save throws Error(path, why) and leaves
// any old file exactly as it was, with no temporary file behind.
// Requires a model with weights (compiled, with a known input shape).
void save_weights(const Sequential& model, const std::string& path);

// Loads weights saved by save_weights, or a Keras 3 .weights.h5 file (weights_format_of; see
// nn/keras_h5.h), or any safetensors file with the same tensor names and
// shapes, F32) into a model of the same architecture. The model must be compiled first
// (compile() sets up the parameters; it also re-initializes them, so compile, then load).
// Everything is checked before anything is loaded; a mismatch throws Error naming the first
// difference, e.g. "tensor dense/kernel has shape (784, 64) in the file but (784, 128) in the
// model". NaN or Inf values are loaded but reported on stderr:
// "warning: <path>: tensor dense/kernel holds N NaN/Inf values".
// A checkpoint file (nn/checkpoint.h) also works: its optimizer state is ignored.
void load_weights(Sequential& model, const std::string& path);

// Keras's load_model: rebuilds the model from the architecture in the file's metadata, compiles
// it with the file's compile settings (optimizer, loss, metrics, as a Keras user expects from
// keras.models.load_model) on options.device / threads / seed, and loads the weights. A file
// whose architecture has no compile_config is compiled with Adam and
// sparse_categorical_crossentropy (with accuracy), the seed's defaults. The optimizer's state is
// not restored: use load_checkpoint for that.
Sequential load_model(const std::string& path, CompileOptions options = {});

// The format save_weights and load_weights use, picked by the path's suffix: ".weights.h5" is
// Keras 3's HDF5 layout (nn/keras_h5.h); a ".keras" archive and any other ".h5"/".hdf5" (Keras
// 2's legacy format) are refused with Error(path, ...) saying what is supported; anything else
// is safetensors (".safetensors", a checkpoint's ".ckpt", ...).
enum class WeightsFormat { safetensors, keras_h5 };
WeightsFormat weights_format_of(const std::string& path);

// ---- files, shared by the weight formats ----

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

// ---- the format itself, for tools, tests and fuzzing ----

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
// load_weights on a file already read (tensors named "optimizer/..." are ignored); `path`
// names it in messages.
void load_weights(Sequential& model, const SafetensorsFile& file, const std::string& path);

// Writes F32 tensors and metadata as a safetensors file, atomically as save_weights does.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace crossover
