// The CUDA backend's batch and layer normalization kernels: per-channel sums in a fixed order
// without atomics, and a warp per row for layer normalization.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/kernels.h"
#include "backends/kernel_math.h"

namespace crossover::cuda {
namespace {

// ---- batch normalization: per-channel sums over rows = m * spatial, channels last ----
// Blocks of kNormLanes x kNormRowLanes threads: threadIdx.x a channel (consecutive channels read
// consecutive addresses), threadIdx.y one of the rows that step through the block's slice of rows.
// Each block writes one partial per channel; the next kernel adds the partials in block order, in
// double. No atomics, so a sum never depends on scheduling (bit-identical run to run).
constexpr int kNormLanes = 32, kNormRowLanes = 8;

enum class NormSum { x, centered_squares, dy_and_dy_centered };

// partials: [2][row_blocks][channels]; the second half only for dy_and_dy_centered (sum of dy,
// then of dy * (x - mean)).
template <NormSum kSum>
__global__ void norm_partials_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                     const float* __restrict__ mean, int64_t rows, int64_t channels,
                                     int64_t rows_per_block, float* __restrict__ partials) {
  __shared__ float sa[kNormRowLanes][kNormLanes + 1], sb[kNormRowLanes][kNormLanes + 1];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kNormLanes + threadIdx.x;
  float a = 0.0f, b = 0.0f;
  if (c < channels) {
    const float mu = kSum == NormSum::x ? 0.0f : mean[c];
    const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_block;
    const int64_t end = begin + rows_per_block < rows ? begin + rows_per_block : rows;
    for (int64_t r = begin + threadIdx.y; r < end; r += kNormRowLanes) {
      const float v = x[r * channels + c];
      if constexpr (kSum == NormSum::x) {
        a += v;
      } else if constexpr (kSum == NormSum::centered_squares) {
        const float d = v - mu;
        a += d * d;
      } else {
        const float g = dy[r * channels + c];
        a += g;
        b += g * (v - mu);
      }
    }
  }
  sa[threadIdx.y][threadIdx.x] = a;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    float ta = 0.0f, tb = 0.0f;
    for (int i = 0; i < kNormRowLanes; ++i) ta += sa[i][threadIdx.x], tb += sb[i][threadIdx.x];
    partials[static_cast<int64_t>(blockIdx.y) * channels + c] = ta;
    if constexpr (kSum == NormSum::dy_and_dy_centered)
      partials[(static_cast<int64_t>(gridDim.y) + blockIdx.y) * channels + c] = tb;
  }
}

// out[c] = (sum of the row_blocks partials of c, in order, in double) / rows: the mean or the
// biased variance.
__global__ void norm_statistic_kernel(const float* __restrict__ partials, int row_blocks,
                                      int64_t channels, int64_t rows, float* __restrict__ out) {
  for (int64_t c = global_thread(); c < channels; c += grid_stride()) {
    double sum = 0.0;
    for (int p = 0; p < row_blocks; ++p) sum += partials[static_cast<int64_t>(p) * channels + c];
    out[c] = static_cast<float>(sum / static_cast<double>(rows));
  }
}

// y = gamma * (x - mean) / sqrt(variance + epsilon) + beta, as oneDNN computes it (the scale
// gamma / sqrt(variance + epsilon) once per channel). gamma, beta may be null.
__global__ void norm_apply_kernel(const float* __restrict__ x, const float* __restrict__ mean,
                                  const float* __restrict__ variance,
                                  const float* __restrict__ gamma, const float* __restrict__ beta,
                                  float epsilon, int64_t rows, int64_t channels,
                                  int64_t rows_per_block, float* __restrict__ y) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kNormLanes + threadIdx.x;
  if (c >= channels) return;
  const float inv = 1.0f / sqrtf(variance[c] + epsilon);
  const float scale = gamma ? gamma[c] * inv : inv, shift = beta ? beta[c] : 0.0f;
  const float mu = mean[c];
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int64_t end = begin + rows_per_block < rows ? begin + rows_per_block : rows;
  for (int64_t r = begin + threadIdx.y; r < end; r += kNormRowLanes)
    y[r * channels + c] = scale * (x[r * channels + c] - mu) + shift;
}

