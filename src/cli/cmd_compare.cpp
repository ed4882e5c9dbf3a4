// crossover compare: the same training, same seed, on every device present (and on a GPU in both
// modes), side by side; GPU rows predicted from a shipped profile where no GPU is present.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "backends/cuda_info.h"
#include "backends/devices.h"
#include "cli/cli.h"
#include "core/error.h"
#include "perf/cost_model.h"
#include "perf/explain.h"
#include "perf/measure.h"
#include "perf/profile.h"

namespace crossover::cli {

namespace {

struct CompareOptions : CommonOptions {
  int epochs = 10;
  int64_t batch_size = kDefaultBatchSize;
  ProfileFlags profile;
  std::string ranks;  // "1,2": the ranks table instead (ranks_table.cpp)
};

struct Run {
  std::string device, device_name;
  perf::Mode mode = perf::Mode::resident;
  bool measured = false;
  double seconds_per_epoch = 0, seconds_per_step = 0, first_epoch_seconds = 0;
  int64_t steps_per_epoch = 0;
  std::optional<double> test_accuracy, test_loss, predicted_seconds_per_epoch;
  std::vector<double> losses;
  std::vector<NamedTensor> weights;
  std::string source;                // the profile a predicted row comes from
  nlohmann::json profile = nullptr;  // {"source", "calibrated_now"} of the profile used
  std::string foreign_cpu;           // the CPU the prediction's profile was measured on, when
                                     // not this machine
};

class EpochLine final : public Callback {
 public:
  EpochLine(const Output& out, std::string label, int epochs)
      : out_(out), label_(std::move(label)), epochs_(epochs) {}
  void on_epoch_end(Sequential&, int epoch, const Logs& logs) override {
    auto get = [&](const char* k) {
      auto it = logs.find(k);
      return it == logs.end() ? 0.0 : it->second;
    };
    out_.say(fmt::format("  {}: epoch {}/{} loss {:.4f} accuracy {:.4f}", label_, epoch + 1,
                         epochs_, get("loss"), get("accuracy")));
  }

 private:
  const Output& out_;
  std::string label_;
  int epochs_;
};

std::string run_label(const Run& r) { return r.device + " " + perf::mode_name(r.mode); }

// One comparison: the runs (measured, then predicted), the table, the winner, the parity.
class Compare {
 public:
  explicit Compare(const CompareOptions& o) : o_(o), out_{o.quiet} {}

  void run() {
    if (!o_.json.empty()) check_writable("--json", o_.json);
    if (o_.epochs < 1) throw Error("--epochs", "must be at least 1");
    if (o_.batch_size < 1) throw Error("--batch-size", "must be at least 1");
    // Every run trains in it (the CPU's too: a precision the CPU lacks is refused first).
    precision_ = cpu_run_precision("compare", o_.model, o_.precision);
    d_ = perf::load_training_data(o_.data, [&](const std::string& l) { out_.say(l); });
    desc_ = perf::describe(model_from_spec(o_.model, d_.sample_shape, d_.classes, precision_));
    n_train_ = d_.x_train.dim(0);
    plan_runs();
    out_.say(fmt::format(
        "compare: {} ({} parameters), {} epochs at batch {}, seed {}, precision {}, on {} ({} "
        "training samples)",
        o_.model, desc_.parameters(), o_.epochs, o_.batch_size, o_.seed, precision_name(precision_),
        d_.name, n_train_));
    for (Run& r : runs_) measure(r);
    // What seconds_per_epoch of a measured row is.
    epoch_note_ = o_.epochs > 1
                      ? "seconds_per_epoch is the mean of epochs 2.." + std::to_string(o_.epochs) +
                            " (the first holds one-off warm-up)"
                      : "seconds_per_epoch is the only epoch's time (--epochs 1), "
                        "one-off warm-up included";
    notes_.push_back(epoch_note_);
    if (all_gpus_.empty() && gpu_refusal_.empty()) add_predicted_gpu_rows();
    print_table();
    const nlohmann::json winner = report_winner();
    report_against_cpu();
    const nlohmann::json parity = report_parity();
    for (const std::string& n : notes_)
      if (n.rfind("no GPU", 0) == 0 || n.rfind("GPU rows", 0) == 0 || n == epoch_note_ ||
          n.rfind("CPU predicted", 0) == 0 || n.find(" GEMM rates: its rows are priced") != n.npos)
        out_.say(n);
    for (const std::string& n : estimate_notes_) out_.say(n);
    notes_.insert(notes_.end(), estimate_notes_.begin(), estimate_notes_.end());
    if (!o_.json.empty()) write_json(winner, parity);
  }

