#include "nn/callbacks.h"

#include <fmt/args.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "core/error.h"
#include "nn/sequential.h"
#include "nn/weights_io.h"

namespace crossover {
namespace {

void check_mode(const std::string& mode, const char* who) {
  if (mode != "auto" && mode != "min" && mode != "max")
    throw Error(who, "mode must be auto, min or max, got '" + mode + "'");
}

// Tracks the best value of a monitored quantity, as Keras 3's MonitorCallback.
struct Monitor {
  std::string key, mode;
  const char* who = "";
  double min_delta = 0;     // >= 0
  std::optional<bool> max;  // decided at the first epoch's end (decide)
  std::optional<double> best;

  Monitor(const std::string& monitor, const std::string& direction, const char* owner, double delta)
      : key(monitor), mode(direction), who(owner), min_delta(std::abs(delta)) {
    check_mode(mode, who);
  }

  // Keras 3's _set_monitor_op, which its callbacks call at the first epoch's end: "min" and "max"
  // as said; "auto" minimises the loss and maximises a compiled metric (the accuracy, whose
  // direction is up), with or without "val_", and refuses anything else rather than guess.
  void decide(const Sequential& model) {
    if (max) return;
    if (mode != "auto") {
      max = mode == "max";
      return;
    }
    const std::string name = key.starts_with("val_") ? key.substr(4) : key;
    if (name == "loss") max = false;
    for (const std::string& metric : model.metrics())
      if (metric == name) max = true;
    if (!max)
      throw Error(who, fmt::format("monitor '{}': mode 'auto' cannot tell whether it should be "
                                   "maximized or minimized (it knows the loss and the compiled "
                                   "metrics: {}); pass mode 'max' or 'min'",
                                   key, model.metrics().empty() ? "none" : "accuracy"));
  }

  // The value, or nothing with a warning when the logs lack it.
  std::optional<double> read(const Logs& logs, const char* who) const {
    auto it = logs.find(key);
    if (it == logs.end()) {
      std::fprintf(stderr, "warning: %s: '%s' is not among the epoch's logs (is validation on?)\n",
                   who, key.c_str());
      return std::nullopt;
    }
    return it->second;
  }
  // Keras's _is_improvement: monitor_op(value -+ min_delta, reference) on float32.
  bool improves(double v, const std::optional<double>& reference) const {
    if (!reference) return true;
    const bool up = max.value();  // decide() ran at the epoch's end
    const float a = static_cast<float>(up ? v - min_delta : v + min_delta);
    const float b = static_cast<float>(*reference);
    return up ? a > b : a < b;
  }
  bool improves(double v) const { return improves(v, best); }
};

void tell(const CallbackMessages& say, const std::string& line) {
  if (say) say(line);
}

class EarlyStoppingCallback final : public Callback {
 public:
  explicit EarlyStoppingCallback(EarlyStoppingOptions o)
      : o_(std::move(o)), mon_(o_.monitor, o_.mode, "EarlyStopping", o_.min_delta) {}
  void on_train_begin(Sequential&) override {
    wait_ = stopped_epoch_ = best_epoch_ = 0;
    mon_.best.reset();
    best_weights_.clear();
    have_best_weights_ = false;
  }
  void on_epoch_end(Sequential& model, int epoch, const Logs& logs) override {
    mon_.decide(model);
    const std::optional<double> v = mon_.read(logs, "EarlyStopping");
    if (!v || epoch < o_.start_from_epoch) return;
    if (o_.restore_best_weights && !have_best_weights_) keep_weights(model, epoch);
    ++wait_;
    if (mon_.improves(*v)) {
      mon_.best = *v;
      best_epoch_ = epoch;
      if (o_.restore_best_weights) keep_weights(model, epoch);
      // The wait restarts only when the value beats the baseline too.
      if (!o_.baseline || mon_.improves(*v, o_.baseline)) wait_ = 0;
      return;
    }
    if (wait_ >= o_.patience && epoch > 0) {
      stopped_epoch_ = epoch;
      model.stop_training();
    }
  }
  void on_train_end(Sequential& model) override {
    if (stopped_epoch_ > 0)
      tell(o_.say, fmt::format("Epoch {}: early stopping", stopped_epoch_ + 1));
    if (o_.restore_best_weights && have_best_weights_) {
      tell(o_.say, fmt::format("Restoring model weights from the end of the best epoch: {}.",
                               best_epoch_ + 1));
      model.set_weights(best_weights_);
    }
  }

 private:
  void keep_weights(const Sequential& model, int epoch) {
    best_weights_ = model.get_weights();
    best_epoch_ = epoch;
    have_best_weights_ = true;
  }

