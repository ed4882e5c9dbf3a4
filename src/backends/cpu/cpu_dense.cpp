// The CPU backend's dense layers and convolutions: oneDNN's sgemm on one block per thread (or its
// bf16 matmul), the weight gradient with the optimizer's update fused in, oneDNN's convolutions.
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <string>

#include "backends/cpu/cpu_backend_impl.h"
#include "core/error.h"

namespace crossover::cpu {
namespace {

// Row-major C(m, n) = alpha * op(A) . op(B) + beta * C.
void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl_status_t s = dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (s != dnnl_success)
    throw Error("cpu", "oneDNN sgemm failed (status " + std::to_string(static_cast<int>(s)) +
                           ") for shape m=" + std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k));
}

}  // namespace

// The dense ops split their output into one block per thread and call oneDNN's sgemm on each
// block from inside our own parallel region (oneDNN then runs single-threaded): a block's bias,
// activation or bias gradient is applied by the same thread while the block is in its cache,
// and no call allocates (oneDNN's own threading allocates per call; docs/GEMM.md).
//
// A layer's weights stay with one thread: the weight gradient and its fused update, and the
// input gradient, each give thread t the same block of rows of w (for_blocks over k), and so
// does the forward when w is the larger operand (below). Then w's rows and the optimizer's state
// for them stay in that core's cache from step to step, instead of w's lines crossing between
// the cores twice a step (docs/PERF.md, "weights that stay with a thread").
void CpuBackend::dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m,
                               int64_t k, int64_t n, ActivationKind act) {
  // y(m, n) = x(m, k) . w(k, n). In bf16 the product is one oneDNN matmul on its own threads,
  // the bias and ReLU its post-ops.
  const bool relu = act == ActivationKind::relu;
  if (bf16_)
    gemm_bf16_weights(false, m, n, k, x, w, y, b, relu);
  else if (weights_stay_with_threads(m, k, n))
    forward_by_weight_rows(x, w, b, y, m, k, n, relu);
  else
    for_blocks(n, 2 * m * n * k, [&](int64_t c0, int64_t c1) {
      if (c1 <= c0) return;
      sgemm('N', 'N', m, c1 - c0, k, 1.0f, x, k, w + c0, n, 0.0f, y + c0, n);
      if (b == nullptr && !relu) return;
      for (int64_t r = 0; r < m; ++r) {
        float* row = y + r * n;
        if (b && relu) {
          for (int64_t j = c0; j < c1; ++j) row[j] = std::max(row[j] + b[j], 0.0f);
        } else if (b) {
          for (int64_t j = c0; j < c1; ++j) row[j] += b[j];
        } else {
          for (int64_t j = c0; j < c1; ++j) row[j] = std::max(row[j], 0.0f);
        }
      }
    });
  // Sigmoid, tanh and softmax (softmax needs whole rows): a second pass, as on the GPU.
  if (act != ActivationKind::linear && !relu) activation_forward(act, 0.0f, y, y, m, n);
}

// backend.h's cpu_forward_splits_weight_rows for this backend. Where the state cannot stay in
// L2 (BIG's 784x1000 and 1000x1000 layers at 2 threads), the split only adds the partial sums:
// measured 1.15x slower for BIG on the Zen 4 (docs/PERF.md).
bool CpuBackend::weights_stay_with_threads(int64_t m, int64_t k, int64_t n) const {
  return cpu_forward_splits_weight_rows(m, k, n, threads_, l2_bytes_);
}

