#include "perf/calibrate.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <memory>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda_info.h"
#include "core/error.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "perf/machine.h"

#ifdef CROSSOVER_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace crossover::perf {

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

namespace {

using Clock = std::chrono::steady_clock;
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

// A block of backend memory, released at scope exit.
struct Block {
  Backend* be = nullptr;
  void* p = nullptr;
  Block(Backend& b, std::size_t bytes) : be(&b), p(b.allocate(std::max<std::size_t>(bytes, 64))) {}
  ~Block() { be->release(p); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  float* f() const { return static_cast<float*>(p); }
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

class Bench {
 public:
  Bench(Backend& be, bool gpu, bool quick) : be_(be), gpu_(gpu), quick_(quick) {}

  // Seconds per call of `op`: the fastest of a few batches of back-to-back calls, each batch long
  // enough to time well (the machine's undisturbed rate: on a shared machine a batch now and then
  // loses its threads to another process for a scheduler slice). On a GPU the batch is a replayed
  // graph (device time, with each node's overhead; the per-launch cost is measured separately).
  double per_call(const std::function<void()>& op) {
    const double target = quick_ ? 0.001 : 0.004;
    const int batches = quick_ ? 3 : 6;
    double one = 1e30;
    for (int i = 0; i < 3; ++i) {  // warm-up and a first estimate
      const auto t0 = Clock::now();
      op();
      be_.synchronize();
      one = std::min(one, std::max(since(t0), 1e-7));
      if (one > 0.05) break;  // a large product: one call is estimate enough
    }
    const int reps = static_cast<int>(std::clamp(target / one, 1.0, gpu_ ? 500.0 : 20000.0));
    std::vector<double> per;
    if (gpu_) {
      auto g = be_.capture(
          [&] {
            for (int r = 0; r < reps; ++r) op();
          },
          true);
      g->replay();
      be_.synchronize();
      for (int b = 0; b < batches; ++b) {
        const auto t0 = Clock::now();
        g->replay();
        be_.synchronize();
        per.push_back(since(t0) / reps);
      }
    } else {
      for (int b = 0; b < batches; ++b) {
        const auto t0 = Clock::now();
        for (int r = 0; r < reps; ++r) op();
        be_.synchronize();
        per.push_back(since(t0) / reps);
      }
    }
    return *std::min_element(per.begin(), per.end());
  }

  // The same, with `setup` run (untimed) before every call: on the CPU, the state training leaves
  // the caches in (handoff() below). On a GPU, where it does not apply, plain per_call.
  double per_call_after(const std::function<void()>& setup, const std::function<void()>& op) {
    if (gpu_ || !setup) return per_call(op);
    const double target = quick_ ? 0.001 : 0.004;
    const int batches = quick_ ? 3 : 6;
    double one = 1e30;
    for (int i = 0; i < 3; ++i) {
      setup();
      const auto t0 = Clock::now();
      op();
      one = std::min(one, std::max(since(t0), 1e-7));
      if (one > 0.05) break;
    }
    const int reps = static_cast<int>(std::clamp(target / one, 1.0, 5000.0));
    double best = 1e30;
    for (int b = 0; b < batches; ++b) {
      double total = 0;
      for (int r = 0; r < reps; ++r) {
        setup();
        const auto t0 = Clock::now();
        op();
        total += since(t0);
      }
      best = std::min(best, total / reps);
    }
    return best;
  }

  // Seconds per call of back-to-back calls without a graph (launch-bound on a GPU).
  double per_call_eager(const std::function<void()>& op, int reps) {
    std::vector<double> per;
    op();
    be_.synchronize();
    for (int b = 0; b < 5; ++b) {
      const auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) op();
      be_.synchronize();
      per.push_back(since(t0) / reps);
    }
    return *std::min_element(per.begin(), per.end());
  }

 private:
  Backend& be_;
  bool gpu_, quick_;
};

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

}  // namespace

Profile calibrate(const CalibrateOptions& o) {
  const auto start = Clock::now();
  const auto say = [&](const std::string& line) {
    if (o.say) o.say(fmt::format("{:<100} [{:5.1f} s]", line, since(start)));
  };
  Profile p;
  std::unique_ptr<Backend> backend;
  bool gpu = false;
  if (o.device == "cpu") {
    backend = make_cpu_backend(o.threads);
    const CpuInfo& cpu = cpu_info();
    p.kind = "cpu";
    p.name = cpu.model;
    p.id = "cpu";
    p.cores = cpu.logical_cores;
    p.threads = o.threads > 0 ? o.threads : cpu.logical_cores;
    p.isa = cpu.isa;
  } else if (o.device == "cuda" || o.device.rfind("cuda:", 0) == 0) {
    const std::string n = o.device == "cuda" ? "0" : o.device.substr(5);
    if (n.empty() || n.size() > 3 || !std::all_of(n.begin(), n.end(), ::isdigit))
      throw Error("--device " + o.device, "expected cpu or cuda:N");
    const int ordinal = std::stoi(n);
    backend = make_cuda_backend(ordinal);
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
  } else {
    throw Error("--device " + o.device, "expected cpu or cuda:N");
  }
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
  {
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
    say(fmt::format(
        "  backend call {:.1f} ns{}", p.call_seconds * 1e9,
        gpu ? "" : fmt::format(", OpenMP fork-join {:.2f} us", p.fork_join_seconds * 1e6)));
  }

  // ---- GPU: launch, graph, sync, host-device copies ----
  if (gpu) {
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
                    p.launch_seconds * 1e6, p.graph_launch_seconds * 1e6,
                    p.graph_node_seconds * 1e6, p.sync_seconds * 1e6));

