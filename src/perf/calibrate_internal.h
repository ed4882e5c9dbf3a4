// Internal to src/perf's calibration (calibrate.cpp, shape_calibration.cpp,
// allreduce_calibration.cpp): the clock, the timing harness and the benches they share.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "perf/profile.h"

namespace crossover::perf {

using Clock = std::chrono::steady_clock;
// Seconds from `a` to now.
double since(Clock::time_point a);
// The middle value of v (the mean of the two middle ones for an even count); v is reordered.
double median(std::vector<double>& v);
// Now, in UTC, as ISO 8601 (a profile's `created`).
std::string iso_now();
// Rewrites n floats at p as the op before hands them over in training (CPU): by the pool's threads.
void handoff(float* p, int64_t n, bool all_threads);
// Uploads n random values of both signs, times `scale`, to `dst`.
void upload_random(Backend& be, float* dst, int64_t n, uint64_t seed, float scale);
// The optimizer unit of kind `name` ("adam") with Keras's defaults; null for none.
const OptimizerConfig* optimizer_for(const std::string& name);

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

// The host-side costs into p: a backend call, an OpenMP fork-join (CPU).
void measure_host(Backend& be, bool gpu, StepCounters* ctr, Profile& p);
// The streaming memory bandwidth into p: ReLU over a large array, read + write.
void measure_memory(Backend& be, Bench& bench, bool quick, Profile& p);
// The read+write bandwidth of each level of the CPU's memory hierarchy into p.memory_levels.
void measure_memory_levels(Backend& be, Bench& bench, Profile& p);

}  // namespace crossover::perf