// From the backward partials: dbeta = sum dy, dgamma = sum dy * (x - mean) / sqrt(variance +
// epsilon), into sums (2 * channels: dbeta | dgamma) and into dgamma, dbeta when not null.
__global__ void norm_backward_sums_kernel(const float* __restrict__ partials, int row_blocks,
                                          int64_t channels, const float* __restrict__ variance,
                                          float epsilon, float* __restrict__ sums,
                                          float* __restrict__ dgamma, float* __restrict__ dbeta) {
  for (int64_t c = global_thread(); c < channels; c += grid_stride()) {
    double sdy = 0.0, sdyx = 0.0;
    for (int p = 0; p < row_blocks; ++p) {
      sdy += partials[static_cast<int64_t>(p) * channels + c];
      sdyx += partials[static_cast<int64_t>(row_blocks + p) * channels + c];
    }
    const float inv = 1.0f / sqrtf(variance[c] + epsilon);
    const float db = static_cast<float>(sdy), dg = static_cast<float>(sdyx) * inv;
    sums[c] = db;
    sums[channels + c] = dg;
    if (dbeta) dbeta[c] = db;
    if (dgamma) dgamma[c] = dg;
  }
}

// dx = gamma / sqrt(variance + epsilon) * (dy - dbeta / n - (x - mean) / sqrt(variance +
// epsilon) * dgamma / n), n = rows, as oneDNN computes it. dx may alias dy.
__global__ void norm_backward_data_kernel(const float* __restrict__ x, const float* dy,
                                          const float* __restrict__ mean,
                                          const float* __restrict__ variance,
                                          const float* __restrict__ gamma,
                                          const float* __restrict__ sums, float epsilon,
                                          int64_t rows, int64_t channels, int64_t rows_per_block,
                                          float* dx) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kNormLanes + threadIdx.x;
  if (c >= channels) return;
  const float inv = 1.0f / sqrtf(variance[c] + epsilon);
  const float n = static_cast<float>(rows);
  const float mean_dy = sums[c] / n, mean_dyx = sums[channels + c] * inv / n;
  const float scale = gamma ? gamma[c] * inv : inv, mu = mean[c];
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * rows_per_block;
  const int64_t end = begin + rows_per_block < rows ? begin + rows_per_block : rows;
  for (int64_t r = begin + threadIdx.y; r < end; r += kNormRowLanes) {
    const int64_t i = r * channels + c;
    dx[i] = scale * (dy[i] - mean_dy - (x[i] - mu) * mean_dyx);
  }
}

__global__ void norm_update_moving_kernel(const float* __restrict__ mean,
                                          const float* __restrict__ variance,
                                          float* __restrict__ moving_mean,
                                          float* __restrict__ moving_variance, int64_t channels,
                                          double momentum) {
  for (int64_t c = global_thread(); c < channels; c += grid_stride())
    batchnorm_moving_update(1, mean + c, variance + c, moving_mean + c, moving_variance + c,
                            momentum);
}

// ---- layer normalization: one warp per row (grid-stride over rows), the row's sums by
// warp_sum. The forward takes the mean, then the biased variance from it (two passes, as the
// CPU does), then y in Keras 3's order: inv = gamma * rstd, y = x * inv + (beta - mean * inv).
__device__ __forceinline__ int64_t warp_index() { return global_thread() / 32; }
__device__ __forceinline__ int64_t warp_count() { return grid_stride() / 32; }

__global__ void layernorm_forward_kernel(const float* __restrict__ x,
                                         const float* __restrict__ gamma,
                                         const float* __restrict__ beta, float* __restrict__ y,
                                         float* __restrict__ mean, float* __restrict__ rstd,
                                         int64_t rows, int64_t n, float epsilon) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const float count = static_cast<float>(n);
  for (int64_t row = warp_index(); row < rows; row += warp_count()) {
    const float* xr = x + row * n;
    float sum = 0.0f;
    for (int64_t j = lane; j < n; j += 32) sum += xr[j];
    const float mu = warp_sum(sum) / count;
    float squares = 0.0f;
    for (int64_t j = lane; j < n; j += 32) {
      const float d = xr[j] - mu;
      squares += d * d;
    }
    const float rs = 1.0f / sqrtf(warp_sum(squares) / count + epsilon);
    if (lane == 0) {
      if (mean) mean[row] = mu;
      if (rstd) rstd[row] = rs;
    }
    float* yr = y + row * n;
    for (int64_t j = lane; j < n; j += 32) {
      const float inv = gamma ? gamma[j] * rs : rs;
      const float shift = beta ? beta[j] - mu * inv : -mu * inv;
      yr[j] = xr[j] * inv + shift;
    }
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - mean) * rstd,
// one warp per row.
__global__ void layernorm_backward_data_kernel(const float* __restrict__ x,
                                               const float* __restrict__ dy,
                                               const float* __restrict__ gamma,
                                               const float* __restrict__ mean,
                                               const float* __restrict__ rstd,
                                               float* __restrict__ dx, int64_t rows, int64_t n) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const float count = static_cast<float>(n);
  for (int64_t row = warp_index(); row < rows; row += warp_count()) {
    const float* xr = x + row * n;
    const float* dyr = dy + row * n;
    const float mu = mean[row], rs = rstd[row];
    float sg = 0.0f, sgx = 0.0f;
    for (int64_t j = lane; j < n; j += 32) {
      const float g = gamma ? dyr[j] * gamma[j] : dyr[j];
      sg += g;
      sgx += g * ((xr[j] - mu) * rs);
    }
    const float mean_g = warp_sum(sg) / count, mean_gx = warp_sum(sgx) / count;
    float* dxr = dx + row * n;
    for (int64_t j = lane; j < n; j += 32) {
      const float g = gamma ? dyr[j] * gamma[j] : dyr[j];
      dxr[j] = rs * (g - mean_g - (xr[j] - mu) * rs * mean_gx);
    }
  }
}

