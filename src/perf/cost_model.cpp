#include "perf/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <set>

#include "core/error.h"
#include "nn/sequential.h"
#include "perf/cost_model_internal.h"

namespace crossover::perf {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::host_overhead:
      return "host_overhead";
    case Phase::h2d_copy:
      return "h2d_copy";
    case Phase::d2h_copy:
      return "d2h_copy";
    case Phase::gemm:
      return "gemm";
    case Phase::elementwise:
      return "elementwise";
    case Phase::optimizer:
      return "optimizer";
    case Phase::sync_wait:
      return "sync_wait";
    case Phase::allreduce:
      return "allreduce";
  }
  return "?";
}

Phase parse_phase(const std::string& name) {
  for (int i = 0; i < kPhaseCount; ++i)
    if (name == phase_name(static_cast<Phase>(i))) return static_cast<Phase>(i);
  throw Error("phase", "unknown phase '" + name + "'");
}

const char* mode_name(Mode m) { return m == Mode::resident ? "resident" : "naive"; }

Mode parse_mode(const std::string& text, const std::string& where) {
  if (text == "resident") return Mode::resident;
  if (text == "naive") return Mode::naive;
  throw Error(where, "unknown mode '" + text + "' (expected resident or naive)");
}

Sequential ModelDesc::model() const {
  if (!graph) return Sequential(layers);
  return Sequential(LayerGraph{layers, graph->inputs, graph->input_layers, graph->output_layers,
                               graph->shared_with});
}

int64_t ModelDesc::parameters() const {
  // As the model's own optimizer step sees them: one segment per parameter tensor.
  int64_t n = 0;
  for (const BackendCall& c : record_step(*this, 1, DeviceKind::cpu, Mode::resident))
    for (int64_t s : c.segments) n += s;
  return n;
}

ModelDesc describe(const Sequential& model) {
  ModelDesc d;
  const Shape in = model.input_shape();
  if (in.empty()) throw Error(model.name(), "the model's input shape is not known yet");
  d.input_width = 1;
  for (int64_t v : in) d.input_width *= v;
  d.layers = model.layers();
  if (model.functional()) {
    LayerGraph g = model.layer_graph();
    d.graph = ModelDesc::Graph{std::move(g.inputs), std::move(g.input_layers),
                               std::move(g.output_layers), std::move(g.shared_with)};
  }
  if (model.compiled()) {  // else the defaults: Adam, sparse categorical cross-entropy
    d.optimizer = model.optimizer();
    d.loss = model.loss_name();
  }
  return d;
}

ModelDesc mlp(int64_t input_width, const std::vector<int64_t>& hidden, int64_t classes,
              double dropout) {
  ModelDesc d;
  d.input_width = input_width;
  d.layers.push_back(Flatten({input_width}));
  for (int64_t w : hidden) {
    d.layers.push_back(Dense(w, "relu"));
    if (dropout > 0) d.layers.push_back(Dropout(dropout));
  }
  d.layers.push_back(Dense(classes, "softmax"));
  return d;
}

// ---- interpolation --------------------------------------------------------------------------
namespace {

struct GemmPoint {
  double b, i, o;  // log2 of batch, in, out
  double log_rate;
};

void to_layer_shape(const GemmSample& g, int64_t& batch, int64_t& in, int64_t& out) {
  if (g.op == "backward_weights") {
    batch = g.k, in = g.m, out = g.n;
  } else if (g.op == "backward_input") {
    batch = g.m, in = g.n, out = g.k;
  } else {
    batch = g.m, in = g.k, out = g.n;
  }
}

// Index of the grid value at or below v (clamped), and the fraction towards the next one.
void bracket(const std::vector<double>& axis, double v, std::size_t& lo, double& t) {
  if (axis.size() == 1 || v <= axis.front()) {
    lo = 0;
    t = 0;
    return;
  }
  if (v >= axis.back()) {
    lo = axis.size() - 2;
    t = 1;
    return;
  }
  lo = static_cast<std::size_t>(std::upper_bound(axis.begin(), axis.end(), v) - axis.begin()) - 1;
  t = (v - axis[lo]) / (axis[lo + 1] - axis[lo]);
}

}  // namespace