  EarlyStoppingOptions o_;
  Monitor mon_;
  int wait_ = 0, stopped_epoch_ = 0, best_epoch_ = 0;
  std::vector<NamedTensor> best_weights_;
  bool have_best_weights_ = false;
};

class ModelCheckpointCallback final : public Callback {
 public:
  ModelCheckpointCallback(std::string path, ModelCheckpointOptions o)
      : path_(std::move(path)),
        o_(std::move(o)),
        mon_(o_.monitor, o_.mode, "ModelCheckpoint", 0.0) {
    if (o_.save_freq < 0)
      throw Error("ModelCheckpoint", "save_freq must be 'epoch' or a positive number of batches");
  }
  bool wants_batches(BatchPhase phase) const override {
    return phase == BatchPhase::train && o_.save_freq > 0;
  }
  void on_train_begin(Sequential&) override {
    batches_since_save_ = 0;
    last_batch_.reset();
  }
  void on_epoch_begin(Sequential&, int epoch) override { epoch_ = epoch; }
  // Keras's _should_save_on_batch: the batches seen since the last save, a batch index not above
  // the last one starting a new epoch.
  void on_train_batch_end(Sequential& model, int64_t batch, const Logs& logs) override {
    if (o_.save_freq <= 0) return;
    batches_since_save_ +=
        (!last_batch_ || batch <= *last_batch_) ? batch + 1 : batch - *last_batch_;
    last_batch_ = batch;
    if (batches_since_save_ < o_.save_freq) return;
    batches_since_save_ = 0;
    mon_.decide(model);
    save(model, epoch_, batch, logs);
  }
  void on_epoch_end(Sequential& model, int epoch, const Logs& logs) override {
    mon_.decide(model);  // Keras decides here even without save_best_only
    if (o_.save_freq == 0) save(model, epoch, std::nullopt, logs);
  }

 private:
  void save(Sequential& model, int epoch, std::optional<int64_t> batch, const Logs& logs) {
    const std::string path = checkpoint_path(path_, epoch, logs, batch);
    if (o_.save_best_only) {
      // Keras 3: without the monitor in the logs it saves anyway.
      if (const std::optional<double> v = mon_.read(logs, "ModelCheckpoint")) {
        const std::string best =
            mon_.best ? fmt::format("{:.5f}", *mon_.best) : std::string("None");
        if (!mon_.improves(*v)) {
          tell(o_.say,
               fmt::format("\nEpoch {}: {} did not improve from {}", epoch + 1, o_.monitor, best));
          return;
        }
        tell(o_.say, fmt::format("\nEpoch {}: {} improved from {} to {:.5f}, saving model to {}",
                                 epoch + 1, o_.monitor, best, *v, path));
        mon_.best = *v;
      }
    } else {
      tell(o_.say, fmt::format("\nEpoch {}: saving model to {}", epoch + 1, path));
    }
    if (o_.save)
      o_.save(model, path);
    else
      save_weights(model, path);
    tell(o_.say, fmt::format("\nEpoch {}: finished saving model to {}", epoch + 1, path));
  }

  std::string path_;
  ModelCheckpointOptions o_;
  Monitor mon_;
  int epoch_ = 0;
  int64_t batches_since_save_ = 0;
  std::optional<int64_t> last_batch_;
};

class SchedulerCallback final : public Callback {
 public:
  explicit SchedulerCallback(std::function<double(int, double)> f) : f_(std::move(f)) {}
  void on_epoch_begin(Sequential& model, int epoch) override {
    const double lr = f_(epoch, model.learning_rate());
    if (lr != model.learning_rate()) model.set_learning_rate(lr);
  }

 private:
  std::function<double(int, double)> f_;
};

class ReduceLROnPlateauCallback final : public Callback {
 public:
  explicit ReduceLROnPlateauCallback(ReduceLROnPlateauOptions o)
      : o_(std::move(o)), mon_(o_.monitor, o_.mode, "ReduceLROnPlateau", o_.min_delta) {
    if (!(o_.factor > 0 && o_.factor < 1))
      throw Error("ReduceLROnPlateau", "factor must be in (0, 1)");
  }
  void on_train_begin(Sequential&) override {
    wait_ = cooldown_ = 0;
    mon_.best.reset();
  }
  // Keras 3's on_epoch_end, line for line.
  void on_epoch_end(Sequential& model, int epoch, const Logs& logs) override {
    mon_.decide(model);
    const std::optional<double> v = mon_.read(logs, "ReduceLROnPlateau");
    if (!v) return;
    if (cooldown_ > 0) {
      --cooldown_;
      wait_ = 0;
    }
    if (mon_.improves(*v)) {
      mon_.best = *v;
      wait_ = 0;
    } else if (cooldown_ <= 0) {
      if (++wait_ >= o_.patience) {
        const double lr = model.learning_rate();  // the float32 rate, as Keras reads its variable
        if (static_cast<float>(lr) > static_cast<float>(o_.min_lr)) {
          const double next = std::max(lr * o_.factor, o_.min_lr);
          model.set_learning_rate(next);
          tell(o_.say, fmt::format("\nEpoch {}: ReduceLROnPlateau reducing learning rate to {}.",
                                   epoch + 1, python_float_repr(next)));
          cooldown_ = o_.cooldown;
          wait_ = 0;
        }
      }
    }
  }

