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
#include <set>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda_info.h"
#include "core/error.h"
#include "core/machine.h"
#include "nn/layers.h"
#include "nn/optimizers.h"

#ifdef CROSSOVER_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace crossover::perf {

namespace {
const char* gemm_op_of(const std::string& kernel) {
  if (kernel == "gemm_forward") return "forward";
  if (kernel == "gemm_backward_weights") return "backward_weights";
  if (kernel == "gemm_backward_input") return "backward_input";
  return nullptr;
}

// The middle value (the mean of the two middle ones for an even count); v is reordered.
double median(std::vector<double>& v) {
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  return (*mid + *std::max_element(v.begin(), mid)) / 2;
}
}  // namespace

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
  // `max_reps_after`: the most calls per batch of per_call_after (each call is timed by itself,
  // so fewer calls time as well; its set-up, untimed, is what a smaller cap saves).
  Bench(Backend& be, bool gpu, bool quick, int max_reps_after = 5000)
      : be_(be), gpu_(gpu), quick_(quick), max_reps_after_(max_reps_after) {}
  // Past `deadline`, a measurement stops after its first batch (CPU; the on-demand calibration's
  // time budget, which a loaded machine, where each fork-join waits for a scheduler slice, would
  // otherwise overrun many times).
  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }

  // Seconds per call of `op`: the median of a few batches of back-to-back calls, each batch long
  // enough to time well. The median, not the fastest: a batch now and then loses its threads to
  // another process for a scheduler slice (the median ignores it), and now and then runs in a
  // lucky moment of a shared host that training's thousands of steps do not get (the fastest
  // batch predicted steps 20-40% too short on a 2-core VM, bench/RESULTS.md). On a GPU the batch
  // is a replayed graph (device time, with each node's overhead; the per-launch cost is measured
  // separately).
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
      for (int b = 0; b < batches && !(b > 0 && past_deadline()); ++b) {
        const auto t0 = Clock::now();
        for (int r = 0; r < reps; ++r) op();
        be_.synchronize();
        per.push_back(since(t0) / reps);
      }
    }
    return median(per);
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
    const int reps = static_cast<int>(std::clamp(target / one, 1.0, double(max_reps_after_)));
    std::vector<double> per;
    for (int b = 0; b < batches && !(b > 0 && past_deadline()); ++b) {
      double total = 0;
      int done = 0;
      for (; done < reps && !(done >= 8 && past_deadline()); ++done) {
        setup();
        const auto t0 = Clock::now();
        op();
        total += since(t0);
      }
      per.push_back(total / done);
    }
    return median(per);
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
  bool past_deadline() const { return deadline_ && Clock::now() > *deadline_; }

  Backend& be_;
  bool gpu_, quick_;
  int max_reps_after_;
  std::optional<Clock::time_point> deadline_;
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

// The elementwise kernels of a training step, each timed as training calls it (docs/PROFILE.md):
// before each call (CPU), the state a step leaves: a new step number (new dropout masks), the
// inputs at a new place in a larger buffer (new data: a branch predictor must not learn the
// pattern from the previous call), handed over from the pool's threads as a GEMM leaves them.
// Batches are gathered from a 60,000-row data set (16,384 quick) in a shuffled order, a new
// stretch each call. Shared by the full grid (calibrate) and the on-demand shapes.
class KernelBench {
 public:
  // `nmax`: the largest flat size a call will get.
  KernelBench(Backend& be, Bench& bench, bool gpu, bool quick, StepCounters* ctr, int64_t nmax)
      : be_(be),
        bench_(bench),
        gpu_(gpu),
        quick_(quick),
        ctr_(ctr),
        nmax_(nmax),
        a_(be, nmax * 4),
        b_(be, nmax * 4),
        c_(be, nmax * 4),
        d_(be, nmax * 4),
        mask_(be, nmax) {
    upload_random(be, a_.f(), nmax, 0x2545F4914F6CDD1Dull, 1.0f);
    upload_random(be, b_.f(), nmax, 0x2545F4914F6CDD1Dull, -0.5f);
    be.fill(c_.f(), 0.0f, nmax);
    be.fill(d_.f(), 0.0f, nmax);
    // Masks at every offset, for the two backward kernels that read them.
    be.dropout_forward(a_.f(), c_.f(), mask_.as<uint8_t>(), 1, nmax, 0.2f, 1, 1, ctr_, 0);
    StepCounters zero;
    be.upload(ctr_ + 1, &zero, sizeof zero);
  }

