// Keras's ModelCheckpoint: a callback that writes the model's weights to files during fit. It
// sits with the formats (it needs save_weights, formats/weights_io.h); the other callbacks are
// the engine's (nn/callbacks.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "nn/callbacks.h"

namespace crossover {

// Saves the model's weights (save_weights: .safetensors, or Keras 3's .weights.h5, by the suffix)
// at the end of every epoch, or only when `monitor` improved. The path may name the epoch
// (1-based) and the epoch's logs as Keras's filepath does, in Python's (and fmt's) format syntax:
// "ckpt-{epoch:02d}-{val_loss:.2f}.safetensors"; a name the logs lack is an Error.
//
// With save_freq N > 0 (Keras's save_freq=N) it saves every N training batches instead, counted
// across epochs, and not at epochs' ends; the path may then also name the batch, "{batch}" (from
// 1 in its epoch, as Keras fills it), and the logs are the batch's running means.
struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  bool save_best_only = false;
  std::string mode = "auto";
  int64_t save_freq = 0;  // 0: at every epoch's end (Keras's "epoch")
  // Writes the file; empty: save_weights (formats/weights_io.h, the format by the suffix).
  std::function<void(const Sequential&, const std::string& path)> save;
  // "\nEpoch N: saving model to PATH", "\nEpoch N: val_loss improved from 0.12345 to ...",
  // "\nEpoch N: finished saving model to PATH" (Keras 3's text).
  CallbackMessages say;
};
std::shared_ptr<Callback> ModelCheckpoint(std::string path, ModelCheckpointOptions options = {});
// ModelCheckpoint's path for an epoch (0-based) and its logs, and a batch (0-based) for a save
// inside the epoch (Keras: "{batch}" is batch + 1, unless the logs hold a "batch").
std::string checkpoint_path(const std::string& pattern, int epoch, const Logs& logs,
                            std::optional<int64_t> batch = std::nullopt);

}  // namespace crossover