 private:
  // The CPU's thread count (measured where not given) and its profile at that count, calibrated
  // first where none matches this machine; then the rows to measure: the CPU, each GPU twice.
  void plan_runs() {
    const std::string what = fmt::format("{} at batch {}", model_label(o_.model), o_.batch_size);
    threads_ = cpu_threads_for_run(
        o_.threads, cpu_model_maker(o_.model, d_.sample_shape, d_.classes, o_.seed, precision_),
        d_.x_train, d_.y_train, o_.batch_size, o_.quiet, what,
        perf::threads_choice_key(desc_, o_.batch_size, precision_));
    cpu_choice_ = cpu_profile_for_run(
        o_.profile, threads_.threads, o_.quiet,
        {{desc_, perf::epoch_step_rows(n_train_, o_.batch_size), precision_}}, what);
    notes_.push_back("CPU predicted from " + cpu_choice_.note);
    runs_.push_back(
        {.device = "cpu",
         .device_name = fmt::format("{}, {} thread{}", device_description("cpu"), threads_.threads,
                                    threads_.threads == 1 ? "" : "s")});
    all_gpus_ = cuda_devices();
    // A model no GPU can train yet (e.g. with BatchNormalization, CPU only) has no GPU rows,
    // measured or predicted.
    gpu_refusal_ = perf::unsupported_on(desc_, perf::DeviceKind::gpu);
    if (!gpu_refusal_.empty())
      notes_.push_back("GPU rows omitted: the GPU cannot train this model (" + gpu_refusal_ + ")");
    const std::vector<CudaDeviceInfo> gpus =
        gpu_refusal_.empty() ? all_gpus_ : std::vector<CudaDeviceInfo>{};
    for (const CudaDeviceInfo& g : gpus)
      for (perf::Mode m : {perf::Mode::resident, perf::Mode::naive})
        runs_.push_back({.device = cuda_device_name(g.ordinal), .device_name = g.name, .mode = m});
    if (all_gpus_.empty()) notes_.push_back("no GPU present: the CPU was measured");
  }

  // Trains and evaluates one row, then predicts it from its device's profile.
  void measure(Run& r) {
    Sequential m = model_from_spec(o_.model, d_.sample_shape, d_.classes, precision_);
    perf::compile_for(m, {.device = r.device,
                          .mode = r.mode,
                          .threads = threads_.threads,
                          .seed = o_.seed,
                          .precision = precision_});
    const std::string label = run_label(r);
    out_.say(fmt::format("training on {} ({})", label, r.device_name));
    FitOptions fo;
    fo.epochs = o_.epochs;
    fo.batch_size = o_.batch_size;
    fo.verbose = 0;
    if (!o_.quiet) fo.callbacks.push_back(std::make_shared<EpochLine>(out_, label, o_.epochs));
    const History h = m.fit(d_.x_train, d_.y_train, fo);
    const EvaluateResult e =
        m.evaluate(d_.x_test, d_.y_test, {.batch_size = o_.batch_size, .verbose = 0});
    r.measured = true;
    r.first_epoch_seconds = h.epochs.front().seconds;
    double sum = 0;
    int counted = 0;
    for (std::size_t i = h.epochs.size() > 1 ? 1 : 0; i < h.epochs.size(); ++i, ++counted)
      sum += h.epochs[i].seconds;
    r.seconds_per_epoch = sum / std::max(counted, 1);
    r.steps_per_epoch = h.epochs.front().steps;
    r.seconds_per_step =
        r.seconds_per_epoch / static_cast<double>(std::max<int64_t>(r.steps_per_epoch, 1));
    r.test_accuracy = e.accuracy;
    r.test_loss = e.loss;
    for (const EpochRecord& er : h.epochs) r.losses.push_back(er.loss);
    r.weights = m.get_weights();
    std::string note;
    std::optional<perf::Profile> p;
    if (r.device == "cpu") {
      p = cpu_choice_.profile;
      r.profile = profile_json(cpu_choice_);
      if (p && !cpu_choice_.this_machine) r.foreign_cpu = p->name;
    } else if ((p = perf::profile_for_device(r.device, "", o_.threads, note))) {
      r.profile = {{"source", p->source}, {"calibrated_now", false}};
    }
    if (p)
      r.predicted_seconds_per_epoch =
          perf::predict_epoch(desc_, n_train_, o_.batch_size, *p, r.mode, 1,
                              priced_precision(*p, precision_, notes_))
              .seconds;
  }