    const std::size_t bytes = o.quick ? (16u << 20) : (256u << 20);
    Block dev(be, bytes);
    std::vector<unsigned char> pageable(bytes, 1);
    char small[64] = {};
    p.h2d_latency_seconds = bench.per_call_eager([&] { be.upload(dev.p, small, 4); }, 200);
    p.d2h_latency_seconds = bench.per_call_eager([&] { be.download(small, dev.p, 4); }, 200);
    const int reps = o.quick ? 3 : 5;
    p.h2d_bytes_per_second.pageable =
        double(bytes) /
        bench.per_call_eager([&] { be.upload(dev.p, pageable.data(), bytes); }, reps);
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

  // ---- streaming memory bandwidth: ReLU over a large array, read + write ----
  {
    const int64_t n = o.quick ? (int64_t{1} << 23) : (int64_t{1} << 26);
    Block x(be, static_cast<std::size_t>(n) * 4), y(be, static_cast<std::size_t>(n) * 4);
    be.fill(x.f(), 0.5f, n);
    const double t =
        bench.per_call([&] { be.activation_forward(ActivationKind::relu, x.f(), y.f(), 1, n); });
    p.memory_bytes_per_second = 8.0 * double(n) / t;
    say(fmt::format("  memory (streaming, {} MB in + out) {:.1f} GB/s", n * 4 >> 20,
                    p.memory_bytes_per_second / 1e9));
  }

