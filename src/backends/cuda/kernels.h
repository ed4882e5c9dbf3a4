// The CUDA backend's own kernels (everything but the matrix products, which are cuBLASLt's).
//
// Each launch_* enqueues one kernel on `stream` and returns cudaGetLastError() (the launch
// status); the backend turns a failure into Error. Shapes as in backend.h: (rows, columns),
// row-major. Per-element arithmetic that the CPU shares comes from backends/kernel_math.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/backend.h"

namespace crossover::cuda {

// Grid sizes: blocks of this many threads, at most kMaxBlocks of them (grid-stride loops).
inline constexpr int kThreads = 256;
inline constexpr int kMaxBlocks = 4096;

// ---- scratch the reductions below need, allocated once per backend ----
// Deterministic reductions: each block writes a partial, the last block to finish (by an atomic
// ticket) adds the partials in block order, so sums do not depend on scheduling.
inline constexpr int kLossMaxBlocks = 256;   // loss: blocks of 128 rows
inline constexpr int kNormMaxBlocks = 1024;  // gradient norm
struct ReductionScratch {
  double* loss_partials;  // 2 * kLossMaxBlocks (loss, correct; a metric's sum)
  double* norm_partials;  // kNormMaxBlocks
  unsigned int* tickets;  // 4, zero between launches
};

// One ParamSlot as the optimizer kernel reads it: `offset` is where the slot starts in the
// concatenation of all slots (the launch's index space).
struct SlotDescriptor {
  float* value;
  const float* grad;
  float* slot1;
  float* slot2;
  float* slot3;  // Adam's velocity_hat with amsgrad, else null
  int64_t n;
  int64_t offset;
  int32_t decay;
  // Keras's clipnorm: this tensor's tensor_clip_divisor, written each step by the tensor-norm
  // kernel before the update reads it (unused without tensor_clipnorm).
  float clip_divisor;
};

cudaError_t launch_fill(cudaStream_t s, float* dst, float value, int64_t n);

cudaError_t launch_gather_rows(cudaStream_t s, const float* src, int64_t cols,
                               const int32_t* indices, int64_t batch, const StepCounters* counters,
                               int64_t m, float* dst);

// y(m, n) = act(y + b) in place (b may be null): the GEMM epilogue when cuBLASLt cannot fuse it.
cudaError_t launch_bias_activation(cudaStream_t s, float* y, const float* b, int64_t m, int64_t n,
                                   ActivationKind act);
// db(n) = column sums of dy(m, n) (the bias gradient when cuBLASLt cannot fuse it).
cudaError_t launch_column_sums(cudaStream_t s, const float* dy, float* db, int64_t m, int64_t n);
// bf16 copies of two float arrays, one launch (the operands of a bf16 product).
cudaError_t launch_to_bf16(cudaStream_t s, const float* a, void* a16, int64_t na, const float* b,
                           void* b16, int64_t nb);

cudaError_t launch_activation_forward(cudaStream_t s, ActivationKind act, float alpha,
                                      const float* x, float* y, int64_t m, int64_t n);
cudaError_t launch_activation_backward(cudaStream_t s, ActivationKind act, float alpha,
                                       const float* x, const float* y, const float* dy, float* dx,
                                       int64_t m, int64_t n);

// y = a + b (y may alias a or b); a block of columns between two row-major matrices
// (Backend::copy_columns).
cudaError_t launch_add(cudaStream_t s, const float* a, const float* b, float* y, int64_t n);
cudaError_t launch_copy_columns(cudaStream_t s, const float* src, int64_t src_cols, int64_t src_col,
                                float* dst, int64_t dst_cols, int64_t dst_col, int64_t rows,
                                int64_t cols);
// Element-wise arithmetic with broadcasting (Backend::binary_forward, binary_backward): the
// forward a thread per output value; the backward a thread per value of each operand's gradient,
// summing what it was broadcast over in the CPU's order; row sums a thread per row.
cudaError_t launch_binary_forward(cudaStream_t s, BinaryOp op, const BinaryShape& shape,
                                  const float* a, const float* b, float* y);
cudaError_t launch_binary_backward(cudaStream_t s, BinaryOp op, const BinaryShape& shape,
                                   const float* a, const float* b, const float* dy, float* da,
                                   float* db);
cudaError_t launch_row_sum(cudaStream_t s, const float* x, float* y, int64_t rows, int64_t cols,
                           float scale);
// Each sample's axes permuted (Backend::permute): a thread per output value, reading its x value.
cudaError_t launch_permute(cudaStream_t s, const PermuteShape& shape, const float* x, float* y,
                           int64_t samples);
// Nearest-neighbour upsampling of (samples, in_h, in_w, channels) by size_h x size_w
// (Backend::upsample2d_*): the forward a thread per output value, the backward a thread per input
// value summing its block in order.
cudaError_t launch_upsample2d_forward(cudaStream_t s, const float* x, float* y, int64_t samples,
                                      int64_t in_h, int64_t in_w, int64_t channels, int64_t size_h,
                                      int64_t size_w);
cudaError_t launch_upsample2d_backward(cudaStream_t s, const float* dy, float* dx, int64_t samples,
                                       int64_t in_h, int64_t in_w, int64_t channels, int64_t size_h,
                                       int64_t size_w);

cudaError_t launch_dropout_forward(cudaStream_t s, const float* x, float* y, uint8_t* mask,
                                   int64_t m, int64_t n, float rate, uint64_t seed, uint32_t layer,
                                   const StepCounters* counters, int64_t first_row);
// Backend::noise_forward.
cudaError_t launch_noise_forward(cudaStream_t s, NoiseKind kind, const float* x, float* y,
                                 float* factor, int64_t m, int64_t n, int64_t channels,
                                 float amount, uint64_t seed, uint32_t layer,
                                 const StepCounters* counters, int64_t first_row);
cudaError_t launch_dropout_backward(cudaStream_t s, const float* dy, const uint8_t* mask, float* dx,
                                    int64_t total, float rate);
cudaError_t launch_relu_dropout_backward(cudaStream_t s, const float* y_after_dropout,
                                         const float* dy, float* dz, int64_t total, float rate);

// probs must not be null (the backend passes scratch when the caller's is). The gradient is of
// the rows' summed loss divided by mean_rows (Backend::loss_forward_backward).
cudaError_t launch_loss(cudaStream_t s, LossConfig loss, ActivationKind act, const float* out,
                        const float* targets, const float* weights, float* probs, float* d_out,
                        int64_t m, int64_t c, StepCounters* counters,
                        const ReductionScratch& scratch, int64_t mean_rows);

// Adds the sum over m rows of metric_row to *sum (device memory; Backend::metric_sum).
cudaError_t launch_metric(cudaStream_t s, MetricKind kind, const float* pred, const float* targets,
                          int64_t m, int64_t c, int64_t target_cols, float parameter, double* sum,
                          const ReductionScratch& scratch);

// Backend::regularize: the penalty of n values times rows into counters->loss_sum where counters
// is not null (per-block sums added in block order by the last block), and its gradient into
// grad where not null.
cudaError_t launch_regularize(cudaStream_t s, const float* value, float* grad, int64_t n, float l1,
                              float l2, float linear, StepCounters* counters, int64_t rows,
                              const ReductionScratch& scratch);

// Keras's clipnorm: each slot's tensor_clip_divisor into its descriptor (one block per slot).
cudaError_t launch_tensor_norms(cudaStream_t s, SlotDescriptor* slots, int nslots, float clipnorm);
// Clip-by-global-norm factor into counters->grad_scale (one launch, deterministic).
cudaError_t launch_gradient_norm(cudaStream_t s, const SlotDescriptor* slots, int nslots,
                                 int64_t total, float clipnorm, StepCounters* counters,
                                 const ReductionScratch& scratch);
// Every parameter's update, one launch; then (last block) learning_rate, grad_scale (when no
// clipnorm), step += 1, batch_index += 1.
cudaError_t launch_optimizer_update(cudaStream_t s, const OptimizerConfig& config,
                                    const SlotDescriptor* slots, int nslots, int64_t total,
                                    StepCounters* counters, const ReductionScratch& scratch,
                                    int max_blocks);
cudaError_t launch_advance_batch(cudaStream_t s, StepCounters* counters);

// ---- convolution helpers (cudnn_conv.cpp) and pooling, channels last ----
// out(cols, rows) = in(rows, cols)^T.
cudaError_t launch_transpose(cudaStream_t s, const float* in, float* out, int64_t rows,
                             int64_t cols);
// xp (m, h + top + bottom, w + left + right, c) = x (m, h, w, c) with zeros around it.
cudaError_t launch_pad_nhwc(cudaStream_t s, const float* x, float* xp, int64_t m, int64_t h,
                            int64_t w, int64_t c, int64_t top, int64_t bottom, int64_t left,
                            int64_t right);
// dx (m, h, w, c) = the interior of the padded dxp that pad_nhwc would have made from it.
cudaError_t launch_crop_nhwc(cudaStream_t s, const float* dxp, float* dx, int64_t m, int64_t h,
                             int64_t w, int64_t c, int64_t top, int64_t bottom, int64_t left,
                             int64_t right);
// Pooling as backend.h defines it. Max: argmax (m * out_h * out_w * channels int32, may be null)
// records each output's source (row * in_w + col; the first maximum in the window on ties), which
// the backward pass reads. Average: argmax is not used.
cudaError_t launch_pool_forward(cudaStream_t s, const PoolShape& shape, const float* x, float* y,
                                int32_t* argmax, int64_t m);
cudaError_t launch_pool_backward(cudaStream_t s, const PoolShape& shape, const float* dy,
                                 const int32_t* argmax, float* dx, int64_t m);

// ---- batch normalization (backend.h's BatchNormShape), channels last over rows = m * spatial ----
// Crossover's own kernels, not cuDNN's (docs/CUDA.md, "Batch normalization" says why). Every
// per-channel sum is split among blocks by the shape alone, each block writes a partial, and a
// second kernel adds the partials in block order in double: no atomics, so the statistics and
// gradients are bit-identical run to run. `scratch` holds batchnorm_scratch_floats(shape, m)
// floats (the backend's, allocated when the batch size is planned); calls on one stream share it.
int64_t batchnorm_scratch_floats(const BatchNormShape& shape, int64_t m);
// The batch's mean, then its biased variance from the mean (two passes over x, as oneDNN), then y.
cudaError_t launch_batchnorm_forward_training(cudaStream_t s, const BatchNormShape& shape,
                                              const float* x, const float* gamma, const float* beta,
                                              float* y, float* mean, float* variance, int64_t m,
                                              float* scratch);
cudaError_t launch_batchnorm_forward_inference(cudaStream_t s, const BatchNormShape& shape,
                                               const float* x, const float* gamma,
                                               const float* beta, const float* mean,
                                               const float* variance, float* y, int64_t m);
// dbeta = sum dy, dgamma = sum dy * xhat (each only when its parameter exists and the pointer is
// not null), then dx through the batch statistics (dx may alias dy).
cudaError_t launch_batchnorm_backward(cudaStream_t s, const BatchNormShape& shape, const float* x,
                                      const float* dy, const float* gamma, const float* mean,
                                      const float* variance, float* dx, float* dgamma, float* dbeta,
                                      int64_t m, float* scratch);
// kernel_math.h's batchnorm_moving_update, one thread per channel.
cudaError_t launch_batchnorm_update_moving(cudaStream_t s, const float* mean, const float* variance,
                                           float* moving_mean, float* moving_variance,
                                           int64_t channels, double momentum);

// ---- layer normalization over rows of n features (backend_ops.h's layernorm_*) ----
// A warp per row; mean and rstd may be null (evaluate and predict).
cudaError_t launch_layernorm_forward(cudaStream_t s, const float* x, const float* gamma,
                                     const float* beta, float* y, float* mean, float* rstd,
                                     int64_t rows, int64_t n, float epsilon);
// dgamma and dbeta (each if not null) a thread per column over the rows in order, then dx a warp
// per row.
cudaError_t launch_layernorm_backward(cudaStream_t s, const float* x, const float* dy,
                                      const float* gamma, const float* mean, const float* rstd,
                                      float* dx, float* dgamma, float* dbeta, int64_t rows,
                                      int64_t n);

// Loads every kernel above now (CUDA loads modules lazily, at a kernel's first launch), so that
// no module is first loaded while a stream is being captured.
cudaError_t preload_kernels();

}  // namespace crossover::cuda
