// The CUDA backend's element-wise kernels (fill, gathering rows, bias and activations, bf16 copies,
// merging, permuting, arithmetic with broadcasting) and preload_kernels; the other groups are in
// the *_kernels.cu files beside it. Semantics are the CPU reference's (backends/cpu/);
// the per-element arithmetic that must not drift between the two (optimizer updates, the
// learning-rate schedule, a loss row, Philox dropout draws) is the shared code of
// backends/kernel_math.h and core/philox.h, compiled here as device code.
//
// Sizes in this model are small (a batch is 32 rows; the widest layer 1000 columns), so most
// kernels are launch-bound: they are written plainly, with grid-stride loops, and the training
// step's launches are what the CUDA graph amortises.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/kernels.h"
#include "backends/kernel_math.h"

namespace crossover::cuda {
namespace {

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float activate(ActivationKind act, float x, float alpha = 0.0f) {
  switch (act) {
    case ActivationKind::relu:
      return fmaxf(x, 0.0f);
    case ActivationKind::sigmoid:
      return 1.0f / (1.0f + expf(-x));
    case ActivationKind::tanh:
      return tanhf(x);
    case ActivationKind::linear:
    case ActivationKind::softmax:  // per row, never here
      return x;
    default:  // elu, selu, leaky_relu, gelu, softplus, swish, exponential: kernel_math.h's
      return activation_value(act, x, alpha);
  }
}

// ---------------------------------------------------------------------------------------------
__global__ void fill_kernel(float* dst, float value, int64_t n) {
  for (int64_t i = global_thread(); i < n; i += grid_stride()) dst[i] = value;
}

// dst[i, :] = src[indices[batch_index * batch + i], :]; batch_index read on the device.
__global__ void gather_rows_kernel(const float* __restrict__ src, int64_t cols,
                                   const int32_t* __restrict__ indices, int64_t batch,
                                   const StepCounters* counters, int64_t m,
                                   float* __restrict__ dst) {
  const int32_t* idx = indices + counters->batch_index * batch;
  const int64_t total = m * cols;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    const int64_t i = e / cols, j = e - i * cols;
    dst[e] = src[static_cast<int64_t>(idx[i]) * cols + j];
  }
}

__global__ void bias_activation_kernel(float* y, const float* __restrict__ b, int64_t m, int64_t n,
                                       ActivationKind act) {
  const int64_t total = m * n;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    float v = y[e];
    if (b) v += b[e % n];
    y[e] = activate(act, v);
  }
}

// Blocks of 32 x 8 threads; block x owns 32 columns, its 8 rows of threads stride over the rows.
__global__ void column_sums_kernel(const float* __restrict__ dy, float* __restrict__ db, int64_t m,
                                   int64_t n) {
  __shared__ float sh[8][33];
  const int64_t j = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float acc = 0.0f;
  if (j < n)
    for (int64_t r = threadIdx.y; r < m; r += 8) acc += dy[r * n + j];
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && j < n) {
    float s = 0.0f;
    for (int y = 0; y < 8; ++y) s += sh[y][threadIdx.x];
    db[j] = s;
  }
}

__global__ void to_bf16_kernel(const float* __restrict__ a, __nv_bfloat16* __restrict__ a16,
                               int64_t na, const float* __restrict__ b,
                               __nv_bfloat16* __restrict__ b16, int64_t nb) {
  for (int64_t e = global_thread(); e < na + nb; e += grid_stride()) {
    if (e < na)
      a16[e] = __float2bfloat16_rn(a[e]);
    else
      b16[e - na] = __float2bfloat16_rn(b[e - na]);
  }
}

__global__ void activation_forward_kernel(ActivationKind act, float alpha, const float* x, float* y,
                                          int64_t total) {
  for (int64_t e = global_thread(); e < total; e += grid_stride())
    y[e] = activate(act, x[e], alpha);
}

// One warp per row: max, sum of exp(x - max), then the normalised row. x may alias y.
__global__ void softmax_rows_kernel(const float* x, float* y, int64_t m, int64_t n) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= m) return;
  const float* xr = x + row * n;
  float* yr = y + row * n;
  float mx = -INFINITY;
  for (int64_t j = lane; j < n; j += 32) mx = fmaxf(mx, xr[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int64_t j = lane; j < n; j += 32) sum += expf(xr[j] - mx);
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t j = lane; j < n; j += 32) yr[j] = expf(xr[j] - mx) * inv;
}

