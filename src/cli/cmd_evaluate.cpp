// crossover evaluate: a saved model (crossover train --save, or save_weights) on a data set's test
// split, Keras-style output, and the same "test" JSON object as train's.
#include <fmt/format.h>

#include "cli/cli.h"
#include "core/error.h"
#include "data/dataset.h"
#include "formats/weights_io.h"

namespace crossover::cli {

namespace {

struct EvaluateOptionsCli : CommonOptions {
  std::string load;
  std::string device = "cpu";
  int64_t batch_size = kDefaultBatchSize;
};

// The data's samples in the shape the model takes (the same number of values, e.g. (28, 28)
// images for a model declared on (784,)); refused otherwise.
Tensor fit_to_model(const Tensor& x, const Sequential& model, const std::string& load,
                    const std::string& data) {
  const Shape want = model.input_shape();
  const Shape have(x.shape().begin() + 1, x.shape().end());
  if (want == have) return x;
  if (shape_size(want) == shape_size(have)) {
    Shape s{x.dim(0)};
    s.insert(s.end(), want.begin(), want.end());
    return x.reshaped(s);
  }
  throw Error("--load " + load, "the model takes samples of shape " + shape_to_string(want) +
                                    " but " + data + " has samples of shape " +
                                    shape_to_string(have));
}

void run_evaluate(const EvaluateOptionsCli& o) {
  // Under mpirun, each rank evaluates its share of the rows; rank 0 alone speaks and writes.
  Ranks ranks = ranks_for_command(o.rank_timeout);
  const bool quiet = o.quiet || !ranks.leader();
  Output out{quiet};
  if (ranks.leader() && !o.json.empty()) check_writable("--json", o.json);
  if (o.batch_size < 1) throw Error("--batch-size", "must be at least 1");
  CompileOptions copts{.device = o.device, .threads = o.threads};
  place_ranks_on_device(ranks, copts.device);
  if (ranks.size > 1 && o.threads == 0) copts.threads = threads_per_rank(ranks);
  copts.collective = ranks.collective;
  Sequential model = load_model(o.load, copts);
  check_metric_keys(model, "--load " + o.load);
  out.say(fmt::format("model: {} ({} parameters) on {}", o.load, model.count_params(),
                      device_description(model.device_name())));
  data::DataSplits d = data::load_data(o.data, [&](const std::string& line) { out.say(line); });
  const Tensor x_test = fit_to_model(data::to_float_images(d.test), model, o.load, d.name);
  const Tensor y_test = targets_for(model, d.test, x_test, d.num_classes, "--load " + o.load);
  check_same_data(ranks, "--data " + d.path, {&x_test, &y_test});
  if (!quiet) std::printf("Evaluate on %lld test samples\n", static_cast<long long>(x_test.dim(0)));
  const EvaluateResult test =
      model.evaluate(x_test, y_test, {.batch_size = o.batch_size, .verbose = quiet ? 0 : 1});
  if (!ranks.leader() || o.json.empty()) return;
  nlohmann::json doc{{"command", "evaluate"},
                     {"device", model.device_name()},
                     {"device_name", device_description(model.device_name())},
                     {"load", o.load},
                     {"model", model_json(model, model.name())},
                     {"data", {{"name", d.name}, {"path", d.path}, {"test", d.test.count}}},
                     {"batch_size", o.batch_size},
                     {"test", test_json(test)}};
  add_ranks_json(doc, ranks);
  write_json_file("--json", o.json, doc);
}

}  // namespace

void add_evaluate(CLI::App& app) {
  auto o = std::make_shared<EvaluateOptionsCli>();
  auto* cmd = app.add_subcommand(
      "evaluate", "Test a saved model (crossover train --save) on a data set's test split");
  cmd->add_option("--load", o->load, "The model file (.safetensors) written by train --save")
      ->required();
  add_common_options(*cmd, *o,
                     kDataOption | kThreadsOption | kJsonOption | kQuietOption | kRankTimeoutOption,
                     "Write a JSON record with the same \"test\" object as train's",
                     "No progress or information on stdout");
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Batch size")->capture_default_str();
  cmd->callback([o] { run_evaluate(*o); });
}

}  // namespace crossover::cli
