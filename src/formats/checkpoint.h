// Training checkpoints: everything needed to continue training exactly where it stopped.
//
//   model.fit(x, y, {.epochs = 1});
//   save_checkpoint(model, "run.ckpt", 1);
//   ...
//   Sequential fresh = ...same layers...;
//   fresh.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.seed = same});
//   int epoch = load_checkpoint(fresh, "run.ckpt");        // 1
//   fresh.fit(x, y, {.epochs = 2, .initial_epoch = epoch});  // the same trajectory
//
// A checkpoint is a safetensors file (formats/weights_io.h) holding the weights ("dense/kernel",
// ...), the optimizer's state ("optimizer/dense/kernel/slot1", ...: Adam's m and v (and
// velocity_hat, slot3, with amsgrad), SGD's velocity, RMSprop's mean square) and, in __metadata__,
// "contents": "checkpoint", the epoch, the exact optimizer step count, the optimizer settings
// (Keras's compile_config), the architecture and any extra entries the caller adds. Written
// atomically, like save_weights.
//
// Shuffling and dropout depend on the seed, the epoch and the step only, so a model compiled with
// the same seed (and, for bit-identical results on the CPU, the same thread count) continues
// the same trajectory.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "formats/model_config.h"
#include "nn/sequential.h"

namespace crossover {

// Saves weights, optimizer state and progress. `epoch`: the number of epochs completed (the
// epoch to resume from). `extra`: more metadata to keep (e.g. {"seed", "42"}); keys used by
// crossover itself (format, contents, architecture, epoch, step, optimizer, crossover_version)
// are refused. Requires a compiled model with weights.
void save_checkpoint(const Sequential& model, const std::string& path, int epoch,
                     const std::map<std::string, std::string>& extra = {});

// Restores weights, optimizer state and step counter into a compiled model of the same
// architecture and optimizer kind (a different one is refused, naming the difference); the
// learning rate is set to the checkpoint's (it may have been changed by a callback). Returns the
// epoch to resume from: pass it as FitOptions::initial_epoch.
int load_checkpoint(Sequential& model, const std::string& path);

struct CheckpointInfo {
  int epoch = 0;
  int64_t step = 0;
  std::string architecture;                     // Keras 3 model JSON (formats/model_config.h)
  TrainingConfig training;                      // optimizer, loss, metrics
  std::map<std::string, std::string> metadata;  // everything in __metadata__, extras included
};

// Reads and checks a checkpoint's metadata (the whole file is validated).
CheckpointInfo read_checkpoint_info(const std::string& path);

// For `crossover train --resume`: rebuilds the model from the checkpoint's architecture,
// compiles it with the checkpoint's optimizer, loss and metrics on options.device (threads,
// seed: as given), and restores everything. The epoch to resume from goes to *epoch.
Sequential model_from_checkpoint(const std::string& path, CompileOptions options, int* epoch);

}  // namespace crossover