  // ---- elementwise kernels: time by size ----
  {
    const std::vector<int64_t> sizes = o.quick ? kernel_sizes(6, 18, 3) : kernel_sizes(6, 22, 1);
    const int64_t nmax = sizes.back();
    Block a(be, nmax * 4), b(be, nmax * 4), c(be, nmax * 4), d(be, nmax * 4), mask(be, nmax);
    // Random values of both signs, as activations and gradients are: the CPU's loops branch on
    // each element's sign or mask, and a constant input would make every branch predictable.
    {
      std::vector<float> host(static_cast<std::size_t>(nmax));
      uint64_t h = 0x2545F4914F6CDD1Dull;
      for (float& v : host) {
        h ^= h << 13, h ^= h >> 7, h ^= h << 17;
        v = static_cast<float>(static_cast<double>(h >> 11) * 0x1p-53 * 2.0 - 1.0);
      }
      be.upload(a.p, host.data(), host.size() * 4);
      for (float& v : host) v = -v * 0.5f;
      be.upload(b.p, host.data(), host.size() * 4);
    }
    be.fill(c.f(), 0.0f, nmax);
    // Each call's inputs (a, b) handed over from the pool's threads first, as a GEMM leaves them.
    // Before each call (CPU), the state a training step leaves: a new step number (new dropout
    // masks), inputs at a new place in a larger buffer (new data: a branch predictor must not
    // learn the pattern from the previous call), handed over from the pool's threads as a GEMM
    // leaves them.
    int64_t off = 0, step_no = 0;
    auto A = [&] { return a.f() + off; };
    auto B = [&] { return b.f() + off; };
    auto M = [&] { return mask.as<uint8_t>() + off; };
    auto curve = [&](const std::string& name, const std::vector<int64_t>& elements,
                     const std::function<void(int64_t)>& op) {
      std::vector<KernelSample> s;
      for (int64_t e : elements) {
        off = 0;
        std::function<void()> setup;
        if (!gpu)
          setup = [&, e] {
            const int64_t len = std::min(e, nmax);
            off = off + 2 * len <= nmax ? off + len : 0;
            handoff(A(), len, true);
            handoff(B(), len, true);
            StepCounters sc;
            sc.step = ++step_no;
            be.upload(ctr, &sc, sizeof sc);
          };
        s.push_back({e, bench.per_call_after(setup, [&] { op(e); })});
      }
      off = 0;
      p.kernels[name] = std::move(s);
    };
    curve("relu_forward", sizes,
          [&](int64_t n) { be.activation_forward(ActivationKind::relu, A(), c.f(), 1, n); });
    curve("relu_backward", sizes,
          [&](int64_t n) { be.activation_backward(ActivationKind::relu, A(), B(), c.f(), 1, n); });
    curve("copy", sizes,
          [&](int64_t n) { be.activation_forward(ActivationKind::linear, A(), c.f(), 1, n); });
    if (!o.quick) {
      for (ActivationKind act : {ActivationKind::sigmoid, ActivationKind::tanh}) {
        const std::string an(activation_name(act));
        curve(an + "_forward", sizes,
              [&, act](int64_t n) { be.activation_forward(act, A(), c.f(), 1, n); });
        curve(an + "_backward", sizes,
              [&, act](int64_t n) { be.activation_backward(act, A(), B(), c.f(), 1, n); });
      }
    }
    // The masks dropout_forward draws (at every offset) serve the two backward kernels.
    be.dropout_forward(a.f(), c.f(), mask.as<uint8_t>(), 1, nmax, 0.2f, 1, 1, ctr);
    curve("dropout_forward", sizes,
          [&](int64_t n) { be.dropout_forward(A(), c.f(), M(), 1, n, 0.2f, 1, 1, ctr); });
    be.dropout_forward(a.f(), c.f(), mask.as<uint8_t>(), 1, nmax, 0.2f, 1, 1, ctr);
    curve("dropout_backward", sizes,
          [&](int64_t n) { be.dropout_backward(B(), M(), c.f(), 1, n, 0.2f); });
    curve("relu_dropout_backward", sizes,
          [&](int64_t n) { be.relu_dropout_backward(A(), M(), B(), c.f(), 1, n, 0.2f); });
    be.fill(d.f(), 0.0f, nmax);
    // Rows of 10 classes (MNIST's output).
    std::vector<int64_t> row_elems;
    for (int64_t r = 1; r * 10 <= std::min<int64_t>(nmax, 10 << 14); r *= 2)
      row_elems.push_back(r * 10);
    {
      Block labels(be, (nmax / 10 + 1) * 4);
      curve("loss_sparse_softmax", row_elems, [&](int64_t n) {
        be.loss_forward_backward(LossKind::sparse_categorical_crossentropy, ActivationKind::softmax,
                                 A(), labels.f(), nullptr, c.f(), n / 10, 10, ctr);
      });
      curve("softmax_forward", row_elems, [&](int64_t n) {
        be.activation_forward(ActivationKind::softmax, A(), c.f(), n / 10, 10);
      });
    }
    // Batches of MNIST rows (784 floats) gathered from a data set of 60,000 rows (16,384 quick)
    // in a shuffled order, a different stretch of it each call, as training reads them: each row
    // comes from memory, not from a cache the previous call warmed. And the labels likewise.
    {
      const int64_t cols = 784, set_rows = o.quick ? 16384 : 60000, rows_max = 1024;
      Block set(be, static_cast<std::size_t>(set_rows * cols) * 4),
          labels(be, static_cast<std::size_t>(set_rows) * 4);
      be.fill(set.f(), 0.5f, set_rows * cols);
      Block idx(be, static_cast<std::size_t>(set_rows) * 4),
          dst(be, static_cast<std::size_t>(rows_max * cols) * 4);
      std::vector<int32_t> order(static_cast<std::size_t>(set_rows));
      uint64_t h = 0x9E3779B97F4A7C15ull;
      for (int64_t i = 0; i < set_rows; ++i)
        order[static_cast<std::size_t>(i)] = static_cast<int32_t>(i);
      for (int64_t i = set_rows - 1; i > 0; --i) {  // a fixed shuffle
        h ^= h << 13, h ^= h >> 7, h ^= h << 17;
        std::swap(order[static_cast<std::size_t>(i)], order[h % static_cast<uint64_t>(i + 1)]);
      }
      be.upload(idx.p, order.data(), order.size() * 4);
      StepCounters zero;
      be.upload(ctr + 1, &zero, sizeof zero);
      int64_t offset = 0;
      auto next = [&](int64_t rows) {
        if (offset + rows > set_rows) offset = 0;
        const int32_t* at = idx.as<int32_t>() + offset;
        offset += rows;
        return at;
      };
      std::vector<int64_t> rows_elems, label_elems;
      for (int64_t r = 1; r <= rows_max; r *= 2) rows_elems.push_back(r * cols);
      for (int64_t r = 1; r <= rows_max; r *= 2) label_elems.push_back(r);
      curve("gather_rows", rows_elems, [&](int64_t n) {
        be.gather_rows(set.f(), cols, next(n / cols), 0, ctr + 1, n / cols, dst.f());
      });
      curve("gather_labels", label_elems,
            [&](int64_t n) { be.gather_rows(labels.f(), 1, next(n), 0, ctr + 1, n, dst.f()); });
    }
    // Adam on one parameter tensor of n elements.
    {
      const OptimizerConfig adam = Adam();
      curve("adam", sizes, [&](int64_t n) {
        const ParamSlot slot{A(), B(), c.f(), d.f(), n, true};
        be.optimizer_step(adam, std::span<const ParamSlot>(&slot, 1), ctr);
      });
    }
    say(fmt::format("  elementwise kernels: {} curves of {} sizes ({} to {} elements)",
                    p.kernels.size(), sizes.size(), sizes.front(), sizes.back()));
  }

