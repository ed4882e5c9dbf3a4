// The CPU backend's class (backends/cpu), private to its files: each defines one group of its
// members (cpu_backend.cpp and the cpu_*.cpp beside it); the threading helpers are inline here.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include "backends/backend.h"
#include "backends/cpu/dnnl_conv.h"
#include "backends/cpu/dnnl_matmul.h"
#include "backends/cpu/dnnl_rnn.h"
#include "backends/kernel_math.h"
#include "core/aligned.h"
#include "core/bits.h"
#include "core/error.h"
#include "core/machine.h"

namespace crossover::cpu {

// Elementwise loops below this many elements run on one thread: a fork-join costs more.
inline constexpr int64_t kParallelThreshold = 1 << 15;

// Adam with amsgrad needs its third slot: a caller that gives none is an internal error.
inline void require_amsgrad_slots(const OptimizerConfig& config,
                                  std::span<const ParamSlot> params) {
  if (config.kind != OptimizerKind::adam || !config.args.adam.amsgrad) return;
  for (const ParamSlot& p : params)
    if (p.n > 0 && p.slot3 == nullptr)
      throw Error("cpu", "optimizer_step: Adam with amsgrad needs a third slot (velocity_hat)");
}

// g when y > 0, else +0, in integer operations that vectorise (a float select stays a branch):
// a positive float is a positive int32, and the mask is all ones or all zeros.
inline float keep_if_positive(float y, float g) {
  const uint32_t mask = 0u - static_cast<uint32_t>(crossover::bit_cast<int32_t>(y) > 0);
  return crossover::bit_cast<float>(crossover::bit_cast<uint32_t>(g) & mask);
}

class CpuBackend final : public Backend {
 public:
  // ---- construction, memory and transfers (cpu_backend.cpp)
  CpuBackend(int threads, Precision precision);
  std::string device_name() const override;
  void* allocate(std::size_t bytes) override;
  MemoryAvailable available_memory() const override;
  void release(void* p) noexcept override;
  void upload(void* dst, const void* src, std::size_t bytes) override;
  void host_wrote(void* dst, std::size_t bytes) override;
  bool reads_host_memory() const override;
  void download(void* dst, const void* src, std::size_t bytes) override;
  void download_async(void* dst, const void* src, std::size_t bytes) override;
  void fill(float* dst, float value, int64_t n) override;
  void synchronize() override;
  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool) override;
  void gather_rows(const float* src, int64_t cols, const int32_t* indices, int64_t batch,
                   const StepCounters* counters, int64_t m, float* dst) override;