  static bool knows(const std::string& name) {
    static const std::set<std::string> flat{
        "relu_forward",          "relu_backward",       "copy",
        "sigmoid_forward",       "sigmoid_backward",    "tanh_forward",
        "tanh_backward",         "dropout_forward",     "dropout_backward",
        "relu_dropout_backward", "loss_sparse_softmax", "softmax_forward",
        "gather_rows",           "gather_labels"};
    return flat.count(name) > 0 || optimizer_for(name) != nullptr;
  }

  // Seconds of one call of kernel `name` on `elements` elements, `rows` rows of them (the batch's
  // rows for gathers, the loss and softmax; ignored by the flat kernels).
  double seconds(const std::string& name, int64_t elements, int64_t rows) {
    const int64_t e = elements;
    rows = std::clamp<int64_t>(rows, 1, e);
    const int64_t cols = e / rows;
    std::function<void()> op;
    std::optional<ActivationKind> act_f, act_b;
    if (name == "relu_forward") act_f = ActivationKind::relu;
    if (name == "copy") act_f = ActivationKind::linear;
    if (name == "sigmoid_forward") act_f = ActivationKind::sigmoid;
    if (name == "tanh_forward") act_f = ActivationKind::tanh;
    if (name == "relu_backward") act_b = ActivationKind::relu;
    if (name == "sigmoid_backward") act_b = ActivationKind::sigmoid;
    if (name == "tanh_backward") act_b = ActivationKind::tanh;
    if (act_f) {
      op = [&, a = *act_f] { be_.activation_forward(a, 0.0f, A(), c_.f(), 1, e); };
    } else if (act_b) {
      op = [&, a = *act_b] { be_.activation_backward(a, 0.0f, nullptr, A(), B(), c_.f(), 1, e); };
    } else if (name == "dropout_forward") {
      op = [&] { be_.dropout_forward(A(), c_.f(), M(), 1, e, 0.2f, 1, 1, ctr_, 0); };
    } else if (name == "dropout_backward") {
      op = [&] { be_.dropout_backward(B(), M(), c_.f(), 1, e, 0.2f); };
    } else if (name == "relu_dropout_backward") {
      op = [&] { be_.relu_dropout_backward(A(), M(), B(), c_.f(), 1, e, 0.2f); };
    } else if (name == "loss_sparse_softmax") {
      op = [&] {
        be_.loss_forward_backward(LossKind::sparse_categorical_crossentropy,
                                  ActivationKind::softmax, A(), d_.f(), nullptr, nullptr, c_.f(),
                                  rows, cols, ctr_, rows);
      };
    } else if (name == "softmax_forward") {
      op = [&] { be_.activation_forward(ActivationKind::softmax, 0.0f, A(), c_.f(), rows, cols); };
    } else if (name == "gather_rows" || name == "gather_labels") {
      Gather& g = gather(name == "gather_labels" ? 1 : cols, rows);
      op = [&] {
        if (g.offset + rows > g.rows) g.offset = 0;
        const int32_t* at = g.idx.as<int32_t>() + g.offset;
        g.offset += rows;
        be_.gather_rows(g.set.f(), g.cols, at, 0, ctr_ + 1, rows, g.dst->f());
      };
    } else if (const OptimizerConfig* opt = optimizer_for(name)) {
      op = [&, opt] {
        const ParamSlot slot{A(), B(), c_.f(), d_.f(), e, true};
        be_.optimizer_step(*opt, std::span<const ParamSlot>(&slot, 1), ctr_);
      };
    } else {
      throw Error("calibrate", "no way to measure kernel '" + name + "'");
    }
    off_ = 0;
    std::function<void()> setup;
    if (!gpu_)
      setup = [&] {
        const int64_t len = std::min(e, nmax_);
        off_ = off_ + 2 * len <= nmax_ ? off_ + len : 0;
        handoff(A(), len, true);
        handoff(B(), len, true);
        StepCounters sc;
        sc.step = ++step_no_;
        be_.upload(ctr_, &sc, sizeof sc);
      };
    const double t = bench_.per_call_after(setup, op);
    off_ = 0;
    return t;
  }

