// crossover explain: a training step's time split into phases, measured and predicted, and what
// dominates it (docs/PERF.md).
#include <fmt/format.h>

#include "backends/devices.h"
#include "cli/cli.h"
#include "core/error.h"
#include "perf/explain.h"
#include "perf/measure.h"
#include "perf/profile.h"
#include "perf/trace.h"

namespace crossover::cli {

namespace {

struct ExplainCliOptions : CommonOptions {
  int64_t batch_size = kDefaultBatchSize;
  std::string device = "cpu";
  std::string mode = "resident";
  int64_t steps = 200;
  double max_seconds = 20;
  ProfileFlags profile;
  bool ops = false;
  int ranks = 0;            // 0: as started (one process, or mpirun's ranks)
  std::string trace;        // --trace: the timed steps as a Chrome trace (perf/trace.h)
  bool fused_step = false;  // --fused-step: the fused step predicted beside the unfused one
};

// The option checks that need no data: one line each, before anything is read. Sets `mode`
// (--mode); returns whether the device is a GPU.
bool check_explain_options(const ExplainCliOptions& o, const Ranks& ranks, perf::Mode& mode) {
  if (!o.json.empty()) check_writable("--json", o.json);
  if (!o.trace.empty() && ranks.leader()) check_writable("--trace", o.trace);
  if (o.batch_size < 1) throw Error("--batch-size", "must be at least 1");
  if (o.steps < 1) throw Error("--steps", "must be at least 1");
  if (!(o.max_seconds > 0)) throw Error("--max-seconds", "must be positive");
  mode = perf::parse_mode(o.mode);
  const bool gpu = perf::is_gpu_device(o.device);
  if (o.device != "cpu" && !gpu) throw Error("--device " + o.device, "expected cpu or cuda:N");
  if (!gpu && mode == perf::Mode::naive)
    throw Error("--mode naive",
                "applies to a GPU (cuda:N): the CPU has no launches or host-device copies");
  if (gpu && cuda_device_count() == 0)
    throw Error("--device " + o.device, "no GPU present (or this build has no CUDA backend)");
  if (gpu && ranks.size > 1)
    throw Error("--ranks", "explain over ranks runs on the CPU only for now (--device cpu)");
  return gpu;
}

// The CPU threads of the run: --threads, else over ranks this host's cores divided among them
// (as train does), else the count measured fastest here; a GPU run's as given.
ThreadsForRun explain_threads(const ExplainCliOptions& o, const Ranks& ranks, bool gpu,
                              const perf::TrainingData& d, const Sequential& probe,
                              Precision precision) {
  if (gpu) return ThreadsForRun{o.threads, std::nullopt};
  if (ranks.size > 1)
    return o.threads > 0
               ? ThreadsForRun{o.threads, std::nullopt}
               : ThreadsForRun{threads_per_rank(ranks), std::nullopt, "cores divided among ranks"};
  const std::string what = fmt::format("{} at batch {}", model_label(o.model), o.batch_size);
  return cpu_threads_for_run(
      o.threads, cpu_model_maker(o.model, d.sample_shape, d.classes, o.seed, precision), d.x_train,
      d.y_train, o.batch_size, o.quiet, what,
      perf::threads_choice_key(perf::describe(probe), o.batch_size, precision));
}

// The profile the step is predicted from (into c.profile), the note saying whose it is, and the
// JSON "profile" object (null without one).
nlohmann::json choose_explain_profile(const ExplainCliOptions& o, const Ranks& ranks, bool gpu,
                                      const perf::TrainingData& d, const Sequential& probe,
                                      int threads, perf::ExplainConfig& c, std::string& note) {
  nlohmann::json profile_doc = nullptr;
  if (gpu) {
    c.profile = perf::profile_for_device(c.device, o.profile.profile, o.threads, note);
    if (c.profile) profile_doc = {{"source", c.profile->source}, {"calibrated_now", false}};
  } else {
    // This CPU's profile, calibrated first where none matches this machine.
    const std::string what = fmt::format("{} at batch {}", model_label(o.model), o.batch_size);
    const perf::CpuProfileChoice choice = cpu_profile_for_run(
        o.profile, threads, o.quiet,
        // A rank's step, and the batch of 4x that explain's sentences weigh it against.
        {{perf::describe(probe),
          {(std::min<int64_t>(o.batch_size, d.x_train.dim(0)) + ranks.size - 1) / ranks.size,
           (4 * o.batch_size + ranks.size - 1) / ranks.size},
          c.precision}},
        what, ranks);
    c.profile = choice.profile;
    note = choice.note;
    profile_doc = profile_json(choice);
  }
  if (profile_doc.is_object()) profile_doc["note"] = note;
  return profile_doc;
}

// The phase table, the sentences and (--ops) the op list.
void print_explain(const ExplainCliOptions& o, const perf::ExplainResult& r,
                   const std::string& note, const Output& out) {
  out.say(fmt::format("measured {} steps: {}", r.steps_measured, r.method));
  out.say("");
  out.say(fmt::format("{:<15}{:>14}{:>15}{:>8}{:>8}{:>12}", "phase", "measured", "predicted",
                      "share", "ratio", "floor"));
  for (int i = 0; i < perf::kPhaseCount; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (static_cast<perf::Phase>(i) == perf::Phase::allreduce && r.ranks == 1) continue;
    const std::string pred = r.has_prediction ? perf::human_seconds(r.predicted[k]) : "-";
    const std::string ratio = r.has_prediction && r.measured[k] > 0 && r.predicted[k] > 0
                                  ? fmt::format("{:.2f}", r.predicted[k] / r.measured[k])
                                  : "-";
    const std::string floor = r.has_prediction && r.floor.phase_seconds[k] > 0
                                  ? perf::human_seconds(r.floor.phase_seconds[k])
                                  : "-";
    out.say(fmt::format(
        "{:<15}{:>14}{:>15}{:>7}%{:>8}{:>12}", perf::phase_name(static_cast<perf::Phase>(i)),
        perf::human_seconds(r.measured[k]), pred,
        static_cast<int>(std::lround(100 * r.measured[k] / std::max(r.step_measured, 1e-15))),
        ratio, floor));
  }
  out.say(fmt::format(
      "{:<15}{:>14}{:>15}{:>8}{:>8}{:>12}", "step", perf::human_seconds(r.step_measured),
      r.has_prediction ? perf::human_seconds(r.step_predicted) : "-", "100%",
      r.has_prediction ? fmt::format("{:.2f}", r.step_predicted / r.step_measured) : "-",
      r.has_prediction ? perf::human_seconds(r.floor.step_seconds) : "-"));
  out.say("");
  for (const std::string& s : r.sentences) out.say(s);
  if (!r.has_prediction) out.say("No prediction: " + note + ".");
  if (!o.ops || !r.has_prediction) return;
  out.say("");
  out.say(fmt::format("{:<52}{:<14}{:>10}{:>10}{:>12}{:>12}{:>12}", "op", "phase", "MFLOP", "MB",
                      "measured", "predicted", "floor"));
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const perf::Op& op = r.ops[i];
    out.say(fmt::format("{:<52}{:<14}{:>10.3f}{:>10.3f}{:>12}{:>12}{:>12}", op.name,
                        perf::phase_name(op.phase), double(op.flops) / 1e6,
                        double(op.bytes_read + op.bytes_written) / 1e6,
                        r.op_measured.empty() ? "-" : perf::human_seconds(r.op_measured[i]),
                        perf::human_seconds(r.prediction.op_seconds[i]),
                        perf::human_seconds(r.floor.op_seconds[i])));
  }
  // --fused-step: each priced fused step's stages (perf::predict_fused_step).
  for (const perf::FusedComparison& fc : r.fused) {
    if (!fc.fused.priced()) continue;
    out.say("");
    out.say(fmt::format("{:<52}{:>10}{:>10}{:>10}{:>12}", "fused step on " + fc.device + ": stage",
                        "MFLOP", "MB", "barriers", "predicted"));
    out.say(fmt::format("{:<52}{:>10}{:>10}{:>10}{:>12}", "launch", "-", "-", "-",
                        perf::human_seconds(fc.fused.launch_seconds)));
    for (const perf::FusedStage& st : fc.fused.stages)
      out.say(fmt::format("{:<52}{:>10.3f}{:>10.3f}{:>10}{:>12}", st.name, double(st.flops) / 1e6,
                          double(st.bytes) / 1e6, st.barriers, perf::human_seconds(st.seconds)));
    out.say(fmt::format("{:<52}{:>10}{:>10}{:>10}{:>12}", "grid barriers", "-", "-",
                        fc.fused.barriers, perf::human_seconds(fc.fused.barrier_seconds)));
  }
}

nlohmann::json explain_phases_json(const perf::ExplainResult& r) {
  nlohmann::json phases = nlohmann::json::array();
  for (int i = 0; i < perf::kPhaseCount; ++i) {
    const auto k = static_cast<std::size_t>(i);
    phases.push_back({{"name", perf::phase_name(static_cast<perf::Phase>(i))},
                      {"measured_seconds", r.measured[k]},
                      {"predicted_seconds",
                       r.has_prediction ? nlohmann::json(r.predicted[k]) : nlohmann::json(nullptr)},
                      {"floor_seconds", r.has_prediction ? nlohmann::json(r.floor.phase_seconds[k])
                                                         : nlohmann::json(nullptr)}});
  }
  return phases;
}

// The roofline floor (perf::Floor): null without a profile.
nlohmann::json floor_json(const perf::ExplainResult& r) {
  const perf::Floor& f = r.floor;
  if (!r.has_prediction || !(f.step_seconds > 0)) return nullptr;
  nlohmann::json levels = nlohmann::json::array();
  for (std::size_t l = 0; l < f.levels.size(); ++l)
    levels.push_back({{"name", f.levels[l].name},
                      {"bytes", f.levels[l].bytes},
                      {"bytes_per_second", f.levels[l].bytes_per_second},
                      {"step_bytes", f.level_bytes[l]}});
  return {{"step_seconds", f.step_seconds},
          {"gemm_seconds", f.gemm_seconds},
          {"update_seconds", f.update_seconds},
          {"peak_flops_per_second", f.peak_flops_per_second},
          {"x_roofline", r.step_measured / f.step_seconds},
          {"below_floor", perf::below_floor(r)},
          {"x_gemm_floor", f.gemm_seconds > 0 ? nlohmann::json(r.step_measured / f.gemm_seconds)
                                              : nlohmann::json(nullptr)},
          {"levels", levels}};
}

// --fused-step: the fused step on each GPU priced (perf::FusedComparison); null without it.
nlohmann::json fused_json(const perf::ExplainConfig& c, const perf::ExplainResult& r) {
  if (!c.fused_step) return nullptr;
  nlohmann::json all = nlohmann::json::array();
  for (const perf::FusedComparison& fc : r.fused) {
    const perf::FusedPrediction& f = fc.fused;
    nlohmann::json stages = nlohmann::json::array();
    for (const perf::FusedStage& s : f.stages)
      stages.push_back({{"name", s.name},
                        {"seconds", s.seconds},
                        {"flops", s.flops},
                        {"bytes", s.bytes},
                        {"barriers", s.barriers}});
    auto or_null = [&](double v) {
      return f.priced() ? nlohmann::json(v) : nlohmann::json(nullptr);
    };
    all.push_back(
        {{"device_name", fc.device},
         {"profile", fc.profile},
         {"eligible", f.refusal.empty()},
         {"refusal", f.refusal.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.refusal)},
         {"priced", f.priced()},
         {"unpriced", f.unpriced.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.unpriced)},
         {"unfused_step_seconds", or_null(fc.unfused_seconds)},
         {"step_seconds", or_null(f.step_seconds)},
         {"launch_seconds", or_null(f.launch_seconds)},
         {"stage_seconds", or_null(f.stage_seconds)},
         {"barrier_seconds", or_null(f.barrier_seconds)},
         {"barriers", f.barriers},
         {"blocks", f.blocks},
         {"state_bytes", f.state_bytes},
         {"stages", stages}});
  }
  return all;
}