// y = x . w as a sum over the threads' blocks of rows of w (the reduction dimension, split as
// the weight gradient splits it): each thread's product x(:, r0:r1) . w(r0:r1, :) goes to its
// own partial sum, and after a barrier each thread adds up a block of y's elements over the
// partials in thread order, with the bias and ReLU. The sums' order, and so the bits, depend on
// the team's size nt; the partials take nt * m * n floats (room for threads_ is kept), fewer
// than w's k * n when this is chosen (k >= threads * m). On one thread it is the plain product.
// The barrier needs every thread of the team to call the block function, which
// for_blocks_with_index does (also for an empty block).
void CpuBackend::forward_by_weight_rows(const float* x, const float* w, const float* b, float* y,
                                        int64_t m, int64_t k, int64_t n, bool relu) {
  float* partials = partial_sums(threads_ * m * n);
  for_blocks_with_index(k, 2 * m * n * k, [&](int64_t r0, int64_t r1, int64_t t, int64_t nt) {
    const int64_t size = m * n;
    float* own = nt == 1 ? y : partials + t * size;
    if (r1 > r0)
      sgemm('N', 'N', m, n, r1 - r0, 1.0f, x + r0, k, w + r0 * n, n, 0.0f, own, n);
    else
      std::fill(own, own + size, 0.0f);
    if (nt > 1) {
#pragma omp barrier
    }
    // This thread's elements of y, [e0, e1), row by row: partials[0] + ... + partials[nt - 1].
    const int64_t e1 = size * (t + 1) / nt;
    for (int64_t e = size * t / nt; e < e1;) {
      const int64_t r = e / n, j0 = e - r * n, j1 = std::min(n, j0 + (e1 - e));
      float* out = y + r * n;
      const float* first = nt == 1 ? out : partials + r * n;
      for (int64_t j = j0; j < j1; ++j) {
        float sum = first[j];
        for (int64_t u = 1; u < nt; ++u) sum += partials[u * size + r * n + j];
        if (b) sum += b[j];
        out[j] = relu ? std::max(sum, 0.0f) : sum;
      }
      e += j1 - j0;
    }
  });
}

void CpuBackend::dense_backward_weights(const float* x, const float* dy, float* dw, float* db,
                                        int64_t m, int64_t k, int64_t n) {
  weight_gradient(x, dy, dw, db, m, k, n, nullptr);
}

bool CpuBackend::fuses_weight_update() const { return true; }

// The weight gradient with the update applied by each thread to the rows it has just computed,
// while they are in its cache, instead of in a pass over every parameter at the end.
void CpuBackend::dense_backward_weights_update(const float* x, const float* dy,
                                               const ParamSlot& kernel, const ParamSlot* bias,
                                               int64_t m, int64_t k, int64_t n,
                                               const OptimizerConfig& config,
                                               const StepCounters* counters) {
  if (config.clipnorm > 0.0f || config.tensor_clipnorm > 0.0f)
    throw Error("cpu", "dense_backward_weights_update: clipnorm needs the gradient's norm first");
  require_amsgrad_slots(config, {&kernel, 1});
  if (bias) require_amsgrad_slots(config, {bias, 1});
  const float lr = scheduled_learning_rate(config.schedule, counters->step);
  const int64_t t = counters->step + 1;
  const BlockUpdate update{config, update_constants(config, lr, t, *counters), kernel, bias};
  weight_gradient(x, dy, kernel.grad, bias ? bias->grad : nullptr, m, k, n, &update);
  if (bf16_) matmul_.weights_rewritten(kernel.value);  // the update wrote the bf16 copies too
}

void CpuBackend::dense_backward_input(const float* dy, const float* w, float* dx, int64_t m,
                                      int64_t k, int64_t n) {
  // dx(m, k) = dy(m, n) . w(k, n)^T: blocks of columns of dx (rows of w).
  if (bf16_) {
    gemm_bf16_weights(true, m, k, n, dy, w, dx);
    return;
  }
  for_blocks(k, 2 * m * n * k, [&](int64_t c0, int64_t c1) {
    if (c1 <= c0) return;
    sgemm('N', 'T', m, c1 - c0, n, 1.0f, dy, n, w + c0 * n, n, 0.0f, dx + c0, k);
  });
}

