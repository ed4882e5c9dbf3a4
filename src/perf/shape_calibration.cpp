// On-demand calibration of a CPU: the shapes the models' steps need, those a profile lacks, each
// measured within a time budget, and the CPU profile a run uses (cpu_profile_for).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "perf/calibrate.h"
#include "perf/calibrate_internal.h"

namespace crossover::perf {

namespace {
const char* gemm_op_of(const std::string& kernel) {
  if (kernel == "gemm_forward") return "forward";
  if (kernel == "gemm_backward_weights") return "backward_weights";
  if (kernel == "gemm_backward_input") return "backward_input";
  return nullptr;
}

// Convolution and pooling calls at their exact shapes (CPU), each timed with its inputs as a
// training step leaves them: the layer input and the incoming gradient written by the pool's
// threads (the ops around a convolution are threaded at these sizes), the kernel by the
// optimizer's threaded update. Values random, of both signs (ReLU and max pooling branch on them).
class ConvBench {
 public:
  ConvBench(Backend& be, Bench& bench, const std::set<ConvNeed>& convs,
            const std::set<PoolNeed>& pools, const std::set<NormNeed>& norms = {})
      : be_(be), bench_(bench) {
    int64_t in = 1, out = 1, weights = 1, channels = 1;
    for (const ConvNeed& c : convs) {
      const ConvShape& s = c.shape;
      in = std::max(in, c.batch * s.in_h * s.in_w * s.in_c);
      out = std::max(out, c.batch * s.out_h * s.out_w * s.out_c);
      weights = std::max(weights, s.kernel_h * s.kernel_w * s.in_c * s.out_c);
      channels = std::max(channels, s.out_c);
    }
    for (const PoolNeed& c : pools) {
      const PoolShape& s = c.shape;
      in = std::max(in, c.batch * s.in_h * s.in_w * s.channels);
      out = std::max(out, c.batch * s.out_h * s.out_w * s.channels);
    }
    for (const NormNeed& c : norms) {
      const int64_t n = c.batch * c.shape.spatial * c.shape.channels;
      in = std::max(in, n), out = std::max(out, n);
      channels = std::max(channels, c.shape.channels);
    }
    x_ = std::make_unique<Block>(be, in * 4);
    dx_ = std::make_unique<Block>(be, in * 4);
    y_ = std::make_unique<Block>(be, out * 4);
    dy_ = std::make_unique<Block>(be, out * 4);
    w_ = std::make_unique<Block>(be, weights * 4);
    dw_ = std::make_unique<Block>(be, weights * 4);
    bias_ = std::make_unique<Block>(be, channels * 4);
    db_ = std::make_unique<Block>(be, channels * 4);
    upload_random(be, x_->f(), in, 0x9E3779B97F4A7C15ull, 1.0f);
    upload_random(be, dy_->f(), out, 0x2545F4914F6CDD1Dull, 0.1f);
    upload_random(be, w_->f(), weights, 0xD1B54A32D192ED03ull, 0.1f);
    be.fill(bias_->f(), 0.0f, channels);
    // Batch normalization's per-channel vectors: gamma, beta, mean, variance, dgamma, dbeta.
    norm_ = std::make_unique<Block>(be, 6 * channels * 4);
    be.fill(norm_->f(), 1.0f, channels);                 // gamma
    be.fill(norm_->f() + 3 * channels, 1.0f, channels);  // variance
    channels_ = channels;
  }

  // Seconds of one call.
  double conv(const ConvNeed& c) {
    const ConvShape& s = c.shape;
    const int64_t m = c.batch, nx = m * s.in_h * s.in_w * s.in_c,
                  ny = m * s.out_h * s.out_w * s.out_c,
                  nw = s.kernel_h * s.kernel_w * s.in_c * s.out_c;
    float *x = x_->f(), *y = y_->f(), *dy = dy_->f(), *dx = dx_->f(), *w = w_->f();
    if (c.op == "forward")
      return bench_.per_call_after(
          [&] {
            handoff(x, nx, true);
            handoff(w, nw, true);
          },
          [&] {
            be_.conv2d_forward(s, x, w, c.bias ? bias_->f() : nullptr, y, m,
                               c.relu ? ActivationKind::relu : ActivationKind::linear);
          });
    if (c.op == "backward_input")
      return bench_.per_call_after(
          [&] {
            handoff(dy, ny, true);
            handoff(w, nw, true);
          },
          [&] { be_.conv2d_backward_input(s, dy, w, dx, m); });
    return bench_.per_call_after(
        [&] {
          handoff(x, nx, true);
          handoff(dy, ny, true);
        },
        [&] { be_.conv2d_backward_weights(s, x, dy, dw_->f(), c.bias ? db_->f() : nullptr, m); });
  }

