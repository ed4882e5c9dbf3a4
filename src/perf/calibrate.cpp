#include "perf/calibrate.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda_info.h"
#include "core/error.h"
#include "core/machine.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "perf/calibrate_internal.h"

#ifdef CROSSOVER_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace crossover::perf {

// The middle value (the mean of the two middle ones for an even count); v is reordered.
double median(std::vector<double>& v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2;
}

void* pinned_host_alloc(std::size_t bytes) {
#ifdef CROSSOVER_HAVE_CUDA
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
#else
  (void)bytes;
  return nullptr;
#endif
}

void pinned_host_free(void* p) {
#ifdef CROSSOVER_HAVE_CUDA
  if (p) cudaFreeHost(p);
#else
  (void)p;
#endif
}

GemmGrid gemm_grid(bool quick) {
  if (quick) return {{16, 64, 256, 1024}, {64, 784, 2048}, {10, 128, 1024}};
  return {{16, 32, 64, 128, 256, 512, 1024},
          {32, 64, 128, 256, 512, 784, 1024, 2048, 4096},
          {10, 32, 64, 128, 256, 512, 1024, 2048, 4096}};
}

double since(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

std::string iso_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Training hands each op its inputs fresh from the op before: a GEMM's output written by every
// thread of the pool (each its own part), or a serial loop's output written by the calling
// thread. Reading them costs cache-line transfers between cores that back-to-back calls on the
// same buffers never pay. handoff() rewrites a buffer that way before a timed call (CPU only).
void handoff(float* p, int64_t n, bool all_threads) {
  if (n <= 0) return;
  volatile float* v = p;
  if (all_threads) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += 16) v[i] = v[i];
  } else {
    for (int64_t i = 0; i < n; i += 16) v[i] = v[i];
  }
}

// Random values of both signs, as activations and gradients are: the CPU's loops branch on each
// element's sign or mask, and a constant input would make every branch predictable.
void upload_random(Backend& be, float* dst, int64_t n, uint64_t seed, float scale) {
  std::vector<float> host(static_cast<std::size_t>(n));
  uint64_t h = seed;
  for (float& v : host) {
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    v = scale * static_cast<float>(static_cast<double>(h >> 11) * 0x1p-53 * 2.0 - 1.0);
  }
  be.upload(dst, host.data(), host.size() * 4);
}

const OptimizerConfig* optimizer_for(const std::string& name) {
  // Each optimizer unit with Keras's defaults, by its kind's name ("adam"; AdamW is Adam's kind).
  static const std::map<std::string, OptimizerConfig> by_name = [] {
    std::map<std::string, OptimizerConfig> m;
    for (const OptimizerClass& c : optimizer_classes())
      m.emplace(optimizer_name(c.kind), make_optimizer(c.class_name));
    return m;
  }();
  const auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : &it->second;
}

// The host-side costs: a backend call, an OpenMP fork-join (CPU).
void measure_host(Backend& be, bool gpu, StepCounters* ctr, Profile& p) {
  const int reps = 2000;
  std::vector<double> per;
  for (int b = 0; b < 5; ++b) {
    const auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) be.advance_batch(ctr);
    per.push_back(since(t0) / reps);  // host time only: nothing waited for
  }
  be.synchronize();
  p.call_seconds = *std::min_element(per.begin(), per.end());
  if (!gpu) {
    std::vector<double> fj;
    volatile int sink = 0;
    for (int b = 0; b < 5; ++b) {
      const auto t0 = Clock::now();
      for (int r = 0; r < 500; ++r) {
#pragma omp parallel
        {
          if (omp_get_thread_num() == 0) sink = sink + 1;
        }
      }
      fj.push_back(since(t0) / 500);
    }
    p.fork_join_seconds = *std::min_element(fj.begin(), fj.end());
  }
}

// Streaming memory bandwidth: ReLU over a large array, read + write.
void measure_memory(Backend& be, Bench& bench, bool quick, Profile& p) {
  const int64_t n = quick ? (int64_t{1} << 23) : (int64_t{1} << 26);
  Block x(be, static_cast<std::size_t>(n) * 4), y(be, static_cast<std::size_t>(n) * 4);
  be.fill(x.f(), 0.5f, n);
  const double t = bench.per_call(
      [&] { be.activation_forward(ActivationKind::relu, 0.0f, x.f(), y.f(), 1, n); });
  p.memory_bytes_per_second = 8.0 * double(n) / t;
}

