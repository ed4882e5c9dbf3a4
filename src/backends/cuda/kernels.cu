// The CUDA backend's kernels. Semantics are the CPU reference's (backends/cpu/cpu_backend.cpp);
// the per-element arithmetic that must not drift between the two (optimizer updates, the
// learning-rate schedule, a loss row, Philox dropout draws) is the shared code of
// backends/kernel_math.h and core/philox.h, compiled here as device code.
//
// Sizes in this model are small (a batch is 32 rows; the widest layer 1000 columns), so most
// kernels are launch-bound: they are written plainly, with grid-stride loops, and the training
// step's launches are what the CUDA graph amortises.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/kernels.h"
#include "backends/kernel_math.h"
#include "backends/losses/list.h"
#include "core/philox.h"

namespace crossover::cuda {
namespace {

int blocks_for(int64_t n, int threads = kThreads, int max_blocks = kMaxBlocks) {
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
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum of one double per thread over the block, in a fixed order (a shared-memory tree), into
// thread 0's return value. blockDim.x must be a power of two <= 1024; `sh` holds blockDim.x.
__device__ double block_sum(double v, double* sh) {
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
__device__ bool last_block_done(unsigned int* ticket) {
  __threadfence();
  unsigned int t = atomicAdd(ticket, 1u);
  return t == gridDim.x - 1;
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

// Nearest-neighbour upsampling, channels last: output value (b, oy, ox, k) is input value
// (b, oy / size_h, ox / size_w, k); the backward sums each input value's block, row by row.
__global__ void upsample2d_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                          int64_t total, int64_t in_h, int64_t in_w, int64_t c,
                                          int64_t size_h, int64_t size_w) {
  const int64_t out_w = in_w * size_w, out_h = in_h * size_h;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    const int64_t k = e % c, ox = e / c % out_w, oy = e / (c * out_w) % out_h;
    const int64_t b = e / (c * out_w * out_h);
    y[e] = x[((b * in_h + oy / size_h) * in_w + ox / size_w) * c + k];
  }
}

__global__ void upsample2d_backward_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                           int64_t total, int64_t in_h, int64_t in_w, int64_t c,
                                           int64_t size_h, int64_t size_w) {
  const int64_t out_w = in_w * size_w, out_h = in_h * size_h;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    const int64_t k = e % c, ix = e / c % in_w, iy = e / (c * in_w) % in_h;
    const int64_t b = e / (c * in_w * in_h);
    const float* block = dy + ((b * out_h + iy * size_h) * out_w + ix * size_w) * c + k;
    float sum = 0.0f;
    for (int64_t i = 0; i < size_h; ++i)
      for (int64_t j = 0; j < size_w; ++j) sum += block[(i * out_w + j) * c];
    dx[e] = sum;
  }
}

// y_after_dropout > 0 exactly when the unit was kept and its ReLU output was positive.
__global__ void relu_dropout_backward_kernel(const float* __restrict__ y,
                                             const float* __restrict__ dy, float* __restrict__ dz,
                                             int64_t total, float scale) {
  for (int64_t e = global_thread(); e < total; e += grid_stride())
    dz[e] = y[e] > 0.0f ? dy[e] * scale : 0.0f;
}

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

// ---- optimizer ------------------------------------------------------------------------------
// The launch's index space is the concatenation of all slots; block chunks of kChunk elements
// stride over it, and each chunk walks the slots it overlaps (found by binary search).
constexpr int kOptThreads = 256;
constexpr int64_t kChunk = kOptThreads * 8;

__device__ int first_slot_ending_after(const SlotDescriptor* slots, int nslots, int64_t begin) {
  int lo = 0, hi = nslots;  // first s with offset + n > begin
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (slots[mid].offset + slots[mid].n > begin)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

__global__ void gradient_norm_kernel(const SlotDescriptor* __restrict__ slots, int nslots,
                                     int64_t total, float clipnorm, StepCounters* counters,
                                     double* partials, unsigned int* ticket) {
  double acc = 0.0;
  for (int64_t chunk = blockIdx.x; chunk * kChunk < total; chunk += gridDim.x) {
    const int64_t begin = chunk * kChunk;
    const int64_t end = begin + kChunk < total ? begin + kChunk : total;
    for (int s = first_slot_ending_after(slots, nslots, begin); s < nslots && slots[s].offset < end;
         ++s) {
      const SlotDescriptor d = slots[s];
      const int64_t lo = (begin > d.offset ? begin : d.offset) - d.offset;
      const int64_t hi = (end < d.offset + d.n ? end : d.offset + d.n) - d.offset;
      for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const double g = d.grad[i];
        acc += g * g;
      }
    }
  }
  __shared__ double sh[kOptThreads];
  __shared__ bool last;
  acc = block_sum(acc, sh);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = acc;
    last = last_block_done(ticket);
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    double sum = 0.0;
    for (unsigned b = 0; b < gridDim.x; ++b) sum += __ldcg(partials + b);
    counters->grad_scale = clipnorm_scale(clipnorm, sum);
    *ticket = 0;
  }
}