__global__ void activation_backward_kernel(ActivationKind act, float alpha, const float* x,
                                           const float* y, const float* dy, float* dx,
                                           int64_t total) {
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    const float yv = y[e], g = dy[e];
    float d;
    switch (act) {
      case ActivationKind::relu:
        d = yv > 0.0f ? g : 0.0f;
        break;
      case ActivationKind::sigmoid:
        d = g * yv * (1.0f - yv);
        break;
      case ActivationKind::tanh:
        d = g * (1.0f - yv * yv);
        break;
      case ActivationKind::linear:
      case ActivationKind::softmax:  // per row, never here
        d = g;
        break;
      default:  // the input is read only by gelu and swish (activation_needs_input)
        d = g * activation_derivative(act, activation_needs_input(act) ? x[e] : 0.0f, yv, alpha);
        break;
    }
    dx[e] = d;
  }
}

// dx_j = y_j * (dy_j - sum_i dy_i y_i), one warp per row. dx may alias dy: every lane reads its
// elements for the dot product before any lane writes, and then reads and writes only its own.
__global__ void softmax_backward_rows_kernel(const float* y, const float* dy, float* dx, int64_t m,
                                             int64_t n) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x & 31;
  if (row >= m) return;
  const float* yr = y + row * n;
  const float* dyr = dy + row * n;
  float* dxr = dx + row * n;
  float dot = 0.0f;
  for (int64_t j = lane; j < n; j += 32) dot += dyr[j] * yr[j];
  dot = warp_sum(dot);
  for (int64_t j = lane; j < n; j += 32) dxr[j] = yr[j] * (dyr[j] - dot);
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t e = global_thread(); e < n; e += grid_stride()) y[e] = a[e] + b[e];
}

__global__ void copy_columns_kernel(const float* __restrict__ src, int64_t src_cols,
                                    int64_t src_col, float* __restrict__ dst, int64_t dst_cols,
                                    int64_t dst_col, int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    const int64_t r = e / cols, c = e % cols;
    dst[r * dst_cols + dst_col + c] = src[r * src_cols + src_col + c];
  }
}

// Element-wise arithmetic with broadcasting (kernel_math.h's binary_value, binary_gradient).
__global__ void binary_forward_kernel(BinaryOp op, BinaryShape s, const float* a, const float* b,
                                      float* y) {
  const int64_t total = s.rows * s.cols;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    const int64_t r = e / s.cols, c = e % s.cols;
    y[e] = binary_value(op, operand_at(a, s.a, s.a_value, r, c, s.cols),
                        operand_at(b, s.b, s.b_value, r, c, s.cols));
  }
}
// One operand's gradient (`how` its broadcast, of_a which one): each value sums its share of dy
// over what it was broadcast along, in row-major order (the CPU's).
__global__ void binary_backward_kernel(BinaryOp op, BinaryShape s, const float* a, const float* b,
                                       const float* dy, float* out, Broadcast how, bool of_a) {
  const int64_t rows = s.rows, cols = s.cols;
  auto share = [&](int64_t r, int64_t c) {
    const BinaryGrad g =
        binary_gradient(op, operand_at(a, s.a, s.a_value, r, c, cols),
                        operand_at(b, s.b, s.b_value, r, c, cols), dy[r * cols + c]);
    return of_a ? g.a : g.b;
  };
  const int64_t total = how == Broadcast::full     ? rows * cols
                        : how == Broadcast::column ? rows
                        : how == Broadcast::row    ? cols
                                                   : 1;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    float sum = 0.0f;
    if (how == Broadcast::full) {
      sum = share(e / cols, e % cols);
    } else if (how == Broadcast::column) {
      for (int64_t c = 0; c < cols; ++c) sum += share(e, c);
    } else if (how == Broadcast::row) {
      for (int64_t r = 0; r < rows; ++r) sum += share(r, e);
    } else {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) sum += share(r, c);
    }
    out[e] = sum;
  }
}
__global__ void row_sum_kernel(const float* x, float* y, int64_t rows, int64_t cols, float scale) {
  for (int64_t r = global_thread(); r < rows; r += grid_stride()) {
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += x[r * cols + c];
    y[r] = sum * scale;
  }
}