  // Seconds of one call; the forward as training makes it (max pooling writes its workspace), the
  // backward from that forward's workspace.
  double pool(const PoolNeed& c) {
    const PoolShape& s = c.shape;
    const int64_t m = c.batch, nx = m * s.in_h * s.in_w * s.channels,
                  ny = m * s.out_h * s.out_w * s.channels;
    Block workspace(be_, be_.pool2d_workspace_bytes(s, m));
    void* ws = s.kind == PoolKind::max ? workspace.p : nullptr;
    float *x = x_->f(), *y = y_->f(), *dy = dy_->f(), *dx = dx_->f();
    if (c.op == "forward")
      return bench_.per_call_after([&] { handoff(x, nx, true); },
                                   [&] { be_.pool2d_forward(s, x, y, ws, m); });
    be_.pool2d_forward(s, x, y, ws, m);
    return bench_.per_call_after([&] { handoff(dy, ny, true); },
                                 [&] { be_.pool2d_backward(s, dy, ws, dx, m); });
  }

  // Seconds of one call, with its inputs as a step leaves them: the training forward on the layer
  // input, the backward from that forward's statistics, the moving update of the statistics.
  double norm(const NormNeed& c) {
    const BatchNormShape& s = c.shape;
    const int64_t m = c.batch, n = m * s.spatial * s.channels, ch = channels_;
    float *x = x_->f(), *y = y_->f(), *dy = dy_->f(), *dx = dx_->f(), *v = norm_->f();
    float *gamma = s.scale ? v : nullptr, *beta = s.center ? v + ch : nullptr;
    float *mean = v + 2 * ch, *variance = v + 3 * ch;
    float *dgamma = s.scale ? v + 4 * ch : nullptr, *dbeta = s.center ? v + 5 * ch : nullptr;
    be_.batchnorm_prepare(s, m);
    if (c.op == "forward_training")
      return bench_.per_call_after(
          [&] { handoff(x, n, true); },
          [&] { be_.batchnorm_forward_training(s, x, gamma, beta, y, mean, variance, m); });
    if (c.op == "forward_inference")
      return bench_.per_call_after(
          [&] { handoff(x, n, true); },
          [&] { be_.batchnorm_forward_inference(s, x, gamma, beta, mean, variance, y, m); });
    if (c.op == "update_moving")
      return bench_.per_call_after({}, [&] {
        be_.batchnorm_update_moving(s, mean, variance, v + 4 * ch, v + 5 * ch, 0.99);
      });
    be_.batchnorm_forward_training(s, x, gamma, beta, y, mean, variance, m);
    return bench_.per_call_after(
        [&] {
          handoff(x, n, true);
          handoff(dy, n, true);
        },
        [&] { be_.batchnorm_backward(s, x, dy, gamma, mean, variance, dx, dgamma, dbeta, m); });
  }