__global__ void tensor_norm_kernel(SlotDescriptor* __restrict__ slots, float clipnorm) {
  const SlotDescriptor d = slots[blockIdx.x];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < d.n; i += blockDim.x) {
    const double g = d.grad[i];
    acc += g * g;
  }
  __shared__ double sh[kOptThreads];
  acc = block_sum(acc, sh);
  if (threadIdx.x == 0) slots[blockIdx.x].clip_divisor = tensor_clip_divisor(clipnorm, acc);
}

__global__ void optimizer_update_kernel(OptimizerConfig config,
                                        const SlotDescriptor* __restrict__ slots, int nslots,
                                        int64_t total, StepCounters* counters,
                                        unsigned int* ticket) {
  // Every block reads the step before any block can finish, so the last block may advance it.
  __shared__ UpdateConstants s_u;
  __shared__ float s_scale;
  __shared__ bool last;
  if (threadIdx.x == 0) {
    const int64_t step = counters->step;
    const float lr = scheduled_learning_rate(config.schedule, step);
    s_u = update_constants(config, lr, step + 1, *counters);
    s_scale = config.clipnorm > 0.0f ? counters->grad_scale : 1.0f;
  }
  __syncthreads();
  const UpdateConstants u = s_u;
  const float grad_scale = s_scale;
  for (int64_t chunk = blockIdx.x; chunk * kChunk < total; chunk += gridDim.x) {
    const int64_t begin = chunk * kChunk;
    const int64_t end = begin + kChunk < total ? begin + kChunk : total;
    for (int s = first_slot_ending_after(slots, nslots, begin); s < nslots && slots[s].offset < end;
         ++s) {
      const SlotDescriptor d = slots[s];
      const int64_t lo = (begin > d.offset ? begin : d.offset) - d.offset;
      const int64_t hi = (end < d.offset + d.n ? end : d.offset + d.n) - d.offset;
      for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float w = d.value[i];
        update_one(config, u, config.tensor_clipnorm > 0.0f ? d.clip_divisor : grad_scale,
                   d.decay != 0, w, d.grad[i], d.slot1, d.slot2, d.slot3, i);
        d.value[i] = w;
      }
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) last = last_block_done(ticket);
  __syncthreads();
  if (last && threadIdx.x == 0) {
    counters->learning_rate = u.lr;
    if (!(config.clipnorm > 0.0f)) counters->grad_scale = 1.0f;
    record_step(config, u, *counters, counters->step + 1);
    counters->step += 1;
    counters->batch_index += 1;
    *ticket = 0;
  }
}

__global__ void advance_batch_kernel(StepCounters* counters) { counters->batch_index += 1; }

// ---- convolution helpers and pooling (channels last) -----------------------------------------
// out(cols, rows) = in(rows, cols)^T: Keras's (kh, kw, in, out) kernel as cuDNN's (out, kh, kw, in)
// and back.
__global__ void transpose_kernel(const float* __restrict__ in, float* __restrict__ out,
                                 int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    const int64_t j = e / rows, i = e - j * rows;  // out[j, i]
    out[e] = in[i * cols + j];
  }
}