Precision priced_precision(const Profile& profile, Precision precision) {
  return precision == Precision::bf16 && profile.gemm_bf16.empty() ? Precision::fp32 : precision;
}

double gemm_rate(const Profile& profile, const std::string& op, int64_t batch, int64_t in,
                 int64_t out, Precision precision) {
  const bool bf16 = precision == Precision::bf16;
  const std::vector<GemmSample>& samples = bf16 ? profile.gemm_bf16 : profile.gemm;
  if (bf16 && samples.empty())
    throw Error(profile.source.empty() ? "profile" : profile.source,
                "has no bf16 GEMM rates: calibrate measures them on a CPU with AVX512_BF16 or "
                "AMX-BF16");
  std::vector<GemmPoint> pts;
  for (const std::string& want : {op, std::string()}) {
    for (const GemmSample& g : samples) {
      if (g.op != want) continue;
      int64_t b, i, o;
      to_layer_shape(g, b, i, o);
      pts.push_back({std::log2(double(b)), std::log2(double(i)), std::log2(double(o)),
                     std::log(g.flops_per_second)});
    }
    if (!pts.empty()) break;
  }
  if (pts.empty())
    for (const GemmSample& g : samples) {
      int64_t b, i, o;
      to_layer_shape(g, b, i, o);
      pts.push_back({std::log2(double(b)), std::log2(double(i)), std::log2(double(o)),
                     std::log(g.flops_per_second)});
    }
  if (pts.empty())
    throw Error(profile.source.empty() ? "profile" : profile.source, "has no GEMM rates");
  const double qb = std::log2(double(std::max<int64_t>(batch, 1)));
  const double qi = std::log2(double(std::max<int64_t>(in, 1)));
  const double qo = std::log2(double(std::max<int64_t>(out, 1)));

  // A full grid: trilinear interpolation of log(rate), clamped at the edges.
  std::set<double> sb, si, so;
  std::map<std::tuple<double, double, double>, double> grid;
  for (const GemmPoint& p : pts) {
    sb.insert(p.b), si.insert(p.i), so.insert(p.o);
    grid[{p.b, p.i, p.o}] = p.log_rate;
  }
  if (grid.size() == sb.size() * si.size() * so.size()) {
    const std::vector<double> ab(sb.begin(), sb.end()), ai(si.begin(), si.end()),
        ao(so.begin(), so.end());
    std::size_t lb, li, lo;
    double tb, ti, to;
    bracket(ab, qb, lb, tb);
    bracket(ai, qi, li, ti);
    bracket(ao, qo, lo, to);
    double acc = 0;
    for (int db = 0; db < 2; ++db)
      for (int di = 0; di < 2; ++di)
        for (int dn = 0; dn < 2; ++dn) {
          const double w = (db ? tb : 1 - tb) * (di ? ti : 1 - ti) * (dn ? to : 1 - to);
          if (w == 0) continue;
          const double b = ab[std::min(lb + db, ab.size() - 1)];
          const double i = ai[std::min(li + di, ai.size() - 1)];
          const double o = ao[std::min(lo + dn, ao.size() - 1)];
          acc += w * grid.at({b, i, o});
        }
    return std::exp(acc);
  }
  // Scattered samples: inverse-distance weighting in log space (power 4: nearly nearest).
  double num = 0, den = 0;
  for (const GemmPoint& p : pts) {
    const double d2 = (p.b - qb) * (p.b - qb) + (p.i - qi) * (p.i - qi) + (p.o - qo) * (p.o - qo);
    if (d2 < 1e-12) return std::exp(p.log_rate);
    const double w = 1.0 / (d2 * d2);
    num += w * p.log_rate;
    den += w;
  }
  return std::exp(num / den);
}