 private:
  struct Gather {
    Block set, idx;
    int64_t rows = 0, cols = 0, offset = 0;
    std::unique_ptr<Block> dst;
    int64_t dst_rows = 0;
    Gather(Backend& be, int64_t r, int64_t c)
        : set(be, static_cast<std::size_t>(r * c) * 4),
          idx(be, static_cast<std::size_t>(r) * 4),
          rows(r),
          cols(c) {}
  };
  // A data set of `cols` columns to gather batches of up to `rows` rows from.
  Gather& gather(int64_t cols, int64_t rows) {
    auto it = gathers_.find(cols);
    if (it == gathers_.end()) {
      const int64_t want = quick_ ? 16384 : 60000;
      const int64_t set_rows =
          std::max<int64_t>(std::min<int64_t>(want, (int64_t{1} << 26) / cols), 2 * rows);
      auto g = std::make_unique<Gather>(be_, set_rows, cols);
      be_.fill(g->set.f(), 0.5f, set_rows * cols);
      std::vector<int32_t> order(static_cast<std::size_t>(set_rows));
      uint64_t h = 0x9E3779B97F4A7C15ull;
      for (int64_t i = 0; i < set_rows; ++i)
        order[static_cast<std::size_t>(i)] = static_cast<int32_t>(i);
      for (int64_t i = set_rows - 1; i > 0; --i) {  // a fixed shuffle
        h ^= h << 13, h ^= h >> 7, h ^= h << 17;
        std::swap(order[static_cast<std::size_t>(i)], order[h % static_cast<uint64_t>(i + 1)]);
      }
      be_.upload(g->idx.p, order.data(), order.size() * 4);
      it = gathers_.emplace(cols, std::move(g)).first;
    }
    Gather& g = *it->second;
    if (g.dst_rows < rows) {
      g.dst = std::make_unique<Block>(be_, static_cast<std::size_t>(rows * cols) * 4);
      g.dst_rows = rows;
    }
    return g;
  }
  float* A() { return a_.f() + off_; }
  float* B() { return b_.f() + off_; }
  uint8_t* M() { return mask_.as<uint8_t>() + off_; }

  Backend& be_;
  Bench& bench_;
  bool gpu_, quick_;
  StepCounters* ctr_;
  int64_t nmax_;
  Block a_, b_, c_, d_, mask_;
  int64_t off_ = 0, step_no_ = 0;
  std::map<int64_t, std::unique_ptr<Gather>> gathers_;
};

// The dense layer's three GEMMs, each timed with its inputs as a training step leaves them: the
// layer input from the op before (a serial loop at small sizes, the pool above 2^15 elements),
// the weights from the optimizer's threaded update, the incoming gradient from the pool.
class GemmBench {
 public:
  GemmBench(Backend& be, Bench& bench, bool gpu, int64_t max_batch, int64_t max_width)
      : be_(be),
        bench_(bench),
        gpu_(gpu),
        x_(be, max_batch * max_width * 4),
        w_(be, max_width * max_width * 4),
        bias_(be, max_width * 4),
        y_(be, max_batch * max_width * 4),
        dy_(be, max_batch * max_width * 4),
        dw_(be, max_width * max_width * 4),
        db_(be, max_width * 4),
        dx_(be, max_batch * max_width * 4) {
    be.fill(x_.f(), 0.01f, max_batch * max_width);
    be.fill(w_.f(), 0.01f, max_width * max_width);
    be.fill(dy_.f(), 0.01f, max_batch * max_width);
    be.fill(bias_.f(), 0.0f, max_width);
  }

  // The rate (FLOP/s) of `op` ("forward", "backward_weights", "backward_input") for a layer
  // in -> out at `batch` rows, as a GemmSample.
  GemmSample measure(const std::string& op, int64_t batch, int64_t in, int64_t out) {
    const double flops = 2.0 * double(batch) * double(in) * double(out);
    const bool x_pool = batch * in >= (int64_t{1} << 15);
    auto cpu_setup = [&](std::function<void()> f) {
      return gpu_ ? std::function<void()>() : std::move(f);
    };
    if (op == "forward") {
      const double t =
          bench_.per_call_after(cpu_setup([&] {
                                  handoff(x_.f(), batch * in, x_pool);
                                  handoff(w_.f(), in * out, true);
                                }),
                                [&] {
                                  be_.dense_forward(x_.f(), w_.f(), bias_.f(), y_.f(), batch, in,
                                                    out, ActivationKind::relu);
                                });
      return {"forward", batch, out, in, flops / t};
    }
    if (op == "backward_weights") {
      const double t = bench_.per_call_after(
          cpu_setup([&] {
            handoff(x_.f(), batch * in, x_pool);
            handoff(dy_.f(), batch * out, true);
          }),
          [&] { be_.dense_backward_weights(x_.f(), dy_.f(), dw_.f(), db_.f(), batch, in, out); });
      return {"backward_weights", in, out, batch, flops / t};
    }
    const double t = bench_.per_call_after(
        cpu_setup([&] {
          handoff(dy_.f(), batch * out, true);
          handoff(w_.f(), in * out, true);
        }),
        [&] { be_.dense_backward_input(dy_.f(), w_.f(), dx_.f(), batch, in, out); });
    return {"backward_input", batch, in, out, flops / t};
  }

 private:
  Backend& be_;
  Bench& bench_;
  bool gpu_;
  Block x_, w_, bias_, y_, dy_, dw_, db_, dx_;
};

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

namespace crossover::perf {

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

// ---- the ranks' allreduce --------------------------------------------------------------------
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