nlohmann::json explain_ops_json(const perf::ExplainResult& r) {
  nlohmann::json ops = nlohmann::json::array();
  for (std::size_t i = 0; i < r.ops.size(); ++i) {
    const perf::Op& op = r.ops[i];
    ops.push_back(
        {{"name", op.name},
         {"phase", perf::phase_name(op.phase)},
         {"kernel", op.kernel},
         {"flops", op.flops},
         {"bytes_read", op.bytes_read},
         {"bytes_written", op.bytes_written},
         {"elements", op.elements},
         {"launches", op.launches},
         {"transfer_bytes", op.transfer_bytes},
         {"measured_seconds",
          r.op_measured.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.op_measured[i])},
         {"predicted_seconds",
          r.has_prediction ? nlohmann::json(r.prediction.op_seconds[i]) : nlohmann::json(nullptr)},
         {"floor_seconds",
          r.has_prediction ? nlohmann::json(r.floor.op_seconds[i]) : nlohmann::json(nullptr)}});
  }
  return ops;
}

void run_explain_cmd(const ExplainCliOptions& o) {
  // Over ranks: under mpirun, each rank runs this; rank 0 alone speaks and writes the JSON.
  const Ranks ranks = ranks_for_command(o.rank_timeout);
  if (o.ranks < 0) throw Error("--ranks", "must be at least 1");
  if (o.ranks > 1 && ranks.size == 1)
    throw ExitStatus{relaunch_under_mpirun("explain", o.ranks, o.quiet)};
  if (o.ranks > 0 && o.ranks != ranks.size)
    throw Error(fmt::format("--ranks {}", o.ranks),
                fmt::format("started by mpirun as {} ranks: give --ranks {} or none", ranks.size,
                            ranks.size));
  Output out{o.quiet || !ranks.leader()};
  perf::Mode mode = perf::Mode::resident;
  const bool gpu = check_explain_options(o, ranks, mode);
  // The precision (a model file's dtype policy, or --precision agreeing with it), and on the CPU
  // whether it can train in it: refused before the data is read.
  const Precision precision = precision_for_spec(o.model, o.precision);
  if (!gpu)
    if (const std::string why = cpu_precision_problem(precision); !why.empty())
      throw Error(std::string("--precision ") + precision_name(precision), why);

  perf::TrainingData d =
      perf::load_training_data(o.data, [&](const std::string& l) { out.say(l); });
  check_same_data(ranks, "--data " + d.path, {&d.x_train, &d.y_train});
  // Check the model spec before any measuring.
  perf::ExplainConfig c;
  c.precision = precision;
  const Sequential probe = model_from_spec(o.model, d.sample_shape, d.classes, c.precision);
  c.make_model = [&] { return model_from_spec(o.model, d.sample_shape, d.classes, c.precision); };
  c.x = &d.x_train;
  c.y = &d.y_train;
  c.batch = o.batch_size;
  c.device = parse_device(o.device).name();  // "cuda" is cuda:0
  c.mode = mode;
  const ThreadsForRun threads = explain_threads(o, ranks, gpu, d, probe, c.precision);
  c.threads = threads.threads;
  c.seed = o.seed;
  c.steps = o.steps;
  c.max_seconds = o.max_seconds;
  std::string note;
  const nlohmann::json profile_doc =
      choose_explain_profile(o, ranks, gpu, d, probe, threads.threads, c, note);
  if (!gpu) c.other_profiles = perf::gpu_profiles();
  c.collective = ranks.collective;
  c.trace = !o.trace.empty();
  c.fused_step = o.fused_step;
  out.say(fmt::format("explain: {} on {}, batch {}{}, {} mode; prediction from {}", o.model,
                      device_description(c.device), o.batch_size,
                      ranks.collective
                          ? fmt::format(" over {} ranks ({}; {} thread{} each)", ranks.size,
                                        ranks.collective->description(), threads.threads,
                                        threads.threads == 1 ? "" : "s")
                          : "",
                      o.mode, note));
  const perf::ExplainResult r = perf::run_explain(c);
  print_explain(o, r, note, out);
  if (c.trace && ranks.leader()) {
    perf::write_chrome_trace(
        o.trace, r,
        {.title = fmt::format("crossover explain: {} on {}, batch {}{}", o.model, c.device, r.batch,
                              ranks.size > 1 ? fmt::format(", rank 0 of {}", ranks.size) : ""),
         .device = c.device,
         .device_name = device_description(c.device)},
        "--trace " + o.trace);
    out.say(fmt::format("trace: {} ({} timed steps; open it in ui.perfetto.dev)", o.trace,
                        r.raw.traced_steps.size()));
  }

  if (o.json.empty() || !ranks.leader()) return;
  nlohmann::json doc{
      {"command", "explain"},
      {"model", o.model},
      {"device", c.device},
      {"device_name", device_description(c.device)},
      {"mode", o.mode},
      {"batch_size", r.batch},
      {"data", d.name},
      {"steps_measured", r.steps_measured},
      {"method", r.method},
      {"profile", profile_doc},
      {"threads", gpu ? nlohmann::json(nullptr) : threads_json(threads)},
      {"phases", explain_phases_json(r)},
      {"step_seconds",
       {{"measured", r.step_measured},
        {"predicted",
         r.has_prediction ? nlohmann::json(r.step_predicted) : nlohmann::json(nullptr)},
        {"timed", r.timed_step_wall},
        {"ratio", r.has_prediction ? nlohmann::json(r.step_predicted / r.step_measured)
                                   : nlohmann::json(nullptr)}}},
      {"floor", floor_json(r)},
      {"summary", r.sentences},
      {"ops", explain_ops_json(r)},
      {"fused_step", fused_json(c, r)}};
  add_ranks_json(doc, ranks);
  write_json_file("--json", o.json, doc);
}

}  // namespace

