// crossover report: the seed's question answered as one self-contained HTML page. It runs
// compare (each model on every device), explain (a step's phases on each device present) and a
// short sweep (the crossover width) in this process, each through its own subcommand with --json,
// predicts the phases of the devices that are absent from their profiles, and renders the lot
// (perf/report.h).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/cuda_info.h"
#include "backends/devices.h"
#include "cli/cli.h"
#include "core/error.h"
#include "core/machine.h"
#include "perf/cost_model.h"
#include "perf/measure.h"
#include "perf/profile.h"
#include "perf/report.h"

namespace crossover::cli {

namespace {

struct ReportOptions : CommonOptions {
  std::vector<std::string> models{"small", "big"};
  int epochs = 1;
  int64_t batch_size = kDefaultBatchSize;
  std::string device = "all";  // the devices explain measures: all present, cpu, or cuda:N
  std::string out = "report.html";
  std::string widths = "32,128,512,1024,2048,4096";
  int64_t steps = 100;  // explain's measured steps a run
  ProfileFlags profile;
};

// A folder for the subcommands' JSON files, removed when done.
class ScratchFolder {
 public:
  ScratchFolder()
      : path_(std::filesystem::temp_directory_path() /
              fmt::format("crossover-report-{}", static_cast<long>(getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Runs `crossover <args> --json FILE --quiet` in this process (the subcommand's own parsing,
// checks and code) and returns what it wrote.
nlohmann::json run_for_json(std::vector<std::string> args, const std::string& json_path) {
  CLI::App app{"crossover", "crossover"};
  app.require_subcommand(1);
  add_compare(app);
  add_explain(app);
  add_sweep(app);
  args.insert(args.end(), {"--json", json_path, "--quiet"});
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last argument first
  app.parse(args);
  std::ifstream f(json_path);
  if (!f) throw Error(args.back(), "wrote no JSON to " + json_path);
  return nlohmann::json::parse(f);
}

// The options every subcommand run shares with report's own.
std::vector<std::string> shared_args(const ReportOptions& o, const std::string& spec) {
  std::vector<std::string> a{"--data", o.data, "--seed", std::to_string(o.seed)};
  if (!spec.empty()) a.insert(a.end(), {"--model", spec});
  if (o.threads > 0) a.insert(a.end(), {"--threads", std::to_string(o.threads)});
  if (!o.precision.empty()) a.insert(a.end(), {"--precision", o.precision});
  if (!o.profile.profile.empty()) a.insert(a.end(), {"--profile", o.profile.profile});
  if (o.profile.no_calibrate) a.emplace_back("--no-calibrate");
  return a;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

// The devices explain measures: every one present (--device all), or the one named.
std::vector<std::string> explained_devices(const std::string& device,
                                           const std::vector<CudaDeviceInfo>& gpus) {
  if (device == "all") {
    std::vector<std::string> d{"cpu"};
    for (const CudaDeviceInfo& g : gpus) d.push_back(cuda_device_name(g.ordinal));
    return d;
  }
  if (device != "cpu" && !perf::is_gpu_device(device))
    throw Error("--device " + device, "expected all, cpu or cuda:N");
  if (perf::is_gpu_device(device) && gpus.empty())
    throw Error("--device " + device, "no GPU present (or this build has no CUDA backend)");
  return {device};
}

class Report {
 public:
  explicit Report(const ReportOptions& o) : o_(o), out_{o.quiet} {}

  void run() {
    check_writable("--out", o_.out);
    if (o_.models.empty()) throw Error("--model", "give at least one model");
    if (o_.epochs < 1) throw Error("--epochs", "must be at least 1");
    if (o_.batch_size < 1) throw Error("--batch-size", "must be at least 1");
    if (o_.steps < 1) throw Error("--steps", "must be at least 1");
    gpus_ = cuda_devices();
    const std::vector<std::string> devices = explained_devices(o_.device, gpus_);
    // The data's shape, for the predicted phases of absent devices.
    const perf::TrainingData d = perf::load_training_data(o_.data, [](const std::string&) {});
    const int64_t n_train = d.x_train.dim(0);

    // compare, and explain on each device (a GPU in both modes), per model; then the sweep.
    const std::size_t total =
        o_.models.size() * (1 + devices.size() * 2 - (devices.front() == "cpu" ? 1 : 0)) + 1;
    for (const std::string& spec : o_.models) {
      perf::ReportModel m{.label = model_label(spec), .spec = spec};
      step(total, fmt::format("compare {}: {} epoch{} on every device", m.label, o_.epochs,
                              o_.epochs == 1 ? "" : "s"));
      std::vector<std::string> a = shared_args(o_, spec);
      a.insert(a.begin(), "compare");
      a.insert(a.end(), {"--epochs", std::to_string(o_.epochs), "--batch-size",
                         std::to_string(o_.batch_size)});
      m.compare = run_for_json(a, scratch_.file("compare-" + std::to_string(models_.size())));
      if (!cpu_profile_source_) cpu_profile_source_ = cpu_profile_of(m.compare);
      for (const std::string& dev : devices)
        for (const char* mode : {"resident", "naive"}) {
          if (dev == "cpu" && std::string(mode) == "naive") continue;
          explain(m, dev, mode, total);
        }
      add_predicted_gpu_steps(m, spec, d, n_train);
      models_.push_back(std::move(m));
    }
    const nlohmann::json sweep = run_sweep(total);

    perf::ReportInput in;
    in.title = "Why is the GPU slower for the small Keras MLP?";
    in.command_line = command_line();
    in.created = utc_now();
    in.models = std::move(models_);
    in.sweep = sweep;
    in.sweep_svg = sweep_svg_;
    in.cpu = cpu_info();
    if (cpu_profile_source_ && !cpu_profile_source_->empty()) {
      try {
        in.cpu_profile = perf::load_profile(*cpu_profile_source_);
      } catch (const Error&) {
        // The machine section then goes without the CPU's rates.
      }
    }
    in.gpu_profiles = perf::gpu_profiles();
    for (const CudaDeviceInfo& g : gpus_)
      in.gpus.push_back(fmt::format("{} {} ({} SMs, {:.0f} GiB)", cuda_device_name(g.ordinal),
                                    g.name, g.sm_count,
                                    static_cast<double>(g.memory_bytes) / (1 << 30)));
    write_page(perf::report_html(in));
    if (!o_.quiet)
      for (const std::string& s : perf::report_sentences(in)) out_.say(s);
    out_.say("report written to " + o_.out);
  }

 private:
  void step(std::size_t total, const std::string& what) {
    out_.say(fmt::format("report [{}/{}] {}", ++done_, total, what));
  }

  static std::optional<std::string> cpu_profile_of(const nlohmann::json& compare) {
    for (const nlohmann::json& r : compare.at("runs"))
      if (r.value("device", "") == "cpu" && r.contains("profile") && r.at("profile").is_object())
        return r.at("profile").value("source", "");
    return std::nullopt;
  }

  void explain(perf::ReportModel& m, const std::string& device, const std::string& mode,
               std::size_t total) {
    step(total, fmt::format("explain {} on {} ({})", m.label, device, mode));
    std::vector<std::string> a = shared_args(o_, m.spec);
    a.insert(a.begin(), "explain");
    a.insert(a.end(),
             {"--device", device, "--mode", mode, "--batch-size", std::to_string(o_.batch_size),
              "--steps", std::to_string(o_.steps), "--max-seconds", "5"});
    const nlohmann::json doc = run_for_json(
        a, scratch_.file(fmt::format("explain-{}-{}-{}.json", models_.size(), device, mode)));
    for (perf::StepSplit& s : perf::step_splits_of_explain(doc)) m.steps.push_back(std::move(s));
    for (const nlohmann::json& s : doc.at("summary"))
      m.explain_sentences.push_back(fmt::format("{} ({}): {}", device, mode, s.get<std::string>()));
  }

  // Where no GPU is present: each shipped GPU profile's step, both modes, predicted.
  void add_predicted_gpu_steps(perf::ReportModel& m, const std::string& spec,
                               const perf::TrainingData& d, int64_t n_train) const {
    if (!gpus_.empty()) return;
    const Precision precision = precision_for_spec(spec, o_.precision);
    const perf::ModelDesc desc =
        perf::describe(model_from_spec(spec, d.sample_shape, d.classes, precision));
    if (!perf::unsupported_on(desc, perf::DeviceKind::gpu).empty()) return;
    for (const perf::Profile& p : perf::gpu_profiles())
      for (perf::Mode mode : {perf::Mode::resident, perf::Mode::naive}) {
        const perf::EpochPrediction e = perf::predict_epoch(
            desc, n_train, o_.batch_size, p, mode, 1, perf::priced_precision(p, precision));
        m.steps.push_back({.device = p.id,
                           .device_name = p.name,
                           .mode = perf::mode_name(mode),
                           .measured = false,
                           .phase_seconds = e.full_step.phase_seconds});
      }
  }

  // A one-hidden-layer MLP over a few widths at the report's batch size, short: the crossover.
  nlohmann::json run_sweep(std::size_t total) {
    step(total, fmt::format("sweep widths {} at batch {}", o_.widths, o_.batch_size));
    std::vector<std::string> a = shared_args(o_, "");
    a.insert(a.begin(), "sweep");
    // One thread count for every point (compare's measured choice for the first model) keeps
    // the sweep short; --threads overrides it.
    if (o_.threads == 0 && !models_.empty())
      if (const nlohmann::json* cpu = cpu_run(models_.front().compare);
          cpu && cpu->contains("threads"))
        a.insert(a.end(), {"--threads", std::to_string(cpu->at("threads").value("threads", 0))});
    const std::string svg = scratch_.file("sweep.svg");
    a.insert(a.end(), {"--widths", o_.widths, "--batch-sizes", std::to_string(o_.batch_size),
                       "--steps", "30", "--max-seconds", "1", "--plot", svg});
    nlohmann::json doc = run_for_json(a, scratch_.file("sweep.json"));
    std::ifstream f(svg);
    std::stringstream text;
    text << f.rdbuf();
    sweep_svg_ = text.str();
    return doc;
  }

  static const nlohmann::json* cpu_run(const nlohmann::json& compare) {
    for (const nlohmann::json& r : compare.at("runs"))
      if (r.value("device", "") == "cpu") return &r;
    return nullptr;
  }

  std::string command_line() const {
    std::string s = fmt::format("crossover report --data {} --epochs {} --batch-size {}", o_.data,
                                o_.epochs, o_.batch_size);
    for (const std::string& m : o_.models) s += " --model " + m;
    return s + " --out " + o_.out;
  }

  // Atomically: a temporary file beside --out, then a rename.
  void write_page(const std::string& html) const {
    const std::string tmp = fmt::format("{}.tmp-{}", o_.out, static_cast<long>(getpid()));
    {
      std::ofstream f(tmp, std::ios::binary);
      f << html;
      f.close();
      if (!f) {
        std::remove(tmp.c_str());
        throw Error("--out " + o_.out, "could not be written");
      }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, o_.out, ec);
    if (ec) {
      std::remove(tmp.c_str());
      throw Error("--out " + o_.out, "could not be written: " + ec.message());
    }
  }

  const ReportOptions& o_;
  Output out_;
  ScratchFolder scratch_;
  std::vector<CudaDeviceInfo> gpus_;
  std::vector<perf::ReportModel> models_;
  std::optional<std::string> cpu_profile_source_;
  std::string sweep_svg_;
  std::size_t done_ = 0;
};

}  // namespace

void add_report(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand(
      "report",
      "The seed's question answered as one self-contained HTML page: compare, explain and a "
      "short sweep of SMALL and BIG on every device, with the reasons in words");
  add_common_options(*cmd, *o,
                     kDataOption | kSeedOption | kThreadsOption | kQuietOption | kPrecisionOption,
                     "", "Nothing on stdout");
  cmd->add_option("--model", o->models,
                  "A model to report (repeat for more; default: --model small --model big)")
      ->capture_default_str();
  cmd->add_option("--epochs", o->epochs, "Epochs compare trains each model for")
      ->capture_default_str();
  cmd->add_option("--batch-size", o->batch_size, "Batch size")->capture_default_str();
  cmd->add_option("--device", o->device,
                  "Where explain measures a step: all (every device present), cpu or cuda:N")
      ->capture_default_str();
  cmd->add_option("--widths", o->widths, "The sweep's hidden widths, comma-separated")
      ->capture_default_str();
  cmd->add_option("--steps", o->steps, "Training steps explain measures on each device")
      ->capture_default_str();
  add_profile_options(cmd, o->profile);
  cmd->add_option("--out", o->out, "The page to write (replaced if it exists)")
      ->capture_default_str();
  cmd->callback([o] {
    refuse_ranks("report");
    Report(*o).run();
  });
}

}  // namespace crossover::cli