// xp (m, h + top + bottom, w + left + right, c) = x with zeros around it.
__global__ void pad_nhwc_kernel(const float* __restrict__ x, float* __restrict__ xp, int64_t m,
                                int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
                                int64_t hp, int64_t wp) {
  const int64_t total = m * hp * wp * c;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    int64_t r = e;
    const int64_t ch = r % c;
    r /= c;
    const int64_t col = r % wp - left;
    r /= wp;
    const int64_t row = r % hp - top;
    const int64_t n = r / hp;
    xp[e] =
        row >= 0 && row < h && col >= 0 && col < w ? x[((n * h + row) * w + col) * c + ch] : 0.0f;
  }
}

// dx (m, h, w, c) = the interior of dxp (m, hp, wp, c) that starts at (top, left).
__global__ void crop_nhwc_kernel(const float* __restrict__ dxp, float* __restrict__ dx, int64_t m,
                                 int64_t h, int64_t w, int64_t c, int64_t top, int64_t left,
                                 int64_t hp, int64_t wp) {
  const int64_t total = m * h * w * c;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    int64_t r = e;
    const int64_t ch = r % c;
    r /= c;
    const int64_t col = r % w;
    r /= w;
    const int64_t row = r % h;
    const int64_t n = r / h;
    dx[e] = dxp[((n * hp + row + top) * wp + col + left) * c + ch];
  }
}

// One thread per output element (n, oh, ow, c). Max: the first maximum in the window's row-major
// order (a later equal element does not replace it, as oneDNN does), its position in the image
// (row * in_w + col) into argmax when given. Average: over the real elements only.
__global__ void pool_forward_kernel(PoolShape s, const float* __restrict__ x, float* __restrict__ y,
                                    int32_t* __restrict__ argmax, int64_t m) {
  const int64_t total = m * s.out_h * s.out_w * s.channels;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    int64_t r = e;
    const int64_t ch = r % s.channels;
    r /= s.channels;
    const int64_t ow = r % s.out_w;
    r /= s.out_w;
    const int64_t oh = r % s.out_h;
    const int64_t n = r / s.out_h;
    const PoolSpan rows = pool_rows(s, oh), cols = pool_cols(s, ow);
    const float* img = x + n * s.in_h * s.in_w * s.channels + ch;
    if (s.kind == PoolKind::max) {
      float best = img[(rows.start * s.in_w + cols.start) * s.channels];
      int64_t at = rows.start * s.in_w + cols.start;
      for (int64_t i = rows.start; i < rows.end; ++i)
        for (int64_t j = cols.start; j < cols.end; ++j) {
          const float v = img[(i * s.in_w + j) * s.channels];
          if (v > best) best = v, at = i * s.in_w + j;
        }
      y[e] = best;
      if (argmax) argmax[e] = static_cast<int32_t>(at);
    } else {
      float sum = 0.0f;
      for (int64_t i = rows.start; i < rows.end; ++i)
        for (int64_t j = cols.start; j < cols.end; ++j) sum += img[(i * s.in_w + j) * s.channels];
      y[e] = sum / static_cast<float>(rows.size() * cols.size());
    }
  }
}

// One thread per input element (n, h, w, c), summing what every window that covers it sends
// back (no atomics, so the sums are deterministic).
__global__ void pool_backward_kernel(PoolShape s, const float* __restrict__ dy,
                                     const int32_t* __restrict__ argmax, float* __restrict__ dx,
                                     int64_t m) {
  const int64_t total = m * s.in_h * s.in_w * s.channels;
  for (int64_t e = global_thread(); e < total; e += grid_stride()) {
    int64_t r = e;
    const int64_t ch = r % s.channels;
    r /= s.channels;
    const int64_t w = r % s.in_w;
    r /= s.in_w;
    const int64_t h = r % s.in_h;
    const int64_t n = r / s.in_h;
    // Outputs o with o * stride - pad <= h < o * stride - pad + window.
    const int64_t hp = h + s.pad_top, wp = w + s.pad_left;
    const int64_t oh0 = hp - s.window_h < 0 ? 0 : (hp - s.window_h) / s.stride_h + 1;
    const int64_t ow0 = wp - s.window_w < 0 ? 0 : (wp - s.window_w) / s.stride_w + 1;
    const int64_t oh1 = hp / s.stride_h < s.out_h - 1 ? hp / s.stride_h : s.out_h - 1;
    const int64_t ow1 = wp / s.stride_w < s.out_w - 1 ? wp / s.stride_w : s.out_w - 1;
    const int64_t here = h * s.in_w + w;
    float sum = 0.0f;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = ((n * s.out_h + oh) * s.out_w + ow) * s.channels + ch;
        if (s.kind == PoolKind::max) {
          if (argmax[o] == here) sum += dy[o];
        } else {
          const PoolSpan rows = pool_rows(s, oh), cols = pool_cols(s, ow);
          sum += dy[o] / static_cast<float>(rows.size() * cols.size());
        }
      }
    dx[e] = sum;
  }
}

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
}  // namespace