  // ---- dense layers, convolutions and recurrent layers (cpu_dense.cpp)
  void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k,
                     int64_t n, ActivationKind act) override;
  bool weights_stay_with_threads(int64_t m, int64_t k, int64_t n) const;
  void forward_by_weight_rows(const float* x, const float* w, const float* b, float* y, int64_t m,
                              int64_t k, int64_t n, bool relu);
  void dense_backward_weights(const float* x, const float* dy, float* dw, float* db, int64_t m,
                              int64_t k, int64_t n) override;
  bool fuses_weight_update() const override;
  void dense_backward_weights_update(const float* x, const float* dy, const ParamSlot& kernel,
                                     const ParamSlot* bias, int64_t m, int64_t k, int64_t n,
                                     const OptimizerConfig& config,
                                     const StepCounters* counters) override;
  void dense_backward_input(const float* dy, const float* w, float* dx, int64_t m, int64_t k,
                            int64_t n) override;
  bool has_conv2d() const override;
  void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                      int64_t m, ActivationKind act) override;
  void conv2d_backward_input(const ConvShape& s, const float* dy, const float* w, float* dx,
                             int64_t m) override;
  void conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw,
                               float* db, int64_t m) override;
  void conv2d_transpose_forward(const ConvShape& s, const float* x, const float* w, const float* b,
                                float* y, int64_t m) override;
  void conv2d_transpose_backward_input(const ConvShape& s, const float* dy, const float* w,
                                       float* dx, int64_t m) override;
  void conv2d_transpose_backward_weights(const ConvShape& s, const float* x, const float* dy,
                                         float* dw, float* db, int64_t m) override;
  bool has_rnn() const override;
  std::size_t rnn_workspace_bytes(const RnnShape& s, int64_t m) override;
  void rnn_forward(const RnnShape& s, const float* x, const float* kernel, const float* recurrent,
                   const float* b, float* y, void* workspace, int64_t m) override;
  void rnn_backward(const RnnShape& s, const float* x, const float* kernel, const float* recurrent,
                    const float* b, const float* y, const float* dy, const void* workspace,
                    float* dx, float* dkernel, float* drecurrent, float* db, int64_t m) override;

  // ---- pooling and upsampling (cpu_pooling.cpp)
  std::size_t pool2d_workspace_bytes(const PoolShape& s, int64_t m) override;
  void pool2d_forward(const PoolShape& s, const float* x, float* y, void* workspace,
                      int64_t m) override;
  void pool2d_backward(const PoolShape& s, const float* dy, const void* workspace, float* dx,
                       int64_t m) override;
  void upsample2d_forward(const PoolShape& s, const float* x, float* y, int64_t m) override;
  void upsample2d_backward(const PoolShape& s, const float* dy, float* dx, int64_t m) override;

  // ---- batch and layer normalization (cpu_normalization.cpp)
  bool has_batch_norm() const override;
  void batchnorm_prepare(const BatchNormShape& s, int64_t m) override;
  void batchnorm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, float* y, float* mean, float* variance,
                                  int64_t m) override;
  void batchnorm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                   const float* beta, const float* mean, const float* variance,
                                   float* y, int64_t m) override;
  void batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                          const float* gamma, const float* mean, const float* variance, float* dx,
                          float* dgamma, float* dbeta, int64_t m) override;
  void batchnorm_update_moving(const BatchNormShape& s, const float* mean, const float* variance,
                               float* moving_mean, float* moving_variance,
                               double momentum) override;
  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, int64_t rows, int64_t n, float epsilon) override;
  void layernorm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                          const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                          int64_t n) override;

  // ---- activations, merging, permuting, element-wise arithmetic (cpu_elementwise.cpp)
  void activation_forward(ActivationKind act, float alpha, const float* x, float* y, int64_t m,
                          int64_t n) override;
  void activation_backward(ActivationKind act, float alpha, const float* x, const float* y,
                           const float* dy, float* dx, int64_t m, int64_t n) override;
  void add(const float* a, const float* b, float* y, int64_t n) override;
  void copy_columns(const float* src, int64_t src_cols, int64_t src_col, float* dst,
                    int64_t dst_cols, int64_t dst_col, int64_t rows, int64_t cols) override;
  void permute(const PermuteShape& s, const float* x, float* y, int64_t m) override;
  void binary_forward(BinaryOp op, const BinaryShape& s, const float* a, const float* b,
                      float* y) override;
  void binary_backward(BinaryOp op, const BinaryShape& s, const float* a, const float* b,
                       const float* dy, float* da, float* db) override;
  void row_sum(const float* x, float* y, int64_t rows, int64_t cols, float scale) override;

  // ---- dropout and noise layers (cpu_dropout.cpp)
  void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n, float rate,
                       uint64_t seed, uint32_t layer, const StepCounters* counters,
                       int64_t first_row) override;
  void noise_forward(NoiseKind kind, const float* x, float* y, float* factor, int64_t m, int64_t n,
                     int64_t channels, float amount, uint64_t seed, uint32_t layer,
                     const StepCounters* counters, int64_t first_row) override;
  void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m, int64_t n,
                        float rate) override;
  void relu_dropout_backward(const float* y_after_dropout, const uint8_t*, const float* dy,
                             float* dz, int64_t m, int64_t n, float rate) override;

  // ---- losses, metrics and the optimizer step (cpu_loss_optimizer.cpp)
  void loss_forward_backward(LossConfig loss, ActivationKind act, const float* out,
                             const float* targets, const float* weights, float* probs, float* d_out,
                             int64_t m, int64_t c, StepCounters* counters,
                             int64_t mean_rows) override;
  void metric_sum(MetricKind kind, const float* pred, const float* targets, int64_t m, int64_t c,
                  int64_t target_cols, float parameter, double* sum) override;
  void regularize(const float* value, float* grad, int64_t n, float l1, float l2, float linear,
                  StepCounters* counters, int64_t rows) override;
  void optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                      StepCounters* counters) override;
  void advance_batch(StepCounters* counters) override;

 private:
  // ---- the optimizer's loops (cpu_loss_optimizer.cpp)
  static double sum_of_squares(const ParamSlot& p);
  void update_tensor(const OptimizerConfig& config, const UpdateConstants& constants,
                     float grad_scale, const ParamSlot& p);
  static void update_range(const OptimizerConfig& config, const UpdateConstants& constants,
                           float grad_scale, const ParamSlot& p, int64_t begin, int64_t end);

  // ---- the weight gradients with their fused update, and the bf16 products (cpu_dense.cpp)
  struct BlockUpdate {
    const OptimizerConfig& config;
    UpdateConstants constants;
    const ParamSlot& kernel;
    const ParamSlot* bias;
  };
  static void column_sums(const float* dy, int64_t m, int64_t n, int64_t c0, int64_t c1, float* db);
  void weight_gradient(const float* x, const float* dy, float* dw, float* db, int64_t m, int64_t k,
                       int64_t n, const BlockUpdate* update);
  void update_rows(const BlockUpdate& update, int64_t r0, int64_t r1, int64_t n);
  static void bias_gradient_part(const float* dy, float* db, int64_t m, int64_t n, int64_t t,
                                 int64_t nt, const BlockUpdate* update);
  void weight_gradient_in_blocks(const float* x, const float* dy, float* dw, float* db, int64_t m,
                                 int64_t k, int64_t n, const BlockUpdate* update);
  void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                 float* c);
  void gemm_bf16_weights(bool tw, int64_t m, int64_t n, int64_t k, const float* a, const float* w,
                         float* c, const float* bias = nullptr, bool relu = false);

  // Rows of a kernel updated and then written into its bf16 copies in one go (even: whole pairs).
  static constexpr int64_t kCopyRows = 16;

  // Below this many flops a GEMM runs on one thread: a fork-join costs a few microseconds.
  static constexpr int64_t kParallelGemmFlops = 1 << 19;

  // ---- threads, scratch and the bf16 copies' bookkeeping, for every group (inline here)
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
  template <class F>
  void on_gemm_threads(int64_t m, int64_t n, int64_t k, F&& f) {
    const int nt = 2 * m * n * k < kParallelGemmFlops ? 1 : threads_;
    if (nt != threads_) omp_set_num_threads(nt);
    f(nt);
    if (nt != threads_) omp_set_num_threads(threads_);
  }

  // Memory [p, p + bytes) was written other than by the products: bf16 weights copies made from it
  // are stale and are remade at their next use (a scan of a few entries; none in fp32).
  void weights_changed(const void* p, std::size_t bytes) {
    if (bf16_) matmul_.weights_changed(p, bytes);
  }

  // f(begin, end, thread, threads) over [0, extent) in blocks of multiples of 16 (whole cache
  // lines and vectors), one per thread; one thread when the work is small.
  template <class F>
  void for_blocks_with_index(int64_t extent, int64_t flops, F&& f) {
    const int64_t nt = std::min<int64_t>(threads_, std::max<int64_t>(1, extent / 16));
    if (nt == 1 || flops < kParallelGemmFlops) {
      // oneDNN would otherwise open its own parallel region, which allocates on every call.
      omp_set_num_threads(1);
      f(0, extent, 0, 1);
      omp_set_num_threads(threads_);
      return;
    }
#pragma omp parallel num_threads(static_cast <int>(nt))
    {
      const int64_t t = omp_get_thread_num();
      const int64_t n = omp_get_num_threads();
      const int64_t begin = std::min(extent, (extent * t / n + 15) / 16 * 16);
      const int64_t end =
          t + 1 == n ? extent : std::min(extent, (extent * (t + 1) / n + 15) / 16 * 16);
      // Also when empty: f may have other work for thread t, or a barrier
      // (forward_by_weight_rows) that every thread of the team must reach.
      f(begin, end, t, n);
    }
  }
  template <class F>
  void for_blocks(int64_t extent, int64_t flops, F&& f) {
    for_blocks_with_index(extent, flops, [&](int64_t b, int64_t e, int64_t, int64_t) { f(b, e); });
  }

  // f(begin, end) over [0, total) split evenly across the threads.
  template <class F>
  void parallel_chunks(int64_t total, F&& f) {
    parallel_chunks_above(total, kParallelThreshold, total, std::forward<F>(f));
  }
  // f(begin, end) over [0, total) split evenly across the threads when `work` is at least
  // `threshold`, else on the calling thread.
  template <class F>
  void parallel_chunks_above(int64_t work, int64_t threshold, int64_t total, F&& f) {
    if (work < threshold || threads_ == 1) {
      f(0, total);
      return;
    }
#pragma omp parallel
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t chunk = (total + nt - 1) / nt;
      const int64_t begin = std::min(total, t * chunk), end = std::min(total, begin + chunk);
      if (begin < end) f(begin, end);
    }
  }

  float* partial_sums(int64_t c) {
    if (static_cast<int64_t>(partials_size_) < c) {
      partials_ = make_aligned<float>(static_cast<std::size_t>(c));
      partials_size_ = static_cast<std::size_t>(c);
    }
    return partials_.get();
  }

  float* scratch_row(int64_t c) {
    if (static_cast<int64_t>(scratch_size_) < c) {
      scratch_ = make_aligned<float>(static_cast<std::size_t>(c));
      scratch_size_ = static_cast<std::size_t>(c);
    }
    return scratch_.get();
  }

  int threads_ = 1;
  int64_t l2_bytes_ = cpu_info().l2_bytes;  // a core's; 0 where sysfs does not say
  bool bf16_ = false;                       // the dense GEMMs in bf16 (Precision::bf16)
  bool amx_ = false;                        // bf16 on a CPU with AMX-BF16
  cpu::DnnlConv conv_;
  cpu::DnnlRnn rnn_;
  cpu::DnnlMatmulBf16 matmul_;
  std::unique_ptr<float[], AlignedFree> scratch_;
  std::size_t scratch_size_ = 0;
  std::unique_ptr<float[], AlignedFree> partials_;  // forward_by_weight_rows's partial sums
  std::size_t partials_size_ = 0;
};

}  // namespace crossover::cpu
