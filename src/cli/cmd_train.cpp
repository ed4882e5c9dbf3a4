// crossover train: the seed experiment (or any Dense stack) on one device, Keras-style output,
// and a JSON record of what happened.
#include <fmt/format.h>

#include <algorithm>

#include "cli/cli.h"
#include "core/error.h"
#include "core/machine.h"
#include "data/dataset.h"
#include "formats/checkpoint.h"
#include "formats/weights_io.h"
#include "nn/metrics.h"
#include "perf/choose.h"

namespace crossover::cli {

namespace {

struct TrainOptions : CommonOptions {
  int epochs = 10;
  int64_t batch_size = kDefaultBatchSize;
  std::string device = "cpu";
  ProfileFlags profile;
  double validation_split = 0.0;
  std::string save;        // --save FILE: the trained model (safetensors, or .weights.h5)
  std::string checkpoint;  // --checkpoint CKPT: weights + optimizer state after every epoch
  std::string resume;      // --resume CKPT: continue a run from its checkpoint
  bool model_given = false, seed_given = false, batch_given = false;
  bool fused_step = false;  // --fused-step: CompileOptions::fused_step
};

// --checkpoint: a checkpoint after every completed epoch, with what --resume needs to continue
// the same trajectory (the seed and batch size).
class CheckpointEachEpoch : public Callback {
 public:
  CheckpointEachEpoch(std::string path, std::map<std::string, std::string> extra)
      : path_(std::move(path)), extra_(std::move(extra)) {}
  void on_epoch_end(Sequential& model, int epoch, const Logs&) override {
    save_checkpoint(model, path_, epoch + 1, extra_);
  }

