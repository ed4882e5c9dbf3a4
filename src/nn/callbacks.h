// What fit reports, and what can be hooked into it between epochs.
//
// Callbacks run on the host between epochs only (never inside an epoch), so they cost nothing
// per step and never force a device synchronisation inside an epoch.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace crossover {

class Sequential;

// One epoch's numbers: "loss", "accuracy", "val_loss", "val_accuracy", "lr".
using Logs = std::map<std::string, double>;

struct EpochRecord {
  int epoch = 0;  // 1-based
  double loss = 0;
  double accuracy = 0;
  double seconds = 0;  // training time of this epoch alone
  int64_t steps = 0;
  std::optional<double> val_loss, val_accuracy, val_seconds;
  double learning_rate = 0;  // at the end of the epoch
};

// Keras's History: one record per epoch, and the same numbers by key.
struct History {
  std::vector<EpochRecord> epochs;
  std::map<std::string, std::vector<double>> history;  // "loss" -> per-epoch values, ...
  bool interrupted = false;                            // Ctrl-C stopped training after a step
  bool stopped_early = false;                          // a callback asked to stop
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(Sequential&) {}
  virtual void on_epoch_begin(Sequential&, int /*epoch*/) {}
  // May call model.stop_training() or model.set_learning_rate().
  virtual void on_epoch_end(Sequential&, int /*epoch*/, const Logs&) {}
  virtual void on_train_end(Sequential&) {}
};

// Where a callback's messages go, a line at a time without its newline (Keras's verbose=1:
// Keras 3's own text, io_utils.print_msg adds the newline); empty: none.
using CallbackMessages = std::function<void(const std::string& line)>;

// EarlyStopping, ModelCheckpoint and ReduceLROnPlateau compare the monitored value as Keras 3's
// MonitorCallback does (_is_improvement): the first value is an improvement, then
// (value - min_delta) > best for a maximised quantity, (value + min_delta) < best for a
// minimised one, both sides rounded to float32 (Keras's ops take Python floats as float32). A
// monitor missing from the logs is warned about on stderr and the epoch skipped.

// Keras's EarlyStopping: stops after `patience` epochs in a row in which `monitor` did not
// improve by more than min_delta (so at most 1 + patience epochs after the best one); with
// restore_best_weights, the weights of the best epoch are put back when training ends.
struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0;
  int patience = 0;
  std::string mode = "auto";  // "min", "max", or "auto" (Keras 3's: see Monitor::decide)
  // An epoch that improves on the best but not on the baseline does not reset the wait.
  std::optional<double> baseline;
  bool restore_best_weights = false;
  int start_from_epoch = 0;  // epochs (0-based) before this one are not monitored
  // "Epoch N: early stopping", "Restoring model weights from the end of the best epoch: N."
  CallbackMessages say;
};
std::shared_ptr<Callback> EarlyStopping(EarlyStoppingOptions options = {});

// Saves the model's weights (save_weights: .safetensors, or Keras 3's .weights.h5, by the suffix)
// at the end of every epoch, or only when `monitor` improved. The path may name the epoch
// (1-based) and the epoch's logs as Keras's filepath does, in Python's (and fmt's) format syntax:
// "ckpt-{epoch:02d}-{val_loss:.2f}.safetensors"; a name the logs lack is an Error.
struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  bool save_best_only = false;
  std::string mode = "auto";
  // Writes the file; empty: save_weights (nn/weights_io.h, the format by the suffix).
  std::function<void(const Sequential&, const std::string& path)> save;
  // "\nEpoch N: saving model to PATH", "\nEpoch N: val_loss improved from 0.12345 to ...",
  // "\nEpoch N: finished saving model to PATH" (Keras 3's text).
  CallbackMessages say;
};
std::shared_ptr<Callback> ModelCheckpoint(std::string path, ModelCheckpointOptions options = {});
// ModelCheckpoint's path for an epoch (0-based) and its logs.
std::string checkpoint_path(const std::string& pattern, int epoch, const Logs& logs);

// Keras's LearningRateScheduler: lr for the next epoch = schedule(epoch (0-based), lr).
std::shared_ptr<Callback> LearningRateScheduler(std::function<double(int, double)> schedule);
// Step decay: lr = initial * drop ^ floor(epoch / epochs_per_drop).
std::shared_ptr<Callback> StepDecay(double initial_learning_rate, double drop, int epochs_per_drop);

// Keras 3's ReduceLROnPlateau (keras/src/callbacks/reduce_lr_on_plateau.py, step for step): while
// in cooldown, the cooldown counts down and the wait stays 0; an improvement sets the best and
// the wait to 0; otherwise, out of cooldown, the wait grows, and at `patience` the rate becomes
// max(rate * factor, min_lr) if the rate (float32) is above min_lr (as float32), which starts
// the cooldown and resets the wait; at min_lr nothing changes (the wait keeps growing).
struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;
  int patience = 10;
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0;
  std::string mode = "auto";
  // "\nEpoch N: ReduceLROnPlateau reducing learning rate to X." (X as Python prints the float).
  CallbackMessages say;
};
// A double as Python's repr prints it (the shortest text that reads back, "0.1", "1e-05", "2.0").
std::string python_float_repr(double value);
std::shared_ptr<Callback> ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});

}  // namespace crossover
