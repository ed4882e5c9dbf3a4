// compare --ranks and sweep --ranks: where more ranks stop paying. Each rank count up to this
// host's cores is measured by `crossover explain --ranks N` (run as a child process: it starts
// mpirun itself), the others are predicted only; every row is predicted by the cost model
// (perf::predict_epoch over N ranks), so one path gives both commands their table.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "cli/cli.h"
#include "core/error.h"
#include "core/machine.h"
#include "perf/cost_model.h"
#include "perf/explain.h"
#include "perf/measure.h"

namespace crossover::cli {

namespace {

struct RanksRow {
  int ranks = 1, threads = 1;
  bool measured = false;
  std::string why_predicted;  // for a row not measured
  double epoch_predicted = 0, allreduce_share_predicted = 0;
  std::optional<double> epoch_measured, allreduce_share_measured, step_measured;
};

// This very binary with `args`, stdout and stderr passed through; its exit status.
int run_self(const std::vector<std::string>& args) {
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (self.empty()) throw Error("--ranks", "cannot find this crossover's own path");
  std::vector<char*> argv{const_cast<char*>(self.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) throw Error("--ranks", "cannot start explain (fork failed)");
  if (child == 0) {
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

double phase_share(const nlohmann::json& explain, const char* key) {
  double allreduce = 0;
  for (const nlohmann::json& p : explain["phases"])
    if (p["name"] == "allreduce" && p[key].is_number()) allreduce = p[key].get<double>();
  const double step = explain["step_seconds"]["measured"].get<double>();
  return step > 0 ? allreduce / step : 0;
}

// What every row of one table shares: the model, its data and the epoch it is timed over.
struct RanksTableRun {
  const RanksTableOptions& o;
  Precision precision;
  int cores;
  std::string data_name;
  perf::ModelDesc desc;
  int64_t samples, batch, steps;
};

// Why a row of `n` ranks is predicted only ("" when it is measured).
std::string why_predicted_only(const RanksTableOptions& o, int n, int cores, int threads) {
  if (o.predict_only) return "--predict-only";
  if (n > cores)
    return fmt::format(
        "{} ranks > {} cores: measuring would need mpirun --oversubscribe, timing ranks that "
        "share cores; predicted as if each rank had {} thread{} of its own",
        n, cores, threads, threads == 1 ? "" : "s");
  return "";
}

// Measures row `r` by `crossover explain --ranks N` (a child process; its JSON in `dir`).
void measure_ranks_row(const RanksTableRun& t, const std::string& dir, RanksRow& r,
                       const Output& out) {
  const RanksTableOptions& o = t.o;
  const int n = r.ranks;
  out.say(fmt::format("measuring {} rank{} ({} thread{} each) with crossover explain ...", n,
                      n == 1 ? "" : "s", r.threads, r.threads == 1 ? "" : "s"));
  const std::string json = fmt::format("{}/explain-{}.json", dir, n);
  std::vector<std::string> args{"explain",
                                "--model",
                                o.model,
                                "--data",
                                o.data,
                                "--batch-size",
                                std::to_string(t.batch),
                                "--threads",
                                std::to_string(r.threads),
                                "--seed",
                                std::to_string(o.seed),
                                "--steps",
                                std::to_string(o.steps),
                                "--max-seconds",
                                fmt::format("{}", o.max_seconds),
                                "--precision",
                                precision_name(t.precision),
                                "--quiet",
                                "--json",
                                json};
  if (n > 1)
    args.insert(args.end(), {"--ranks", std::to_string(n), "--rank-timeout",
                             fmt::format("{}", o.rank_timeout)});
  if (!o.profile.profile.empty()) args.insert(args.end(), {"--profile", o.profile.profile});
  if (o.profile.no_calibrate) args.push_back("--no-calibrate");
  const int rc = run_self(args);
  if (rc != 0) throw Error("--ranks", fmt::format("explain over {} ranks failed (exit {})", n, rc));
  std::ifstream f(json);
  const nlohmann::json e = nlohmann::json::parse(f);
  r.measured = true;
  r.step_measured = e["step_seconds"]["measured"].get<double>();
  r.epoch_measured = *r.step_measured * static_cast<double>(t.steps);
  r.allreduce_share_measured = phase_share(e, "measured_seconds");
}

// Row `r`'s prediction: this CPU's profile at the threads each rank has (calibrated where none
// matches; an explain above saved its ranks' allreduce fit in it).
void predict_ranks_row(const RanksTableRun& t, RanksRow& r) {
  const int n = r.ranks;
  std::vector<int64_t> shares;  // each step's largest share: full batches, the ragged last
  for (const int64_t m : perf::epoch_step_rows(t.samples, t.batch))
    shares.push_back((m + n - 1) / n);
  const perf::CpuProfileChoice choice =
      cpu_profile_for_run(t.o.profile, r.threads, t.o.quiet, {{t.desc, shares, t.precision}},
                          fmt::format("{} over {} ranks", model_label(t.o.model), n));
  if (!choice.profile) throw Error("--ranks", "no CPU profile to predict with: " + choice.note);
  const perf::EpochPrediction p = perf::predict_epoch(t.desc, t.samples, t.batch, *choice.profile,
                                                      perf::Mode::resident, n, t.precision);
  r.epoch_predicted = p.seconds;
  const double step = p.full_step.step_seconds;
  r.allreduce_share_predicted =
      step > 0 ? p.full_step.phase_seconds[static_cast<std::size_t>(perf::Phase::allreduce)] / step
               : 0;
}

void print_ranks_rows(const std::vector<RanksRow>& rows, const Output& out) {
  const double base_pred = rows.front().epoch_predicted;
  out.say("");
  out.say(fmt::format("{:>6}{:>9}{:>18}{:>18}{:>8}{:>20}{:>10}", "ranks", "threads",
                      "epoch measured", "epoch predicted", "ratio", "allreduce share", "speed-up"));
  for (const RanksRow& r : rows) {
    const std::string share =
        r.allreduce_share_measured
            ? fmt::format("{:.0f}% / {:.0f}%", 100 * *r.allreduce_share_measured,
                          100 * r.allreduce_share_predicted)
            : fmt::format("- / {:.0f}%", 100 * r.allreduce_share_predicted);
    out.say(fmt::format(
        "{:>6}{:>9}{:>18}{:>18}{:>8}{:>20}{:>10}", r.ranks, r.threads,
        r.epoch_measured ? perf::human_seconds(*r.epoch_measured) : "-",
        perf::human_seconds(r.epoch_predicted),
        r.epoch_measured ? fmt::format("{:.2f}", r.epoch_predicted / *r.epoch_measured) : "-",
        share, fmt::format("{:.2f}x", base_pred / r.epoch_predicted)));
  }
  out.say(
      "(allreduce share: measured / predicted share of a step; speed-up: predicted, against "
      "the first row; a measured epoch is the measured step x the epoch's steps)");
  for (const RanksRow& r : rows)
    if (!r.why_predicted.empty())
      out.say(fmt::format("{} ranks: predicted only ({})", r.ranks, r.why_predicted));
}

// Where more ranks stop paying: the count with the fastest predicted epoch, and why the next
// one is slower (its allreduce share).
std::string ranks_summary(const std::vector<RanksRow>& rows) {
  const double base_pred = rows.front().epoch_predicted;
  std::size_t best = 0;
  for (std::size_t i = 1; i < rows.size(); ++i)
    if (rows[i].epoch_predicted < rows[best].epoch_predicted) best = i;
  auto measured_share = [](const RanksRow& r) {
    return r.allreduce_share_measured
               ? fmt::format(" ({:.0f}% measured)", 100 * *r.allreduce_share_measured)
               : std::string();
  };
  if (rows.size() < 2) return "Give two or more rank counts to see where more ranks stop paying.";
  if (best + 1 == rows.size())
    return fmt::format(
        "More ranks keep paying up to {} here (predicted {:.2f}x the first row): the allreduce "
        "is {:.0f}% of a step at {} ranks{}, less than the compute each rank sheds.",
        rows.back().ranks, base_pred / rows.back().epoch_predicted,
        100 * rows.back().allreduce_share_predicted, rows.back().ranks,
        measured_share(rows.back()));
  const RanksRow& a = rows[best];
  const RanksRow& b = rows[best + 1];
  return fmt::format(
      "More ranks stop paying beyond {} rank{} (predicted {} per epoch; {} at {} ranks): there "
      "the allreduce of the gradients is {:.0f}% of a step{}, one blocking call not overlapped "
      "with the backward pass, more than the compute each rank sheds, and every rank still "
      "runs the optimizer over all the parameters.",
      a.ranks, a.ranks == 1 ? "" : "s", perf::human_seconds(a.epoch_predicted),
      perf::human_seconds(b.epoch_predicted), b.ranks, 100 * b.allreduce_share_predicted,
      measured_share(b));
}

void write_ranks_json(const RanksTableRun& t, const std::vector<RanksRow>& rows,
                      const std::string& summary) {
  nlohmann::json jr = nlohmann::json::array();
  for (const RanksRow& r : rows) {
    auto opt = [](const std::optional<double>& v) {
      return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
    };
    jr.push_back(
        {{"ranks", r.ranks},
         {"threads", r.threads},
         {"measured", r.measured},
         {"predicted_only_because",
          r.why_predicted.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.why_predicted)},
         {"epoch_seconds", {{"measured", opt(r.epoch_measured)}, {"predicted", r.epoch_predicted}}},
         {"allreduce_share",
          {{"measured", opt(r.allreduce_share_measured)},
           {"predicted", r.allreduce_share_predicted}}}});
  }
  write_json_file("--json", t.o.json,
                  {{"command", t.o.command},
                   {"model", t.o.model},
                   {"data", t.data_name},
                   {"batch_size", t.batch},
                   {"precision", precision_name(t.precision)},
                   {"train_samples", t.samples},
                   {"rows", jr},
                   {"summary", summary}});
}

}  // namespace

std::vector<int64_t> parse_ranks(const std::string& text) {
  std::vector<int64_t> v;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 1 || n > 4096)
      throw Error("--ranks", "'" + item + "' is not a rank count (expected a list such as 1,2,4)");
    v.push_back(n);
    at = comma + 1;
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

void run_ranks_table(const RanksTableOptions& o) {
  Output out{o.quiet};
  if (!o.json.empty()) check_writable("--json", o.json);
  if (o.batch < 1) throw Error("--batch-size", "must be at least 1");
  const std::vector<int64_t> counts = parse_ranks(o.ranks);
  const Precision precision = cpu_run_precision(o.command, o.model, o.precision);
  const int cores = cpu_info().logical_cores;
  // Before any work: the counts to be measured need MPI and mpirun (one line, exit 2).
  if (!o.predict_only)
    for (const int64_t n : counts)
      if (n > 1 && n <= cores) mpirun_for_ranks("explain", static_cast<int>(n));
  perf::TrainingData d = perf::load_training_data(o.data, [&](const std::string&) {});
  const Sequential probe = model_from_spec(o.model, d.sample_shape, d.classes, precision);
  const int64_t samples = d.x_train.dim(0);
  const int64_t batch = std::min(o.batch, samples);
  const RanksTableRun t{o,
                        precision,
                        cores,
                        d.name,
                        perf::describe(probe),
                        samples,
                        batch,
                        (samples + batch - 1) / batch};
  out.say(fmt::format(
      "{} --ranks: {} at batch {} (global), one epoch of {} ({} samples, {} steps), on {} ({} "
      "cores); each rank count up to the cores measured by `crossover explain --ranks N`, every "
      "row predicted by the cost model",
      o.command, model_label(o.model), batch, d.name, samples, t.steps, device_description("cpu"),
      cores));
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("crossover-ranks-{}", ::getpid()))
          .string();
  std::filesystem::create_directories(dir);
  std::vector<RanksRow> rows;
  for (const int64_t n64 : counts) {
    RanksRow r;
    r.ranks = static_cast<int>(n64);
    r.threads = o.threads > 0 ? o.threads : std::max(1, cores / r.ranks);
    r.why_predicted = why_predicted_only(o, r.ranks, cores, r.threads);
    if (r.why_predicted.empty()) measure_ranks_row(t, dir, r, out);
    predict_ranks_row(t, r);
    rows.push_back(r);
  }
  std::filesystem::remove_all(dir);

  print_ranks_rows(rows, out);
  const std::string summary = ranks_summary(rows);
  out.say("");
  out.say(summary);
  if (!o.json.empty()) write_ranks_json(t, rows, summary);
}

}  // namespace crossover::cli