// A permutation of each sample's axes: y's axis i of dim[i] values steps stride[i] through x's
// sample; output value e is at sample e / values, and its position in y's axes at the remainder.
struct PermuteIndex {
  int rank = 0;
  int64_t values = 0;
  int64_t dim[PermuteShape::kMaxRank] = {};
  int64_t stride[PermuteShape::kMaxRank] = {};
};
__global__ void permute_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t total,
                               PermuteIndex p) {
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    int64_t rest = e % p.values, offset = e - rest;
    for (int i = p.rank - 1; i >= 0; --i) {
      offset += rest % p.dim[i] * p.stride[i];
      rest /= p.dim[i];
    }
    y[e] = x[offset];
  }
}

}  // namespace

cudaError_t launch_fill(cudaStream_t s, float* dst, float value, int64_t n) {
  if (n <= 0) return cudaSuccess;
  fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(dst, value, n);
  return cudaGetLastError();
}

cudaError_t launch_gather_rows(cudaStream_t s, const float* src, int64_t cols,
                               const int32_t* indices, int64_t batch, const StepCounters* counters,
                               int64_t m, float* dst) {
  if (m <= 0 || cols <= 0) return cudaSuccess;
  gather_rows_kernel<<<blocks_for(m * cols), kThreads, 0, s>>>(src, cols, indices, batch, counters,
                                                               m, dst);
  return cudaGetLastError();
}

cudaError_t launch_bias_activation(cudaStream_t s, float* y, const float* b, int64_t m, int64_t n,
                                   ActivationKind act) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  bias_activation_kernel<<<blocks_for(m * n), kThreads, 0, s>>>(y, b, m, n, act);
  return cudaGetLastError();
}

cudaError_t launch_column_sums(cudaStream_t s, const float* dy, float* db, int64_t m, int64_t n) {
  if (n <= 0) return cudaSuccess;
  const dim3 block(32, 8);
  const dim3 grid(static_cast<unsigned>((n + 31) / 32));
  column_sums_kernel<<<grid, block, 0, s>>>(dy, db, m, n);
  return cudaGetLastError();
}

cudaError_t launch_to_bf16(cudaStream_t s, const float* a, void* a16, int64_t na, const float* b,
                           void* b16, int64_t nb) {
  if (na + nb <= 0) return cudaSuccess;
  to_bf16_kernel<<<blocks_for(na + nb), kThreads, 0, s>>>(a, static_cast<__nv_bfloat16*>(a16), na,
                                                          b, static_cast<__nv_bfloat16*>(b16), nb);
  return cudaGetLastError();
}

cudaError_t launch_activation_forward(cudaStream_t s, ActivationKind act, float alpha,
                                      const float* x, float* y, int64_t m, int64_t n) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  if (act == ActivationKind::softmax) {
    const int rows_per_block = kThreads / 32;
    const int64_t blocks = (m + rows_per_block - 1) / rows_per_block;
    softmax_rows_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(x, y, m, n);
  } else if (act == ActivationKind::linear) {
    if (x == y) return cudaSuccess;
    return cudaMemcpyAsync(y, x, static_cast<size_t>(m * n) * sizeof(float),
                           cudaMemcpyDeviceToDevice, s);
  } else {
    activation_forward_kernel<<<blocks_for(m * n), kThreads, 0, s>>>(act, alpha, x, y, m * n);
  }
  return cudaGetLastError();
}

cudaError_t launch_activation_backward(cudaStream_t s, ActivationKind act, float alpha,
                                       const float* x, const float* y, const float* dy, float* dx,
                                       int64_t m, int64_t n) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  if (act == ActivationKind::softmax) {
    const int rows_per_block = kThreads / 32;
    const int64_t blocks = (m + rows_per_block - 1) / rows_per_block;
    softmax_backward_rows_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(y, dy, dx, m,
                                                                                    n);
  } else if (act == ActivationKind::linear) {
    if (dx == dy) return cudaSuccess;
    return cudaMemcpyAsync(dx, dy, static_cast<size_t>(m * n) * sizeof(float),
                           cudaMemcpyDeviceToDevice, s);
  } else {
    activation_backward_kernel<<<blocks_for(m * n), kThreads, 0, s>>>(act, alpha, x, y, dy, dx,
                                                                      m * n);
  }
  return cudaGetLastError();
}