 private:
  ReduceLROnPlateauOptions o_;
  Monitor mon_;
  int wait_ = 0, cooldown_ = 0;
};

}  // namespace

std::string python_float_repr(double value) {
  // fmt's shortest round-trip form switches to an exponent where Python's repr does (below 1e-4,
  // from 1e16); Python adds ".0" to a whole number.
  std::string s = fmt::format("{}", value);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::shared_ptr<Callback> EarlyStopping(EarlyStoppingOptions options) {
  return std::make_shared<EarlyStoppingCallback>(std::move(options));
}
std::shared_ptr<Callback> ModelCheckpoint(std::string path, ModelCheckpointOptions options) {
  return std::make_shared<ModelCheckpointCallback>(std::move(path), std::move(options));
}
std::string checkpoint_path(const std::string& pattern, int epoch, const Logs& logs,
                            std::optional<int64_t> batch) {
  if (pattern.find_first_of("{}") == std::string::npos) return pattern;
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  args.push_back(fmt::arg("epoch", epoch + 1));
  std::string names = "epoch";
  if (batch && !logs.contains("batch")) {
    args.push_back(fmt::arg("batch", *batch + 1));
    names += ", batch";
  }
  for (const auto& [key, value] : logs) {
    args.push_back(fmt::arg(key.c_str(), value));
    names += ", " + key;
  }
  try {
    return fmt::vformat(pattern, args);
  } catch (const fmt::format_error& e) {
    throw Error("ModelCheckpoint", "cannot fill in the path '" + pattern + "' (" + e.what() +
                                       "); it may name " + names);
  }
}

BatchHooks::BatchHooks(Sequential& model, const Callbacks& callbacks, BatchPhase phase)
    : model_(model), callbacks_(callbacks), phase_(phase) {
  for (const auto& cb : callbacks)
    if (cb->wants_batches(phase)) wanting_.push_back(cb.get());
}

void BatchHooks::begin_loop() {
  for (const auto& cb : callbacks_) {
    if (phase_ == BatchPhase::test) cb->on_test_begin(model_);
    if (phase_ == BatchPhase::predict) cb->on_predict_begin(model_);
  }
}

void BatchHooks::end_loop(const Logs& logs) {
  for (const auto& cb : callbacks_) {
    if (phase_ == BatchPhase::test) cb->on_test_end(model_, logs);
    if (phase_ == BatchPhase::predict) cb->on_predict_end(model_);
  }
}

void BatchHooks::begin(int64_t batch) {
  for (Callback* cb : wanting_) switch (phase_) {
      case BatchPhase::train:
        cb->on_train_batch_begin(model_, batch);
        break;
      case BatchPhase::test:
        cb->on_test_batch_begin(model_, batch);
        break;
      case BatchPhase::predict:
        cb->on_predict_batch_begin(model_, batch);
        break;
    }
}

void BatchHooks::end(int64_t batch, const Logs& logs) {
  for (Callback* cb : wanting_) {
    if (phase_ == BatchPhase::train)
      cb->on_train_batch_end(model_, batch, logs);
    else
      cb->on_test_batch_end(model_, batch, logs);
  }
}

void BatchHooks::end(int64_t batch, const Tensor& outputs) {
  for (Callback* cb : wanting_) cb->on_predict_batch_end(model_, batch, outputs);
}

EpochSteps::EpochSteps(int64_t pass_steps, std::optional<int64_t> steps_per_epoch)
    : pass_steps_(pass_steps), steps_per_epoch_(steps_per_epoch) {
  if (steps_per_epoch_ && *steps_per_epoch_ < 1)
    throw Error("fit",
                "steps_per_epoch must be at least 1, got " + std::to_string(*steps_per_epoch_));
}

EpochSteps::Epoch EpochSteps::next() {
  Epoch e;
  if (!steps_per_epoch_) {
    e.steps = pass_steps_;
    e.new_pass = true;
    return e;
  }
  e.new_pass = position_ == 0;
  e.first = position_;
  e.steps = std::min(*steps_per_epoch_, pass_steps_ - position_);
  if (e.steps < *steps_per_epoch_ && !warned_) {
    // Keras's EpochIterator (warnings.warn: once).
    std::fprintf(stderr,
                 "warning: Your input ran out of data; interrupting training. Make sure that "
                 "your dataset or generator can generate at least `steps_per_epoch * epochs` "
                 "batches. You may need to use the `.repeat()` function when building your "
                 "dataset.\n");
    warned_ = true;
  }
  position_ += e.steps;
  if (position_ >= pass_steps_) position_ = 0;
  return e;
}

std::shared_ptr<Callback> LearningRateScheduler(std::function<double(int, double)> schedule) {
  return std::make_shared<SchedulerCallback>(std::move(schedule));
}
std::shared_ptr<Callback> StepDecay(double initial, double drop, int epochs_per_drop) {
  if (epochs_per_drop < 1) throw Error("StepDecay", "epochs_per_drop must be at least 1");
  return LearningRateScheduler([=](int epoch, double) {
    return initial * std::pow(drop, std::floor(static_cast<double>(epoch) / epochs_per_drop));
  });
}
std::shared_ptr<Callback> ReduceLROnPlateau(ReduceLROnPlateauOptions options) {
  return std::make_shared<ReduceLROnPlateauCallback>(std::move(options));
}

}  // namespace crossover