// The read+write bandwidth of each level of the CPU's memory hierarchy (Profile::memory_levels):
// the same streaming kernel as measure_memory over a working set (input and output together) of
// half the level's capacity: the L2 of every thread together (OpenMP gives each thread a
// contiguous share, which stays in its core's L2), the L3, and DRAM at four times the L3 (at
// least 256 MiB). A level the CPU does not report (size 0) or that is no larger than the one
// below it is left out.
void measure_memory_levels(Backend& be, Bench& bench, Profile& p) {
  struct Level {
    const char* name;
    int64_t capacity, working_set;
  };
  const int64_t l2 = p.l2_bytes * std::max(1, p.threads);
  const int64_t dram = std::max<int64_t>(int64_t{256} << 20, 4 * p.l3_bytes);
  const Level levels[] = {
      {"L2", l2, l2 / 2}, {"L3", p.l3_bytes, p.l3_bytes / 2}, {"DRAM", 0, dram}};
  p.memory_levels.clear();
  int64_t below = 0;
  for (const Level& l : levels) {
    if (l.working_set <= 0 || (l.capacity != 0 && l.capacity <= below)) continue;
    below = l.capacity;
    const int64_t n = l.working_set / 8;  // floats in each of the two arrays
    Block x(be, static_cast<std::size_t>(n) * 4), y(be, static_cast<std::size_t>(n) * 4);
    be.fill(x.f(), 0.5f, n);
    const double t = bench.per_call(
        [&] { be.activation_forward(ActivationKind::relu, 0.0f, x.f(), y.f(), 1, n); });
    p.memory_levels.push_back({l.name, l.capacity, 8.0 * double(n) / t});
  }
}

namespace {

// Sizes around every power of two: 2^k - 1 and 2^k, so that a kernel whose implementation
// switches strategy at a power of two (a threaded loop above 2^15 elements, say) is sampled on
// both sides of the switch, and interpolation never straddles it.
std::vector<int64_t> kernel_sizes(int lo_pow, int hi_pow, int step) {
  std::vector<int64_t> s;
  for (int k = lo_pow; k <= hi_pow; k += step) {
    const int64_t v = int64_t{1} << k;
    if (v - 1 > (s.empty() ? 0 : s.back())) s.push_back(v - 1);
    s.push_back(v);
  }
  return s;
}

// The backend calibrate measures (o.device), and the profile's device fields; `gpu` says which.
std::unique_ptr<Backend> calibrated_backend(const CalibrateOptions& o, Profile& p, bool& gpu) {
  gpu = false;
  if (o.device == "cpu") {
    std::unique_ptr<Backend> backend = make_cpu_backend(o.threads);
    set_this_cpu(p, o.threads);
    return backend;
  }
  if (o.device != "cuda" && o.device.rfind("cuda:", 0) != 0)
    throw Error("--device " + o.device, "expected cpu or cuda:N");
  const std::string n = o.device == "cuda" ? "0" : o.device.substr(5);
  if (n.empty() || n.size() > 3 || !std::all_of(n.begin(), n.end(), ::isdigit))
    throw Error("--device " + o.device, "expected cpu or cuda:N");
  const int ordinal = std::stoi(n);
  std::unique_ptr<Backend> backend = make_cuda_backend(ordinal);
  gpu = true;
  p.kind = "gpu";
  p.id = "cuda:" + n;
  p.name = "CUDA device " + n;
  for (const CudaDeviceInfo& d : cuda_devices())
    if (d.ordinal == ordinal) {
      p.name = d.name;
      p.cores = d.sm_count;
      p.memory_bytes = static_cast<int64_t>(d.memory_bytes);
    }
  return backend;
}

using Say = std::function<void(const std::string&)>;

// GPU: launch, graph, sync, host-device copies.
void measure_gpu_host_costs(Backend& be, Bench& bench, bool quick, Profile& p, const Say& say) {
  Block tiny(be, 4096);
  p.launch_seconds = bench.per_call_eager([&] { be.fill(tiny.f(), 0.0f, 1); }, 1000);
  auto graph_of = [&](int nodes) {
    auto g = be.capture(
        [&, nodes] {
          for (int i = 0; i < nodes; ++i) be.fill(tiny.f(), 0.0f, 1);
        },
        true);
    return bench.per_call_eager([&] { g->replay(); }, 50);
  };
  const double g1 = graph_of(1), g101 = graph_of(101);
  p.graph_node_seconds = std::max(0.0, (g101 - g1) / 100.0);
  p.graph_launch_seconds = std::max(0.0, g1 - p.graph_node_seconds);
  const double round = bench.per_call_eager(
      [&] {
        be.fill(tiny.f(), 0.0f, 1);
        be.synchronize();
      },
      200);
  p.sync_seconds = std::max(0.0, round - p.launch_seconds);
  say(
      fmt::format("  launch {:.2f} us, graph launch {:.2f} us + {:.2f} us per node, sync round "
                  "trip {:.2f} us",
                  p.launch_seconds * 1e6, p.graph_launch_seconds * 1e6, p.graph_node_seconds * 1e6,
                  p.sync_seconds * 1e6));

  const std::size_t bytes = quick ? (16u << 20) : (256u << 20);
  Block dev(be, bytes);
  std::vector<unsigned char> pageable(bytes, 1);
  char small[64] = {};
  p.h2d_latency_seconds = bench.per_call_eager([&] { be.upload(dev.p, small, 4); }, 200);
  p.d2h_latency_seconds = bench.per_call_eager([&] { be.download(small, dev.p, 4); }, 200);
  const int reps = quick ? 3 : 5;
  p.h2d_bytes_per_second.pageable =
      double(bytes) / bench.per_call_eager([&] { be.upload(dev.p, pageable.data(), bytes); }, reps);
  p.d2h_bytes_per_second.pageable =
      double(bytes) /
      bench.per_call_eager([&] { be.download(pageable.data(), dev.p, bytes); }, reps);
  if (void* pinned = pinned_host_alloc(bytes)) {
    std::memset(pinned, 1, bytes);
    p.h2d_bytes_per_second.pinned =
        double(bytes) / bench.per_call_eager([&] { be.upload(dev.p, pinned, bytes); }, reps);
    p.d2h_bytes_per_second.pinned =
        double(bytes) / bench.per_call_eager([&] { be.download(pinned, dev.p, bytes); }, reps);
    pinned_host_free(pinned);
  }
  auto gbs = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.1f} GB/s", *v / 1e9) : std::string("n/a");
  };
  say(
      fmt::format("  h2d pageable {}, pinned {}; d2h pageable {}, pinned {}; latency h2d {:.1f} "
                  "us, d2h {:.1f} us",
                  gbs(p.h2d_bytes_per_second.pageable), gbs(p.h2d_bytes_per_second.pinned),
                  gbs(p.d2h_bytes_per_second.pageable), gbs(p.d2h_bytes_per_second.pinned),
                  p.h2d_latency_seconds * 1e6, p.d2h_latency_seconds * 1e6));
}