  // ---- GEMMs, as the dense layer calls them ----
  {
    const GemmGrid g = gemm_grid(o.quick);
    const int64_t B = g.batches.back(), I = g.ins.back(), O = g.outs.back();
    const int64_t W = std::max(I, O);
    Block x(be, B * W * 4), w(be, W * W * 4), bias(be, W * 4), y(be, B * W * 4), dy(be, B * W * 4),
        dw(be, W * W * 4), db(be, W * 4), dx(be, B * W * 4);
    be.fill(x.f(), 0.01f, B * W);
    be.fill(w.f(), 0.01f, W * W);
    be.fill(dy.f(), 0.01f, B * W);
    double best = 0;
    for (int64_t batch : g.batches)
      for (int64_t in : g.ins)
        for (int64_t out : g.outs) {
          const double flops = 2.0 * double(batch) * double(in) * double(out);
          // Before each call, its inputs as a training step leaves them: the layer input from the
          // op before (a serial loop at small sizes, the pool above 2^15 elements), the weights
          // from the optimizer's threaded update, the incoming gradient from the pool.
          const bool x_pool = batch * in >= (int64_t{1} << 15);
          const double tf =
              bench.per_call_after(gpu ? std::function<void()>() : std::function<void()>([&] {
                                     handoff(x.f(), batch * in, x_pool);
                                     handoff(w.f(), in * out, true);
                                   }),
                                   [&] {
                                     be.dense_forward(x.f(), w.f(), bias.f(), y.f(), batch, in, out,
                                                      ActivationKind::relu);
                                   });
          const double tw = bench.per_call_after(
              gpu ? std::function<void()>() : std::function<void()>([&] {
                handoff(x.f(), batch * in, x_pool);
                handoff(dy.f(), batch * out, true);
              }),
              [&] { be.dense_backward_weights(x.f(), dy.f(), dw.f(), db.f(), batch, in, out); });
          const double ti = bench.per_call_after(
              gpu ? std::function<void()>() : std::function<void()>([&] {
                handoff(dy.f(), batch * out, true);
                handoff(w.f(), in * out, true);
              }),
              [&] { be.dense_backward_input(dy.f(), w.f(), dx.f(), batch, in, out); });
          p.gemm.push_back({"forward", batch, out, in, flops / tf});
          p.gemm.push_back({"backward_weights", in, out, batch, flops / tw});
          p.gemm.push_back({"backward_input", batch, in, out, flops / ti});
          best = std::max({best, flops / tf, flops / tw, flops / ti});
        }
    say(fmt::format("  GEMM: {} shapes x 3 ops (batch {}..{}, widths {}..{}), best {:.1f} GFLOP/s",
                    g.batches.size() * g.ins.size() * g.outs.size(), g.batches.front(),
                    g.batches.back(), std::min(g.ins.front(), g.outs.front()), std::max(I, O),
                    best / 1e9));
  }

  p.calibration_seconds = since(start);
  say(fmt::format("calibrated in {:.1f} s", p.calibration_seconds));
  return p;
}

}  // namespace crossover::perf