// ---- launchers ----------------------------------------------------------------------------------

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

cudaError_t launch_upsample2d_forward(cudaStream_t s, const float* x, float* y, int64_t samples,
                                      int64_t in_h, int64_t in_w, int64_t channels, int64_t size_h,
                                      int64_t size_w) {
  const int64_t total = samples * in_h * size_h * in_w * size_w * channels;
  if (total <= 0) return cudaSuccess;
  upsample2d_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(x, y, total, in_h, in_w,
                                                                   channels, size_h, size_w);
  return cudaGetLastError();
}

cudaError_t launch_upsample2d_backward(cudaStream_t s, const float* dy, float* dx, int64_t samples,
                                       int64_t in_h, int64_t in_w, int64_t channels, int64_t size_h,
                                       int64_t size_w) {
  const int64_t total = samples * in_h * in_w * channels;
  if (total <= 0) return cudaSuccess;
  upsample2d_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(dy, dx, total, in_h, in_w,
                                                                    channels, size_h, size_w);
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

cudaError_t launch_gradient_norm(cudaStream_t s, const SlotDescriptor* slots, int nslots,
                                 int64_t total, float clipnorm, StepCounters* counters,
                                 const ReductionScratch& scratch) {
  const int blocks =
      blocks_for((total + kChunk - 1) / kChunk, 1, kNormMaxBlocks);  // one chunk per block
  gradient_norm_kernel<<<blocks, kOptThreads, 0, s>>>(slots, nslots, total, clipnorm, counters,
                                                      scratch.norm_partials, scratch.tickets + 1);
  return cudaGetLastError();
}

cudaError_t launch_optimizer_update(cudaStream_t s, const OptimizerConfig& config,
                                    const SlotDescriptor* slots, int nslots, int64_t total,
                                    StepCounters* counters, const ReductionScratch& scratch,
                                    int max_blocks) {
  const int blocks = blocks_for((total + kChunk - 1) / kChunk, 1, max_blocks);
  optimizer_update_kernel<<<blocks, kOptThreads, 0, s>>>(config, slots, nslots, total, counters,
                                                         scratch.tickets + 2);
  return cudaGetLastError();
}

cudaError_t launch_tensor_norms(cudaStream_t s, SlotDescriptor* slots, int nslots, float clipnorm) {
  if (nslots <= 0) return cudaSuccess;
  tensor_norm_kernel<<<nslots, kOptThreads, 0, s>>>(slots, clipnorm);
  return cudaGetLastError();
}

cudaError_t launch_advance_batch(cudaStream_t s, StepCounters* counters) {
  advance_batch_kernel<<<1, 1, 0, s>>>(counters);
  return cudaGetLastError();
}

cudaError_t launch_transpose(cudaStream_t s, const float* in, float* out, int64_t rows,
                             int64_t cols) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  transpose_kernel<<<blocks_for(rows * cols), kThreads, 0, s>>>(in, out, rows, cols);
  return cudaGetLastError();
}

cudaError_t launch_pad_nhwc(cudaStream_t s, const float* x, float* xp, int64_t m, int64_t h,
                            int64_t w, int64_t c, int64_t top, int64_t bottom, int64_t left,
                            int64_t right) {
  const int64_t hp = h + top + bottom, wp = w + left + right;
  if (m <= 0 || c <= 0 || hp <= 0 || wp <= 0) return cudaSuccess;
  pad_nhwc_kernel<<<blocks_for(m * hp * wp * c), kThreads, 0, s>>>(x, xp, m, h, w, c, top, left, hp,
                                                                   wp);
  return cudaGetLastError();
}

