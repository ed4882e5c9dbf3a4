#include "perf/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/error.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"

namespace crossover::perf {

namespace {

constexpr int64_t kFloat = 4;
constexpr int64_t kCountersBytes = static_cast<int64_t>(sizeof(StepCounters));

std::string act_kernel(ActivationKind a, const char* dir) {
  return std::string(activation_name(a)) + "_" + dir;
}

bool is_param_layer(const Layer& l) { return l.type == LayerType::dense; }

}  // namespace

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

int64_t ModelDesc::parameters() const {
  int64_t n = 0, width = input_width;
  for (const Layer& l : layers) {
    if (l.type == LayerType::dense) {
      n += width * l.units + (l.use_bias ? l.units : 0);
      width = l.units;
    }
  }
  return n;
}

ModelDesc describe(const Sequential& model) {
  ModelDesc d;
  const Shape in = model.input_shape();
  if (in.empty()) throw Error(model.name(), "the model's input shape is not known yet");
  d.input_width = 1;
  for (int64_t v : in) d.input_width *= v;
  d.layers = model.layers();
  d.optimizer = model.optimizer().kind;
  const std::string& loss = model.loss_name();
  d.loss = loss == "categorical_crossentropy" ? LossKind::categorical_crossentropy
           : loss == "binary_crossentropy"    ? LossKind::binary_crossentropy
           : loss == "mean_squared_error"     ? LossKind::mean_squared_error
                                              : LossKind::sparse_categorical_crossentropy;
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

// ---- the op list: Sequential::Impl::train_step, call for call --------------------------------
std::vector<Op> step_ops(const ModelDesc& model, int64_t m, DeviceKind device, Mode mode) {
  if (device == DeviceKind::cpu && mode == Mode::naive)
    throw Error("--mode",
                "naive mode applies to a GPU: the CPU has no launches or host-device copies");
  if (m < 1) throw Error("cost model", "a step needs at least one row");
  const bool gpu = device == DeviceKind::gpu;
  const bool naive = mode == Mode::naive;
  // Layer names as Sequential gives them (dense, dense_1, dropout, ...), where not given.
  std::vector<Layer> layers = model.layers;
  {
    std::map<std::string, int> counts;
    for (Layer& l : layers) {
      if (!l.name.empty()) continue;
      const std::string base = l.type == LayerType::input     ? "input_layer"
                               : l.type == LayerType::flatten ? "flatten"
                               : l.type == LayerType::dense   ? "dense"
                               : l.type == LayerType::dropout ? "dropout"
                                                              : "activation";
      int& c = counts[base];
      l.name = c == 0 ? base : base + "_" + std::to_string(c);
      ++c;
    }
  }
  const std::size_t L = layers.size();

  // Widths, as Sequential::build computes them.
  std::vector<int64_t> in_w(L), out_w(L);
  int64_t width = model.input_width;
  for (std::size_t i = 0; i < L; ++i) {
    in_w[i] = width;
    if (layers[i].type == LayerType::dense) width = layers[i].units;
    out_w[i] = width;
  }
  const int64_t classes = out_w.back();
  const int64_t target_cols = model.loss == LossKind::sparse_categorical_crossentropy ? 1 : classes;
  const Layer& last = layers.back();
  const int deferred = (last.type == LayerType::dense || last.type == LayerType::activation)
                           ? static_cast<int>(L) - 1
                           : -1;
  const ActivationKind final_act = deferred >= 0 ? last.activation : ActivationKind::linear;

  std::vector<Op> ops;
  auto elementwise = [&](std::string name, std::string layer, std::string kernel, int64_t elements,
                         int64_t read, int64_t written) {
    Op o;
    o.name = std::move(name);
    o.layer = std::move(layer);
    o.phase = Phase::elementwise;
    o.kernel = std::move(kernel);
    o.elements = elements;
    o.bytes_read = read;
    o.bytes_written = written;
    o.launches = gpu ? 1 : 0;
    o.calls = 1;
    ops.push_back(std::move(o));
  };

  // 1. The batch: gathered on the device from resident data, or (naive) gathered on the host
  //    from pageable memory and copied.
  auto batch_in = [&](const char* what, int64_t cols, const char* kernel) {
    if (naive) {
      Op o;
      o.name = fmt::format("copy batch {} to device (pageable)", what);
      o.phase = Phase::h2d_copy;
      o.kernel = "h2d_pageable";
      o.elements = m * cols;
      o.bytes_read = m * cols * kFloat;
      o.bytes_written = m * cols * kFloat;
      o.transfer_bytes = m * cols * kFloat;
      o.calls = 1;
      ops.push_back(std::move(o));
    } else {
      elementwise(fmt::format("gather batch {}", what), "", kernel, m * cols,
                  m * cols * kFloat + m * 4, m * cols * kFloat);
    }
  };
  batch_in("x", model.input_width, "gather_rows");
  batch_in("y", target_cols, target_cols == 1 ? "gather_labels" : "gather_rows");

  // 2. Forward.
  for (std::size_t i = 0; i < L; ++i) {
    const Layer& l = layers[i];
    const int64_t n = out_w[i], k = in_w[i];
    const bool defer = static_cast<int>(i) == deferred;
    switch (l.type) {
      case LayerType::input:
      case LayerType::flatten:
        break;
      case LayerType::dense: {
        const ActivationKind act = defer ? ActivationKind::linear : l.activation;
        const bool fused = act == ActivationKind::linear || act == ActivationKind::relu;
        const ActivationKind epilogue = fused ? act : ActivationKind::linear;
        Op o;
        o.name = fmt::format("{} forward {}->{}", l.name, k, n);
        o.layer = l.name;
        o.phase = Phase::gemm;
        o.kernel = "gemm_forward";
        o.flops = 2 * m * k * n;
        o.bytes_read = kFloat * (m * k + k * n + (l.use_bias ? n : 0));
        o.bytes_written = kFloat * m * n;
        o.elements = m * n;
        o.batch = m;
        o.in = k;
        o.out = n;
        o.calls = 1;
        const bool has_epilogue = l.use_bias || epilogue == ActivationKind::relu;
        o.launches = gpu ? (naive && has_epilogue ? 2 : 1) : 0;
        ops.push_back(std::move(o));
        if (!fused)
          elementwise(fmt::format("{} {} forward", l.name, activation_name(act)), l.name,
                      act_kernel(act, "forward"), m * n, kFloat * m * n, kFloat * m * n);
        break;
      }
      case LayerType::dropout:
        elementwise(fmt::format("{} forward", l.name), l.name, "dropout_forward", m * n,
                    kFloat * m * n, kFloat * m * n + m * n);
        break;
      case LayerType::activation: {
        const ActivationKind act = defer ? ActivationKind::linear : l.activation;
        elementwise(fmt::format("{} {} forward", l.name, activation_name(act)), l.name,
                    act == ActivationKind::linear ? "copy" : act_kernel(act, "forward"), m * n,
                    kFloat * m * n, kFloat * m * n);
        break;
      }
    }
  }

  // 3. Loss, fused with the final activation's backward.
  {
    const bool sparse = model.loss == LossKind::sparse_categorical_crossentropy;
    const std::string kernel =
        sparse && final_act == ActivationKind::softmax ? "loss_sparse_softmax" : "loss";
    elementwise("loss forward+backward", "", kernel, m * classes,
                kFloat * (m * classes + m * target_cols), kFloat * m * classes);
  }

  // 4. Backward, from the last layer down to the first one with parameters.
  int first_param = -1;
  for (std::size_t i = 0; i < L; ++i)
    if (is_param_layer(layers[i])) {
      first_param = static_cast<int>(i);
      break;
    }
  bool activation_done = true;
  for (int i = static_cast<int>(L) - 1; first_param >= 0 && i >= first_param; --i) {
    const auto ui = static_cast<std::size_t>(i);
    const Layer& l = layers[ui];
    const int64_t n = out_w[ui], k = in_w[ui];
    switch (l.type) {
      case LayerType::input:
      case LayerType::flatten:
        activation_done = false;
        break;
      case LayerType::dense: {
        if (!activation_done && l.activation != ActivationKind::linear)
          elementwise(fmt::format("{} {} backward", l.name, activation_name(l.activation)), l.name,
                      act_kernel(l.activation, "backward"), m * n, 2 * kFloat * m * n,
                      kFloat * m * n);
        Op w;
        w.name = fmt::format("{} backward weights {}->{}", l.name, k, n);
        w.layer = l.name;
        w.phase = Phase::gemm;
        w.kernel = "gemm_backward_weights";
        w.flops = 2 * k * n * m;
        w.bytes_read = kFloat * (m * k + m * n);
        w.bytes_written = kFloat * (k * n + (l.use_bias ? n : 0));
        w.elements = k * n;
        w.batch = m;
        w.in = k;
        w.out = n;
        w.calls = 1;
        w.launches = gpu ? (naive && l.use_bias ? 2 : 1) : 0;
        ops.push_back(std::move(w));
        if (i > first_param) {
          Op x;
          x.name = fmt::format("{} backward input {}->{}", l.name, k, n);
          x.layer = l.name;
          x.phase = Phase::gemm;
          x.kernel = "gemm_backward_input";
          x.flops = 2 * m * k * n;
          x.bytes_read = kFloat * (m * n + k * n);
          x.bytes_written = kFloat * m * k;
          x.elements = m * k;
          x.batch = m;
          x.in = k;
          x.out = n;
          x.calls = 1;
          x.launches = gpu ? 1 : 0;
          ops.push_back(std::move(x));
        }
        activation_done = false;
        break;
      }
      case LayerType::dropout: {
        const Layer* prev = i > 0 ? &layers[ui - 1] : nullptr;
        const bool relu_before =
            prev && (prev->type == LayerType::dense || prev->type == LayerType::activation) &&
            prev->activation == ActivationKind::relu;
        if (relu_before) {
          elementwise(fmt::format("{} + relu backward", l.name), l.name, "relu_dropout_backward",
                      m * n, 2 * kFloat * m * n, kFloat * m * n);
          activation_done = true;
        } else {
          elementwise(fmt::format("{} backward", l.name), l.name, "dropout_backward", m * n,
                      kFloat * m * n + m * n, kFloat * m * n);
          activation_done = false;
        }
        break;
      }
      case LayerType::activation:
        if (!activation_done && l.activation != ActivationKind::linear)
          elementwise(fmt::format("{} {} backward", l.name, activation_name(l.activation)), l.name,
                      act_kernel(l.activation, "backward"), m * n, 2 * kFloat * m * n,
                      kFloat * m * n);
        activation_done = false;
        break;
    }
  }

  // 5. The optimizer: every parameter, one call (one launch on a GPU).
  {
    Op o;
    o.name = std::string(optimizer_name(model.optimizer)) + " update";
    o.phase = Phase::optimizer;
    o.kernel = std::string(optimizer_name(model.optimizer));
    int64_t width = model.input_width;
    for (const Layer& l : layers)
      if (l.type == LayerType::dense) {
        o.segments.push_back(width * l.units);
        if (l.use_bias) o.segments.push_back(l.units);
        width = l.units;
      }
    for (int64_t s : o.segments) o.elements += s;
    // Per element: read value, gradient and the state slots; write value and the slots.
    const int64_t slots = model.optimizer == OptimizerKind::adam      ? 2
                          : model.optimizer == OptimizerKind::rmsprop ? 1
                                                                      : 1;
    o.bytes_read = kFloat * o.elements * (2 + slots);
    o.bytes_written = kFloat * o.elements * (1 + slots);
    o.launches = gpu ? 1 : 0;
    o.calls = 1;
    ops.push_back(std::move(o));
  }

  // 6. Around the step.
  int64_t calls = 0;
  for (const Op& o : ops) calls += o.calls;
  if (!gpu) {
    Op o;
    o.name = fmt::format("host: step dispatch ({} backend calls)", calls);
    o.phase = Phase::host_overhead;
    o.kernel = "call";
    o.elements = calls;
    ops.insert(ops.begin(), std::move(o));
  } else if (!naive) {
    Op o;
    o.name = "host: graph launch";
    o.phase = Phase::host_overhead;
    o.kernel = "graph_launch";
    o.calls = 1;
    ops.insert(ops.begin(), std::move(o));
  } else {
    Op d;
    d.name = "read back step counters (d2h)";
    d.phase = Phase::d2h_copy;
    d.kernel = "d2h_pageable";
    d.transfer_bytes = kCountersBytes;
    d.bytes_read = kCountersBytes;
    d.bytes_written = kCountersBytes;
    d.calls = 1;
    ops.push_back(std::move(d));
    Op s;
    s.name = "synchronize (each step)";
    s.phase = Phase::sync_wait;
    s.kernel = "sync";
    s.calls = 1;
    ops.push_back(std::move(s));
  }
  return ops;
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

double gemm_rate(const Profile& profile, const std::string& op, int64_t batch, int64_t in,
                 int64_t out) {
  std::vector<GemmPoint> pts;
  for (const std::string& want : {op, std::string()}) {
    for (const GemmSample& g : profile.gemm) {
      if (g.op != want) continue;
      int64_t b, i, o;
      to_layer_shape(g, b, i, o);
      pts.push_back({std::log2(double(b)), std::log2(double(i)), std::log2(double(o)),
                     std::log(g.flops_per_second)});
    }
    if (!pts.empty()) break;
  }
  if (pts.empty())
    for (const GemmSample& g : profile.gemm) {
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
    // The CPU updates one parameter tensor after another (a parallel loop each).
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
    if (have) return t;
  }
  const double k = kernel_seconds(p, o.kernel, o.elements);
  if (k >= 0) return k;
  return floor + streaming(p, o.bytes_read + o.bytes_written);
}

const char* gemm_op(const std::string& kernel) {
  if (kernel == "gemm_backward_weights") return "backward_weights";
  if (kernel == "gemm_backward_input") return "backward_input";
  return "forward";
}

}  // namespace

Prediction predict(const std::vector<Op>& ops, const Profile& p, Mode mode) {
  Prediction r;
  r.op_seconds.assign(ops.size(), 0.0);
  const bool gpu = p.kind == "gpu";
  if (!gpu && mode == Mode::naive)
    throw Error("--mode",
                "naive mode applies to a GPU: the CPU has no launches or host-device copies");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    double device = 0;  // time the op's own phase gets
    double host = 0;    // time host_overhead gets on its account (GPU naive: launch-bound part)
    switch (o.phase) {
      case Phase::gemm: {
        device =
            static_cast<double>(o.flops) / gemm_rate(p, gemm_op(o.kernel), o.batch, o.in, o.out);
        if (gpu && mode == Mode::naive && o.launches > 1) {
          // The epilogue the graph mode fuses runs as its own kernel: one more pass over the
          // output.
          const int64_t extra = o.kernel == "gemm_forward" ? 2 * kFloat * o.batch * o.out
                                                           : kFloat * (o.batch * o.out + o.out);
          device += streaming(p, extra);
        }
        break;
      }
      case Phase::elementwise:
      case Phase::optimizer:
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
                              const Profile& profile, Mode mode) {
  if (samples < 1 || batch < 1)
    throw Error("cost model", "samples and batch size must be positive");
  const DeviceKind dev = profile.kind == "gpu" ? DeviceKind::gpu : DeviceKind::cpu;
  const int64_t b = std::min(batch, samples);
  const int64_t full = samples / b, rest = samples % b;
  EpochPrediction e;
  e.full_step = predict(step_ops(model, b, dev, mode), profile, mode);
  e.steps = full + (rest ? 1 : 0);
  e.seconds = static_cast<double>(full) * e.full_step.step_seconds;
  if (rest) e.seconds += predict(step_ops(model, rest, dev, mode), profile, mode).step_seconds;
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
