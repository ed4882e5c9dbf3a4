// What the CUDA backend's kernel files (kernels.cu and the *_kernels.cu beside it) share: grid
// sizes, grid-stride indices, warp and block sums, and preloading. Device code: for .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "backends/cuda/kernels.h"

namespace crossover::cuda {

inline int blocks_for(int64_t n, int threads = kThreads, int max_blocks = kMaxBlocks) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > max_blocks) b = max_blocks;
  return static_cast<int>(b);
}

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum of one double per thread over the block, in a fixed order (a shared-memory tree), into
// thread 0's return value. blockDim.x must be a power of two <= 1024; `sh` holds blockDim.x.
inline __device__ double block_sum(double v, double* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

// Thread 0 of each block calls this after writing its partial: returns true in the one block
// that finishes last (which then owns all partials and must reset *ticket to 0).
inline __device__ bool last_block_done(unsigned int* ticket) {
  __threadfence();
  unsigned int t = atomicAdd(ticket, 1u);
  return t == gridDim.x - 1;
}

// cudaFuncGetAttributes of each kernel, which loads it now (preload_kernels, kernels.h): the first
// failure, else cudaSuccess.
inline cudaError_t preload_each(std::initializer_list<const void*> kernels) {
  for (const void* k : kernels) {
    cudaFuncAttributes attr;
    const cudaError_t e = cudaFuncGetAttributes(&attr, k);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// Each kernel file's preload_each over its kernels; preload_kernels (kernels.cu) calls them all.
cudaError_t preload_dropout_kernels();
cudaError_t preload_loss_kernels();
cudaError_t preload_optimizer_kernels();
cudaError_t preload_conv_pool_kernels();
cudaError_t preload_norm_kernels();

}  // namespace crossover::cuda
