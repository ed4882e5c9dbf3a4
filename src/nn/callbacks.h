// What fit reports, and what can be hooked into it between epochs and, on request, between
// batches.
//
// Epoch-level hooks run on the host between epochs. Batch-level hooks (Keras's
// on_train_batch_*, on_test_batch_*, on_predict_batch_*) are called only when a callback asks
// for them (wants_batches): then each batch's end reads the running loss and accuracy back, a
// device synchronisation per batch; without one, fit's steps read nothing per batch, as before.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

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
  // The compiled metrics other than "accuracy", by name in compile's order ("mae"), and the
  // validation's (by the same names, without "val_"; empty when it did not run).
  std::vector<std::pair<std::string, double>> metrics, val_metrics;
  double learning_rate = 0;  // at the end of the epoch
};

// Which loop a batch belongs to: fit's training steps, evaluate's (and fit's validation),
// predict's.
enum class BatchPhase { train, test, predict };

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

  // Whether the batch hooks of `phase` are to be called (false: fit/evaluate/predict never read
  // a batch's numbers for this callback).
  virtual bool wants_batches(BatchPhase) const { return false; }
  // Keras's batch hooks; `batch` counts from 0 in each epoch (each evaluate, each predict). The
  // train and test logs are the running means since the epoch's (evaluation's) start: "loss" and
  // "accuracy" when compiled with it, as Keras's logs.
  virtual void on_train_batch_begin(Sequential&, int64_t /*batch*/) {}
  virtual void on_train_batch_end(Sequential&, int64_t /*batch*/, const Logs&) {}
  // Around every evaluation: evaluate's and each validation of fit (Keras calls them with fit's
  // callbacks too); on_test_end's logs are the evaluation's "loss" and "accuracy".
  virtual void on_test_begin(Sequential&) {}
  virtual void on_test_end(Sequential&, const Logs&) {}
  virtual void on_test_batch_begin(Sequential&, int64_t /*batch*/) {}
  virtual void on_test_batch_end(Sequential&, int64_t /*batch*/, const Logs&) {}
  virtual void on_predict_begin(Sequential&) {}
  virtual void on_predict_end(Sequential&) {}
  virtual void on_predict_batch_begin(Sequential&, int64_t /*batch*/) {}
  // `outputs`: the batch's rows of predict's result (rows, outputs), valid during the call.
  virtual void on_predict_batch_end(Sequential&, int64_t /*batch*/, const Tensor& /*outputs*/) {}
};

using Callbacks = std::vector<std::shared_ptr<Callback>>;

// fit/evaluate/predict's side of the batch hooks, made once per loop: run() calls the batch's
// step alone when no callback wants this phase's batches, and otherwise the begin hooks, the
// step, and the end hooks with the logs read after it.
class BatchHooks {
 public:
  BatchHooks(Sequential& model, const Callbacks& callbacks, BatchPhase phase);
  bool active() const { return !wanting_.empty(); }
  // Every callback's on_test_begin / on_predict_begin (none for train: fit calls its own).
  void begin_loop();
  // Every callback's on_test_end(logs) / on_predict_end.
  void end_loop(const Logs& logs);
  // read_result() -> the batch's Logs (train, test) or its rows of the result (predict).
  template <class Step, class ReadResult>
  void run(int64_t batch, Step&& step, ReadResult&& read_result) {
    if (wanting_.empty()) {
      step();
      return;
    }
    begin(batch);
    step();
    end(batch, read_result());
  }
  // The same hooks one at a time (call them only when active()).
  void begin(int64_t batch);
  void end(int64_t batch, const Logs& logs);
  // Predict's: the batch's rows of the result.
  void end(int64_t batch, const Tensor& outputs);

 private:
  Sequential& model_;
  const Callbacks& callbacks_;
  std::vector<Callback*> wanting_;
  BatchPhase phase_;
};

// Keras's EpochIterator over arrays, with steps_per_epoch: an epoch takes the next
// `steps_per_epoch` batches of the current pass over the data (a pass is `pass_steps` batches,
// shuffled at its start) and ends early where the pass runs out, with Keras's warning (once);
// the next epoch then starts a new pass. Unset: every epoch is one whole pass.
class EpochSteps {
 public:
  EpochSteps(int64_t pass_steps, std::optional<int64_t> steps_per_epoch);
  struct Epoch {
    int64_t first = 0;      // the pass's batch the epoch starts at
    int64_t steps = 0;      // batches it runs
    bool new_pass = false;  // the epoch starts a pass: shuffle
  };
  // The next epoch's batches (advances the position in the pass).
  Epoch next();
  // The progress bar's (and Keras's params["steps"]) steps per epoch.
  int64_t target() const { return steps_per_epoch_.value_or(pass_steps_); }

 private:
  int64_t pass_steps_;
  std::optional<int64_t> steps_per_epoch_;
  int64_t position_ = 0;  // batches of the current pass already run
  bool warned_ = false;
};

// Where a callback's messages go, a line at a time without its newline (Keras's verbose=1:
// Keras 3's own text, io_utils.print_msg adds the newline); empty: none.
using CallbackMessages = std::function<void(const std::string& line)>;

// EarlyStopping, ModelCheckpoint and ReduceLROnPlateau compare the monitored value as Keras 3's
// MonitorCallback does (_is_improvement): the first value is an improvement, then
// (value - min_delta) > best for a maximised quantity, (value + min_delta) < best for a
// minimised one, both sides rounded to float32 (Keras's ops take Python floats as float32). A
// monitor missing from the logs is warned about on stderr and the epoch skipped.

// A monitored quantity's best value, as Keras 3's MonitorCallback (EarlyStopping, ReduceLROnPlateau
// and ModelCheckpoint, formats/model_checkpoint.h, share it).
struct CallbackMonitor {
  std::string key, mode;
  const char* who = "";
  double min_delta = 0;     // >= 0
  std::optional<bool> max;  // decided at the first epoch's end (decide)
  std::optional<double> best;

  // mode "auto", "min" or "max" (else Error(owner, ...)).
  CallbackMonitor(const std::string& monitor, const std::string& direction, const char* owner,
                  double delta);
  // Keras 3's _set_monitor_op, which its callbacks call at the first epoch's end: "min" and "max"
  // as said; "auto" minimises the loss and follows a compiled metric's direction (up for the
  // accuracies, down for the errors), with or without "val_", and refuses anything else.
  void decide(const Sequential& model);
  // The value, or nothing with a warning on stderr (naming `reader`) when the logs lack it.
  std::optional<double> read(const Logs& logs, const char* reader) const;
  // Keras's _is_improvement: monitor_op(value -+ min_delta, reference) on float32.
  bool improves(double v, const std::optional<double>& reference) const;
  bool improves(double v) const { return improves(v, best); }
};
// Passes one line to `say` when there is one.
void say_line(const CallbackMessages& say, const std::string& line);

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
