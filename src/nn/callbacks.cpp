#include "nn/callbacks.h"

#include <fmt/args.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.h"
#include "nn/sequential.h"
#include "nn/weights_io.h"

namespace crossover {
namespace {

// Keras's "auto" mode: maximise accuracy-like quantities, minimise the rest.
bool maximise(const std::string& monitor, const std::string& mode, const char* who) {
  if (mode == "max") return true;
  if (mode == "min") return false;
  if (mode != "auto") throw Error(who, "mode must be auto, min or max, got '" + mode + "'");
  return monitor.find("acc") != std::string::npos;
}

// Tracks the best value of a monitored quantity.
struct Monitor {
  std::string key;
  bool max = false;
  double min_delta = 0;
  double best = std::numeric_limits<double>::quiet_NaN();

  // Returns the value, or NaN with a warning when the logs lack it.
  double read(const Logs& logs, const char* who) const {
    auto it = logs.find(key);
    if (it == logs.end()) {
      std::fprintf(stderr, "warning: %s: '%s' is not among the epoch's logs (is validation on?)\n",
                   who, key.c_str());
      return std::numeric_limits<double>::quiet_NaN();
    }
    return it->second;
  }
  bool improves(double v) const {
    if (std::isnan(v)) return false;
    if (std::isnan(best)) return true;
    return max ? v - min_delta > best : v + min_delta < best;
  }
};

class EarlyStoppingCallback final : public Callback {
 public:
  explicit EarlyStoppingCallback(EarlyStoppingOptions o) : o_(std::move(o)) {
    mon_ = {o_.monitor, maximise(o_.monitor, o_.mode, "EarlyStopping"), std::abs(o_.min_delta)};
  }
  void on_train_begin(Sequential&) override {
    wait_ = 0;
    mon_.best = std::numeric_limits<double>::quiet_NaN();
    best_weights_.clear();
  }
  void on_epoch_end(Sequential& model, int epoch, const Logs& logs) override {
    if (epoch < o_.start_from_epoch) return;
    const double v = mon_.read(logs, "EarlyStopping");
    if (std::isnan(v)) return;
    ++wait_;
    if (mon_.improves(v)) {
      mon_.best = v;
      if (o_.restore_best_weights) best_weights_ = model.get_weights();
      if (!o_.baseline || beats(v, *o_.baseline)) wait_ = 0;
      return;
    }
    if (wait_ >= o_.patience && epoch > 0) model.stop_training();
  }
  void on_train_end(Sequential& model) override {
    if (o_.restore_best_weights && !best_weights_.empty()) model.set_weights(best_weights_);
  }

 private:
  bool beats(double v, double reference) const {
    return mon_.max ? v - mon_.min_delta > reference : v + mon_.min_delta < reference;
  }

  EarlyStoppingOptions o_;
  Monitor mon_;
  int wait_ = 0;
  std::vector<NamedTensor> best_weights_;
};

class ModelCheckpointCallback final : public Callback {
 public:
  ModelCheckpointCallback(std::string path, ModelCheckpointOptions o)
      : path_(std::move(path)), o_(std::move(o)) {
    mon_ = {o_.monitor, maximise(o_.monitor, o_.mode, "ModelCheckpoint"), 0.0};
  }
  void on_epoch_end(Sequential& model, int epoch, const Logs& logs) override {
    const std::string path = checkpoint_path(path_, epoch, logs);
    if (o_.save_best_only) {
      const double v = mon_.read(logs, "ModelCheckpoint");
      if (!mon_.improves(v)) return;
      mon_.best = v;
    }
    if (o_.save)
      o_.save(model, path);
    else
      save_weights(model, path);
  }

 private:
  std::string path_;
  ModelCheckpointOptions o_;
  Monitor mon_;
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
  explicit ReduceLROnPlateauCallback(ReduceLROnPlateauOptions o) : o_(std::move(o)) {
    if (!(o_.factor > 0 && o_.factor < 1))
      throw Error("ReduceLROnPlateau", "factor must be in (0, 1)");
    mon_ = {o_.monitor, maximise(o_.monitor, o_.mode, "ReduceLROnPlateau"), o_.min_delta};
  }
  void on_train_begin(Sequential&) override {
    wait_ = cooldown_ = 0;
    mon_.best = std::numeric_limits<double>::quiet_NaN();
  }
  void on_epoch_end(Sequential& model, int, const Logs& logs) override {
    const double v = mon_.read(logs, "ReduceLROnPlateau");
    if (std::isnan(v)) return;
    if (cooldown_ > 0) --cooldown_;
    if (mon_.improves(v)) {
      mon_.best = v;
      wait_ = 0;
      return;
    }
    if (cooldown_ > 0) return;
    if (++wait_ >= o_.patience) {
      const double lr = model.learning_rate();
      const double next = std::max(lr * o_.factor, o_.min_lr);
      if (next < lr) model.set_learning_rate(next);
      cooldown_ = o_.cooldown;
      wait_ = 0;
    }
  }

 private:
  ReduceLROnPlateauOptions o_;
  Monitor mon_;
  int wait_ = 0, cooldown_ = 0;
};

}  // namespace

std::shared_ptr<Callback> EarlyStopping(EarlyStoppingOptions options) {
  return std::make_shared<EarlyStoppingCallback>(std::move(options));
}
std::shared_ptr<Callback> ModelCheckpoint(std::string path, ModelCheckpointOptions options) {
  return std::make_shared<ModelCheckpointCallback>(std::move(path), std::move(options));
}
std::string checkpoint_path(const std::string& pattern, int epoch, const Logs& logs) {
  if (pattern.find_first_of("{}") == std::string::npos) return pattern;
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  args.push_back(fmt::arg("epoch", epoch + 1));
  std::string names = "epoch";
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