cudaError_t launch_crop_nhwc(cudaStream_t s, const float* dxp, float* dx, int64_t m, int64_t h,
                             int64_t w, int64_t c, int64_t top, int64_t bottom, int64_t left,
                             int64_t right) {
  if (m <= 0 || c <= 0 || h <= 0 || w <= 0) return cudaSuccess;
  crop_nhwc_kernel<<<blocks_for(m * h * w * c), kThreads, 0, s>>>(
      dxp, dx, m, h, w, c, top, left, h + top + bottom, w + left + right);
  return cudaGetLastError();
}

cudaError_t launch_pool_forward(cudaStream_t s, const PoolShape& shape, const float* x, float* y,
                                int32_t* argmax, int64_t m) {
  const int64_t total = m * shape.out_h * shape.out_w * shape.channels;
  if (total <= 0) return cudaSuccess;
  pool_forward_kernel<<<blocks_for(total), kThreads, 0, s>>>(shape, x, y, argmax, m);
  return cudaGetLastError();
}

cudaError_t launch_pool_backward(cudaStream_t s, const PoolShape& shape, const float* dy,
                                 const int32_t* argmax, float* dx, int64_t m) {
  const int64_t total = m * shape.in_h * shape.in_w * shape.channels;
  if (total <= 0) return cudaSuccess;
  pool_backward_kernel<<<blocks_for(total), kThreads, 0, s>>>(shape, dy, argmax, dx, m);
  return cudaGetLastError();
}

// ---- batch normalization ----
namespace {

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

cudaError_t preload_kernels() {
  const void* kernels[] = {
      reinterpret_cast<const void*>(fill_kernel),
      reinterpret_cast<const void*>(gather_rows_kernel),
      reinterpret_cast<const void*>(bias_activation_kernel),
      reinterpret_cast<const void*>(column_sums_kernel),
      reinterpret_cast<const void*>(to_bf16_kernel),
      reinterpret_cast<const void*>(activation_forward_kernel),
      reinterpret_cast<const void*>(softmax_rows_kernel),
      reinterpret_cast<const void*>(activation_backward_kernel),
      reinterpret_cast<const void*>(softmax_backward_rows_kernel),
      reinterpret_cast<const void*>(dropout_forward_kernel),
      reinterpret_cast<const void*>(dropout_backward_kernel),
      reinterpret_cast<const void*>(relu_dropout_backward_kernel),
      reinterpret_cast<const void*>(noise_forward_kernel),
      reinterpret_cast<const void*>(add_kernel),
      reinterpret_cast<const void*>(copy_columns_kernel),
      reinterpret_cast<const void*>(binary_forward_kernel),
      reinterpret_cast<const void*>(binary_backward_kernel),
      reinterpret_cast<const void*>(row_sum_kernel),
      reinterpret_cast<const void*>(permute_kernel),
      reinterpret_cast<const void*>(upsample2d_forward_kernel),
      reinterpret_cast<const void*>(upsample2d_backward_kernel),
      reinterpret_cast<const void*>(loss_kernel),
      reinterpret_cast<const void*>(metric_kernel),
      reinterpret_cast<const void*>(gradient_norm_kernel),
      reinterpret_cast<const void*>(optimizer_update_kernel),
      reinterpret_cast<const void*>(advance_batch_kernel),
      reinterpret_cast<const void*>(transpose_kernel),
      reinterpret_cast<const void*>(pad_nhwc_kernel),
      reinterpret_cast<const void*>(crop_nhwc_kernel),
      reinterpret_cast<const void*>(pool_forward_kernel),
      reinterpret_cast<const void*>(pool_backward_kernel),
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
  };
  for (const void* k : kernels) {
    cudaFuncAttributes attr;
    const cudaError_t e = cudaFuncGetAttributes(&attr, k);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace crossover::cuda