double kernel_seconds(const Profile& profile, const std::string& kernel, int64_t elements) {
  auto it = profile.kernels.find(kernel);
  if (it == profile.kernels.end() || it->second.empty()) return -1;
  const auto& s = it->second;
  const double n = static_cast<double>(elements);
  if (elements <= s.front().elements) return s.front().seconds;
  if (elements >= s.back().elements)
    return s.back().seconds * n / static_cast<double>(s.back().elements);
  const auto hi = std::upper_bound(s.begin(), s.end(), elements,
                                   [](int64_t e, const KernelSample& k) { return e < k.elements; });
  const auto lo = hi - 1;
  const double t = (n - double(lo->elements)) / double(hi->elements - lo->elements);
  return lo->seconds + t * (hi->seconds - lo->seconds);
}

// ---- prediction ----------------------------------------------------------------------------
namespace {

double streaming(const Profile& p, int64_t bytes) {
  return static_cast<double>(bytes) / p.memory_bytes_per_second;
}

// Device (or CPU) time of an elementwise or optimizer op.
double kernel_time(const Profile& p, const Op& o, double floor) {
  if (o.phase == Phase::optimizer && p.kind == "cpu" && !o.segments.empty()) {
    // The CPU updates one parameter tensor after another (a parallel loop each): at least the sum
    // of each tensor's time, measured alone. Alone, a tensor's state may fit a cache that the
    // whole update overflows (BIG's 1.8 M parameters move 50 MB through Adam each step), so also
    // at least the time of one call on all the elements at once, from the same curve.
    double t = 0;
    bool have = true;
    for (int64_t s : o.segments) {
      const double k = kernel_seconds(p, o.kernel, s);
      if (k < 0) {
        have = false;
        break;
      }
      t += k;
    }
    if (have) return std::max(t, kernel_seconds(p, o.kernel, o.elements));
  }
  const double k = kernel_seconds(p, o.kernel, o.elements);
  if (k >= 0) return k;
  return floor + streaming(p, o.bytes_read + o.bytes_written);
}

// The update fused into a weight gradient (the CPU's dense_backward_weights_update): each
// tensor's update as the profile's curve measured it alone, at the op's own bytes per element
// where the profile has no curve for it.
double fused_update_time(const Profile& p, const Op& o) {
  int64_t elements = 0;
  for (int64_t s : o.segments) elements += s;
  if (elements == 0) return 0;
  const double gemm_bytes = double(kFloat * (o.m * o.k + o.m * o.n));
  const double per_element = (double(o.bytes_read + o.bytes_written) - gemm_bytes) / elements;
  double t = 0;
  for (int64_t s : o.segments) {
    const double k = kernel_seconds(p, o.update, s);
    t += k >= 0 ? k : streaming(p, static_cast<int64_t>(per_element * double(s)));
  }
  return t;
}

const char* gemm_op(const std::string& kernel) {
  if (kernel == "gemm_backward_weights") return "backward_weights";
  if (kernel == "gemm_backward_input") return "backward_input";
  return "forward";
}

}  // namespace

std::string conv_pool_op(const std::string& call) {
  // A transposed convolution runs the convolution it transposes, with forward and backward_input
  // exchanged (backends/backend_ops.h).
  if (call == "conv2d_transpose_forward") return "backward_input";
  if (call == "conv2d_transpose_backward_input") return "forward";
  if (call == "conv2d_transpose_backward_weights") return "backward_weights";
  return call.substr(call.find('_') + 1);
}

