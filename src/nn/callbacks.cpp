#include "nn/callbacks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "core/error.h"
#include "nn/metrics.h"
#include "nn/sequential.h"

namespace crossover {

namespace {

// "accuracy, mae", or "none": the compiled metrics, for messages.
std::string metric_list(const Sequential& model) {
  std::string out;
  for (const std::string& m : model.metrics()) out += (out.empty() ? "" : ", ") + m;
  return out.empty() ? "none" : out;
}

void check_mode(const std::string& mode, const char* who) {
  if (mode != "auto" && mode != "min" && mode != "max")
    throw Error(who, "mode must be auto, min or max, got '" + mode + "'");
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
      say_line(o_.say, fmt::format("Epoch {}: early stopping", stopped_epoch_ + 1));
    if (o_.restore_best_weights && have_best_weights_) {
      say_line(o_.say, fmt::format("Restoring model weights from the end of the best epoch: {}.",
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
  CallbackMonitor mon_;
  int wait_ = 0, stopped_epoch_ = 0, best_epoch_ = 0;
  std::vector<NamedTensor> best_weights_;
  bool have_best_weights_ = false;
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
          say_line(o_.say,
                   fmt::format("\nEpoch {}: ReduceLROnPlateau reducing learning rate to {}.",
                               epoch + 1, python_float_repr(next)));
          cooldown_ = o_.cooldown;
          wait_ = 0;
        }
      }
    }
  }

 private:
  ReduceLROnPlateauOptions o_;
  CallbackMonitor mon_;
  int wait_ = 0, cooldown_ = 0;
};

}  // namespace

CallbackMonitor::CallbackMonitor(const std::string& monitor, const std::string& direction,
                                 const char* owner, double delta)
    : key(monitor), mode(direction), who(owner), min_delta(std::abs(delta)) {
  check_mode(mode, who);
}

void CallbackMonitor::decide(const Sequential& model) {
  if (max) return;
  if (mode != "auto") {
    max = mode == "max";
    return;
  }
  const std::string name = key.starts_with("val_") ? key.substr(4) : key;
  bool known = name == "loss";
  if (known) max = false;
  for (const MetricSpec& metric : model.metric_specs())
    if (metric.name == name || (metric.loss_accuracy && name == "accuracy"))
      known = true, max = metric.higher_is_better;
  if (!known)
    throw Error(who, fmt::format("monitor '{}': mode 'auto' cannot tell whether it should be "
                                 "maximized or minimized (it knows the loss and the compiled "
                                 "metrics: {}); pass mode 'max' or 'min'",
                                 key, metric_list(model)));
}

std::optional<double> CallbackMonitor::read(const Logs& logs, const char* reader) const {
  auto it = logs.find(key);
  if (it == logs.end()) {
    std::fprintf(stderr, "warning: %s: '%s' is not among the epoch's logs (is validation on?)\n",
                 reader, key.c_str());
    return std::nullopt;
  }
  return it->second;
}

bool CallbackMonitor::improves(double v, const std::optional<double>& reference) const {
  if (!reference) return true;
  const bool up = max.value();  // decide() ran at the epoch's end
  const float a = static_cast<float>(up ? v - min_delta : v + min_delta);
  const float b = static_cast<float>(*reference);
  return up ? a > b : a < b;
}

void say_line(const CallbackMessages& say, const std::string& line) {
  if (say) say(line);
}

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