// dgamma = column sums of dy * xhat, dbeta = column sums of dy: one thread per column over every
// row in order (deterministic, no atomics; neighbouring threads read neighbouring columns).
__global__ void layernorm_backward_params_kernel(
    const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ mean,
    const float* __restrict__ rstd, float* __restrict__ dgamma, float* __restrict__ dbeta,
    int64_t rows, int64_t n) {
  for (int64_t c = global_thread(); c < n; c += grid_stride()) {
    float sdy = 0.0f, sdyx = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      const float g = dy[r * n + c];
      sdy += g;
      sdyx += g * ((x[r * n + c] - mean[r]) * rstd[r]);
    }
    if (dgamma) dgamma[c] = sdyx;
    if (dbeta) dbeta[c] = sdy;
  }
}

// How the rows are split among blocks: a function of the shape only, so the order of every sum
// is the same in every run.
struct NormGrid {
  dim3 blocks;
  dim3 threads{kNormLanes, kNormRowLanes};
  int64_t rows_per_block = 0;
  int row_blocks = 0;
};
NormGrid norm_grid(int64_t rows, int64_t channels) {
  constexpr int64_t kRowsPerBlock = 512, kMaxRowBlocks = 65535;
  NormGrid g;
  g.rows_per_block = std::max(kRowsPerBlock, (rows + kMaxRowBlocks - 1) / kMaxRowBlocks);
  g.row_blocks =
      static_cast<int>(std::max<int64_t>(1, (rows + g.rows_per_block - 1) / g.rows_per_block));
  g.blocks = dim3(static_cast<unsigned>((channels + kNormLanes - 1) / kNormLanes),
                  static_cast<unsigned>(g.row_blocks));
  return g;
}

}  // namespace

// ---- batch normalization ----
int64_t batchnorm_scratch_floats(const BatchNormShape& shape, int64_t m) {
  const int64_t rows = m * shape.spatial;
  return (2 * static_cast<int64_t>(norm_grid(rows, shape.channels).row_blocks) + 2) *
         shape.channels;
}

cudaError_t launch_batchnorm_forward_training(cudaStream_t s, const BatchNormShape& shape,
                                              const float* x, const float* gamma, const float* beta,
                                              float* y, float* mean, float* variance, int64_t m,
                                              float* scratch) {
  const int64_t rows = m * shape.spatial, ch = shape.channels;
  if (rows <= 0 || ch <= 0) return cudaSuccess;
  const NormGrid g = norm_grid(rows, ch);
  norm_partials_kernel<NormSum::x>
      <<<g.blocks, g.threads, 0, s>>>(x, nullptr, nullptr, rows, ch, g.rows_per_block, scratch);
  norm_statistic_kernel<<<blocks_for(ch), kThreads, 0, s>>>(scratch, g.row_blocks, ch, rows, mean);
  norm_partials_kernel<NormSum::centered_squares>
      <<<g.blocks, g.threads, 0, s>>>(x, nullptr, mean, rows, ch, g.rows_per_block, scratch);
  norm_statistic_kernel<<<blocks_for(ch), kThreads, 0, s>>>(scratch, g.row_blocks, ch, rows,
                                                            variance);
  norm_apply_kernel<<<g.blocks, g.threads, 0, s>>>(x, mean, variance, shape.scale ? gamma : nullptr,
                                                   shape.center ? beta : nullptr, shape.epsilon,
                                                   rows, ch, g.rows_per_block, y);
  return cudaGetLastError();
}

