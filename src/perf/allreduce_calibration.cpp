// The ranks' allreduce: its calibration (calibrate_allreduce), fit and description, and the CPU
// profile rank 0 chooses, sent to every rank (cpu_profile_for_ranks).
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "perf/calibrate.h"
#include "perf/calibrate_internal.h"

namespace crossover::perf {

void fit_allreduce(AllreduceFit& f) {
  if (f.samples.size() < 2) throw Error("calibrate", "an allreduce fit needs at least two sizes");
  // Weighted least squares of t = a + b x with weights 1 / t^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const AllreduceSample& s : f.samples) {
    const double w = 1.0 / (s.seconds * s.seconds), x = static_cast<double>(s.bytes);
    sw += w, sx += w * x, sy += w * s.seconds, sxx += w * x * x, sxy += w * x * s.seconds;
  }
  const double det = sw * sxx - sx * sx;
  double a = det != 0 ? (sy * sxx - sx * sxy) / det : 0;
  double b = det != 0 ? (sw * sxy - sx * sy) / det : 0;
  if (a < 0 || b <= 0) {
    // Through the origin (no latency), or when the line would fall with size: the weighted mean
    // seconds per byte.
    a = 0;
    double num = 0, den = 0;
    for (const AllreduceSample& s : f.samples) {
      const double w = 1.0 / (s.seconds * s.seconds), x = static_cast<double>(s.bytes);
      num += w * x * s.seconds, den += w * x * x;
    }
    b = num / den;
  }
  f.latency_seconds = a;
  f.bytes_per_second = 1.0 / b;
}

std::string describe_allreduce(const AllreduceFit& f) {
  if (f.samples.size() < 2)
    return fmt::format("{:.1f} us latency, {:.2f} GB/s", f.latency_seconds * 1e6,
                       f.bytes_per_second / 1e9);
  auto size = [](int64_t bytes) {
    return bytes >= (int64_t{1} << 20) ? fmt::format("{} MB", bytes >> 20)
                                       : fmt::format("{} KB", bytes >> 10);
  };
  auto rate = [&](const AllreduceSample& s) {
    return fmt::format("{:.2f} GB/s at {}", static_cast<double>(s.bytes) / s.seconds / 1e9,
                       size(s.bytes));
  };
  std::string text = fmt::format("{:.1f} us at {}", f.samples.front().seconds * 1e6,
                                 size(f.samples.front().bytes));
  for (const AllreduceSample& s : f.samples)
    if (s.bytes == (int64_t{1} << 20) && &s != &f.samples.back()) text += ", " + rate(s);
  return text + ", " + rate(f.samples.back());
}

AllreduceFit calibrate_allreduce(Collective& ranks, int hosts, bool quick) {
  AllreduceFit fit;
  fit.transport = "mpi";
  fit.ranks = ranks.size();
  fit.hosts = std::max(hosts, 1);
  const int rounds = quick ? 3 : 7;
  constexpr int64_t kLargest = int64_t{32} << 20;
  std::vector<float> buffer(static_cast<std::size_t>(kLargest / 4), 1.0f);
  // In a training step the gradients reach the allreduce after the backward pass and before it
  // the optimizer have streamed the parameters' arrays through the caches: from 1 MB on, each
  // round is one call on a buffer written just before and with the caches flushed by a pass over
  // 64 MB, as the step leaves them; smaller sizes are latency, timed back to back.
  std::vector<float> flush(static_cast<std::size_t>(int64_t{64} << 20) / 4, 0.0f);
  float stamp = 0;
  for (const int64_t bytes :
       {int64_t{4} << 10, int64_t{16} << 10, int64_t{64} << 10, int64_t{256} << 10,
        int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20, kLargest}) {
    const int64_t n = bytes / 4;
    const bool cold = bytes >= (int64_t{1} << 20);
    // About 32 MB moved per round, at least 2 calls and at most 200 (1 when cold).
    const int calls = cold ? 1 : static_cast<int>(std::clamp<int64_t>(kLargest / bytes, 2, 200));
    for (int i = 0; i < 2; ++i) ranks.allreduce_sum(buffer.data(), n);  // warm-up
    std::vector<double> per_call;
    for (int r = 0; r < (cold ? 2 * rounds + 1 : rounds); ++r) {
      if (cold) {
        stamp += 1;
        for (float& f : flush) f = stamp;
        std::fill(buffer.begin(), buffer.begin() + n, stamp);
      }
      ranks.barrier();
      const auto t0 = Clock::now();
      for (int i = 0; i < calls; ++i) ranks.allreduce_sum(buffer.data(), n);
      per_call.push_back(since(t0) / calls);
    }
    fit.samples.push_back({bytes, median(per_call)});
  }
  // Rank 0's figures on every rank.
  std::vector<double> seconds;
  for (const AllreduceSample& s : fit.samples) seconds.push_back(s.seconds);
  ranks.broadcast(seconds.data(), seconds.size() * sizeof(double), 0);
  for (std::size_t i = 0; i < seconds.size(); ++i) fit.samples[i].seconds = seconds[i];
  fit_allreduce(fit);
  return fit;
}

