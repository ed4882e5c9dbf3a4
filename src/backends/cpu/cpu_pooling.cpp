// The CPU backend's pooling and nearest-neighbour upsampling: loops of our own over channels-last
// samples, vectorised across the channels.
#include <algorithm>

#include "backends/cpu/cpu_backend_impl.h"
#include "backends/kernel_math.h"

namespace crossover::cpu {

// Pooling: loops of our own over channels-last data, vectorised across the channels. oneDNN
// 2.6's jit:avx2 max pooling on NHWC ran at about 1 GB/s (40% of the MNIST convnet's step on
// Zen 3, bench/RESULTS.md). Max: the window's first maximum in row-major order wins a tie (as
// oneDNN did, and the CUDA kernels do); the workspace holds its offset in the sample (int32
// per output element), where backward sends the gradient. Average: the sum over the window's
// real elements divided by their count (padding never counts, TensorFlow's 'same').
std::size_t CpuBackend::pool2d_workspace_bytes(const PoolShape& s, int64_t m) {
  if (s.kind != PoolKind::max) return 0;
  return static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels) * sizeof(int32_t);
}
void CpuBackend::pool2d_forward(const PoolShape& s, const float* x, float* y, void* workspace,
                                int64_t m) {
  const int64_t c = s.channels, in_sample = s.in_h * s.in_w * c;
  int32_t* arg = static_cast<int32_t*>(workspace);  // null in inference
  parallel_rows(m * s.out_h, s.out_w * c * s.window_h * s.window_w, [&](int64_t row) {
    const int64_t n = row / s.out_h, oh = row % s.out_h;
    const float* xs = x + n * in_sample;
    const auto [ha, hb] = pool_rows(s, oh);
    for (int64_t ow = 0; ow < s.out_w; ++ow) {
      const auto [wa, wb] = pool_cols(s, ow);
      const int64_t out = (row * s.out_w + ow) * c;
      float* yo = y + out;
      if (s.kind == PoolKind::max) {
        int32_t* ao = arg ? arg + out : nullptr;
        bool first = true;
        for (int64_t h = ha; h < hb; ++h)
          for (int64_t w = wa; w < wb; ++w) {
            const int64_t off = (h * s.in_w + w) * c;
            const float* xi = xs + off;
            if (first) {
              for (int64_t k = 0; k < c; ++k) yo[k] = xi[k];
              if (ao)
                for (int64_t k = 0; k < c; ++k) ao[k] = static_cast<int32_t>(off + k);
              first = false;
            } else if (ao) {
              for (int64_t k = 0; k < c; ++k) {
                const bool more = xi[k] > yo[k];
                yo[k] = more ? xi[k] : yo[k];
                ao[k] = more ? static_cast<int32_t>(off + k) : ao[k];
              }
            } else {
              for (int64_t k = 0; k < c; ++k) yo[k] = xi[k] > yo[k] ? xi[k] : yo[k];
            }
          }
        if (first) {  // a window of padding only (no Keras shape makes one): 0, no gradient
          for (int64_t k = 0; k < c; ++k) yo[k] = 0.0f;
          if (ao)
            for (int64_t k = 0; k < c; ++k) ao[k] = -1;
        }
      } else {
        const float count = static_cast<float>(std::max<int64_t>((hb - ha) * (wb - wa), 1));
        for (int64_t k = 0; k < c; ++k) yo[k] = 0.0f;
        for (int64_t h = ha; h < hb; ++h)
          for (int64_t w = wa; w < wb; ++w) {
            const float* xi = xs + (h * s.in_w + w) * c;
            for (int64_t k = 0; k < c; ++k) yo[k] += xi[k];
          }
        for (int64_t k = 0; k < c; ++k) yo[k] /= count;
      }
    }
  });
}
void CpuBackend::pool2d_backward(const PoolShape& s, const float* dy, const void* workspace,
                                 float* dx, int64_t m) {
  const int64_t c = s.channels, in_sample = s.in_h * s.in_w * c;
  const int64_t out_sample = s.out_h * s.out_w * c;
  const auto* arg = static_cast<const int32_t*>(workspace);
  // One sample per task: the windows of a sample may overlap, samples never do.
  parallel_rows(m, in_sample + out_sample * s.window_h * s.window_w, [&](int64_t n) {
    float* dxs = dx + n * in_sample;
    const float* dys = dy + n * out_sample;
    std::fill(dxs, dxs + in_sample, 0.0f);
    if (s.kind == PoolKind::max) {
      const int32_t* as = arg + n * out_sample;
      for (int64_t i = 0; i < out_sample; ++i)
        if (as[i] >= 0) dxs[as[i]] += dys[i];
      return;
    }
    for (int64_t oh = 0; oh < s.out_h; ++oh) {
      const auto [ha, hb] = pool_rows(s, oh);
      for (int64_t ow = 0; ow < s.out_w; ++ow) {
        const auto [wa, wb] = pool_cols(s, ow);
        const float count = static_cast<float>(std::max<int64_t>((hb - ha) * (wb - wa), 1));
        const float* dyo = dys + (oh * s.out_w + ow) * c;
        for (int64_t h = ha; h < hb; ++h)
          for (int64_t w = wa; w < wb; ++w) {
            float* dxi = dxs + (h * s.in_w + w) * c;
            for (int64_t k = 0; k < c; ++k) dxi[k] += dyo[k] / count;
          }
      }
    }
  });
}

// ---- nearest-neighbour upsampling: one input row (a sample's row of in_w pixels) per task;
// the forward writes the first output row of its block and copies it down the block, the
// backward sums the block's rows and columns in order (the same at any thread count) ----
void CpuBackend::upsample2d_forward(const PoolShape& s, const float* x, float* y, int64_t m) {
  const int64_t c = s.channels, out_row = s.out_w * c;
  parallel_rows(m * s.in_h, s.window_h * out_row, [&](int64_t r) {
    const float* in = x + r * s.in_w * c;
    float* out = y + r * s.window_h * out_row;
    for (int64_t ix = 0; ix < s.in_w; ++ix)
      for (int64_t j = 0; j < s.window_w; ++j)
        std::copy_n(in + ix * c, c, out + (ix * s.window_w + j) * c);
    for (int64_t i = 1; i < s.window_h; ++i) std::copy_n(out, out_row, out + i * out_row);
  });
}
void CpuBackend::upsample2d_backward(const PoolShape& s, const float* dy, float* dx, int64_t m) {
  const int64_t c = s.channels, out_row = s.out_w * c;
  parallel_rows(m * s.in_h, s.window_h * out_row, [&](int64_t r) {
    const float* block = dy + r * s.window_h * out_row;
    float* out = dx + r * s.in_w * c;
    std::fill_n(out, s.in_w * c, 0.0f);
    for (int64_t i = 0; i < s.window_h; ++i)
      for (int64_t ix = 0; ix < s.in_w; ++ix)
        for (int64_t j = 0; j < s.window_w; ++j) {
          const float* g = block + i * out_row + (ix * s.window_w + j) * c;
          for (int64_t k = 0; k < c; ++k) out[ix * c + k] += g[k];
        }
  });
}

}  // namespace crossover::cpu