cudaError_t launch_batchnorm_forward_inference(cudaStream_t s, const BatchNormShape& shape,
                                               const float* x, const float* gamma,
                                               const float* beta, const float* mean,
                                               const float* variance, float* y, int64_t m) {
  const int64_t rows = m * shape.spatial, ch = shape.channels;
  if (rows <= 0 || ch <= 0) return cudaSuccess;
  const NormGrid g = norm_grid(rows, ch);
  norm_apply_kernel<<<g.blocks, g.threads, 0, s>>>(x, mean, variance, shape.scale ? gamma : nullptr,
                                                   shape.center ? beta : nullptr, shape.epsilon,
                                                   rows, ch, g.rows_per_block, y);
  return cudaGetLastError();
}

cudaError_t launch_batchnorm_backward(cudaStream_t s, const BatchNormShape& shape, const float* x,
                                      const float* dy, const float* gamma, const float* mean,
                                      const float* variance, float* dx, float* dgamma, float* dbeta,
                                      int64_t m, float* scratch) {
  const int64_t rows = m * shape.spatial, ch = shape.channels;
  if (rows <= 0 || ch <= 0) return cudaSuccess;
  const NormGrid g = norm_grid(rows, ch);
  float* sums = scratch + 2 * static_cast<int64_t>(g.row_blocks) * ch;
  norm_partials_kernel<NormSum::dy_and_dy_centered>
      <<<g.blocks, g.threads, 0, s>>>(x, dy, mean, rows, ch, g.rows_per_block, scratch);
  norm_backward_sums_kernel<<<blocks_for(ch), kThreads, 0, s>>>(
      scratch, g.row_blocks, ch, variance, shape.epsilon, sums, shape.scale ? dgamma : nullptr,
      shape.center ? dbeta : nullptr);
  norm_backward_data_kernel<<<g.blocks, g.threads, 0, s>>>(
      x, dy, mean, variance, shape.scale ? gamma : nullptr, sums, shape.epsilon, rows, ch,
      g.rows_per_block, dx);
  return cudaGetLastError();
}

cudaError_t launch_batchnorm_update_moving(cudaStream_t s, const float* mean, const float* variance,
                                           float* moving_mean, float* moving_variance,
                                           int64_t channels, double momentum) {
  if (channels <= 0) return cudaSuccess;
  norm_update_moving_kernel<<<blocks_for(channels), kThreads, 0, s>>>(
      mean, variance, moving_mean, moving_variance, channels, momentum);
  return cudaGetLastError();
}

// A warp per row, 8 rows per block of kThreads.
cudaError_t launch_layernorm_forward(cudaStream_t s, const float* x, const float* gamma,
                                     const float* beta, float* y, float* mean, float* rstd,
                                     int64_t rows, int64_t n, float epsilon) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  layernorm_forward_kernel<<<blocks_for(rows * 32), kThreads, 0, s>>>(x, gamma, beta, y, mean, rstd,
                                                                      rows, n, epsilon);
  return cudaGetLastError();
}

cudaError_t launch_layernorm_backward(cudaStream_t s, const float* x, const float* dy,
                                      const float* gamma, const float* mean, const float* rstd,
                                      float* dx, float* dgamma, float* dbeta, int64_t rows,
                                      int64_t n) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  if (dgamma || dbeta)
    layernorm_backward_params_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, dy, mean, rstd, dgamma,
                                                                        dbeta, rows, n);
  layernorm_backward_data_kernel<<<blocks_for(rows * 32), kThreads, 0, s>>>(x, dy, gamma, mean,
                                                                            rstd, dx, rows, n);
  return cudaGetLastError();
}

cudaError_t preload_norm_kernels() {
  return preload_each({
      reinterpret_cast<const void*>(norm_partials_kernel<NormSum::x>),
      reinterpret_cast<const void*>(norm_partials_kernel<NormSum::centered_squares>),
      reinterpret_cast<const void*>(norm_partials_kernel<NormSum::dy_and_dy_centered>),
      reinterpret_cast<const void*>(norm_statistic_kernel),
      reinterpret_cast<const void*>(norm_apply_kernel),
      reinterpret_cast<const void*>(norm_backward_sums_kernel),
      reinterpret_cast<const void*>(norm_backward_data_kernel),
      reinterpret_cast<const void*>(norm_update_moving_kernel),
      reinterpret_cast<const void*>(layernorm_forward_kernel),
      reinterpret_cast<const void*>(layernorm_backward_data_kernel),
      reinterpret_cast<const void*>(layernorm_backward_params_kernel),
  });
}

}  // namespace crossover::cuda