// Elementwise kernels: time by size.
void measure_kernel_curves(Backend& be, Bench& bench, bool gpu, bool quick, StepCounters* ctr,
                           Profile& p, const Say& say) {
  const std::vector<int64_t> sizes = quick ? kernel_sizes(6, 18, 3) : kernel_sizes(6, 22, 1);
  KernelBench kb(be, bench, gpu, quick, ctr, sizes.back());
  auto curve = [&](const std::string& name, const std::vector<int64_t>& elements, int64_t cols) {
    std::vector<KernelSample> s;
    for (int64_t e : elements)
      s.push_back({e, kb.seconds(name, e, std::max<int64_t>(e / cols, 1))});
    p.kernels[name] = std::move(s);
  };
  std::vector<std::string> flat{"relu_forward", "relu_backward", "copy"};
  if (!quick)
    for (const char* k : {"sigmoid_forward", "sigmoid_backward", "tanh_forward", "tanh_backward"})
      flat.emplace_back(k);
  for (const char* k : {"dropout_forward", "dropout_backward", "relu_dropout_backward"})
    flat.emplace_back(k);
  for (const std::string& k : flat) curve(k, sizes, 1);
  // Rows of 10 classes (MNIST's output).
  std::vector<int64_t> row_elems;
  for (int64_t r = 1; r * 10 <= std::min<int64_t>(sizes.back(), 10 << 14); r *= 2)
    row_elems.push_back(r * 10);
  curve("loss_sparse_softmax", row_elems, 10);
  curve("softmax_forward", row_elems, 10);
  // Batches of MNIST rows (784 floats), and their labels.
  std::vector<int64_t> rows_elems, label_elems;
  for (int64_t r = 1; r <= 1024; r *= 2) rows_elems.push_back(r * 784);
  for (int64_t r = 1; r <= 1024; r *= 2) label_elems.push_back(r);
  curve("gather_rows", rows_elems, 784);
  curve("gather_labels", label_elems, 1);
  // Adam on one parameter tensor of n elements.
  curve("adam", sizes, 1);
  say(fmt::format("  elementwise kernels: {} curves of {} sizes ({} to {} elements)",
                  p.kernels.size(), sizes.size(), sizes.front(), sizes.back()));
}