double conv_pool_seconds(const Profile& p, const Op& o, std::string* estimate) {
  const std::string op = conv_pool_op(o.call);
  const std::string at = fmt::format("{} at batch {}: ", o.name, o.batch);
  auto say = [&](const std::string& how) {
    if (estimate) *estimate = at + how;
  };
  if (estimate) estimate->clear();
  const double flops = static_cast<double>(o.flops);
  if (o.call.rfind("conv2d_", 0) == 0) {
    const bool relu = o.act == ActivationKind::relu;
    const ConvSample* nearest = nullptr;
    double distance = 0;
    for (const ConvSample& s : p.conv2d) {
      if (s.op != op) continue;
      if (s.shape == o.conv && s.batch == o.batch && s.bias == o.bias && s.relu == relu)
        return s.seconds;
      const ConvShape& c = s.shape;
      const double f = 2.0 * double(s.batch * c.out_h * c.out_w) *
                       double(c.kernel_h * c.kernel_w * c.in_c) * double(c.out_c);
      const double d = std::fabs(std::log(f) - std::log(std::max(flops, 1.0)));
      if (!nearest || d < distance) nearest = &s, distance = d;
    }
    if (nearest) {
      const ConvShape& c = nearest->shape;
      const double f = 2.0 * double(nearest->batch * c.out_h * c.out_w) *
                       double(c.kernel_h * c.kernel_w * c.in_c) * double(c.out_c);
      say(fmt::format(
          "not measured; scaled by FLOPs from the profile's {} {}x{}x{}->{}x{}x{} at batch {}", op,
          c.in_h, c.in_w, c.in_c, c.out_h, c.out_w, c.out_c, nearest->batch));
      return nearest->seconds * flops / f;
    }
    say("not measured (the profile has no convolutions); priced at the GEMM rate of its im2col "
        "product");
    const char* gemm = op == "forward"          ? "forward"
                       : op == "backward_input" ? "backward_input"
                                                : "backward_weights";
    return flops / gemm_rate(p, gemm, o.m, o.k, o.n);
  }
  const PoolSample* nearest = nullptr;
  double distance = 0;
  auto elements_of = [&](const PoolSample& s) {
    const PoolShape& c = s.shape;
    return static_cast<double>(s.batch * c.channels *
                               (op == "forward" ? c.out_h * c.out_w : c.in_h * c.in_w));
  };
  for (const PoolSample& s : p.pool2d) {
    if (s.op != op || s.shape.kind != o.pool.kind) continue;
    if (s.shape == o.pool && s.batch == o.batch) return s.seconds;
    const double d = std::fabs(std::log(elements_of(s)) -
                               std::log(std::max<double>(static_cast<double>(o.elements), 1)));
    if (!nearest || d < distance) nearest = &s, distance = d;
  }
  if (nearest) {
    const PoolShape& c = nearest->shape;
    say(fmt::format("not measured; scaled by elements from the profile's {} {}x{}x{} at batch {}",
                    op, c.in_h, c.in_w, c.channels, nearest->batch));
    return nearest->seconds * static_cast<double>(o.elements) / elements_of(*nearest);
  }
  say("not measured (the profile has no pooling); priced by its bytes at the memory bandwidth");
  return (p.kind == "gpu" ? p.graph_node_seconds : p.call_seconds) +
         streaming(p, o.bytes_read + o.bytes_written);
}

double norm_seconds(const Profile& p, const Op& o, std::string* estimate) {
  const std::string op = o.call.substr(o.call.find('_') + 1);  // "forward_training", ...
  if (estimate) estimate->clear();
  auto elements_of = [](const NormSample& s) {
    return static_cast<double>(s.op == "update_moving"
                                   ? 2 * s.shape.channels
                                   : s.batch * s.shape.spatial * s.shape.channels);
  };
  const NormSample* nearest = nullptr;
  double distance = 0;
  const double elements = std::max<double>(static_cast<double>(o.elements), 1);
  for (const NormSample& s : p.batchnorm) {
    if (s.op != op) continue;
    if (s.shape == o.norm && s.batch == o.batch) return s.seconds;
    const double d = std::fabs(std::log(elements_of(s)) - std::log(elements));
    if (!nearest || d < distance) nearest = &s, distance = d;
  }
  const std::string at = fmt::format("{} at batch {}: ", o.name, o.batch);
  if (nearest) {
    if (estimate)
      *estimate = at + fmt::format(
                           "not measured; scaled by elements from the profile's {} {}x{} "
                           "at batch {}",
                           op, nearest->shape.spatial, nearest->shape.channels, nearest->batch);
    return nearest->seconds * elements / elements_of(*nearest);
  }
  if (estimate)
    *estimate = at +
                "not measured (the profile has no batch normalization); priced by its bytes at the "
                "memory bandwidth";
  return (p.kind == "gpu" ? p.graph_node_seconds : p.call_seconds) +
         streaming(p, o.bytes_read + o.bytes_written);
}