 private:
  Backend& be_;
  Bench& bench_;
  std::unique_ptr<Block> x_, dx_, y_, dy_, w_, dw_, bias_, db_, norm_;
  int64_t channels_ = 1;
};
}  // namespace

std::vector<int64_t> epoch_step_rows(int64_t samples, int64_t batch) {
  const int64_t b = std::max<int64_t>(1, std::min(batch, samples));
  std::vector<int64_t> rows{b};
  if (samples > 0 && samples % b) rows.push_back(samples % b);
  return rows;
}

ShapeNeeds cpu_shape_needs(const std::vector<Workload>& workloads) {
  ShapeNeeds n;
  n.memory_levels = !workloads.empty();
  for (const Workload& w : workloads)
    for (int64_t rows : w.rows)
      for (const Op& o : step_ops(w.model, rows, DeviceKind::cpu, Mode::resident)) {
        const std::string call_op = o.call.substr(o.call.find('_') + 1);
        if (o.call.rfind("conv2d_", 0) == 0) {
          n.convs.insert(
              {conv_pool_op(o.call), o.conv, o.batch, o.bias, o.act == ActivationKind::relu});
          continue;
        }
        if (o.call.rfind("pool2d_", 0) == 0) {
          n.pools.insert({call_op, o.pool, o.batch});
          continue;
        }
        if (o.call.rfind("batchnorm_", 0) == 0) {
          n.norms.insert({call_op, o.norm, o.batch});
          continue;
        }
        if (o.phase == Phase::gemm) {
          if (const char* op = gemm_op_of(o.kernel))
            (w.precision == Precision::bf16 ? n.gemms_bf16 : n.gemms)
                .insert({op, o.batch, o.in, o.out});
          if (!o.update.empty() && KernelBench::knows(o.update))
            for (int64_t s : o.segments) n.kernels.emplace(std::pair{o.update, s}, 1);
          continue;
        }
        if (o.phase != Phase::elementwise && o.phase != Phase::optimizer) continue;
        if (!KernelBench::knows(o.kernel)) continue;
        if (o.phase == Phase::optimizer && !o.segments.empty()) {
          for (int64_t s : o.segments) n.kernels.emplace(std::pair{o.kernel, s}, 1);
          // And all of them as one stream: what the step's update costs once its state no longer
          // fits the caches that each tensor alone fits (cost_model.cpp, kernel_time).
          if (o.segments.size() > 1) n.kernels.emplace(std::pair{o.kernel, o.elements}, 1);
        } else if (o.elements > 0) {
          n.kernels.emplace(std::pair{o.kernel, o.elements}, rows);
        }
      }
  return n;
}

ShapeNeeds missing_shapes(const Profile& p, const ShapeNeeds& needs) {
  ShapeNeeds m;
  // Convolutions, pooling and batch normalization at their exact calls, whatever the coverage (a
  // grid has none).
  std::set<ConvNeed> convs;
  for (const ConvSample& c : p.conv2d) convs.insert({c.op, c.shape, c.batch, c.bias, c.relu});
  for (const ConvNeed& c : needs.convs)
    if (!convs.count(c)) m.convs.insert(c);
  std::set<PoolNeed> pools;
  for (const PoolSample& c : p.pool2d) pools.insert({c.op, c.shape, c.batch});
  for (const PoolNeed& c : needs.pools)
    if (!pools.count(c)) m.pools.insert(c);
  std::set<NormNeed> norms;
  for (const NormSample& c : p.batchnorm) norms.insert({c.op, c.shape, c.batch});
  for (const NormNeed& c : needs.norms)
    if (!norms.count(c)) m.norms.insert(c);
  if (p.gemm_bf16.empty()) m.gemms_bf16 = needs.gemms_bf16;
  m.memory_levels = needs.memory_levels && p.memory_levels.empty();
  if (p.coverage == "grid") return m;
  auto lacking = [](const std::vector<GemmSample>& samples, const std::set<GemmNeed>& want,
                    std::set<GemmNeed>& out) {
    std::set<GemmNeed> have;
    for (const GemmSample& g : samples) {
      if (g.op == "forward") have.insert({g.op, g.m, g.k, g.n});
      if (g.op == "backward_weights") have.insert({g.op, g.k, g.m, g.n});
      if (g.op == "backward_input") have.insert({g.op, g.m, g.n, g.k});
    }
    for (const GemmNeed& g : want)
      if (!have.count(g)) out.insert(g);
  };
  lacking(p.gemm, needs.gemms, m.gemms);
  lacking(p.gemm_bf16, needs.gemms_bf16, m.gemms_bf16);
  for (const auto& [key, rows] : needs.kernels) {
    auto it = p.kernels.find(key.first);
    const int64_t elements = key.second;  // a structured binding cannot be captured (clang 14)
    const bool has = it != p.kernels.end() &&
                     std::any_of(it->second.begin(), it->second.end(),
                                 [&](const KernelSample& s) { return s.elements == elements; });
    if (!has) m.kernels.emplace(key, rows);
  }
  return m;
}

// Measures `gemms` on `be` into `out`: three rounds over all the shapes, each shape's rate the
// median of its rounds, so that a shape's samples are spread over the whole calibration and one
// slow or fast spell of a shared host (seconds long) does not decide it alone. Later rounds are
// dropped when `over()` says the budget has run out (but one shape is always measured: a profile
// needs one GEMM rate); `skipped` counts the shapes not measured at all.
static void measure_gemm_rounds(Backend& be, Bench& bench, const std::set<GemmNeed>& gemms,
                                const std::function<bool()>& over, std::vector<GemmSample>& out,
                                std::size_t& skipped) {
  int64_t batch = 1, width = 1;
  for (const GemmNeed& g : gemms) {
    batch = std::max(batch, g.batch);
    width = std::max({width, g.in, g.out});
  }
  GemmBench gb(be, bench, false, batch, width);
  std::map<GemmNeed, std::vector<GemmSample>> rounds;
  for (int round = 0; round < 3; ++round)
    for (const GemmNeed& g : gemms) {
      if (over() && (round > 0 || !rounds.empty())) break;
      rounds[g].push_back(gb.measure(g.op, g.batch, g.in, g.out));
    }
  skipped += gemms.size() - rounds.size();
  for (auto& [g, samples] : rounds) {
    std::vector<double> rates;
    for (const GemmSample& s : samples) rates.push_back(s.flops_per_second);
    GemmSample s = samples.front();
    s.flops_per_second = median(rates);
    out.push_back(s);
  }
}

Profile calibrate_cpu_shapes(const ShapeNeeds& needs, int threads, bool with_host,
                             double budget_seconds, std::size_t* left) {
  const auto start = Clock::now();
  std::unique_ptr<Backend> backend = make_cpu_backend(threads);
  Backend& be = *backend;
  Profile p;
  set_this_cpu(p, threads);
  p.coverage = "shapes";
  p.created = iso_now();
  p.crossover_version = "0.1.0";
  // At most 200 individually timed calls a batch: the set-up before each call (handing the
  // inputs over from the pool's threads) costs more than the call itself at these sizes, and is
  // what made the full calibration take minutes.
  Bench bench(be, false, false, 200);
  bench.set_deadline(start + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(budget_seconds)));
  Block counters(be, 2 * sizeof(StepCounters));
  {
    StepCounters zero[2];
    be.upload(counters.p, zero, sizeof zero);
  }
  auto* ctr = counters.as<StepCounters>();
  if (with_host) {
    measure_host(be, false, ctr, p);
    measure_memory(be, bench, true, p);
  }
  if (with_host || needs.memory_levels) measure_memory_levels(be, bench, p);
  std::size_t skipped = 0;
  const auto over = [&] { return since(start) > budget_seconds; };
  // The GEMMs first: they weigh most in a step. A new profile must have one GEMM rate at least.
  if (!needs.gemms.empty() || with_host || needs.memory_levels) {
    std::set<GemmNeed> gemms = needs.gemms;
    if (gemms.empty()) gemms.insert({"forward", 32, 128, 128});
    // With the memory levels, the roofline's other constant: a GEMM large enough to run at the
    // CPU's peak rate (the model's own shapes may all be small).
    if (with_host || needs.memory_levels) gemms.insert({"forward", 1024, 1024, 1024});
    measure_gemm_rounds(be, bench, gemms, over, p.gemm, skipped);
  }
  // The bf16 GEMMs, the same way on a backend in bf16, where this CPU has it.
  if (!needs.gemms_bf16.empty()) {
    if (cpu_bf16_problem(cpu_bf16_support()).empty()) {
      std::unique_ptr<Backend> bf16 = make_cpu_backend(threads, Precision::bf16);
      Bench bench16(*bf16, false, false, 200);
      bench16.set_deadline(start + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(budget_seconds)));
      measure_gemm_rounds(*bf16, bench16, needs.gemms_bf16, over, p.gemm_bf16, skipped);
    } else {
      skipped += needs.gemms_bf16.size();
    }
  }
  // Then the convolution, pooling and batch-normalization calls, in rounds too.
  if (!needs.convs.empty() || !needs.pools.empty() || !needs.norms.empty()) {
    ConvBench cb(be, bench, needs.convs, needs.pools, needs.norms);
    std::map<ConvNeed, std::vector<double>> convs;
    std::map<PoolNeed, std::vector<double>> pools;
    std::map<NormNeed, std::vector<double>> norms;
    for (int round = 0; round < 3 && !over(); ++round) {
      for (const ConvNeed& c : needs.convs) {
        if (over()) break;
        convs[c].push_back(cb.conv(c));
      }
      for (const PoolNeed& c : needs.pools) {
        if (over()) break;
        pools[c].push_back(cb.pool(c));
      }
      for (const NormNeed& c : needs.norms) {
        if (over()) break;
        norms[c].push_back(cb.norm(c));
      }
    }
    skipped += needs.convs.size() - convs.size() + needs.pools.size() - pools.size() +
               needs.norms.size() - norms.size();
    for (auto& [c, seconds] : convs)
      p.conv2d.push_back({c.op, c.shape, c.batch, c.bias, c.relu, median(seconds)});
    for (auto& [c, seconds] : pools) p.pool2d.push_back({c.op, c.shape, c.batch, median(seconds)});
    for (auto& [c, seconds] : norms)
      p.batchnorm.push_back({c.op, c.shape, c.batch, median(seconds)});
  }
  if (!needs.kernels.empty()) {
    int64_t largest = 0;
    for (const auto& [key, rows] : needs.kernels) largest = std::max(largest, key.second);
    KernelBench kb(be, bench, false, false, ctr, std::max<int64_t>(int64_t{1} << 22, 2 * largest));
    // In rounds too, as the GEMMs.
    std::map<std::pair<std::string, int64_t>, std::vector<double>> rounds;
    for (int round = 0; round < 3; ++round)
      for (const auto& [key, rows] : needs.kernels) {
        if (over()) break;
        rounds[key].push_back(kb.seconds(key.first, key.second, rows));
      }
    skipped += needs.kernels.size() - rounds.size();
    for (auto& [key, seconds] : rounds)
      p.kernels[key.first].push_back({key.second, median(seconds)});
  }
  for (auto& [name, curve] : p.kernels)
    std::sort(curve.begin(), curve.end(),
              [](const KernelSample& a, const KernelSample& b) { return a.elements < b.elements; });
  p.calibration_seconds = since(start);
  if (left) *left = skipped;
  return p;
}