// Convolution and pooling: oneDNN's primitives (backends/cpu/dnnl_conv.h).
bool CpuBackend::has_conv2d() const { return true; }
void CpuBackend::conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b,
                                float* y, int64_t m, ActivationKind act) {
  conv_.conv_forward(s, x, w, b, y, m, act);
}
void CpuBackend::conv2d_backward_input(const ConvShape& s, const float* dy, const float* w,
                                       float* dx, int64_t m) {
  conv_.conv_backward_input(s, dy, w, dx, m);
}
void CpuBackend::conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy,
                                         float* dw, float* db, int64_t m) {
  conv_.conv_backward_weights(s, x, dy, dw, db, m);
}
// Recurrent layers: oneDNN's RNN primitives (backends/cpu/dnnl_rnn.h).
bool CpuBackend::has_rnn() const { return true; }
std::size_t CpuBackend::rnn_workspace_bytes(const RnnShape& s, int64_t m) {
  return rnn_.workspace_bytes(s, m);
}
void CpuBackend::rnn_forward(const RnnShape& s, const float* x, const float* kernel,
                             const float* recurrent, const float* b, float* y, void* workspace,
                             int64_t m) {
  rnn_.forward(s, x, kernel, recurrent, b, y, workspace, m);
}
void CpuBackend::rnn_backward(const RnnShape& s, const float* x, const float* kernel,
                              const float* recurrent, const float* b, const float* y,
                              const float* dy, const void* workspace, float* dx, float* dkernel,
                              float* drecurrent, float* db, int64_t m) {
  rnn_.backward(s, x, kernel, recurrent, b, y, dy, workspace, dx, dkernel, drecurrent, db, m);
}
// The transposed convolution as the convolution it transposes: its forward is that
// convolution's backward-data primitive (oneDNN's deconvolution is the same arithmetic), its
// input gradient the convolution's forward, its kernel gradient the convolution's
// backward-weights with the roles of x and dy exchanged; the bias is a pass of our own.
void CpuBackend::conv2d_transpose_forward(const ConvShape& s, const float* x, const float* w,
                                          const float* b, float* y, int64_t m) {
  conv_.conv_backward_input(s, x, w, y, m);
  if (!b) return;
  const int64_t c = s.in_c;
  parallel_rows(m * s.in_h, s.in_w * c, [&](int64_t r) {
    float* row = y + r * s.in_w * c;
    for (int64_t i = 0; i < s.in_w; ++i)
      for (int64_t j = 0; j < c; ++j) row[i * c + j] += b[j];
  });
}
void CpuBackend::conv2d_transpose_backward_input(const ConvShape& s, const float* dy,
                                                 const float* w, float* dx, int64_t m) {
  conv_.conv_forward(s, dy, w, nullptr, dx, m, ActivationKind::linear);
}
void CpuBackend::conv2d_transpose_backward_weights(const ConvShape& s, const float* x,
                                                   const float* dy, float* dw, float* db,
                                                   int64_t m) {
  conv_.conv_backward_weights(s, dy, x, dw, nullptr, m);
  if (db) column_sums(dy, m * s.in_h * s.in_w, s.in_c, 0, s.in_c, db);
}

// db[c0, c1) = column sums of dy(m, n) over those columns.
void CpuBackend::column_sums(const float* dy, int64_t m, int64_t n, int64_t c0, int64_t c1,
                             float* db) {
  for (int64_t j = c0; j < c1; ++j) db[j] = 0.0f;
  for (int64_t r = 0; r < m; ++r) {
    const float* row = dy + r * n;
    for (int64_t j = c0; j < c1; ++j) db[j] += row[j];
  }
}

// dw(k, n) = x(m, k)^T . dy(m, n) in one block of rows of dw per thread, db(n) = column sums
// of dy in one block of columns per thread; with `update`, each thread updates its blocks as
// soon as it has computed them, from its own cache, with no parallel region of its own.
// Smaller blocks, to keep each in L2 until its update, measured slower: oneDNN's sgemm on
// 16-row blocks of a 1000x1000 gradient ran at 59 GFLOP/s against 73 for the whole block on
// the Zen 3, 1 thread (bench/cpu_calls), and the update gained less than that (docs/PERF.md).
// In bf16 the product is one oneDNN matmul first, and the blocks only do the rest.
void CpuBackend::weight_gradient(const float* x, const float* dy, float* dw, float* db, int64_t m,
                                 int64_t k, int64_t n, const BlockUpdate* update) {
  // With AMX, a narrow gradient (a classifier's 10 columns) in float32: its bf16 product and
  // conversions cost 4x the sgemm (measured 53 against 13 us a step for BIG's 1000 x 10).
  const bool bf16_product = bf16_ && !(amx_ && n < 64);
  if (bf16_product && amx_) {
    weight_gradient_in_blocks(x, dy, dw, db, m, k, n, update);
    return;
  }
  if (bf16_product) gemm_bf16(true, false, k, n, m, x, dy, dw);
  for_blocks_with_index(k, 2 * m * n * k, [&](int64_t r0, int64_t r1, int64_t t, int64_t nt) {
    if (r1 > r0) {
      if (!bf16_product)
        sgemm('T', 'N', r1 - r0, n, m, 1.0f, x + r0, k, dy, n, 0.0f, dw + r0 * n, n);
      if (update) update_rows(*update, r0, r1, n);
    }
    bias_gradient_part(dy, db, m, n, t, nt, update);
  });
}

