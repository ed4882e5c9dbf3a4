// crossover train: the seed experiment (or any Dense stack) on one device, Keras-style output,
// and a JSON record of what happened.
#include <fmt/format.h>

#include "cli/cli.h"
#include "core/error.h"
#include "data/dataset.h"
#include "perf/machine.h"

namespace crossover::cli {

namespace {

struct TrainOptions {
  std::string model = "small";
  std::string data = "auto";
  int epochs = 10;
  int64_t batch_size = 32;
  std::string device = "cpu";
  uint64_t seed = 0;
  int threads = 0;
  std::string json;
  bool quiet = false;
  double validation_split = 0.0;
};

nlohmann::json model_json(const Sequential& model, const std::string& spec) {
  nlohmann::json layers = nlohmann::json::array();
  for (const Layer& l : model.layers()) {
    nlohmann::json j{{"name", l.name}, {"type", layer_type_name(l.type)}};
    if (l.type == LayerType::dense) {
      j["units"] = l.units;
      j["activation"] = activation_name(l.activation);
      j["use_bias"] = l.use_bias;
    }
    if (l.type == LayerType::activation) j["activation"] = activation_name(l.activation);
    if (l.type == LayerType::dropout) j["rate"] = l.rate;
    layers.push_back(j);
  }
  return {{"name", spec}, {"layers", layers}, {"parameters", model.count_params()},
          {"input_shape", model.input_shape()}};
}

void run_train(const TrainOptions& o) {
  Output out{o.quiet};
  if (!o.json.empty()) check_writable("--json", o.json);
  if (o.epochs < 0) throw Error("--epochs", "must not be negative");
  if (o.batch_size < 1) throw Error("--batch-size", "must be at least 1");
  if (o.threads < 0) throw Error("--threads", "must be 0 (all cores) or positive");

  data::DataSplits d = data::load_data(o.data, [&](const std::string& line) { out.say(line); });
  const Tensor x_train = data::to_float_images(d.train), y_train = data::to_float_labels(d.train);
  const Tensor x_test = data::to_float_images(d.test), y_test = data::to_float_labels(d.test);

  Sequential model = model_from_spec(o.model, d.train.item_shape, d.num_classes);
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.device = o.device, .threads = o.threads, .seed = o.seed});
  const int threads = o.threads > 0 ? o.threads : perf::cpu_info().logical_cores;
  out.say(fmt::format("model: {} ({} parameters) on {}{}, batch {}, seed {}", o.model,
                      model.count_params(), device_description(model.device_name()),
                      model.device_name() == "cpu" ? fmt::format(" with {} threads", threads) : "",
                      o.batch_size, o.seed));
  if (!o.quiet) std::fputs(model.summary().c_str(), stdout);

  History h = model.fit(x_train, y_train,
                        {.epochs = o.epochs,
                         .batch_size = o.batch_size,
                         .validation_split = o.validation_split,
                         .verbose = o.quiet ? 0 : 1});
  if (!o.quiet) std::printf("Evaluate on %lld test samples\n", static_cast<long long>(x_test.dim(0)));
  EvaluateResult test = model.evaluate(x_test, y_test, {.batch_size = o.batch_size, .verbose = o.quiet ? 0 : 1});

  if (o.json.empty()) return;
  nlohmann::json hist = nlohmann::json::array();
  for (const EpochRecord& e : h.epochs) {
    nlohmann::json j{{"epoch", e.epoch}, {"loss", e.loss}, {"accuracy", e.accuracy},
                     {"seconds", e.seconds}, {"steps", e.steps}, {"learning_rate", e.learning_rate}};
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
      {"model", model_json(model, o.model)},
      {"data", {{"name", d.name}, {"path", d.path}, {"train", d.train.count}, {"test", d.test.count}}},
      {"batch_size", o.batch_size},
      {"epochs", o.epochs},
      {"seed", o.seed},
      {"optimizer", "adam"},
      {"loss", "sparse_categorical_crossentropy"},
      {"history", hist},
      {"interrupted", h.interrupted},
      {"test", {{"loss", test.loss}, {"accuracy", test.accuracy}, {"seconds", test.seconds}, {"samples", test.samples}}}};
  write_json_file("--json", o.json, doc);
}

}  // namespace

void add_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  auto* cmd = app.add_subcommand("train", "Train a model (the seed experiment by default) and test it");
  cmd->add_option("--model", o->model, "small, big, a layer list such as dense:128:relu,dropout:0.2,dense:10:softmax, or a Keras model .json")->capture_default_str();
  cmd->add_option("--data", o->data, "auto, mnist-10k, a folder of the four IDX files, or a .npz file")->capture_default_str();
  cmd->add_option("--epochs", o->epochs, "Epochs")->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Batch size")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of initial weights, shuffling and dropout")->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_option("--validation-split", o->validation_split, "Fraction of training data held out for validation")->capture_default_str();
  cmd->add_option("--json", o->json, "Write a JSON record (docs/JSON.md) to this file");
  cmd->add_flag("--quiet", o->quiet, "No progress or information on stdout");
  cmd->callback([o] { run_train(*o); });
}

}  // namespace crossover::cli