namespace {
// The time of an allreduce of `bytes` at the fit's own rank count, as latency + the bytes' part.
// From the measured sizes where the fit has them: between two of them linear in the bytes, past
// the largest at the largest's bytes per second, below the smallest the smallest's time. The line
// of the fit alone misleads between sizes: on shared memory a buffer that fits the caches moves
// three to four times faster than one that does not (2026-12-01, Zen 4: 3.1 GB/s at 1 MB, 0.8
// at 4 MB and up), and the line through all sizes followed the small ones. A fit without samples
// (made by hand): its latency + bytes / its bandwidth.
std::pair<double, double> allreduce_at(const AllreduceFit& f, double bytes) {
  const std::vector<AllreduceSample>& s = f.samples;
  if (s.size() < 2) return {f.latency_seconds, bytes / f.bytes_per_second};
  double t;
  if (bytes <= static_cast<double>(s.front().bytes)) {
    t = s.front().seconds;
  } else if (bytes >= static_cast<double>(s.back().bytes)) {
    t = s.back().seconds * bytes / static_cast<double>(s.back().bytes);
  } else {
    const auto hi = std::upper_bound(
        s.begin(), s.end(), bytes,
        [](double b, const AllreduceSample& x) { return b < static_cast<double>(x.bytes); });
    const auto lo = hi - 1;
    const double w = (bytes - double(lo->bytes)) / double(hi->bytes - lo->bytes);
    t = lo->seconds + w * (hi->seconds - lo->seconds);
  }
  const double latency = std::clamp(f.latency_seconds, 0.0, t);
  return {latency, t - latency};
}
}  // namespace

double allreduce_seconds(const Profile& p, const Op& o, std::string* estimate) {
  if (estimate) estimate->clear();
  const double bytes = static_cast<double>(o.bytes_read);
  const int n = std::max(o.ranks, 1);
  if (n == 1) return 0;
  // A ring allreduce: each rank sends and receives (N - 1) / N of the buffer twice, in 2 (N - 1)
  // steps.
  auto ring = [](int ranks) { return static_cast<double>(ranks - 1) / ranks; };
  // The fit at the nearest rank count (the exact one first), on the fewest hosts.
  const AllreduceFit* nearest = nullptr;
  for (const AllreduceFit& f : p.allreduce) {
    if (f.transport != "mpi") continue;
    const auto key = [n](const AllreduceFit& e) {
      return std::pair{std::abs(e.ranks - n), e.hosts};
    };
    if (!nearest || key(f) < key(*nearest)) nearest = &f;
  }
  if (nearest) {
    const auto [latency, transfer] = allreduce_at(*nearest, bytes);
    if (nearest->ranks == n) return latency + transfer;
    if (estimate)
      *estimate = fmt::format(
          "{}: not measured at {} ranks; scaled from the profile's {} ranks as a ring allreduce "
          "scales",
          o.name, n, nearest->ranks);
    return latency * (n - 1) / std::max(nearest->ranks - 1, 1) +
           transfer * ring(n) / ring(nearest->ranks);
  }
  if (estimate)
    *estimate = o.name +
                ": not measured (the profile has no allreduce); priced as a ring allreduce at the "
                "memory bandwidth";
  return p.call_seconds + 2 * ring(n) * 2 * bytes / p.memory_bytes_per_second;
}

