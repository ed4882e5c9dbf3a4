// Keras 3's `.weights.h5` files (model.save_weights / model.load_weights), through libhdf5.
//
// The layout Keras 3 writes (keras/src/saving/saving_lib.py, H5IOStore and _save_state) for a
// Sequential model, and the one crossover writes:
//
//   /vars                      group, attribute name = the model's name, no datasets
//   /layers/dense/vars         group, attribute name = the layer's name ("dense")
//   /layers/dense/vars/0       float32 dataset, the kernel (inputs, units)
//   /layers/dense/vars/1       float32 dataset, the bias (units)
//   /layers/dropout/vars       group, attribute name = "dropout", no datasets
//   /layers/dense_1/vars/...   the second Dense layer
//   /optimizer/vars/0..n       the optimizer's variables, when the model was trained
//
// A layer's group is named after its class, not its name: the snake_case class name, then
// "_1", "_2", ... for the next layers of the same class (Dense, Dense -> dense, dense_1), in the
// order of model.layers (InputLayer excluded). Keras 2.13's files say
// "_layer_checkpoint_dependencies" for "layers"; both are read. The root has no attributes.
//
// crossover reads the layers' variables and ignores the optimizer's (it cannot map another
// framework's optimizer slots onto its own); it writes the layers' variables only, so Keras
// starts a fresh optimizer state after loading (Keras warns that it skips the optimizer when
// its model was already trained). Use a checkpoint (formats/checkpoint.h) to keep optimizer state.
//
// Hostile files: the reader takes the file's bytes, checks the HDF5 signature and superblock
// version itself, then opens the bytes in memory (libhdf5's core driver: nothing else on disk is
// opened) in a forked child process, because libhdf5 1.10 itself crashes (SIGSEGV) or loops on
// some corrupt files: a child that dies or runs past its deadline (10 s + 1 s per 64 MiB) is an
// Error, and the weights come back through a pipe, checked again. It follows hard links only (no
// soft or external links, no external or virtual datasets, as Keras refuses links), reads float
// datasets without filters whose stored size matches their shape, and turns every libhdf5 error
// into Error(path, ...); libhdf5's own error printing is turned off.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/sequential.h"

namespace crossover {

// One layer's entry of a .weights.h5 file: /layers/<key>/vars.
struct KerasH5Layer {
  std::string key;  // "dense_1": the group under /layers; an inner layer's "time_distributed/layer"
  std::string name;          // its vars group's "name" attribute (the layer's name), or ""
  std::vector<Tensor> vars;  // vars/0, vars/1, ... in order
};

struct KerasH5Weights {
  std::string model_name;            // /vars's "name" attribute, or ""
  std::vector<KerasH5Layer> layers;  // by key; each layer's group, then the groups below it
};

// Parses a .weights.h5 file held in memory (`where` names it in messages). Throws Error(where,
// ...) for anything that is not such a file, naming what is wrong. Never allocates more than a
// small multiple of the input's size.
KerasH5Weights parse_keras_weights_h5(std::span<const uint8_t> file, const std::string& where);
KerasH5Weights read_keras_weights_h5(const std::string& path);

// The file's bytes for these weights (what write_keras_weights_h5 writes).
std::vector<uint8_t> keras_weights_h5_bytes(const KerasH5Weights& weights,
                                            const std::string& where);
// Writes the file atomically (a temporary file in the same folder, then renamed over `path`).
void write_keras_weights_h5(const std::string& path, const KerasH5Weights& weights);

// The model's weights in Keras 3's layout (keys by class, kernel then bias). Requires a model
// with weights (compiled, with a known input shape).
KerasH5Weights keras_weights_of(const Sequential& model);

// Loads Keras weights into a compiled model of the same architecture. Everything is checked
// first; a mismatch throws Error(path, ...) naming the layer and both shapes, e.g. "layer 2
// 'dense_1' (Dense, group layers/dense_1): variable 0 (kernel) has shape (5, 3) in the file but
// (5, 4) in the model".
void load_keras_weights(Sequential& model, const KerasH5Weights& weights, const std::string& path);

// save_weights / load_weights (formats/weights_io.h) call these for paths ending in ".weights.h5".
void save_keras_weights_h5(const Sequential& model, const std::string& path);
void load_keras_weights_h5(Sequential& model, const std::string& path);

// ---- the legacy whole-model HDF5 file: Keras's model.save("m.h5") / load_model("m.h5")
// (keras/src/legacy/saving/legacy_h5_format.py), as Keras 3.15 writes and reads it:
//
//   /                      attributes model_config (the model's JSON), training_config (the
//                          compile settings' JSON; absent for a model never compiled),
//                          keras_version, backend: UTF-8 strings
//   /model_weights         attributes layer_names (the model's layers, in order), backend,
//                          keras_version
//   /model_weights/<layer> attribute weight_names ("sequential/dense/kernel", ...; an empty list
//                          for a layer without weights), each a float dataset at that path inside
//                          the layer's group (intermediate groups made by the path)
//   /optimizer_weights     Keras's optimizer state: ignored when read, not written (Keras then
//                          starts a fresh optimizer, as after crossover's .keras archive)
//
// A list attribute too large for an HDF5 object header is split by Keras into name0, name1, ...;
// both forms are read. The JSON is Python's to make and read (python/crossover/keras/saving.py);
// these read and write the file, with the .weights.h5 reader's guards (a child process, hard
// links only, unfiltered float datasets, sizes checked against the file's).
struct LegacyH5Layer {
  std::string name;
  std::vector<std::string> weight_names;
  std::vector<Tensor> weights;  // one per weight name, in its order
};
struct LegacyH5Model {
  std::string model_config, training_config, keras_version, backend;  // "" when absent
  std::vector<LegacyH5Layer> layers;                                  // in layer_names' order
};
LegacyH5Model parse_legacy_h5_model(std::span<const uint8_t> file, const std::string& where);
LegacyH5Model read_legacy_h5_model(const std::string& path);
std::vector<uint8_t> legacy_h5_model_bytes(const LegacyH5Model& model, const std::string& where);
// Writes the file atomically (a temporary file in the same folder, then renamed over `path`).
void write_legacy_h5_model(const std::string& path, const LegacyH5Model& model);

}  // namespace crossover
