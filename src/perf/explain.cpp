#include "perf/explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "perf/measure.h"

namespace crossover::perf {

std::string human_seconds(double s) {
  if (!std::isfinite(s)) return "n/a";
  const double a = std::fabs(s);
  if (a >= 1.0) return fmt::format("{:.2f} s", s);
  if (a >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  if (a >= 1e-5) return fmt::format("{:.0f} us", s * 1e6);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string fused_step_sentence(const FusedPrediction& f, double unfused_seconds,
                                const std::string& device_name) {
  if (!f.refusal.empty())
    return fmt::format("The fused step (--fused-step) cannot run this model on {}: {}.",
                       device_name, f.refusal);
  if (!f.unpriced.empty())
    return fmt::format("The fused step (--fused-step) on {} is unpriced: {}.", device_name,
                       f.unpriced);
  const bool faster = f.step_seconds < unfused_seconds;
  return fmt::format(
      "The fused step (--fused-step) on {} is predicted at {} a step against the unfused {} "
      "({:.1f}x {}): one launch {}, {} stages {} on {} blocks, {} grid barriers {}.",
      device_name, human_seconds(f.step_seconds), human_seconds(unfused_seconds),
      faster ? unfused_seconds / std::max(f.step_seconds, 1e-15)
             : f.step_seconds / std::max(unfused_seconds, 1e-15),
      faster ? "faster" : "slower", human_seconds(f.launch_seconds), f.stages.size(),
      human_seconds(f.stage_seconds), f.blocks, f.barriers, human_seconds(f.barrier_seconds));
}

bool below_floor(const ExplainResult& r) {
  return r.floor.step_seconds > 0 && r.step_measured > 0 &&
         r.step_measured < kBelowFloor * r.floor.step_seconds;
}

std::string recalibrate_command(const Profile* p) {
  if (!p) return "crossover calibrate";
  if (p->kind != "cpu") return "crossover calibrate --device " + p->id;
  return fmt::format("crossover calibrate --threads {}", p->threads);
}

// How far the measured step is from its physical floor (llm.c's MFU, with the memory traffic):
// the roofline floor and the GEMM floor alone, and the levels the bytes were priced at; a warning
// when the step beats its floor.
std::string floor_sentence(const ExplainResult& r, const Profile* profile) {
  const Floor& f = r.floor;
  std::string levels;
  for (std::size_t l = 0; l < f.levels.size(); ++l) {
    if (f.level_bytes[l] == 0) continue;
    levels += fmt::format("{}{:.2f} MB at {}'s {:.1f} GB/s", levels.empty() ? "" : ", ",
                          double(f.level_bytes[l]) / 1e6, f.levels[l].name,
                          f.levels[l].bytes_per_second / 1e9);
  }
  const auto g = static_cast<std::size_t>(Phase::gemm);
  return fmt::format(
             "Physical floor: the step is {:.2f}x its roofline floor of {} (each op at the larger "
             "of its "
             "FLOPs at the profile's peak GEMM rate, {:.1f} GFLOP/s, and its bytes at the "
             "bandwidth of "
             "the memory level that holds them: {}{}{}) and {:.2f}x the GEMM floor alone ({}); the "
             "GEMM "
             "phase is {:.2f}x its floor.",
             r.step_measured / f.step_seconds, human_seconds(f.step_seconds),
             f.peak_flops_per_second / 1e9, levels.empty() ? "none" : levels,
             f.update_seconds > 0
                 ? fmt::format("; the optimizer updates fused into the weight gradients, {} of it, "
                               "after their GEMMs",
                               human_seconds(f.update_seconds))
                 : "",
             f.levels.size() == 1
                 ? "; the profile has no per-level bandwidths: calibrate measures them"
                 : "",
             f.gemm_seconds > 0 ? r.step_measured / f.gemm_seconds : 0.0,
             human_seconds(f.gemm_seconds),
             f.phase_seconds[g] > 0 ? r.measured[g] / f.phase_seconds[g] : 0.0) +
         (below_floor(r)
              ? fmt::format(" A step faster than its floor means the profile's rates are too "
                            "low for this machine now (calibrated while other work ran, or on "
                            "another machine): recalibrate with `{}` and explain again.",
                            recalibrate_command(profile))
              : "");
}

namespace {

const char* phase_words(Phase p) {
  switch (p) {
    case Phase::host_overhead:
      return "host overhead (the host's own work between backend calls, and launches)";
    case Phase::h2d_copy:
      return "copying batches from host to device";
    case Phase::d2h_copy:
      return "copying results back to the host";
    case Phase::gemm:
      return "GEMM (the dense and convolution layers' products)";
    case Phase::elementwise:
      return "elementwise work (batch gather, dropout, activations, pooling, loss)";
    case Phase::optimizer:
      return "the optimizer update";
    case Phase::sync_wait:
      return "waiting on synchronisation";
    case Phase::allreduce:
      return "the allreduce of the gradients across the ranks";
  }
  return "?";
}

int pct(double part, double whole) {
  return whole > 0 ? static_cast<int>(std::lround(100.0 * part / whole)) : 0;
}

// What would change it: one sentence, with numbers from the cost model.
std::string what_if(const ExplainConfig& c, const ExplainResult& r, const ModelDesc& desc,
                    Phase top) {
  if (!c.profile) return "";
  const Profile& p = *c.profile;
  const bool gpu = p.kind == "gpu";
  const DeviceKind dev = gpu ? DeviceKind::gpu : DeviceKind::cpu;
  const int64_t B = r.batch;
  // A step at global batch `batch`, over the ranks explained (each its share).
  auto step_at = [&](int64_t batch, Mode mode, const Profile& prof) {
    return predict(step_ops(desc, (batch + r.ranks - 1) / r.ranks,
                            prof.kind == "gpu" ? DeviceKind::gpu : DeviceKind::cpu, mode, r.ranks),
                   prof, mode, prof.kind == p.kind ? c.precision : Precision::fp32)
        .step_seconds;
  };
  const double per_sample = r.step_predicted / static_cast<double>(B);
  switch (top) {
    case Phase::host_overhead:
    case Phase::h2d_copy:
    case Phase::sync_wait:
    case Phase::d2h_copy:
      if (gpu && c.mode == Mode::naive) {
        int64_t launches = 0;
        for (const Op& o : r.ops) launches += o.launches;
        const double resident = step_at(B, Mode::resident, p);
        return fmt::format(
            "The GPU is idle most of the step: {} launches at {} each, a pageable copy of each "
            "batch "
            "and a sync every step; resident mode (data on the device, one graph launch per step, "
            "no "
            "per-step sync) is predicted at {} per step instead of {} ({:.1f}x).",
            launches, human_seconds(p.launch_seconds), human_seconds(resident),
            human_seconds(r.step_predicted), r.step_predicted / std::max(resident, 1e-12));
      }
      if (gpu) {
        const int64_t B4 = B * 4;
        return fmt::format(
            "The step is too small to keep the GPU busy: a batch of {} is predicted at {} per "
            "sample "
            "instead of {} ({:.1f}x less per epoch).",
            B4, human_seconds(step_at(B4, Mode::resident, p) / double(B4)),
            human_seconds(per_sample),
            per_sample / std::max(step_at(B4, Mode::resident, p) / double(B4), 1e-15));
      }
      return fmt::format(
          "Per step the host makes {} backend calls; at this size their fixed costs (OpenMP "
          "fork-join "
          "{} each where a loop is threaded) weigh more than the arithmetic; a larger batch "
          "amortises "
          "them: batch {} is predicted at {} per sample instead of {}.",
          r.ops.empty() ? 0 : r.ops.front().elements, human_seconds(p.fork_join_seconds), B * 4,
          human_seconds(step_at(B * 4, Mode::resident, p) / double(B * 4)),
          human_seconds(per_sample));
    case Phase::gemm: {
      const int64_t B4 = B * 4;
      const double s4 = step_at(B4, c.mode, p) / double(B4);
      // The GEMMs' own time: the phase less the updates fused into the weight gradients.
      const double fused = r.prediction.fused_update_seconds;
      const double gemm_only = r.predicted[static_cast<std::size_t>(Phase::gemm)] - fused;
      int64_t flops = 0;
      for (const Op& o : r.ops) flops += o.flops;
      std::string s = fmt::format(
          "The step is compute-bound; the GEMMs run at {:.1f} GFLOP/s here{}; a batch of {} "
          "is predicted at {} per sample instead of {} ({:.1f}x less per epoch)",
          gemm_only > 0 ? double(flops) / gemm_only / 1e9 : 0.0,
          fused > 0 ? fmt::format(" (the optimizer's updates, fused into the weight gradients, "
                                  "are a predicted {} of the phase)",
                                  human_seconds(fused))
                    : "",
          B4, human_seconds(s4), human_seconds(per_sample), per_sample / std::max(s4, 1e-15));
      for (const Profile& g : c.other_profiles)
        if (g.kind == "gpu" && !gpu && r.ranks == 1) {
          if (const std::string why_not = unsupported_on(desc, DeviceKind::gpu); !why_not.empty()) {
            s += fmt::format("; a GPU ({}) cannot train this model yet ({})", g.name, why_not);
            break;
          }
          const double t = step_at(B, Mode::resident, g);
          s += fmt::format("; on {} (resident mode) this step is predicted at {} ({:.1f}x {})",
                           g.name, human_seconds(t),
                           t < r.step_predicted ? r.step_predicted / t : t / r.step_predicted,
                           t < r.step_predicted ? "faster" : "slower");
          break;
        }
      return s + ".";
    }
    case Phase::optimizer: {
      const Op* opt = nullptr;
      for (const Op& o : r.ops)
        if (o.phase == Phase::optimizer && !o.segments.empty()) opt = &o;
      if (!opt) return "";  // each layer's update was fused into its weight gradient
      const int64_t B4 = B * 4;
      const Prediction p4 =
          predict(step_ops(desc, (B4 + r.ranks - 1) / r.ranks, dev, c.mode, r.ranks), p, c.mode,
                  c.precision);
      return fmt::format(
          "The optimizer reads and writes {:.1f} MB per step ({} parameters) whatever the batch "
          "size, "
          "so a larger batch amortises it: at batch {} it is predicted at {}% of the step ({} per "
          "sample instead of {}).",
          double(opt->bytes_read + opt->bytes_written) / 1e6, opt->elements, B4,
          pct(p4.phase_seconds[static_cast<std::size_t>(Phase::optimizer)], p4.step_seconds),
          human_seconds(p4.step_seconds / double(B4)), human_seconds(per_sample));
    }
    case Phase::allreduce:
      return "";  // run_explain's sentence on the ranks says it
    case Phase::elementwise: {
      std::size_t worst = r.ops.size();
      for (std::size_t i = 0; i < r.ops.size(); ++i)
        if (r.ops[i].phase == Phase::elementwise &&
            (worst == r.ops.size() || r.prediction.op_seconds[i] > r.prediction.op_seconds[worst]))
          worst = i;
      if (worst == r.ops.size()) return "";
      return fmt::format(
          "The largest elementwise op is {} at a predicted {}; these loops scale with batch x "
          "width "
          "like the GEMMs but do little arithmetic per byte, so only fewer passes (fusion) would "
          "shrink them.",
          r.ops[worst].name, human_seconds(r.prediction.op_seconds[worst]));
    }
  }
  return "";
}

// The CPU's phases: each backend call of the timed run was timed by the wall clock (host
// overhead: the rest of the step), the split then scaled to the plain run's step.
void split_cpu_phases(ExplainResult& r, bool over_ranks) {
  const double steps = static_cast<double>(std::max<int64_t>(r.raw.steps, 1));
  std::array<double, kPhaseCount> per{};
  for (int i = 0; i < kPhaseCount; ++i)
    per[static_cast<std::size_t>(i)] = r.raw.seconds[static_cast<std::size_t>(i)] / steps;
  per[static_cast<std::size_t>(Phase::host_overhead)] += r.raw.unattributed_seconds() / steps;
  double sum = 0;
  for (double v : per) sum += v;
  const double scale = sum > 0 ? r.step_measured / sum : 0;
  for (int i = 0; i < kPhaseCount; ++i)
    r.measured[static_cast<std::size_t>(i)] = per[static_cast<std::size_t>(i)] * scale;
  r.method = fmt::format(
      "CPU calls are synchronous: each backend call of {} timed steps was timed by the wall "
      "clock "
      "(host overhead: the rest of the step), then the split was scaled to the {} step of an "
      "untimed run (the timed run's step was {}){}",
      r.raw.steps, human_seconds(r.step_measured), human_seconds(r.timed_step_wall),
      over_ranks ? fmt::format("; rank 0 of {}, its allreduce timed in the step (the time it "
                               "spent in MPI_Allreduce, after a barrier whose wait for the "
                               "slowest rank is counted as sync_wait)",
                               r.ranks)
                 : "");
}

// A GPU's phases: each call's device time as measured (scaled down only when they exceed the
// step), host overhead the rest of the plain run's step.
void split_gpu_phases(ExplainResult& r, Mode mode) {
  const double steps = static_cast<double>(std::max<int64_t>(r.raw.steps, 1));
  double device = 0;
  for (int i = 0; i < kPhaseCount; ++i)
    if (static_cast<Phase>(i) != Phase::host_overhead) {
      r.measured[static_cast<std::size_t>(i)] = r.raw.seconds[static_cast<std::size_t>(i)] / steps;
      device += r.measured[static_cast<std::size_t>(i)];
    }
  const auto h = static_cast<std::size_t>(Phase::host_overhead);
  if (device <= r.step_measured) {
    r.measured[h] = r.step_measured - device;
  } else {
    for (int i = 0; i < kPhaseCount; ++i)
      r.measured[static_cast<std::size_t>(i)] *= r.step_measured / device;
    r.measured[h] = 0;
  }
  r.method = fmt::format(
      "instrumented: {} steps without a graph, synchronize() around each backend call, the wait "
      "after each call counted as its phase's device time; host overhead is the rest of the {} "
      "step of an untimed {} run",
      r.raw.steps, human_seconds(r.step_measured),
      mode == Mode::resident ? "graph-captured" : "naive");
}

// Per op: the n-th timed call of a step is the n-th op of the list (less the host op), scaled
// as the phases are (CPU to the plain run's step; GPU device times as measured, scaled down only
// when they exceed the step). Left empty when the counts differ.
void attribute_ops(ExplainResult& r, bool gpu) {
  const double steps = static_cast<double>(std::max<int64_t>(r.raw.steps, 1));
  std::vector<std::size_t> call_ops;
  for (std::size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].phase != Phase::host_overhead) call_ops.push_back(i);
  if (r.raw.by_position.size() != call_ops.size()) return;
  const double total_timed = r.timed_step_wall > 0 ? r.timed_step_wall : 1;
  double attributed = 0;
  for (double s : r.raw.by_position) attributed += s / steps;
  const double scale =
      !gpu ? r.step_measured / total_timed
           : (attributed > r.step_measured && attributed > 0 ? r.step_measured / attributed : 1.0);
  r.op_measured.assign(r.ops.size(), 0.0);
  for (std::size_t n = 0; n < call_ops.size(); ++n)
    r.op_measured[call_ops[n]] = r.raw.by_position[n] / steps * scale;
  for (std::size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i].phase == Phase::host_overhead)
      r.op_measured[i] = r.measured[static_cast<std::size_t>(Phase::host_overhead)];
}

// Over ranks: what each rank computes, and the allreduce it then waits for.
std::string ranks_sentence(const ExplainResult& r) {
  const auto a = static_cast<std::size_t>(Phase::allreduce);
  int64_t bytes = 0;
  for (const Op& o : r.ops)
    if (o.phase == Phase::allreduce) bytes += o.bytes_read;
  return fmt::format(
      "Over {} ranks each rank computes {} of the {} rows and then waits for the allreduce "
      "of the gradients ({:.2f} MB): measured {} ({}% of the step), predicted {} (from the "
      "profile's measured allreduce sizes); it is one blocking call after the backward pass "
      "(overlapping it with the backward pass did not pay on the CPU: docs/DISTRIBUTED.md), "
      "so none of it is hidden, and the optimizer "
      "still updates every parameter on every rank. Before it rank 0 waited {} ({}%) for the "
      "slowest rank (sync_wait: the ranks' imbalance, which the cost model does not predict).",
      r.ranks, r.rank_rows, r.batch, double(bytes) / 1e6, human_seconds(r.measured[a]),
      pct(r.measured[a], r.step_measured), human_seconds(r.predicted[a]),
      human_seconds(r.measured[static_cast<std::size_t>(Phase::sync_wait)]),
      pct(r.measured[static_cast<std::size_t>(Phase::sync_wait)], r.step_measured));
}

// The sentences: what dominates, what would change it, over ranks the allreduce, and which of
// the profile's numbers were estimates.
void add_sentences(const ExplainConfig& c, ExplainResult& r, const ModelDesc& desc,
                   bool over_ranks) {
  std::size_t top = 0, second = 1;
  for (std::size_t i = 0; i < r.measured.size(); ++i)
    if (r.measured[i] > r.measured[top]) top = i;
  second = top == 0 ? 1 : 0;
  for (std::size_t i = 0; i < r.measured.size(); ++i)
    if (i != top && r.measured[i] > r.measured[second]) second = i;
  const Phase tp = static_cast<Phase>(top), sp = static_cast<Phase>(second);
  std::string s1 = fmt::format(
      "On {}, {} dominates: {} of the {} step ({}%){}; next is {} at {}%.", c.device,
      phase_words(tp), human_seconds(r.measured[top]), human_seconds(r.step_measured),
      pct(r.measured[top], r.step_measured),
      r.has_prediction ? fmt::format(", predicted {}", human_seconds(r.predicted[top])) : "",
      phase_words(sp), pct(r.measured[second], r.step_measured));
  r.sentences.push_back(s1);
  if (!r.has_prediction) return;
  const std::string w = what_if(c, r, desc, tp);
  if (!w.empty()) r.sentences.push_back(w);
  if (over_ranks) r.sentences.push_back(ranks_sentence(r));
  if (r.floor.step_seconds > 0)
    r.sentences.push_back(floor_sentence(r, c.profile ? &*c.profile : nullptr));
  const std::string est =
      estimates_sentence(r.prediction, "the step", "calibrating this machine measures them");
  if (!est.empty()) r.sentences.push_back(est);
}

// ExplainConfig::fused_step: the fused step beside the unfused resident one, on the GPU explained
// or (on the CPU) on each GPU profile found, one sentence each.
void add_fused(const ExplainConfig& c, ExplainResult& r, const ModelDesc& desc, bool gpu) {
  std::vector<const Profile*> gpus;
  if (gpu && c.profile)
    gpus.push_back(&*c.profile);
  else if (!gpu)
    for (const Profile& g : c.other_profiles)
      if (g.kind == "gpu") gpus.push_back(&g);
  for (const Profile* g : gpus) {
    FusedComparison fc;
    fc.device = g->name;
    fc.profile = g->source;
    fc.fused = predict_fused_step(desc, r.rank_rows, *g, c.precision, r.ranks);
    if (fc.fused.priced())
      fc.unfused_seconds =
          gpu && c.mode == Mode::resident && r.has_prediction
              ? r.step_predicted
              : predict(step_ops(desc, r.rank_rows, DeviceKind::gpu, Mode::resident), *g,
                        Mode::resident, priced_precision(*g, c.precision))
                    .step_seconds;
    r.sentences.push_back(fused_step_sentence(fc.fused, fc.unfused_seconds, g->name));
    r.fused.push_back(std::move(fc));
  }
  if (gpus.empty())
    r.sentences.push_back(
        "The fused step (--fused-step) is unpriced: there is no GPU profile to price it with.");
}

}  // namespace

ExplainResult run_explain(const ExplainConfig& c) {
  if (!c.x || !c.y || !c.make_model) throw Error("explain", "no data or model");
  ExplainResult r;
  const bool gpu = is_gpu_device(c.device);

  Collective* ranks = c.collective && c.collective->size() > 1 ? c.collective.get() : nullptr;
  if (ranks && gpu) throw Error("explain", "over ranks runs on the CPU only for now");
  r.ranks = ranks ? ranks->size() : 1;

  // 1. The plain run: the true step time.
  Sequential plain = c.make_model();
  compile_for(plain, {.device = c.device,
                      .mode = c.mode,
                      .threads = c.threads,
                      .seed = c.seed,
                      .precision = c.precision,
                      .collective = c.collective});
  const StepTiming t =
      time_steps(plain, *c.x, *c.y, c.batch, c.steps, c.max_seconds, nullptr, ranks);
  r.batch = t.batch;
  r.rank_rows = (r.batch + r.ranks - 1) / r.ranks;
  r.steps_measured = t.steps;
  r.step_measured = t.seconds_per_step;
  const ModelDesc desc = describe(plain);

  // 2. The timed run.
  TimingBackend* timing = nullptr;
  Sequential timed = c.make_model();
  compile_for(timed, {.device = c.device,
                      .mode = c.mode,
                      .threads = c.threads,
                      .seed = c.seed,
                      .precision = c.precision,
                      .no_graph = gpu,
                      .timing = &timing,
                      .collective = c.collective});
  timing->set_tracing(c.trace);
  time_steps(timed, *c.x, *c.y, r.batch, std::max<int64_t>(t.steps, 1), c.max_seconds, timing,
             ranks);
  r.raw = timing->times();
  r.timed_step_wall =
      r.raw.step_wall_seconds / static_cast<double>(std::max<int64_t>(r.raw.steps, 1));
  if (!gpu)
    split_cpu_phases(r, ranks != nullptr);
  else
    split_gpu_phases(r, c.mode);

  // 3. The prediction.
  r.ops = step_ops(desc, r.rank_rows, gpu ? DeviceKind::gpu : DeviceKind::cpu, c.mode, r.ranks);
  if (c.profile) {
    r.prediction = predict(r.ops, *c.profile, c.mode, c.precision);
    r.has_prediction = true;
    r.predicted = r.prediction.phase_seconds;
    r.step_predicted = r.prediction.step_seconds;
    r.floor = roofline_floor(r.ops, *c.profile, c.precision);
  }
  attribute_ops(r, gpu);

  // 4. The sentences.
  add_sentences(c, r, desc, ranks != nullptr);
  if (c.fused_step) add_fused(c, r, desc, gpu);
  return r;
}

}  // namespace crossover::perf