cudaError_t launch_add(cudaStream_t s, const float* a, const float* b, float* y, int64_t n) {
  if (n <= 0) return cudaSuccess;
  add_kernel<<<blocks_for(n), kThreads, 0, s>>>(a, b, y, n);
  return cudaGetLastError();
}

cudaError_t launch_copy_columns(cudaStream_t s, const float* src, int64_t src_cols, int64_t src_col,
                                float* dst, int64_t dst_cols, int64_t dst_col, int64_t rows,
                                int64_t cols) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  copy_columns_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(src, src_cols, src_col, dst,
                                                                   dst_cols, dst_col, rows, cols);
  return cudaGetLastError();
}

cudaError_t launch_binary_forward(cudaStream_t s, BinaryOp op, const BinaryShape& shape,
                                  const float* a, const float* b, float* y) {
  const int64_t total = shape.rows * shape.cols;
  if (total <= 0) return cudaSuccess;
  binary_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(op, shape, a, b, y);
  return cudaGetLastError();
}

cudaError_t launch_binary_backward(cudaStream_t s, BinaryOp op, const BinaryShape& shape,
                                   const float* a, const float* b, const float* dy, float* da,
                                   float* db) {
  if (shape.rows * shape.cols <= 0) return cudaSuccess;
  for (int k = 0; k < 2; ++k) {
    float* out = k == 0 ? da : db;
    const Broadcast how = k == 0 ? shape.a : shape.b;
    if (!out) continue;
    const int64_t n = broadcast_size(how, shape.rows, shape.cols);
    binary_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(op, shape, a, b, dy, out, how,
                                                              k == 0);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t launch_row_sum(cudaStream_t s, const float* x, float* y, int64_t rows, int64_t cols,
                           float scale) {
  if (rows <= 0) return cudaSuccess;
  row_sum_kernel<<<blocks_for(rows), kThreads, 0, s>>>(x, y, rows, cols, scale);
  return cudaGetLastError();
}

cudaError_t launch_permute(cudaStream_t s, const PermuteShape& shape, const float* x, float* y,
                           int64_t samples) {
  PermuteIndex p;
  p.rank = shape.rank;
  p.values = permute_values(shape);
  const int64_t total = samples * p.values;
  if (total <= 0 || p.rank <= 0) return cudaSuccess;
  int64_t in_stride[PermuteShape::kMaxRank];
  int64_t step = 1;
  for (int a = p.rank; a-- > 0;) in_stride[a] = step, step *= shape.in[a];
  for (int i = 0; i < p.rank; ++i)
    p.dim[i] = shape.in[shape.perm[i]], p.stride[i] = in_stride[shape.perm[i]];
  permute_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, y, total, p);
  return cudaGetLastError();
}

namespace {

cudaError_t preload_elementwise_kernels() {
  return preload_each({
      reinterpret_cast<const void*>(fill_kernel),
      reinterpret_cast<const void*>(gather_rows_kernel),
      reinterpret_cast<const void*>(bias_activation_kernel),
      reinterpret_cast<const void*>(column_sums_kernel),
      reinterpret_cast<const void*>(to_bf16_kernel),
      reinterpret_cast<const void*>(activation_forward_kernel),
      reinterpret_cast<const void*>(softmax_rows_kernel),
      reinterpret_cast<const void*>(activation_backward_kernel),
      reinterpret_cast<const void*>(softmax_backward_rows_kernel),
      reinterpret_cast<const void*>(add_kernel),
      reinterpret_cast<const void*>(copy_columns_kernel),
      reinterpret_cast<const void*>(binary_forward_kernel),
      reinterpret_cast<const void*>(binary_backward_kernel),
      reinterpret_cast<const void*>(row_sum_kernel),
      reinterpret_cast<const void*>(permute_kernel),
  });
}

}  // namespace

// Every kernel file's kernels, this file's first (kernel_util.cuh).
cudaError_t preload_kernels() {
  for (cudaError_t (*preload)() :
       {preload_elementwise_kernels, preload_dropout_kernels, preload_loss_kernels,
        preload_optimizer_kernels, preload_conv_pool_kernels, preload_norm_kernels}) {
    const cudaError_t e = preload();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace crossover::cuda