// GEMMs, as the dense layer calls them (and in bf16 on a CPU that has it).
void measure_gemm_grid(Backend& be, Bench& bench, bool gpu, const CalibrateOptions& o, Profile& p,
                       const Say& say) {
  const GemmGrid g = gemm_grid(o.quick);
  const int64_t I = g.ins.back(), O = g.outs.back();
  // Every shape of the grid on `on`, into `out`; the best rate.
  auto grid_rates = [&](Backend& on, Bench& timer, std::vector<GemmSample>& out) {
    GemmBench gb(on, timer, gpu, g.batches.back(), std::max(I, O));
    double best = 0;
    for (int64_t batch : g.batches)
      for (int64_t in : g.ins)
        for (int64_t out_width : g.outs)
          for (const char* op : {"forward", "backward_weights", "backward_input"}) {
            out.push_back(gb.measure(op, batch, in, out_width));
            best = std::max(best, out.back().flops_per_second);
          }
    return best;
  };
  const double best = grid_rates(be, bench, p.gemm);
  say(fmt::format("  GEMM: {} shapes x 3 ops (batch {}..{}, widths {}..{}), best {:.1f} GFLOP/s",
                  g.batches.size() * g.ins.size() * g.outs.size(), g.batches.front(),
                  g.batches.back(), std::min(g.ins.front(), g.outs.front()), std::max(I, O),
                  best / 1e9));
  // The same grid with bf16 operands (--precision bf16), on a CPU that has bf16.
  if (!gpu && cpu_bf16_problem(cpu_bf16_support()).empty()) {
    std::unique_ptr<Backend> bf16 = make_cpu_backend(o.threads, Precision::bf16);
    Bench bench16(*bf16, false, o.quick);
    const double best16 = grid_rates(*bf16, bench16, p.gemm_bf16);
    say(fmt::format("  GEMM in bf16: the same shapes, best {:.1f} GFLOP/s", best16 / 1e9));
  }
}

// The fused training step's rates (backends/fused_mlp.h): its grid-wide barrier and its tile
// product's rate per block, with the fused kernel's own code. A device without a cooperative
// launch has none, and the profile says nothing of the fused step.
void measure_fused_step(const CalibrateOptions& o, Profile& p, const Say& say) {
  const int ordinal = std::stoi(p.id.substr(5));  // "cuda:N" (calibrated_backend)
  try {
    p.fused_step = measure_fused_step_rates(ordinal, o.quick);
  } catch (const Error& e) {
    say(std::string("  fused step: not measured (") + e.what() + ")");
    return;
  }
  say(fmt::format(
      "  fused step: grid barrier {:.2f} us ({} blocks), tile product {:.2f} GFLOP/s per block, "
      "L2 {:.1f} MB",
      p.fused_step->grid_sync_seconds * 1e6, p.cores * p.fused_step->blocks_per_sm,
      p.fused_step->block_flops_per_second / 1e9, double(p.fused_step->l2_bytes) / 1e6));
}

}  // namespace

Profile calibrate(const CalibrateOptions& o) {
  const auto start = Clock::now();
  const Say say = [&](const std::string& line) {
    if (o.say) o.say(fmt::format("{:<100} [{:5.1f} s]", line, since(start)));
  };
  Profile p;
  bool gpu = false;
  const std::unique_ptr<Backend> backend = calibrated_backend(o, p, gpu);
  Backend& be = *backend;
  Bench bench(be, gpu, o.quick);
  p.created = iso_now();
  p.crossover_version = "0.1.0";
  p.quick = o.quick;
  say(fmt::format("calibrating {} ({}){}", p.id, p.name,
                  gpu ? "" : fmt::format(" with {} threads", p.threads)));

  Block counters(be, 2 * sizeof(StepCounters));
  {
    StepCounters zero[2];
    be.upload(counters.p, zero, sizeof zero);
  }
  auto* ctr = counters.as<StepCounters>();

  // ---- host side: a backend call, an OpenMP fork-join ----
  measure_host(be, gpu, ctr, p);
  say(fmt::format(
      "  backend call {:.1f} ns{}", p.call_seconds * 1e9,
      gpu ? "" : fmt::format(", OpenMP fork-join {:.2f} us", p.fork_join_seconds * 1e6)));
  if (gpu) measure_gpu_host_costs(be, bench, o.quick, p, say);

  // ---- streaming memory bandwidth: ReLU over a large array, read + write ----
  measure_memory(be, bench, o.quick, p);
  say(fmt::format("  memory (streaming, {} MB in + out) {:.1f} GB/s",
                  (o.quick ? (int64_t{1} << 23) : (int64_t{1} << 26)) * 4 >> 20,
                  p.memory_bytes_per_second / 1e9));
  if (!gpu) {
    measure_memory_levels(be, bench, p);
    std::string levels;
    for (const MemoryLevel& l : p.memory_levels)
      levels += fmt::format("{}{} {:.1f} GB/s", levels.empty() ? "" : ", ", l.name,
                            l.bytes_per_second / 1e9);
    say("  memory by level (read + write, working set half the level) " + levels);
  }
  measure_kernel_curves(be, bench, gpu, o.quick, ctr, p, say);
  measure_gemm_grid(be, bench, gpu, o, p, say);
  if (gpu) measure_fused_step(o, p, say);

  p.calibration_seconds = since(start);
  say(fmt::format("calibrated in {:.1f} s", p.calibration_seconds));
  return p;
}

}  // namespace crossover::perf
