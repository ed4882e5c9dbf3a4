// crossover train: the seed experiment (or any Dense stack) on one device, Keras-style output,
// and a JSON record of what happened.
#include <fmt/format.h>

#include "cli/cli.h"
#include "core/error.h"
#include "data/dataset.h"
#include "nn/checkpoint.h"
#include "nn/weights_io.h"
#include "perf/choose.h"
#include "perf/machine.h"

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
  if (opt.kind != OptimizerKind::adam && opt.momentum > 0)
    s += fmt::format(", momentum {:g}", opt.momentum);
  if (opt.weight_decay > 0) s += fmt::format(", weight decay {:g}", opt.weight_decay);
  return s + "), loss " + model.loss_name();
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

void run_train(const TrainOptions& o) {
  // Under mpirun, one rank of several: rank 0 alone speaks and writes files (docs/DISTRIBUTED.md).
  Ranks ranks = ranks_for_command(o.rank_timeout);
  const bool leader = ranks.leader();
  const bool quiet = o.quiet || !leader;
  Output out{quiet};
  if (leader && !o.json.empty()) check_writable("--json", o.json);
  if (leader && !o.save.empty()) check_writable("--save", o.save);
  if (leader && !o.checkpoint.empty()) check_writable("--checkpoint", o.checkpoint);
  if (!o.resume.empty() && o.model_given)
    throw Error("--resume", "the model comes from the checkpoint: drop --model");
  // Resuming: the checkpoint's seed and batch size, unless given again, keep the trajectory.
  // The precision: the model's layers' dtype policy (the file's, the checkpoint's), which a
  // --precision given must agree with; for small, big, convnet and layer lists, --precision.
  uint64_t seed = o.seed;
  int64_t batch_size = o.batch_size;
  Precision precision = Precision::fp32;
  if (!o.resume.empty()) {
    const CheckpointInfo info = read_checkpoint_info(o.resume);
    if (!o.seed_given) seed = checkpoint_number(info, "seed", seed, o.resume);
    if (!o.batch_given)
      batch_size = static_cast<int64_t>(
          checkpoint_number(info, "batch_size", static_cast<uint64_t>(batch_size), o.resume));
    const std::string where = o.resume + " (architecture)";
    precision = precision_for_layers(model_from_json(info.architecture, where).layers(),
                                     o.precision, "--resume " + o.resume);
  } else {
    precision = precision_for_spec(o.model, o.precision);
  }
  if (o.epochs < 0) throw Error("--epochs", "must not be negative");
  if (batch_size < 1) throw Error("--batch-size", "must be at least 1");
  // A Keras model JSON compiled with an optimizer and loss trains with them, as Keras's
  // load_model would; read before the data, so that a config crossover refuses is told first.
  const std::optional<TrainingConfig> file_config =
      o.resume.empty() ? training_config_from_spec(o.model) : std::nullopt;

  data::DataSplits d = data::load_data(o.data, [&](const std::string& line) { out.say(line); });
  const Tensor x_train = data::to_float_images(d.train);
  const Tensor x_test = data::to_float_images(d.test);

  int initial_epoch = 0;
  ThreadsForRun threads_run{o.threads > 0 ? o.threads : perf::cpu_info().logical_cores,
                            std::nullopt, o.threads > 0 ? "user" : "all cores"};
  CompileOptions copts{.device = o.device, .threads = o.threads, .seed = seed};
  copts.precision = precision_name(precision);
  // With ranks: the CPU unless a GPU is asked for (then NCCL between the GPUs), and --threads 0
  // divides this host's cores among its ranks instead of measuring.
  const bool measure = o.threads == 0 && ranks.size == 1;
  if (ranks.size > 1 && copts.device == "auto") copts.device = "cpu";
  place_ranks_on_device(ranks, copts.device);
  copts.collective = ranks.collective;
  if (ranks.size > 1) {
    if (o.threads == 0) {
      threads_run = {threads_per_rank(ranks), std::nullopt, "cores divided among ranks"};
      copts.threads = threads_run.threads;
    }
  }
  // --threads 0: the thread count that trains this model fastest here, measured on a few batches
  // of models that `make(threads)` compiles.
  auto measure_threads = [&](const std::function<Sequential(int)>& make, const std::string& what) {
    const Sequential one = make(1);
    const bool sparse_loss = one.loss_name() == "sparse_categorical_crossentropy";
    const Tensor y_probe = sparse_loss ? data::to_float_labels(d.train)
                                       : data::to_one_hot_labels(d.train, d.num_classes);
    threads_run =
        cpu_threads_for_run(0, make, x_train, y_probe, batch_size, quiet, what,
                            perf::threads_choice_key(perf::describe(one), batch_size, precision));
  };
  Sequential model = [&] {
    if (!o.resume.empty()) {
      if (copts.device == "auto") copts.device = "cpu";
      if (copts.device == "cpu" && measure) {
        measure_threads(
            [&](int t) {
              CompileOptions co = copts;
              co.threads = t;
              int ignored = 0;
              return model_from_checkpoint(o.resume, co, &ignored);
            },
            fmt::format("{}'s model at batch {}", o.resume, batch_size));
        copts.threads = threads_run.threads;
      }
      return model_from_checkpoint(o.resume, copts, &initial_epoch);
    }
    Sequential m = model_from_spec(o.model, d.train.item_shape, d.num_classes, precision);
    // Accuracy is always measured: train reports it whatever the file's metrics.
    auto compile_model = [&](Sequential& mm, const CompileOptions& co) {
      if (file_config)
        mm.compile(file_config->optimizer, file_config->loss, {"accuracy"}, co);
      else
        mm.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, co);
    };
    const std::string what = fmt::format("{} at batch {}", model_label(o.model), batch_size);
    // The thread count that trains this model fastest here, measured on a few batches in the
    // precision it trains in (before --device auto, which weighs the CPU at that count; not for
    // a precision this CPU cannot train in: tf32, or bf16 without AVX512_BF16).
    const bool cpu_can = cpu_precision_problem(precision).empty();
    if ((copts.device == "cpu" || (copts.device == "auto" && cpu_can)) && measure) {
      auto make = [&](int t) {
        Sequential p = model_from_spec(o.model, d.train.item_shape, d.num_classes, precision);
        CompileOptions co = copts;
        co.device = "cpu";
        co.threads = t;
        compile_model(p, co);
        return p;
      };
      measure_threads(make, what);
    }
    const int cpu_threads =
        o.threads > 0 || threads_run.choice || ranks.size > 1 ? threads_run.threads : 0;
    if (copts.device == "auto") {
      // The device the cost model predicts faster for this model and batch, and why.
      std::string why;
      copts.device = perf::choose_device(
          m, batch_size, why,
          [&](std::vector<perf::Workload> w, const std::string&) {
            return cpu_profile_for_run(o.profile, cpu_threads, quiet, std::move(w), what);
          },
          precision);
      out.say("device auto: " + copts.device + ": " + why);
    }
    if (copts.device == "cpu") copts.threads = cpu_threads;
    compile_model(m, copts);
    if (file_config)
      out.say(fmt::format("compile: {} from {}'s compile_config", compile_description(m), o.model));
    if (o.precision.empty() && precision != Precision::fp32)
      out.say(fmt::format("precision: {}, as {}'s dtype policy says", precision_name(precision),
                          o.model));
    return m;
  }();
  // Class indices for the sparse loss, one-hot rows for the others.
  const bool sparse = model.loss_name() == "sparse_categorical_crossentropy";
  const Tensor y_train =
      sparse ? data::to_float_labels(d.train) : data::to_one_hot_labels(d.train, d.num_classes);
  const Tensor y_test =
      sparse ? data::to_float_labels(d.test) : data::to_one_hot_labels(d.test, d.num_classes);
  check_same_data(ranks, "--data " + d.path, {&x_train, &y_train, &x_test, &y_test});
  if (!o.resume.empty())
    out.say(fmt::format("resuming: {} after epoch {} (optimizer step {})", o.resume, initial_epoch,
                        model.optimizer_steps()));
  std::vector<std::shared_ptr<Callback>> callbacks;
  if (leader && !o.checkpoint.empty())
    callbacks.push_back(std::make_shared<CheckpointEachEpoch>(
        o.checkpoint, std::map<std::string, std::string>{{"seed", std::to_string(seed)},
                                                         {"batch_size", std::to_string(batch_size)},
                                                         {"data", d.name}}));
  const int threads = threads_run.threads;
  out.say(fmt::format("model: {} ({} parameters) on {}{}, batch {}, seed {}", o.model,
                      model.count_params(), device_description(model.device_name()),
                      model.device_name() == "cpu" ? fmt::format(" with {} threads", threads) : "",
                      batch_size, seed));
  if (ranks.collective)
    out.say(
        fmt::format("ranks: {}: each of the {} ranks takes its rows of every batch of {}, "
                    "with {} threads",
                    ranks.collective->description(), ranks.size, batch_size, threads));
  if (!quiet) std::fputs(model.summary().c_str(), stdout);

  History h = model.fit(x_train, y_train,
                        {.epochs = o.epochs,
                         .batch_size = batch_size,
                         .validation_split = o.validation_split,
                         .verbose = quiet ? 0 : 1,
                         .initial_epoch = initial_epoch,
                         .callbacks = callbacks});
  if (leader && !o.save.empty()) {
    save_weights(model, o.save);
    out.say("saved: " + o.save);
  }
  if (!quiet) std::printf("Evaluate on %lld test samples\n", static_cast<long long>(x_test.dim(0)));
  EvaluateResult test =
      model.evaluate(x_test, y_test, {.batch_size = batch_size, .verbose = quiet ? 0 : 1});

  if (!leader || o.json.empty()) return;
  nlohmann::json hist = nlohmann::json::array();
  for (const EpochRecord& e : h.epochs) {
    nlohmann::json j{{"epoch", e.epoch},       {"loss", e.loss},
                     {"accuracy", e.accuracy}, {"seconds", e.seconds},
                     {"steps", e.steps},       {"learning_rate", e.learning_rate}};
    if (e.val_loss) {
      j["val_loss"] = *e.val_loss;
      j["val_accuracy"] = *e.val_accuracy;
      j["val_seconds"] = *e.val_seconds;
    }
    hist.push_back(j);
  }
  nlohmann::json doc{
      {"command", "train"},
      {"device", model.device_name()},
      {"device_name", device_description(model.device_name())},
      {"threads", model.device_name() == "cpu" ? threads : 0},
      {"threads_choice", model.device_name() == "cpu" ? threads_json(threads_run) : nullptr},
      {"model", model_json(model, o.model)},
      {"data",
       {{"name", d.name}, {"path", d.path}, {"train", d.train.count}, {"test", d.test.count}}},
      {"batch_size", batch_size},
      {"epochs", o.epochs},
      {"initial_epoch", initial_epoch},
      {"seed", seed},
      {"precision", precision_name(precision)},
      {"optimizer", optimizer_name(model.optimizer().kind)},
      {"loss", model.loss_name()},
      {"compile_config", nlohmann::json::parse(training_config_to_json(model))},
      {"history", hist},
      {"interrupted", h.interrupted},
      {"test",
       {{"loss", test.loss},
        {"accuracy", test.accuracy},
        {"seconds", test.seconds},
        {"samples", test.samples}}}};
  add_ranks_json(doc, ranks);
  if (!o.save.empty()) doc["save"] = o.save;
  if (!o.checkpoint.empty()) doc["checkpoint"] = o.checkpoint;
  if (!o.resume.empty()) doc["resume"] = o.resume;
  write_json_file("--json", o.json, doc);
}

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
  add_profile_options(cmd, o->profile);  // the CPU's, for --device auto
  cmd->callback([o, cmd, batch_opt] {
    o->model_given = cmd->get_option("--model")->count() > 0;
    o->seed_given = cmd->get_option("--seed")->count() > 0;
    o->batch_given = batch_opt->count() > 0;
    run_train(*o);
  });
}

}  // namespace crossover::cli
