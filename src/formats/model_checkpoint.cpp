#include "formats/model_checkpoint.h"

#if __has_include(<fmt/args.h>)  // fmt 8 and newer; fmt 7 keeps the store in core.h
#include <fmt/args.h>
#endif
#include <fmt/format.h>

#include "core/error.h"
#include "formats/weights_io.h"
#include "nn/sequential.h"

namespace crossover {
namespace {

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
          say_line(o_.say, fmt::format("\nEpoch {}: {} did not improve from {}", epoch + 1,
                                       o_.monitor, best));
          return;
        }
        say_line(o_.say,
                 fmt::format("\nEpoch {}: {} improved from {} to {:.5f}, saving model to {}",
                             epoch + 1, o_.monitor, best, *v, path));
        mon_.best = *v;
      }
    } else {
      say_line(o_.say, fmt::format("\nEpoch {}: saving model to {}", epoch + 1, path));
    }
    if (o_.save)
      o_.save(model, path);
    else
      save_weights(model, path);
    say_line(o_.say, fmt::format("\nEpoch {}: finished saving model to {}", epoch + 1, path));
  }

  std::string path_;
  ModelCheckpointOptions o_;
  CallbackMonitor mon_;
  int epoch_ = 0;
  int64_t batches_since_save_ = 0;
  std::optional<int64_t> last_batch_;
};

}  // namespace

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

}  // namespace crossover