  // Predicted GPU rows, where no GPU was measured.
  void add_predicted_gpu_rows() {
    const std::vector<perf::Profile> gp = perf::gpu_profiles();
    if (gp.empty()) {
      notes_.push_back("no GPU calibration profile is shipped yet: GPU rows omitted");
      return;
    }
    for (const perf::Profile& p : gp)
      for (perf::Mode m : {perf::Mode::resident, perf::Mode::naive}) {
        const perf::EpochPrediction e = perf::predict_epoch(
            desc_, n_train_, o_.batch_size, p, m, 1, priced_precision(p, precision_, notes_));
        if (m == perf::Mode::resident) {
          const std::string est = perf::estimates_sentence(
              e.full_step, p.id + "'s step", "its profile has no measurement of them");
          if (!est.empty()) estimate_notes_.push_back(est);
        }
        Run r{.device = p.id, .device_name = p.name, .mode = m};
        r.seconds_per_epoch = e.seconds;
        r.steps_per_epoch = e.steps;
        r.seconds_per_step = e.full_step.step_seconds;
        r.predicted_seconds_per_epoch = e.seconds;
        r.source = p.source;
        r.profile = {{"source", p.source}, {"calibrated_now", false}};
        runs_.push_back(std::move(r));
      }
    notes_.push_back("GPU rows are predicted from " + gp.front().source +
                     " (no GPU present to measure)");
  }

  void print_table() const {
    out_.say("");
    out_.say(fmt::format("{:<10}{:<10}{:>12}{:>12}{:>11}   {}", "device", "mode", "s/epoch",
                         "us/step", "test acc", "source"));
    for (const Run& r : runs_) {
      std::string source = r.measured ? "measured" : "predicted (" + r.device_name + " profile)";
      if (r.measured && r.predicted_seconds_per_epoch)
        source += fmt::format(
            "; predicted{} {:.3f} s/epoch (x{:.2f})",
            r.foreign_cpu.empty() ? "" : " from " + r.foreign_cpu + " (not this machine):",
            *r.predicted_seconds_per_epoch, *r.predicted_seconds_per_epoch / r.seconds_per_epoch);
      out_.say(fmt::format("{:<10}{:<10}{:>12.3f}{:>12.1f}{:>11}   {}", r.device,
                           perf::mode_name(r.mode), r.seconds_per_epoch, r.seconds_per_step * 1e6,
                           r.test_accuracy ? fmt::format("{:.4f}", *r.test_accuracy) : "-",
                           source));
    }
  }

  // The fastest row, and by how much it beats the runner-up.
  nlohmann::json report_winner() const {
    std::vector<const Run*> order;
    for (const Run& r : runs_) order.push_back(&r);
    std::stable_sort(order.begin(), order.end(), [](const Run* a, const Run* b) {
      return a->seconds_per_epoch < b->seconds_per_epoch;
    });
    const Run& w = *order.front();
    nlohmann::json winner{{"device", w.device},
                          {"mode", perf::mode_name(w.mode)},
                          {"measured", w.measured},
                          {"seconds_per_epoch", w.seconds_per_epoch}};
    out_.say("");
    if (order.size() > 1) {
      const Run& r2 = *order[1];
      const double factor = r2.seconds_per_epoch / std::max(w.seconds_per_epoch, 1e-15);
      winner["factor"] = factor;
      winner["runner_up"] = {
          {"device", r2.device}, {"mode", perf::mode_name(r2.mode)}, {"measured", r2.measured}};
      out_.say(fmt::format("winner: {} ({}), {:.2f}x faster than {} ({})", run_label(w),
                           w.measured ? "measured" : "predicted", factor, run_label(r2),
                           r2.measured ? "measured" : "predicted"));
    } else {
      winner["factor"] = nullptr;
      winner["runner_up"] = nullptr;
      out_.say(
          fmt::format("winner: {} (the only device; nothing to compare it with)", run_label(w)));
    }
    return winner;
  }

  // The seed's question, where a GPU row exists.
  void report_against_cpu() {
    const Run* cpu = &runs_.front();
    for (const Run& r : runs_)
      if (r.device != "cpu") {
        const double f = cpu->seconds_per_epoch / r.seconds_per_epoch;
        const std::string s =
            fmt::format("{} {} ({}) is {:.2f}x {} than the CPU", r.device, perf::mode_name(r.mode),
                        r.measured ? "measured" : "predicted", f >= 1 ? f : 1 / f,
                        f >= 1 ? "faster" : "slower");
        notes_.push_back(s);
        out_.say(s);
      }
  }

