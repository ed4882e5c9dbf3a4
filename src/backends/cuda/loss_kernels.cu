// The CUDA backend's loss and metric kernels: the shared loss_row and metric_row, a thread per
// row, summed without atomics (per-block partials added in block order by the last block).
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/kernels.h"
#include "backends/kernel_math.h"
#include "backends/losses/list.h"

namespace crossover::cuda {
namespace {

// One thread per row runs the shared loss_row; per-block sums, then the last block adds them to
// the counters in block order.
constexpr int kLossThreads = 128;
__global__ void loss_kernel(LossConfig loss, ActivationKind act, const float* __restrict__ out,
                            const float* __restrict__ targets, const float* __restrict__ weights,
                            float* __restrict__ probs, float* __restrict__ d_out, int64_t m,
                            int64_t c, float inv_m, StepCounters* counters, double* partials,
                            unsigned int* ticket) {
  double l = 0.0, right = 0.0;
  for (int64_t r = global_thread(); r < m; r += grid_stride()) {
    float* d = d_out ? d_out + r * c : nullptr;
    const LossRow row =
        weights ? weighted_loss_row(loss, act, out + r * c, targets, weights, r, c, probs + r * c,
                                    d, inv_m)
                : loss_row(loss, act, out + r * c, targets, r, c, probs + r * c, d, inv_m);
    l += row.loss;
    right += row.correct;
  }
  if (counters == nullptr) return;  // the same for every block
  __shared__ double sh[kLossThreads];
  __shared__ bool last;
  l = block_sum(l, sh);
  right = block_sum(right, sh);
  if (threadIdx.x == 0) {
    partials[2 * blockIdx.x] = l;
    partials[2 * blockIdx.x + 1] = right;
    last = last_block_done(ticket);
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    double ls = 0.0, rs = 0.0;
    for (unsigned b = 0; b < gridDim.x; ++b) {
      ls += __ldcg(partials + 2 * b);
      rs += __ldcg(partials + 2 * b + 1);
    }
    counters->loss_sum += ls;
    counters->correct_sum += rs;
    counters->sample_count += static_cast<double>(m);
    *ticket = 0;
  }
}

// One thread per row runs the shared metric_row; per-block sums, then the last block adds them to
// *sum in block order (the loss kernel's partials and ticket: the two run in order on the stream).
__global__ void metric_kernel(MetricKind kind, const float* __restrict__ pred,
                              const float* __restrict__ targets, int64_t m, int64_t c,
                              int64_t target_cols, float parameter, double* sum, double* partials,
                              unsigned int* ticket) {
  double v = 0.0;
  for (int64_t r = global_thread(); r < m; r += grid_stride())
    v += metric_row(kind, pred + r * c, targets, r, c, target_cols, parameter);
  __shared__ double sh[kLossThreads];
  __shared__ bool last;
  v = block_sum(v, sh);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = v;
    last = last_block_done(ticket);
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    double total = 0.0;
    for (unsigned b = 0; b < gridDim.x; ++b) total += __ldcg(partials + b);
    *sum += total;
    *ticket = 0;
  }
}

// A regularizer's penalty and gradient (kernel_math.h), a thread per value; the penalty's
// per-block sums added to the counters in block order by the last block, as the loss's.
__global__ void regularize_kernel(const float* __restrict__ value, float* __restrict__ grad,
                                  int64_t n, float l1, float l2, float linear,
                                  StepCounters* counters, double rows, double* partials,
                                  unsigned int* ticket) {
  double p = 0.0;
  for (int64_t i = global_thread(); i < n; i += grid_stride()) {
    p += regularizer_penalty(value[i], l1, l2, linear);
    if (grad) grad[i] += regularizer_gradient(value[i], l1, l2, linear);
  }
  if (!counters) return;  // the gradient only (every block alike: no block waits on a ticket)
  __shared__ double sh[kLossThreads];
  __shared__ bool last;
  p = block_sum(p, sh);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = p;
    last = last_block_done(ticket);
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    double total = 0.0;
    for (unsigned b = 0; b < gridDim.x; ++b) total += __ldcg(partials + b);
    counters->loss_sum += total * rows;
    *ticket = 0;
  }
}

}  // namespace

cudaError_t launch_regularize(cudaStream_t s, const float* value, float* grad, int64_t n, float l1,
                              float l2, float linear, StepCounters* counters, int64_t rows,
                              const ReductionScratch& scratch) {
  if (n <= 0) return cudaSuccess;
  const int blocks = blocks_for(n, kLossThreads, kLossMaxBlocks);
  regularize_kernel<<<blocks, kLossThreads, 0, s>>>(value, grad, n, l1, l2, linear, counters,
                                                    static_cast<double>(rows),
                                                    scratch.loss_partials, scratch.tickets + 0);
  return cudaGetLastError();
}

cudaError_t launch_loss(cudaStream_t s, LossConfig loss, ActivationKind act, const float* out,
                        const float* targets, const float* weights, float* probs, float* d_out,
                        int64_t m, int64_t c, StepCounters* counters,
                        const ReductionScratch& scratch, int64_t mean_rows) {
  if (m <= 0) return cudaSuccess;
  const float inv_m = 1.0f / static_cast<float>(mean_rows);
  const int blocks = blocks_for(m, kLossThreads, kLossMaxBlocks);
  loss_kernel<<<blocks, kLossThreads, 0, s>>>(loss, act, out, targets, weights, probs, d_out, m, c,
                                              inv_m, counters, scratch.loss_partials,
                                              scratch.tickets + 0);
  return cudaGetLastError();
}

cudaError_t launch_metric(cudaStream_t s, MetricKind kind, const float* pred, const float* targets,
                          int64_t m, int64_t c, int64_t target_cols, float parameter, double* sum,
                          const ReductionScratch& scratch) {
  if (m <= 0) return cudaSuccess;
  const int blocks = blocks_for(m, kLossThreads, kLossMaxBlocks);
  metric_kernel<<<blocks, kLossThreads, 0, s>>>(kind, pred, targets, m, c, target_cols, parameter,
                                                sum, scratch.loss_partials, scratch.tickets + 0);
  return cudaGetLastError();
}

cudaError_t preload_loss_kernels() {
  return preload_each({
      reinterpret_cast<const void*>(loss_kernel),
      reinterpret_cast<const void*>(metric_kernel),
      reinterpret_cast<const void*>(regularize_kernel),
  });
}

}  // namespace crossover::cuda
