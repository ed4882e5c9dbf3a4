// crossover calibrate: measure a device through the engine's code paths and save a profile
// (docs/PROFILE.md) that the cost model predicts with.
#include <fmt/format.h>

#include <filesystem>

#include "cli/cli.h"
#include "core/error.h"
#include "perf/calibrate.h"

namespace crossover::cli {

namespace {

struct CalibrateCliOptions : CommonOptions {
  std::string device = "cpu";
  std::string out;
  bool quick = false;
};

// Under mpirun (N ranks): rank 0 alone calibrates the device while the others wait (N ranks
// timing at once would each measure against the others), then every rank takes part in the
// allreduce measurement, and rank 0 adds the fit to the profile and saves it.
void run_calibrate(const CalibrateCliOptions& o) {
  const Ranks ranks = ranks_for_command(o.rank_timeout);
  if (ranks.size > 1 && o.device != "cpu")
    throw Error("calibrate",
                "over ranks measures the CPU's MPI allreduce only for now (--device "
                "cpu)");
  Output out{o.quiet || !ranks.leader()};
  if (!o.out.empty() && ranks.leader()) check_writable("--out", o.out);
  perf::Profile p;
  if (ranks.leader())
    p = perf::calibrate({.device = o.device,
                         .quick = o.quick,
                         .threads = o.threads,
                         .say = [&](const std::string& l) { out.say(l); }});
  if (ranks.collective) {
    const int hosts = hosts_of(ranks);
    out.say(fmt::format("allreduce of {} ranks on {} host{} ({}) ...", ranks.size, hosts,
                        hosts == 1 ? "" : "s", ranks.collective->description()));
    const perf::AllreduceFit fit = perf::calibrate_allreduce(*ranks.collective, hosts, o.quick);
    out.say("allreduce: " + perf::describe_allreduce(fit));
    if (!ranks.leader()) return;
    p.allreduce.push_back(fit);
  }
  std::string path = o.out;
  if (path.empty()) {
    path = perf::default_profile_path(p);
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    check_writable("--out", path);
  }
  perf::save_profile(p, path);
  out.say(fmt::format("profile saved to {}", path));
}

}  // namespace

void add_calibrate(CLI::App& app) {
  auto o = std::make_shared<CalibrateCliOptions>();
  auto* cmd = app.add_subcommand(
      "calibrate", "Measure this machine (GEMM rates, bandwidth, latencies) and save a profile");
  add_common_options(*cmd, *o, kThreadsOption | kQuietOption | kRankTimeoutOption, "",
                     "No progress on stdout");
  cmd->add_option("--device", o->device, "cpu or cuda:N")->capture_default_str();
  cmd->add_option("--out", o->out,
                  "Profile file to write (default: <slug>.json in $CROSSOVER_PROFILE_DIR or "
                  "~/.local/share/crossover/profiles)");
  cmd->add_flag("--quick", o->quick, "A coarser grid and fewer repeats (a few seconds)");
  cmd->callback([o] { run_calibrate(*o); });
}

}  // namespace crossover::cli
