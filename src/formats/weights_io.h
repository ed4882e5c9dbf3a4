// Weights and models in and out of files, the format picked by the path's suffix
// (weights_format_of): safetensors (formats/safetensors.h) or Keras 3's .weights.h5
// (formats/keras_h5.h). The top of the formats room: it alone sees every format.
//
//   save_weights(model, "model.safetensors");   // or "model.weights.h5"
//   load_weights(fresh, "model.safetensors");   // a model of the same architecture, compiled
//   Sequential m = load_model("model.safetensors");  // the architecture from the file too
#pragma once

#include <string>

#include "nn/sequential.h"

namespace crossover {

// Writes the model's weights to `path` (safetensors, or Keras 3's .weights.h5: weights_format_of)
// atomically (a temporary file in the same folder, flushed
// and synced, then renamed over the target): a failed save throws Error(path, why) and leaves
// any old file exactly as it was, with no temporary file behind.
// Requires a model with weights (compiled, with a known input shape).
void save_weights(const Sequential& model, const std::string& path);

// Loads weights saved by save_weights, or a Keras 3 .weights.h5 file (weights_format_of; see
// formats/keras_h5.h), or any safetensors file with the same tensor names and
// shapes, F32) into a model of the same architecture. The model must be compiled first
// (compile() sets up the parameters; it also re-initializes them, so compile, then load).
// Everything is checked before anything is loaded; a mismatch throws Error naming the first
// difference, e.g. "tensor dense/kernel has shape (784, 64) in the file but (784, 128) in the
// model". NaN or Inf values are loaded but reported on stderr:
// "warning: <path>: tensor dense/kernel holds N NaN/Inf values".
// A checkpoint file (formats/checkpoint.h) also works: its optimizer state is ignored.
void load_weights(Sequential& model, const std::string& path);

// Keras's load_model: rebuilds the model from the architecture in the file's metadata, compiles
// it with the file's compile settings (optimizer, loss, metrics, as a Keras user expects from
// keras.models.load_model) on options.device / threads / seed, and loads the weights. A file
// whose architecture has no compile_config is compiled with Adam and
// sparse_categorical_crossentropy (with accuracy), the seed's defaults. The optimizer's state is
// not restored: use load_checkpoint for that.
Sequential load_model(const std::string& path, CompileOptions options = {});

// The format save_weights and load_weights use, picked by the path's suffix: ".weights.h5" is
// Keras 3's HDF5 layout (formats/keras_h5.h); a ".keras" archive and any other ".h5"/".hdf5" (Keras
// 2's legacy format) are refused with Error(path, ...) saying what is supported; anything else
// is safetensors (".safetensors", a checkpoint's ".ckpt", ...).
enum class WeightsFormat { safetensors, keras_h5 };
WeightsFormat weights_format_of(const std::string& path);

}  // namespace crossover