namespace {
// Rank `root`'s string on every rank.
std::string broadcast_string(Collective& ranks, std::string s, int root) {
  uint64_t size = s.size();
  ranks.broadcast(&size, sizeof size, root);
  s.resize(size);
  if (size) ranks.broadcast(s.data(), size, root);
  return s;
}
}  // namespace

CpuProfileChoice cpu_profile_for_ranks(const CpuProfileRequest& r, Collective& ranks, int hosts) {
  if (ranks.size() < 2) return cpu_profile_for(r);
  const bool leader = ranks.rank() == 0;
  CpuProfileChoice c;
  // Rank 0 alone: the others wait (a failure there ends every rank: the command's MPI_Abort).
  if (leader) c = cpu_profile_for(r);
  auto has_fit = [&](const Profile& p) {
    return std::any_of(p.allreduce.begin(), p.allreduce.end(), [&](const AllreduceFit& f) {
      return f.transport == "mpi" && f.ranks == ranks.size() && f.hosts == hosts;
    });
  };
  int measure = leader && c.profile && c.this_machine && r.explicit_path.empty() && r.calibrate &&
                !has_fit(*c.profile);
  ranks.broadcast(&measure, sizeof measure, 0);
  if (measure) {
    if (r.say && leader)
      r.say(fmt::format("calibrating the allreduce of these {} ranks ({} host{}) ...", ranks.size(),
                        hosts, hosts == 1 ? "" : "s"));
    const auto t0 = Clock::now();
    const AllreduceFit fit = calibrate_allreduce(ranks, hosts, false);
    if (leader) {
      Profile fresh;
      set_this_cpu(fresh, r.threads);
      fresh.coverage = "shapes";
      fresh.created = iso_now();
      fresh.allreduce.push_back(fit);
      const std::string path = default_profile_path(fresh);
      // Merged into the saved profile (which has the compute by now) under its lock.
      Profile base = *c.profile;
      merge_profile(base, fresh);
      base.source.clear();
      c.profile = merge_and_save_profile(base, path);
      c.calibrated_now = true;
      if (r.say)
        r.say(fmt::format("allreduce of {} ranks: {} ({:.1f} s); saved to {}", ranks.size(),
                          describe_allreduce(fit), since(t0), path));
    }
  }
  // Rank 0's choice on every rank.
  const std::string doc =
      broadcast_string(ranks, leader && c.profile ? profile_to_json(*c.profile).dump() : "", 0);
  c.note = broadcast_string(ranks, c.note, 0);
  int flags = (c.calibrated_now ? 1 : 0) | (c.this_machine ? 2 : 0);
  ranks.broadcast(&flags, sizeof flags, 0);
  if (!leader) {
    c.calibrated_now = flags & 1, c.this_machine = flags & 2;
    if (!doc.empty()) c.profile = profile_from_json(nlohmann::json::parse(doc), "rank 0's profile");
  }
  return c;
}

}  // namespace crossover::perf