 private:
  std::string path_;
  std::map<std::string, std::string> extra_;
};

// "sgd (learning rate 0.05, momentum 0.9), loss categorical_crossentropy": what compile() got.
std::string compile_description(const Sequential& model) {
  const OptimizerConfig& opt = model.optimizer();
  std::string s =
      fmt::format("{} (learning rate {:g}", optimizer_name(opt.kind), opt.schedule.base);
  if (opt.schedule.decay_steps > 0)
    s += fmt::format(" decaying by {:g} every {} steps", opt.schedule.decay_rate,
                     opt.schedule.decay_steps);
  // The optimizer's own arguments where not Keras's defaults ("momentum 0.9", "amsgrad").
  for (const OptimizerArgumentValue& a : optimizer_arguments(opt)) {
    const bool f32 = a.type == OptimizerArgumentValue::Type::float32;
    if (a.value == (f32 ? static_cast<float>(a.default_value) : a.default_value) ||
        a.type == OptimizerArgumentValue::Type::refused)
      continue;
    if (a.type == OptimizerArgumentValue::Type::flag)
      s += a.value != 0 ? fmt::format(", {}", a.name) : fmt::format(", no {}", a.name);
    else
      s += fmt::format(", {} {:g}", a.name, a.value);
  }
  if (opt.weight_decay > 0) s += fmt::format(", weight decay {:g}", opt.weight_decay);
  return s + "), loss " + model.loss_name();
}

// "accuracy, mae, top_k_categorical_accuracy (k 3)": the compiled metrics, as reported.
std::string metrics_description(const Sequential& model) {
  std::string s;
  for (const MetricSpec& m : model.metric_specs()) {
    s += (s.empty() ? "" : ", ") + (m.loss_accuracy ? std::string("accuracy") : m.name);
    if (!m.loss_accuracy && !metric_is_plain(m))
      if (const char* argument = metric_parameter_name(m.kind))
        s += fmt::format(" ({} {:g})", argument, m.parameter);
  }
  return s;
}

uint64_t checkpoint_number(const CheckpointInfo& info, const char* key, uint64_t fallback,
                           const std::string& path) {
  auto it = info.metadata.find(key);
  if (it == info.metadata.end()) return fallback;
  try {
    std::size_t used = 0;
    const unsigned long long v = std::stoull(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw Error("--resume " + path,
              std::string("the checkpoint's ") + key + " '" + it->second + "' is not a number");
}

// One training run: where it starts (a layer list or file, or a checkpoint), its threads and
// device, the fit, the evaluation and the JSON record.
class Train {
 public:
  explicit Train(const TrainOptions& o) : o_(o) {}

  void run() {
    // Under mpirun, one rank of several: rank 0 alone speaks and writes files
    // (docs/DISTRIBUTED.md).
    ranks_ = ranks_for_command(o_.rank_timeout);
    leader_ = ranks_.leader();
    quiet_ = o_.quiet || !leader_;
    out_ = Output{quiet_};
    if (leader_ && !o_.json.empty()) check_writable("--json", o_.json);
    if (leader_ && !o_.save.empty()) check_writable("--save", o_.save);
    if (leader_ && !o_.checkpoint.empty()) check_writable("--checkpoint", o_.checkpoint);
    if (!o_.resume.empty() && o_.model_given)
      throw Error("--resume", "the model comes from the checkpoint: drop --model");
    resolve_seed_batch_precision();
    if (o_.epochs < 0) throw Error("--epochs", "must not be negative");
    if (batch_size_ < 1) throw Error("--batch-size", "must be at least 1");
    // A Keras model JSON compiled with an optimizer and loss trains with them, as Keras's
    // load_model would; read before the data, so that a config crossover refuses is told first.
    file_config_ = o_.resume.empty() ? training_config_from_spec(o_.model) : std::nullopt;

    d_ = data::load_data(o_.data, [&](const std::string& line) { out_.say(line); });
    x_train_ = data::to_float_images(d_.train);
    x_test_ = data::to_float_images(d_.test);
    plan_threads();
    Sequential model = o_.resume.empty() ? model_from_layers() : model_from_resume();
    train(model);
  }

 private:
  // Resuming: the checkpoint's seed and batch size, unless given again, keep the trajectory.
  // The precision: the model's layers' dtype policy (the file's, the checkpoint's), which a
  // --precision given must agree with; for small, big, convnet and layer lists, --precision.
  void resolve_seed_batch_precision() {
    seed_ = o_.seed;
    batch_size_ = o_.batch_size;
    if (o_.resume.empty()) {
      precision_ = precision_for_spec(o_.model, o_.precision);
      return;
    }
    const CheckpointInfo info = read_checkpoint_info(o_.resume);
    if (!o_.seed_given) seed_ = checkpoint_number(info, "seed", seed_, o_.resume);
    if (!o_.batch_given)
      batch_size_ = static_cast<int64_t>(
          checkpoint_number(info, "batch_size", static_cast<uint64_t>(batch_size_), o_.resume));
    const std::string where = o_.resume + " (architecture)";
    precision_ = precision_for_layers(model_from_json(info.architecture, where).layers(),
                                      o_.precision, "--resume " + o_.resume);
  }

  void plan_threads() {
    threads_run_ = {o_.threads > 0 ? o_.threads : cpu_info().logical_cores, std::nullopt,
                    o_.threads > 0 ? "user" : "all cores"};
    copts_ = CompileOptions{.device = o_.device, .threads = o_.threads, .seed = seed_};
    copts_.precision = o_.precision;  // compile applies the layers' policy (model_precision)
    copts_.fused_step = o_.fused_step;
    // With ranks: the CPU unless a GPU is asked for (then NCCL between the GPUs), and --threads 0
    // divides this host's cores among its ranks instead of measuring.
    measure_ = o_.threads == 0 && ranks_.size == 1;
    if (ranks_.size > 1 && copts_.device == "auto") copts_.device = "cpu";
    place_ranks_on_device(ranks_, copts_.device);
    copts_.collective = ranks_.collective;
    if (ranks_.size > 1 && o_.threads == 0) {
      threads_run_ = {threads_per_rank(ranks_), std::nullopt, "cores divided among ranks"};
      copts_.threads = threads_run_.threads;
    }
  }

  // --threads 0: the thread count that trains this model fastest here, measured on a few batches
  // of models that `make(threads)` compiles.
  void measure_threads(const std::function<Sequential(int)>& make, const std::string& what) {
    const Sequential one = make(1);
    const Tensor y_probe = targets_for(one, d_.train, x_train_, d_.num_classes, what);
    threads_run_ =
        cpu_threads_for_run(0, make, x_train_, y_probe, batch_size_, quiet_, what,
                            perf::threads_choice_key(perf::describe(one), batch_size_, precision_));
  }

  Sequential model_from_resume() {
    if (copts_.device == "auto") copts_.device = "cpu";
    if (copts_.device == "cpu" && measure_) {
      measure_threads(
          [&](int t) {
            CompileOptions co = copts_;
            co.threads = t;
            int ignored = 0;
            return model_from_checkpoint(o_.resume, co, &ignored);
          },
          fmt::format("{}'s model at batch {}", o_.resume, batch_size_));
      copts_.threads = threads_run_.threads;
    }
    return model_from_checkpoint(o_.resume, copts_, &initial_epoch_);
  }

  // A file's metrics are computed and reported as Keras would (mae, top-k, ...). Accuracy is
  // measured besides them, first when the file does not name it; but not for an image output
  // (an autoencoder's) unless binary_crossentropy counts it element by element.
  static bool measures_accuracy(const Sequential& m, const std::string& loss) {
    const std::vector<Shape> shapes = m.layer_output_shapes();
    return shapes.empty() || shapes.back().size() == 1 || loss == "binary_crossentropy";
  }
  void compile_model(Sequential& m, const CompileOptions& co) const {
    const std::string loss = file_config_ ? file_config_->loss : "sparse_categorical_crossentropy";
    std::vector<MetricSpec> metrics;
    if (file_config_) metrics = file_config_->metrics;
    if (measures_accuracy(m, loss) &&
        std::none_of(metrics.begin(), metrics.end(),
                     [](const MetricSpec& s) { return s.loss_accuracy; }))
      metrics.insert(metrics.begin(), metric_spec("accuracy"));
    if (file_config_)
      m.compile_with(
          file_config_->optimizer,
          LossSpec{file_config_->loss, file_config_->from_logits, file_config_->loss_parameter},
          std::move(metrics), co);
    else
      m.compile_with(Adam(), LossSpec{"sparse_categorical_crossentropy", false}, std::move(metrics),
                     co);
  }

  Sequential model_from_layers() {
    Sequential m = model_from_spec(o_.model, d_.train.item_shape, d_.num_classes, precision_);
    const std::string what = fmt::format("{} at batch {}", model_label(o_.model), batch_size_);
    // The thread count that trains this model fastest here, measured on a few batches in the
    // precision it trains in (before --device auto, which weighs the CPU at that count; not for
    // a precision this CPU cannot train in: tf32, or bf16 without AVX512_BF16).
    const bool cpu_can = cpu_precision_problem(precision_).empty();
    if ((copts_.device == "cpu" || (copts_.device == "auto" && cpu_can)) && measure_) {
      auto make = [&](int t) {
        Sequential p = model_from_spec(o_.model, d_.train.item_shape, d_.num_classes, precision_);
        CompileOptions co = copts_;
        co.device = "cpu";
        co.threads = t;
        compile_model(p, co);
        return p;
      };
      measure_threads(make, what);
    }
    const int cpu_threads =
        o_.threads > 0 || threads_run_.choice || ranks_.size > 1 ? threads_run_.threads : 0;
    if (copts_.device == "auto") {
      // The device the cost model predicts faster for this model and batch, and why.
      std::string why;
      copts_.device = perf::choose_device(
          m, batch_size_, why,
          [&](std::vector<perf::Workload> w, const std::string&) {
            return cpu_profile_for_run(o_.profile, cpu_threads, quiet_, std::move(w), what);
          },
          precision_);
      out_.say("device auto: " + copts_.device + ": " + why);
    }
    if (copts_.device == "cpu") copts_.threads = cpu_threads;
    compile_model(m, copts_);
    if (file_config_)
      out_.say(fmt::format("compile: {} from {}'s compile_config; metrics {}",
                           compile_description(m), o_.model, metrics_description(m)));
    if (o_.precision.empty() && precision_ != Precision::fp32)
      out_.say(fmt::format("precision: {}, as {}'s dtype policy says", precision_name(precision_),
                           o_.model));
    return m;
  }

  void train(Sequential& model) {
    // Class indices for the sparse loss, one-hot rows for the others; an autoencoder's images.
    const std::string where = o_.resume.empty() ? "--model " + o_.model : "--resume " + o_.resume;
    const Tensor y_train = targets_for(model, d_.train, x_train_, d_.num_classes, where);
    const Tensor y_test = targets_for(model, d_.test, x_test_, d_.num_classes, where);
    check_same_data(ranks_, "--data " + d_.path, {&x_train_, &y_train, &x_test_, &y_test});
    check_metric_keys(model, o_.resume.empty() ? o_.model : "--resume " + o_.resume);
    if (!o_.resume.empty())
      out_.say(fmt::format("resuming: {} after epoch {} (optimizer step {})", o_.resume,
                           initial_epoch_, model.optimizer_steps()));
    std::vector<std::shared_ptr<Callback>> callbacks;
    if (leader_ && !o_.checkpoint.empty())
      callbacks.push_back(std::make_shared<CheckpointEachEpoch>(
          o_.checkpoint,
          std::map<std::string, std::string>{{"seed", std::to_string(seed_)},
                                             {"batch_size", std::to_string(batch_size_)},
                                             {"data", d_.name}}));
    const int threads = threads_run_.threads;
    out_.say(
        fmt::format("model: {} ({} parameters) on {}{}, batch {}, seed {}", o_.model,
                    model.count_params(), device_description(model.device_name()),
                    model.device_name() == "cpu" ? fmt::format(" with {} threads", threads) : "",
                    batch_size_, seed_));
    if (ranks_.collective)
      out_.say(
          fmt::format("ranks: {}: each of the {} ranks takes its rows of every batch of {}, "
                      "with {} threads",
                      ranks_.collective->description(), ranks_.size, batch_size_, threads));
    if (!quiet_) std::fputs(model.summary().c_str(), stdout);

    History h = model.fit(x_train_, y_train,
                          {.epochs = o_.epochs,
                           .batch_size = batch_size_,
                           .validation_split = o_.validation_split,
                           .verbose = quiet_ ? 0 : 1,
                           .initial_epoch = initial_epoch_,
                           .callbacks = callbacks});
    if (leader_ && !o_.save.empty()) {
      save_weights(model, o_.save);
      out_.say("saved: " + o_.save);
    }
    if (!quiet_)
      std::printf("Evaluate on %lld test samples\n", static_cast<long long>(x_test_.dim(0)));
    EvaluateResult test =
        model.evaluate(x_test_, y_test, {.batch_size = batch_size_, .verbose = quiet_ ? 0 : 1});
    if (leader_ && !o_.json.empty()) write_json(model, h, test);
  }

  void write_json(Sequential& model, const History& h, const EvaluateResult& test) const {
    // null where accuracy is not measured (measures_accuracy).
    const bool accuracy = measures_accuracy(model, model.loss_name());
    const auto or_null = [accuracy](double v) { return accuracy ? nlohmann::json(v) : nullptr; };
    nlohmann::json hist = nlohmann::json::array();
    for (const EpochRecord& e : h.epochs) {
      nlohmann::json j{
          {"epoch", e.epoch},     {"loss", e.loss},   {"accuracy", or_null(e.accuracy)},
          {"seconds", e.seconds}, {"steps", e.steps}, {"learning_rate", e.learning_rate}};
      for (const auto& [name, value] : e.metrics) j[name] = value;  // "mae", ... (compile's)
      if (e.val_loss) {
        j["val_loss"] = *e.val_loss;
        j["val_accuracy"] = or_null(*e.val_accuracy);
        j["val_seconds"] = *e.val_seconds;
        for (const auto& [name, value] : e.val_metrics) j["val_" + name] = value;
      }
      hist.push_back(j);
    }
    const int threads = threads_run_.threads;
    nlohmann::json doc{
        {"command", "train"},
        {"device", model.device_name()},
        {"device_name", device_description(model.device_name())},
        {"threads", model.device_name() == "cpu" ? threads : 0},
        {"threads_choice", model.device_name() == "cpu" ? threads_json(threads_run_) : nullptr},
        {"model", model_json(model, o_.model)},
        {"data",
         {{"name", d_.name},
          {"path", d_.path},
          {"train", d_.train.count},
          {"test", d_.test.count}}},
        {"batch_size", batch_size_},
        {"epochs", o_.epochs},
        {"initial_epoch", initial_epoch_},
        {"seed", seed_},
        {"precision", precision_name(precision_)},
        {"optimizer", optimizer_name(model.optimizer().kind)},
        {"loss", model.loss_name()},
        {"compile_config", nlohmann::json::parse(training_config_to_json(model))},
        {"history", hist},
        {"interrupted", h.interrupted},
        {"test", test_json(test)}};
    if (!accuracy) doc["test"]["accuracy"] = nullptr;
    add_ranks_json(doc, ranks_);
    if (!o_.save.empty()) doc["save"] = o_.save;
    if (!o_.checkpoint.empty()) doc["checkpoint"] = o_.checkpoint;
    if (!o_.resume.empty()) doc["resume"] = o_.resume;
    write_json_file("--json", o_.json, doc);
  }

  const TrainOptions& o_;
  Ranks ranks_;
  bool leader_ = true, quiet_ = false, measure_ = false;
  Output out_;
  uint64_t seed_ = 0;
  int64_t batch_size_ = 0;
  Precision precision_ = Precision::fp32;
  std::optional<TrainingConfig> file_config_;
  data::DataSplits d_;
  Tensor x_train_, x_test_;
  int initial_epoch_ = 0;
  ThreadsForRun threads_run_;
  CompileOptions copts_;
};

void run_train(const TrainOptions& o) { Train(o).run(); }

}  // namespace

void add_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  auto* cmd =
      app.add_subcommand("train", "Train a model (the seed experiment by default) and test it");
  add_common_options(*cmd, *o, kAllCommonOptions | kRankTimeoutOption | kPrecisionOption,
                     "Write a JSON record (docs/JSON.md) to this file",
                     "No progress or information on stdout");
  cmd->add_option("--epochs", o->epochs, "Epochs")->capture_default_str();
  auto* batch_opt =
      cmd->add_option("--batch-size", o->batch_size, "Batch size")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda, cuda:N, or auto (the device predicted faster)")
      ->capture_default_str();
  cmd->add_option("--validation-split", o->validation_split,
                  "Fraction of training data held out for validation")
      ->capture_default_str();
  cmd->add_option(
      "--save", o->save,
      "Save the trained model here (safetensors, which crossover evaluate/predict --load; or "
      "Keras 3's weights alone if the name ends in .weights.h5)");
  cmd->add_option("--checkpoint", o->checkpoint,
                  "Write a checkpoint (weights, optimizer state, epoch) here after every epoch");
  cmd->add_option("--resume", o->resume,
                  "Continue the run saved in this checkpoint (up to --epochs in all)");
  cmd->add_flag("--fused-step", o->fused_step,
                "CUDA: each training step as one fused kernel where the model allows it (a chain "
                "of Dense layers; otherwise says why not and trains as usual)");
  add_profile_options(cmd, o->profile);  // the CPU's, for --device auto
  cmd->callback([o, cmd, batch_opt] {
    o->model_given = cmd->get_option("--model")->count() > 0;
    o->seed_given = cmd->get_option("--seed")->count() > 0;
    o->batch_given = batch_opt->count() > 0;
    run_train(*o);
  });
}

}  // namespace crossover::cli
