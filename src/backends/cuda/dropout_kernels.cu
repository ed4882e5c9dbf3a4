// The CUDA backend's dropout and noise kernels: each element's Philox draw exactly as the CPU's
// (backends/kernel_math.h, core/philox.h), one thread per element.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/kernels.h"
#include "backends/kernel_math.h"
#include "core/philox.h"

namespace crossover::cuda {
namespace {

// keep drawn exactly as on the CPU: dropout_keep(seed, layer, step, first + row * n + col, rate),
// first = first_row * n.
__global__ void dropout_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                       uint8_t* __restrict__ mask, int64_t total, float rate,
                                       float scale, uint64_t seed, uint32_t layer,
                                       const StepCounters* counters, uint64_t first) {
  const uint64_t step = static_cast<uint64_t>(counters->step);
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    const bool keep = dropout_keep(seed, layer, step, first + static_cast<uint64_t>(e), rate);
    mask[e] = keep ? 1 : 0;
    y[e] = keep ? x[e] * scale : 0.0f;
  }
}

__global__ void dropout_backward_kernel(const float* __restrict__ dy,
                                        const uint8_t* __restrict__ mask, float* __restrict__ dx,
                                        int64_t total, float scale) {
  for (int64_t e = global_thread(); e < total; e += grid_stride())
    dx[e] = mask[e] ? dy[e] * scale : 0.0f;
}

// The noise layers' draws exactly as the CPU's (Backend::noise_forward): philox_normal and
// spatial_dropout_keep of the global element first + e, first = first_row * n.
__global__ void noise_forward_kernel(NoiseKind kind, const float* __restrict__ x,
                                     float* __restrict__ y, float* __restrict__ factor,
                                     int64_t total, int64_t n, int64_t channels, float amount,
                                     float scale, uint64_t seed, uint32_t layer,
                                     const StepCounters* counters, int64_t first_row) {
  const uint64_t step = static_cast<uint64_t>(counters->step);
  const uint64_t first = static_cast<uint64_t>(first_row) * static_cast<uint64_t>(n);
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    if (kind == NoiseKind::gaussian_noise) {
      y[e] = x[e] + amount * philox_normal(seed, layer, step, first + static_cast<uint64_t>(e));
    } else if (kind == NoiseKind::gaussian_dropout) {
      const float f =
          1.0f + amount * philox_normal(seed, layer, step, first + static_cast<uint64_t>(e));
      factor[e] = f;
      y[e] = x[e] * f;
    } else {
      const int64_t r = e / n, c = e % n;
      const uint64_t channel =
          static_cast<uint64_t>(first_row + r) * static_cast<uint64_t>(channels) +
          static_cast<uint64_t>(c % channels);
      const float f = spatial_dropout_keep(seed, layer, step, channel, amount) ? scale : 0.0f;
      factor[e] = f;
      y[e] = x[e] * f;
    }
  }
}

// y_after_dropout > 0 exactly when the unit was kept and its ReLU output was positive.
__global__ void relu_dropout_backward_kernel(const float* __restrict__ y,
                                             const float* __restrict__ dy, float* __restrict__ dz,
                                             int64_t total, float scale) {
  for (int64_t e = global_thread(); e < total; e += grid_stride())
    dz[e] = y[e] > 0.0f ? dy[e] * scale : 0.0f;
}

}  // namespace

cudaError_t launch_dropout_forward(cudaStream_t s, const float* x, float* y, uint8_t* mask,
                                   int64_t m, int64_t n, float rate, uint64_t seed, uint32_t layer,
                                   const StepCounters* counters, int64_t first_row) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  const float scale = 1.0f / (1.0f - rate);  // as the CPU computes it
  const uint64_t first = static_cast<uint64_t>(first_row) * static_cast<uint64_t>(n);
  dropout_forward_kernel<<<blocks_for(m * n), kThreads, 0, s>>>(x, y, mask, m * n, rate, scale,
                                                                seed, layer, counters, first);
  return cudaGetLastError();
}

cudaError_t launch_noise_forward(cudaStream_t s, NoiseKind kind, const float* x, float* y,
                                 float* factor, int64_t m, int64_t n, int64_t channels,
                                 float amount, uint64_t seed, uint32_t layer,
                                 const StepCounters* counters, int64_t first_row) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  const float scale = 1.0f / (1.0f - amount);  // as the CPU computes it (spatial_dropout)
  noise_forward_kernel<<<blocks_for(m * n), kThreads, 0, s>>>(
      kind, x, y, factor, m * n, n, channels, amount, scale, seed, layer, counters, first_row);
  return cudaGetLastError();
}

cudaError_t launch_dropout_backward(cudaStream_t s, const float* dy, const uint8_t* mask, float* dx,
                                    int64_t total, float rate) {
  if (total <= 0) return cudaSuccess;
  const float scale = 1.0f / (1.0f - rate);
  dropout_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, mask, dx, total, scale);
  return cudaGetLastError();
}

cudaError_t launch_relu_dropout_backward(cudaStream_t s, const float* y_after_dropout,
                                         const float* dy, float* dz, int64_t total, float rate) {
  if (total <= 0) return cudaSuccess;
  const float scale = 1.0f / (1.0f - rate);
  relu_dropout_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(y_after_dropout, dy, dz,
                                                                      total, scale);
  return cudaGetLastError();
}

cudaError_t preload_dropout_kernels() {
  return preload_each({
      reinterpret_cast<const void*>(dropout_forward_kernel),
      reinterpret_cast<const void*>(dropout_backward_kernel),
      reinterpret_cast<const void*>(relu_dropout_backward_kernel),
      reinterpret_cast<const void*>(noise_forward_kernel),
  });
}

}  // namespace crossover::cuda
