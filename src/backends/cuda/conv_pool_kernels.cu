// The CUDA backend's channels-last image kernels: the convolutions' kernel transpose, padding and
// cropping (around cuDNN), pooling, and nearest-neighbour upsampling.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/backend.h"
#include "backends/cuda/kernel_util.cuh"
#include "backends/cuda/kernels.h"
#include "backends/kernel_math.h"

namespace crossover::cuda {
namespace {

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

}  // namespace

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

cudaError_t preload_conv_pool_kernels() {
  return preload_each({
      reinterpret_cast<const void*>(upsample2d_forward_kernel),
      reinterpret_cast<const void*>(upsample2d_backward_kernel),
      reinterpret_cast<const void*>(transpose_kernel),
      reinterpret_cast<const void*>(pad_nhwc_kernel),
      reinterpret_cast<const void*>(crop_nhwc_kernel),
      reinterpret_cast<const void*>(pool_forward_kernel),
      reinterpret_cast<const void*>(pool_backward_kernel),
  });
}

}  // namespace crossover::cuda