std::string unsupported_on(const ModelDesc& model, DeviceKind device) {
  try {
    record_step(model, 1, device, Mode::resident);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string estimates_sentence(const Prediction& p, const std::string& what,
                               const std::string& remedy) {
  const std::vector<std::string>& est = p.estimates;
  if (est.empty()) return "";
  const bool one = est.size() == 1;
  return fmt::format(
      "{} op{} of {} {} no measurement of {} own shape in the profile and {} "
      "estimated ({}): {}{}.",
      est.size(), one ? "" : "s", what, one ? "has" : "have", one ? "its" : "their",
      one ? "is" : "are", remedy, est.front(),
      one ? "" : fmt::format(" (and {} more)", est.size() - 1));
}

Floor roofline_floor(const std::vector<Op>& ops, const Profile& p, Precision precision) {
  Floor f;
  const std::vector<GemmSample>& rates =
      precision == Precision::bf16 && !p.gemm_bf16.empty() ? p.gemm_bf16 : p.gemm;
  for (const GemmSample& g : rates)
    f.peak_flops_per_second = std::max(f.peak_flops_per_second, g.flops_per_second);
  if (!(f.peak_flops_per_second > 0)) throw Error("roofline", "the profile has no GEMM rate");
  f.levels = p.memory_levels;
  if (f.levels.empty()) f.levels.push_back({"memory", 0, p.memory_bytes_per_second});
  f.level_bytes.assign(f.levels.size(), 0);
  f.op_seconds.assign(ops.size(), 0.0);
  // The seconds of `bytes` (read and written; `held` the larger side) at the bandwidth of the
  // smallest level that holds `held`, counted there.
  const auto memory = [&f](int64_t bytes, int64_t held) {
    std::size_t level = f.levels.size() - 1;
    for (std::size_t l = 0; l < f.levels.size(); ++l)
      if (f.levels[l].bytes == 0 || held <= f.levels[l].bytes) {
        level = l;
        break;
      }
    f.level_bytes[level] += bytes;
    return double(bytes) / f.levels[level].bytes_per_second;
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    if (o.phase == Phase::host_overhead || o.phase == Phase::sync_wait) continue;
    const double compute = static_cast<double>(o.flops) / f.peak_flops_per_second;
    double t = 0;
    if (o.update.empty()) {
      t = std::max(compute,
                   memory(o.bytes_read + o.bytes_written, std::max(o.bytes_read, o.bytes_written)));
    } else {
      // An optimizer update fused into a weight gradient runs after it on each thread's rows
      // (the gradient stays in cache, not read back): the two parts one after the other, the
      // GEMM at its roofline and the update's pass over weights and state at its bandwidth.
      const int64_t gemm_read = kFloat * (o.m * o.k + o.m * o.n);
      const int64_t update_read = std::max<int64_t>(o.bytes_read - gemm_read, 0);
      const double update =
          memory(update_read + o.bytes_written, std::max(update_read, o.bytes_written));
      t = std::max(compute, memory(gemm_read, gemm_read)) + update;
      f.update_seconds += update;
    }
    if (o.transfer_bytes > 0) {
      const TransferRates& r =
          o.phase == Phase::d2h_copy ? p.d2h_bytes_per_second : p.h2d_bytes_per_second;
      const double rate = r.pinned.value_or(r.pageable.value_or(p.memory_bytes_per_second));
      t += double(o.transfer_bytes) / rate;
    }
    f.op_seconds[i] = t;
    f.phase_seconds[static_cast<std::size_t>(o.phase)] += t;
    f.step_seconds += t;
    if (o.phase == Phase::gemm) f.gemm_seconds += compute;
  }
  return f;
}

Prediction predict(const std::vector<Op>& ops, const Profile& p, Mode mode, Precision precision) {
  Prediction r;
  r.op_seconds.assign(ops.size(), 0.0);
  const bool gpu = p.kind == "gpu";
  if (!gpu && mode == Mode::naive)
    throw Error("--mode",
                "naive mode applies to a GPU: the CPU has no launches or host-device copies");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    const bool norm = o.call.rfind("batchnorm_", 0) == 0;
    const bool conv_pool = o.call.rfind("conv2d_", 0) == 0 || o.call.rfind("pool2d_", 0) == 0;
    double device = 0;  // time the op's own phase gets
    double host = 0;    // time host_overhead gets on its account (GPU naive: launch-bound part)
    switch (o.phase) {
      case Phase::gemm: {
        if (conv_pool) {
          std::string estimate;
          device = conv_pool_seconds(p, o, &estimate);
          if (!estimate.empty()) r.estimates.push_back(estimate);
          break;
        }
        device = static_cast<double>(o.flops) /
                 gemm_rate(p, gemm_op(o.kernel), o.batch, o.in, o.out, precision);
        if (gpu && mode == Mode::naive && o.launches > 1) {
          // The epilogue the graph mode fuses runs as its own kernel: one more pass over the
          // output.
          const int64_t extra = o.kernel == "gemm_forward" ? 2 * kFloat * o.batch * o.out
                                                           : kFloat * (o.batch * o.out + o.out);
          device += streaming(p, extra);
        }
        if (!o.update.empty()) {
          const double u = fused_update_time(p, o);
          device += u;
          r.fused_update_seconds += u;
        }
        break;
      }
      case Phase::elementwise:
      case Phase::optimizer:
        if (norm) {
          std::string estimate;
          device = norm_seconds(p, o, &estimate);
          if (!estimate.empty()) r.estimates.push_back(estimate);
          break;
        }
        if (conv_pool) {
          std::string estimate;
          device = conv_pool_seconds(p, o, &estimate);
          if (!estimate.empty()) r.estimates.push_back(estimate);
          break;
        }
        device = kernel_time(p, o, gpu ? p.graph_node_seconds : p.call_seconds);
        break;
      case Phase::host_overhead:
        if (o.kernel == "graph_launch")
          host = p.graph_launch_seconds;
        else
          host = static_cast<double>(o.elements) * p.call_seconds;
        break;
      case Phase::h2d_copy:
        device = p.h2d_latency_seconds +
                 static_cast<double>(o.transfer_bytes) /
                     p.h2d_bytes_per_second.pageable.value_or(p.memory_bytes_per_second);
        break;
      case Phase::d2h_copy:
        device = p.d2h_latency_seconds +
                 static_cast<double>(o.transfer_bytes) /
                     p.d2h_bytes_per_second.pageable.value_or(p.memory_bytes_per_second);
        break;
      case Phase::sync_wait:
        device = p.sync_seconds;
        break;
      case Phase::allreduce: {
        // One blocking call after the backward pass: nothing overlaps it yet.
        std::string estimate;
        device = allreduce_seconds(p, o, &estimate);
        if (!estimate.empty()) r.estimates.push_back(estimate);
        break;
      }
    }
    if (gpu && o.launches > 0) {
      if (mode == Mode::resident) {
        device = std::max(device, static_cast<double>(o.launches) * p.graph_node_seconds);
      } else {
        // The host enqueues each launch; when that takes longer than the kernels run, the GPU
        // waits for the host: the difference is host overhead.
        host += std::max(0.0, static_cast<double>(o.launches) * p.launch_seconds - device);
      }
    }
    r.phase_seconds[static_cast<std::size_t>(o.phase)] += device;
    r.phase_seconds[static_cast<std::size_t>(Phase::host_overhead)] += host;
    r.op_seconds[i] = device + host;
    r.step_seconds += device + host;
  }
  return r;
}

EpochPrediction predict_epoch(const ModelDesc& model, int64_t samples, int64_t batch,
                              const Profile& profile, Mode mode, int ranks, Precision precision) {
  if (samples < 1 || batch < 1)
    throw Error("cost model", "samples and batch size must be positive");
  const DeviceKind dev = profile.kind == "gpu" ? DeviceKind::gpu : DeviceKind::cpu;
  const int64_t b = std::min(batch, samples);
  const int64_t full = samples / b, rest = samples % b;
  if (ranks < 1) throw Error("cost model", "ranks must be positive");
  // The largest rank's share of a batch of `rows`: the step every rank waits for.
  auto share = [ranks](int64_t rows) { return (rows + ranks - 1) / ranks; };
  EpochPrediction e;
  e.full_step = predict(step_ops(model, share(b), dev, mode, ranks), profile, mode, precision);
  e.steps = full + (rest ? 1 : 0);
  e.seconds = static_cast<double>(full) * e.full_step.step_seconds;
  if (rest)
    e.seconds += predict(step_ops(model, share(rest), dev, mode, ranks), profile, mode, precision)
                     .step_seconds;
  return e;
}

int64_t epoch_gemm_flops(const ModelDesc& model, int64_t samples, int64_t batch) {
  const int64_t b = std::min(batch, samples);
  const int64_t full = samples / b, rest = samples % b;
  auto flops = [&](int64_t rows) {
    int64_t f = 0;
    for (const Op& o : step_ops(model, rows, DeviceKind::cpu, Mode::resident)) f += o.flops;
    return f;
  };
  return full * flops(b) + (rest ? flops(rest) : 0);
}

}  // namespace crossover::perf