CpuProfileChoice cpu_profile_for(const CpuProfileRequest& r) {
  CpuProfileChoice c;
  if (!r.explicit_path.empty()) {
    c.profile = load_profile(r.explicit_path);
    c.this_machine = cpu_mismatch(*c.profile, r.threads).empty();
    c.note = "profile " + r.explicit_path + " (given" +
             (c.this_machine ? "" : "; measured on " + describe_cpu(*c.profile)) + ")";
    return c;
  }
  const ShapeNeeds needs = cpu_shape_needs(r.workloads);
  std::string why_not;
  std::optional<Profile> mine = find_this_cpu_profile(r.threads, &why_not);
  ShapeNeeds todo = needs;
  std::string reason;
  if (mine) {
    todo = missing_shapes(*mine, needs);
    if (todo.empty() || !r.calibrate) {
      c.profile = std::move(mine);
      c.this_machine = true;
      c.note = "profile " + c.profile->source + " (this machine" +
               (todo.empty() ? "" : fmt::format("; {} shapes interpolated", todo.size())) + ")";
      return c;
    }
    reason = fmt::format("the profile of this machine, {}, lacks {} of their {} shapes",
                         mine->source, todo.size(), needs.size());
  } else if (!r.calibrate) {
    c.profile = closest_cpu_profile(r.threads);
    if (!c.profile) {
      c.note = "no CPU calibration profile found (run crossover calibrate)";
      return c;
    }
    c.note = "profile " + c.profile->source + " (measured on " + describe_cpu(*c.profile) +
             ", not this machine: --no-calibrate)";
    return c;
  } else {
    reason = why_not;
  }
  Profile me;
  set_this_cpu(me, r.threads);
  if (r.say)
    r.say(fmt::format(
        "calibrating this CPU for {} ({}): {} GEMM shapes, {} kernel sizes{}{} ...", r.what, reason,
        todo.gemms.size() + todo.gemms_bf16.size(), todo.kernels.size(),
        todo.convs.empty() && todo.pools.empty()
            ? ""
            : fmt::format(", {} convolution and {} pooling calls", todo.convs.size(),
                          todo.pools.size()),
        todo.norms.empty() ? ""
                           : fmt::format(", {} batch-normalization calls", todo.norms.size())));
  std::size_t left = 0;
  Profile fresh = calibrate_cpu_shapes(todo, r.threads, !mine, r.budget_seconds, &left);
  const double took = fresh.calibration_seconds;
  if (mine) {
    // Keep what the saved profile had (it may live outside the user's folder).
    Profile base = *mine;
    merge_profile(base, fresh);
    base.calibration_seconds = mine->calibration_seconds + took;
    fresh = std::move(base);
    fresh.source.clear();
  }
  const std::string path = default_profile_path(me);
  c.profile = merge_and_save_profile(fresh, path);
  c.calibrated_now = true;
  c.this_machine = true;
  c.note = "profile " + path + " (this machine, calibrated now)";
  if (r.say)
    r.say(fmt::format("calibrated in {:.1f} s{}; saved to {}", took,
                      left ? fmt::format(" ({} shapes left for the next run: the {:g} s budget ran "
                                         "out; they are interpolated meanwhile)",
                                         left, r.budget_seconds)
                           : "",
                      path));
  return c;
}

}  // namespace crossover::perf