  // Parity between measured devices: their weights and loss curves.
  nlohmann::json report_parity() const {
    nlohmann::json parity = nlohmann::json::array();
    std::vector<const Run*> measured;
    for (const Run& r : runs_)
      if (r.measured) measured.push_back(&r);
    if (measured.size() < 2) {
      out_.say("parity: only one device measured; nothing to compare its weights with");
      return parity;
    }
    const Run& a = *measured.front();
    for (std::size_t i = 1; i < measured.size(); ++i) {
      const Run& b = *measured[i];
      const double wd = perf::max_relative_weight_difference(a.weights, b.weights);
      double ld = 0;
      for (std::size_t e = 0; e < std::min(a.losses.size(), b.losses.size()); ++e)
        ld = std::max(
            ld, std::fabs(a.losses[e] - b.losses[e]) / std::max(std::fabs(a.losses[e]), 1e-12));
      const bool agree = ld <= 0.005;
      parity.push_back({{"a", run_label(a)},
                        {"b", run_label(b)},
                        {"max_relative_weight_difference", wd},
                        {"max_relative_loss_difference", ld},
                        {"loss_curves_agree", agree}});
      out_.say(
          fmt::format("parity {} vs {}: largest relative weight difference {:.2e}; loss curves {} "
                      "(largest relative "
                      "difference {:.3f}%, threshold 0.5%)",
                      run_label(a), run_label(b), wd, agree ? "agree" : "DISAGREE", 100 * ld));
    }
    return parity;
  }

  nlohmann::json run_json(const Run& r) const {
    auto opt = [](const std::optional<double>& v) {
      return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    nlohmann::json j{{"device", r.device},
                     {"device_name", r.device_name},
                     {"mode", perf::mode_name(r.mode)},
                     {"measured", r.measured},
                     {"seconds_per_epoch", r.seconds_per_epoch},
                     {"seconds_per_step", r.seconds_per_step},
                     {"steps_per_epoch", r.steps_per_epoch},
                     {"test_accuracy", opt(r.test_accuracy)},
                     {"test_loss", opt(r.test_loss)},
                     {"predicted_seconds_per_epoch", opt(r.predicted_seconds_per_epoch)}};
    j["profile"] = r.profile;
    if (r.device == "cpu") j["threads"] = threads_json(threads_);
    if (r.measured) {
      j["first_epoch_seconds"] = r.first_epoch_seconds;
      j["loss"] = r.losses;
    }
    return j;
  }

  void write_json(const nlohmann::json& winner, const nlohmann::json& parity) const {
    nlohmann::json jr = nlohmann::json::array();
    for (const Run& r : runs_) jr.push_back(run_json(r));
    nlohmann::json doc{{"command", "compare"},
                       {"model", o_.model},
                       {"parameters", desc_.parameters()},
                       {"data", d_.name},
                       {"train_samples", n_train_},
                       {"epochs", o_.epochs},
                       {"batch_size", o_.batch_size},
                       {"seed", o_.seed},
                       {"precision", precision_name(precision_)},
                       {"runs", jr},
                       {"winner", winner},
                       {"parity", parity},
                       {"notes", notes_}};
    write_json_file("--json", o_.json, doc);
  }

  const CompareOptions& o_;
  Output out_;
  Precision precision_ = Precision::fp32;
  perf::TrainingData d_;
  perf::ModelDesc desc_;
  int64_t n_train_ = 0;
  std::vector<std::string> notes_;
  std::vector<std::string> estimate_notes_;  // ops a GPU profile priced without a measurement
  std::string epoch_note_;
  ThreadsForRun threads_;
  perf::CpuProfileChoice cpu_choice_;
  std::vector<CudaDeviceInfo> all_gpus_;
  std::string gpu_refusal_;
  std::vector<Run> runs_;
};

void run_compare(const CompareOptions& o) { Compare(o).run(); }

}  // namespace

void add_compare(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  auto* cmd = app.add_subcommand(
      "compare",
      "Train the same model with the same seed on every device (and GPU mode), side by side");
  add_common_options(*cmd, *o, kAllCommonOptions | kRankTimeoutOption | kPrecisionOption,
                     "Write the comparison as JSON to this file", "Nothing on stdout");
  cmd->add_option("--epochs", o->epochs, "Epochs")->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Batch size")->capture_default_str();
  add_profile_options(cmd, o->profile);
  cmd->add_option("--ranks", o->ranks,
                  "Compare training over these rank counts instead (e.g. 1,2: MPI data "
                  "parallelism on the CPU; each measured by explain --ranks N up to the cores, "
                  "all predicted)");
  cmd->callback([o] {
    refuse_ranks("compare");
    if (!o->ranks.empty()) {
      RanksTableOptions t("compare", *o);
      t.ranks = o->ranks;
      t.batch = o->batch_size;
      t.profile = o->profile;
      run_ranks_table(t);
      return;
    }
    run_compare(*o);
  });
}

}  // namespace crossover::cli