void add_explain(CLI::App& app) {
  auto o = std::make_shared<ExplainCliOptions>();
  auto* cmd = app.add_subcommand(
      "explain", "Where a training step's time goes: phases measured and predicted");
  add_common_options(*cmd, *o, kAllCommonOptions | kRankTimeoutOption | kPrecisionOption,
                     "Write the phases as JSON to this file", "Nothing on stdout");
  cmd->add_option("--batch-size", o->batch_size, "Batch size")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu or cuda:N")->capture_default_str();
  cmd->add_option("--mode", o->mode, "resident or naive (GPU)")->capture_default_str();
  cmd->add_option("--steps", o->steps, "Training steps to measure (each run)")
      ->capture_default_str();
  cmd->add_option("--max-seconds", o->max_seconds, "Stop measuring a run after this long")
      ->capture_default_str();
  add_profile_options(cmd, o->profile);
  cmd->add_flag("--ops", o->ops, "Also print the cost model's op list");
  cmd->add_option("--trace", o->trace,
                  "Write the timed steps as a Chrome trace (JSON) to this file, for Perfetto or "
                  "chrome://tracing: each backend call a slice with its shapes, bytes and FLOPs");
  cmd->add_flag("--fused-step", o->fused_step,
                "Also predict the fused training step (train --fused-step: one kernel a step) "
                "beside the unfused one: on the GPU explained, or on the CPU on each GPU profile "
                "found ($CROSSOVER_PROFILES adds folders)");
  cmd->add_option("--ranks", o->ranks,
                  "Explain a step of training over N ranks (data parallel, MPI): started as one "
                  "process, explain runs itself under mpirun -np N (default: as started)");
  cmd->callback([o] { run_explain_cmd(*o); });
}

}  // namespace crossover::cli