// Rows [r0, r1) of a kernel (n columns) updated by the fused step, from this thread's cache; in
// bf16 16 rows at a time, each written into the weights' bf16 copies at once (instead of a
// pass over all of the weights before the next product).
void CpuBackend::update_rows(const BlockUpdate& update, int64_t r0, int64_t r1, int64_t n) {
  const int64_t rows = bf16_ ? kCopyRows : r1 - r0;
  for (int64_t c0 = r0; c0 < r1; c0 += rows) {
    const int64_t c1 = std::min(r1, c0 + rows);
    update_range(update.config, update.constants, 1.0f, update.kernel, c0 * n, c1 * n);
    if (bf16_) matmul_.write_rows(update.kernel.value, c0, c1);
  }
}

// Thread t of nt's block of columns of db(n) = column sums of dy(m, n), and its bias update
// (nothing without db).
void CpuBackend::bias_gradient_part(const float* dy, float* db, int64_t m, int64_t n, int64_t t,
                                    int64_t nt, const BlockUpdate* update) {
  if (db == nullptr) return;
  const int64_t c0 = n * t / nt, c1 = n * (t + 1) / nt;
  column_sums(dy, m, n, c0, c1, db);
  if (update && update->bias)
    update_range(update->config, update->constants, 1.0f, *update->bias, c0, c1);
}

// The bf16 weight gradient on a CPU with AMX: blocks of rows of dw (about 256 KB each,
// DnnlMatmulBf16::gradient_rows), each thread a run of whole blocks (the same rows every step),
// each block updated and written into the weights' bf16 copies right after its product, while
// it is in this core's cache: dw never makes a round trip through L3. Measured on a Xeon with
// AMX (bench/RESULTS.md, 2026-12-07); CPUs with AVX512_BF16 alone keep the whole product.
void CpuBackend::weight_gradient_in_blocks(const float* x, const float* dy, float* dw, float* db,
                                           int64_t m, int64_t k, int64_t n,
                                           const BlockUpdate* update) {
  const int64_t rows = cpu::DnnlMatmulBf16::gradient_block_rows(k, n);
  const int64_t blocks = (k + rows - 1) / rows;
  const int nt = static_cast<int>(
      std::min<int64_t>(2 * m * n * k < kParallelGemmFlops ? 1 : threads_, blocks));
  matmul_.gradient_operands(m, k, n, x, dy, nt);
  auto run = [&](int t) {
    for (int64_t b = blocks * t / nt; b < blocks * (t + 1) / nt; ++b) {
      const int64_t r0 = b * rows, r1 = std::min(k, r0 + rows);
      matmul_.gradient_rows(r0, r1, dw, t);
      if (update) update_rows(*update, r0, r1, n);
    }
    bias_gradient_part(dy, db, m, n, t, nt, update);
  };
  if (nt == 1) {
    omp_set_num_threads(1);  // oneDNN would otherwise open its own parallel region
    run(0);
    omp_set_num_threads(threads_);
    return;
  }
#pragma omp parallel num_threads(nt)
  run(omp_get_thread_num());
}

// Row-major c(m, n) = op(a) . op(b) with bf16 operands and float32 accumulation
// (backends/cpu/dnnl_matmul.h); a small product runs on one thread, as the sgemm blocks do.
void CpuBackend::gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                           const float* b, float* c) {
  on_gemm_threads(m, n, k, [&](int nt) { matmul_.gemm(ta, tb, m, n, k, a, b, c, nt); });
}
// The same by a layer's weights w, through their blocked bf16 copy: c(m, n) = a(m, k) . w(k, n),
// or . w^T of w stored (n, k) when tw.
void CpuBackend::gemm_bf16_weights(bool tw, int64_t m, int64_t n, int64_t k, const float* a,
                                   const float* w, float* c, const float* bias, bool relu) {
  on_gemm_threads(m, n, k,
                  [&](int nt) { matmul_.gemm_weights(tw, m, n, k, a, w, c, nt, bias, relu); });
}

}  // namespace crossover::cpu
