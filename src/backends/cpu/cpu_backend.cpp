// The CPU backend: GEMMs from oneDNN (see docs/GEMM.md for why), everything else as plain loops
// that the compiler vectorises, threaded with OpenMP (the runtime oneDNN itself uses, so the two
// share one thread pool). A step allocates nothing: every buffer comes from the model's plan.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <oneapi/dnnl/dnnl.h>
#include <string>

#include "backends/backend.h"
#include "backends/kernel_math.h"
#include "core/aligned.h"
#include "core/error.h"
#include "core/philox.h"

namespace crossover {
namespace {

// Elementwise loops below this many elements run on one thread: a fork-join costs more.
constexpr int64_t kParallelThreshold = 1 << 15;

// Row-major C(m, n) = alpha * op(A) . op(B) + beta * C.
void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl_status_t s = dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (s != dnnl_success)
    throw Error("cpu", "oneDNN sgemm failed (status " + std::to_string(static_cast<int>(s)) +
                           ") for shape m=" + std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k));
}

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) {
    threads_ = threads > 0 ? threads : omp_get_num_procs();
    omp_set_num_threads(threads_);
  }

  std::string device_name() const override { return "cpu"; }

  void* allocate(std::size_t bytes) override {
    return make_aligned<unsigned char>(bytes).release();
  }
  void release(void* p) noexcept override { std::free(p); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void download_async(void* dst, const void* src, std::size_t bytes) override {
    download(dst, src, bytes);
  }
  void fill(float* dst, float value, int64_t n) override { std::fill(dst, dst + n, value); }
  void synchronize() override {}

  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool) override {
    struct Replay final : StepGraph {
      std::function<void()> fn;
      void replay() override { fn(); }
    };
    auto g = std::make_unique<Replay>();
    g->fn = std::move(enqueue);
    return g;
  }

  void gather_rows(const float* src, int64_t cols, const int32_t* indices, int64_t batch,
                   const StepCounters* counters, int64_t m, float* dst) override {
    const int32_t* idx = indices + counters->batch_index * batch;
    const std::size_t row_bytes = static_cast<std::size_t>(cols) * sizeof(float);
    for (int64_t i = 0; i < m; ++i)
      std::memcpy(dst + i * cols, src + static_cast<int64_t>(idx[i]) * cols, row_bytes);
  }

  void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m,
                     int64_t k, int64_t n, ActivationKind act) override {
    sgemm('N', 'N', m, n, k, 1.0f, x, k, w, n, 0.0f, y, n);
    if (b == nullptr && act == ActivationKind::linear) return;
    // The output tile is still in cache: adding the bias and clamping now costs one pass of L2.
    parallel_rows(m, n, [&](int64_t r) {
      float* row = y + r * n;
      if (b) {
        if (act == ActivationKind::relu) {
          for (int64_t j = 0; j < n; ++j) row[j] = std::max(row[j] + b[j], 0.0f);
        } else {
          for (int64_t j = 0; j < n; ++j) row[j] += b[j];
        }
      } else if (act == ActivationKind::relu) {
        for (int64_t j = 0; j < n; ++j) row[j] = std::max(row[j], 0.0f);
      }
    });
  }

  void dense_backward_weights(const float* x, const float* dy, float* dw, float* db, int64_t m,
                              int64_t k, int64_t n) override {
    sgemm('T', 'N', k, n, m, 1.0f, x, k, dy, n, 0.0f, dw, n);
    if (db) {
      std::fill(db, db + n, 0.0f);
      for (int64_t r = 0; r < m; ++r) {
        const float* row = dy + r * n;
        for (int64_t j = 0; j < n; ++j) db[j] += row[j];
      }
    }
  }

  void dense_backward_input(const float* dy, const float* w, float* dx, int64_t m, int64_t k,
                            int64_t n) override {
    sgemm('N', 'T', m, k, n, 1.0f, dy, n, w, n, 0.0f, dx, k);
  }

  void activation_forward(ActivationKind act, const float* x, float* y, int64_t m,
                          int64_t n) override {
    const int64_t total = m * n;
    switch (act) {
      case ActivationKind::linear:
        if (x != y) std::copy(x, x + total, y);
        return;
      case ActivationKind::relu:
        parallel_for(total, [&](int64_t i) { y[i] = std::max(x[i], 0.0f); });
        return;
      case ActivationKind::sigmoid:
        parallel_for(total, [&](int64_t i) { y[i] = sigmoid(x[i]); });
        return;
      case ActivationKind::tanh:
        parallel_for(total, [&](int64_t i) { y[i] = std::tanh(x[i]); });
        return;
      case ActivationKind::softmax:
        parallel_rows(m, n, [&](int64_t r) { softmax_row(x + r * n, y + r * n, n); });
        return;
    }
  }

  void activation_backward(ActivationKind act, const float* y, const float* dy, float* dx, int64_t m,
                           int64_t n) override {
    const int64_t total = m * n;
    switch (act) {
      case ActivationKind::linear:
        if (dx != dy) std::copy(dy, dy + total, dx);
        return;
      case ActivationKind::relu:
        parallel_for(total, [&](int64_t i) { dx[i] = y[i] > 0.0f ? dy[i] : 0.0f; });
        return;
      case ActivationKind::sigmoid:
        parallel_for(total, [&](int64_t i) { dx[i] = dy[i] * y[i] * (1.0f - y[i]); });
        return;
      case ActivationKind::tanh:
        parallel_for(total, [&](int64_t i) { dx[i] = dy[i] * (1.0f - y[i] * y[i]); });
        return;
      case ActivationKind::softmax:
        // dx_j = y_j * (dy_j - sum_i dy_i y_i)
        parallel_rows(m, n, [&](int64_t r) {
          const float* yr = y + r * n;
          const float* dyr = dy + r * n;
          float* dxr = dx + r * n;
          float dot = 0.0f;
          for (int64_t j = 0; j < n; ++j) dot += dyr[j] * yr[j];
          for (int64_t j = 0; j < n; ++j) dxr[j] = yr[j] * (dyr[j] - dot);
        });
        return;
    }
  }

  void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n, float rate,
                       uint64_t seed, uint32_t layer, const StepCounters* counters) override {
    const float scale = 1.0f / (1.0f - rate);
    const uint64_t step = static_cast<uint64_t>(counters->step);
    parallel_for(m * n, [&](int64_t i) {
      const bool keep = dropout_keep(seed, layer, step, static_cast<uint64_t>(i), rate);
      mask[i] = keep;
      y[i] = keep ? x[i] * scale : 0.0f;
    });
  }

  void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m, int64_t n,
                        float rate) override {
    const float scale = 1.0f / (1.0f - rate);
    parallel_for(m * n, [&](int64_t i) { dx[i] = mask[i] ? dy[i] * scale : 0.0f; });
  }

  void relu_dropout_backward(const float* y_after_dropout, const uint8_t* mask, const float* dy,
                             float* dz, int64_t m, int64_t n, float rate) override {
    // y > 0 exactly when the unit was kept and its ReLU output was positive.
    const float scale = 1.0f / (1.0f - rate);
    (void)mask;
    parallel_for(m * n,
                 [&](int64_t i) { dz[i] = y_after_dropout[i] > 0.0f ? dy[i] * scale : 0.0f; });
  }

  void loss_forward_backward(LossKind loss, ActivationKind act, const float* out,
                             const float* targets, float* probs, float* d_out, int64_t m,
                             int64_t c, StepCounters* counters) override {
    double loss_sum = 0.0, correct = 0.0;
    const float inv_m = 1.0f / static_cast<float>(m);
    for (int64_t r = 0; r < m; ++r) {
      const float* z = out + r * c;
      float* p = probs ? probs + r * c : scratch_row(c);
      float* d = d_out ? d_out + r * c : nullptr;
      LossRow row = loss_row(loss, act, z, targets, r, c, p, d, inv_m);
      loss_sum += row.loss;
      correct += row.correct;
    }
    if (counters) {
      counters->loss_sum += loss_sum;
      counters->correct_sum += correct;
      counters->sample_count += static_cast<double>(m);
    }
  }

  void optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                      StepCounters* counters) override {
    const int64_t t = counters->step + 1;
    const float lr = scheduled_learning_rate(config.schedule, counters->step);
    counters->learning_rate = lr;
    float grad_scale = 1.0f;
    if (config.clipnorm > 0.0f) {
      double sum_squares = 0.0;
      for (const ParamSlot& p : params)
        for (int64_t i = 0; i < p.n; ++i) sum_squares += static_cast<double>(p.grad[i]) * p.grad[i];
      grad_scale = clipnorm_scale(config.clipnorm, sum_squares);
    }
    counters->grad_scale = grad_scale;
    const UpdateConstants uc = update_constants(config, lr, t);
    for (const ParamSlot& p : params) {
      parallel_for(p.n, [&](int64_t i) {
        update_one(config, uc, grad_scale, p.decay, p.value[i], p.grad[i], p.slot1, p.slot2, i);
      });
    }
    counters->step += 1;
    counters->batch_index += 1;
  }

  void advance_batch(StepCounters* counters) override { counters->batch_index += 1; }

 private:
  template <class F>
  void parallel_for(int64_t total, F&& f) {
    if (total < kParallelThreshold || threads_ == 1) {
      for (int64_t i = 0; i < total; ++i) f(i);
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < total; ++i) f(i);
  }
  template <class F>
  void parallel_rows(int64_t m, int64_t n, F&& f) {
    if (m * n < kParallelThreshold || threads_ == 1) {
      for (int64_t r = 0; r < m; ++r) f(r);
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) f(r);
  }

  float* scratch_row(int64_t c) {
    if (static_cast<int64_t>(scratch_size_) < c) {
      scratch_ = make_aligned<float>(static_cast<std::size_t>(c));
      scratch_size_ = static_cast<std::size_t>(c);
    }
    return scratch_.get();
  }

  int threads_ = 1;
  std::unique_ptr<float[], AlignedFree> scratch_;
  std::size_t scratch_size_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace crossover
