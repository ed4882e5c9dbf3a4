// The CPU backend's dropout and noise layers: Philox draws (core/philox.h), eight blocks at a time
// in AVX2 for dropout, the same on every device.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_backend_impl.h"
#include "backends/kernel_math.h"
#include "core/philox.h"

namespace crossover::cpu {
namespace {

// The high and low 32 bits of each lane's product with m (32 x 32 -> 64 bits, eight lanes):
// AVX2 multiplies the even lanes; the odd lanes are shifted down, multiplied, and blended back.
inline void mul_hi_lo(__m256i a, uint32_t m, __m256i& hi, __m256i& lo) {
  const __m256i mv = _mm256_set1_epi32(static_cast<int>(m));
  const __m256i even = _mm256_mul_epu32(a, mv);                        // lanes 0, 2, 4, 6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), mv);  // lanes 1, 3, 5, 7
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// The elementwise loops are plain functions of restrict pointers, free of branches, so that
// they vectorise (a mask branch mispredicts on every other element).
// Element i of x, y and mask is element 4 * base + i of the layer's draw: block b here is
// Philox block base + b.
__attribute__((noinline)) void dropout_blocks(const float* __restrict x, float* __restrict y,
                                              uint8_t* __restrict mask, int64_t total, float rate,
                                              float scale, uint64_t seed, uint32_t layer,
                                              uint64_t step, uint64_t base, int64_t b0,
                                              int64_t b1) {
  const int64_t full = std::min(b1, total / 4);
  int64_t b = b0;
  // Eight Philox blocks at a time in AVX2 (the library's baseline ISA, x86-64-v3): the same
  // arithmetic as philox4x32_10, in the same order, one block per 32-bit lane.
  const uint32_t draw_lo = static_cast<uint32_t>(step);
  const uint32_t draw_hi = static_cast<uint32_t>(step >> 32) ^
                           (static_cast<uint32_t>(RngStream::dropout) << 24) ^ (layer << 4);
  const __m256 rate8 = _mm256_set1_ps(rate), scale8 = _mm256_set1_ps(scale);
  for (; b + 8 <= full; b += 8) {
    const uint64_t g = base + static_cast<uint64_t>(b);  // the Philox block of lane 0
    __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(g))),
                                  _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    // The block index's high word, lane by lane.
    __m256i c1 =
        _mm256_setr_epi32(static_cast<int>((g + 0) >> 32), static_cast<int>((g + 1) >> 32),
                          static_cast<int>((g + 2) >> 32), static_cast<int>((g + 3) >> 32),
                          static_cast<int>((g + 4) >> 32), static_cast<int>((g + 5) >> 32),
                          static_cast<int>((g + 6) >> 32), static_cast<int>((g + 7) >> 32));
    __m256i c2 = _mm256_set1_epi32(static_cast<int>(draw_lo));
    __m256i c3 = _mm256_set1_epi32(static_cast<int>(draw_hi));
    uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
      __m256i p0_hi, p0_lo, p1_hi, p1_lo;
      mul_hi_lo(c0, 0xD2511F53u, p0_hi, p0_lo);
      mul_hi_lo(c2, 0xCD9E8D57u, p1_hi, p1_lo);
      const __m256i n0 =
          _mm256_xor_si256(_mm256_xor_si256(p1_hi, c1), _mm256_set1_epi32(static_cast<int>(k0)));
      const __m256i n2 =
          _mm256_xor_si256(_mm256_xor_si256(p0_hi, c3), _mm256_set1_epi32(static_cast<int>(k1)));
      c1 = p1_lo;
      c3 = p0_lo;
      c0 = n0;
      c2 = n2;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // Lane j holds block b + j's four words in c0..c3; element (b + j) * 4 + k is word k of
    // lane j. Transpose to eight consecutive elements per vector: two blocks each.
    const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
    const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i words[4] = {
        _mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u2, u3, 0x20),
        _mm256_permute2x128_si256(u0, u1, 0x31), _mm256_permute2x128_si256(u2, u3, 0x31)};
    for (int q = 0; q < 4; ++q) {
      const int64_t i = b * 4 + q * 8;
      // uniform01: the top 24 bits as a float, times 2^-24 (exact).
      const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(words[q], 8)),
                                     _mm256_set1_ps(0x1p-24f));
      const __m256 keep = _mm256_cmp_ps(u, rate8, _CMP_GE_OQ);
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_and_ps(keep, scale8)));
      const uint64_t bytes =
          _pdep_u64(static_cast<uint32_t>(_mm256_movemask_ps(keep)), 0x0101010101010101ull);
      std::memcpy(mask + i, &bytes, 8);
    }
  }
  for (; b < full; ++b) {
    const Philox4x32 r =
        philox_block(seed, RngStream::dropout, layer, step, base + static_cast<uint64_t>(b));
    for (int k = 0; k < 4; ++k) {
      const int64_t i = b * 4 + k;
      const bool keep = uniform01(r.v[k]) >= rate;
      mask[i] = keep;
      y[i] = x[i] * (keep ? scale : 0.0f);
    }
  }
  for (int64_t b = std::max(b0, full); b < b1; ++b) {  // the last, partial block
    const Philox4x32 r =
        philox_block(seed, RngStream::dropout, layer, step, base + static_cast<uint64_t>(b));
    for (int64_t i = b * 4; i < std::min(total, b * 4 + 4); ++i) {
      const bool keep = uniform01(r.v[i & 3]) >= rate;
      mask[i] = keep;
      y[i] = x[i] * (keep ? scale : 0.0f);
    }
  }
}

__attribute__((noinline)) void masked_scale(const float* __restrict dy,
                                            const uint8_t* __restrict mask, float* __restrict dx,
                                            float scale, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * (scale * static_cast<float>(mask[i]));
}

__attribute__((noinline)) void positive_scale(const float* __restrict y, const float* __restrict dy,
                                              float* __restrict dz, float scale, int64_t b,
                                              int64_t e) {
  // for (i) dz[i] = y[i] > 0 ? dy[i] * scale : 0, as bit operations: GCC keeps that select as a
  // branch, which mispredicts on about half the units (23 us instead of 2 for 32 x 128).
  for (int64_t i = b; i < e; ++i) dz[i] = keep_if_positive(y[i], dy[i] * scale);
}

}  // namespace

void CpuBackend::dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n,
                                 float rate, uint64_t seed, uint32_t layer,
                                 const StepCounters* counters, int64_t first_row) {
  const float scale = 1.0f / (1.0f - rate);
  const uint64_t step = static_cast<uint64_t>(counters->step);
  const int64_t total = m * n;
  // Element i is element first + i of the layer's draw. One Philox call gives the draws of four
  // consecutive elements (the same on every device), from a multiple of 4: the elements before
  // the first such one (when first is not a multiple of 4) are drawn one by one.
  const uint64_t first = static_cast<uint64_t>(first_row) * static_cast<uint64_t>(n);
  const int64_t head = std::min<int64_t>(total, static_cast<int64_t>((4 - first % 4) % 4));
  for (int64_t i = 0; i < head; ++i) {
    const bool keep = dropout_keep(seed, layer, step, first + static_cast<uint64_t>(i), rate);
    mask[i] = keep;
    y[i] = x[i] * (keep ? scale : 0.0f);
  }
  const int64_t rest = total - head;
  const uint64_t base = (first + static_cast<uint64_t>(head)) / 4;
  parallel_chunks((rest + 3) / 4, [&](int64_t b0, int64_t b1) {
    dropout_blocks(x + head, y + head, mask + head, rest, rate, scale, seed, layer, step, base, b0,
                   b1);
  });
}

void CpuBackend::noise_forward(NoiseKind kind, const float* x, float* y, float* factor, int64_t m,
                               int64_t n, int64_t channels, float amount, uint64_t seed,
                               uint32_t layer, const StepCounters* counters, int64_t first_row) {
  const uint64_t step = static_cast<uint64_t>(counters->step);
  const uint64_t first = static_cast<uint64_t>(first_row) * static_cast<uint64_t>(n);
  switch (kind) {
    case NoiseKind::gaussian_noise:
      parallel_chunks(m * n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          y[i] = x[i] + amount * philox_normal(seed, layer, step, first + static_cast<uint64_t>(i));
      });
      return;
    case NoiseKind::gaussian_dropout:
      parallel_chunks(m * n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const float f =
              1.0f + amount * philox_normal(seed, layer, step, first + static_cast<uint64_t>(i));
          factor[i] = f;
          y[i] = x[i] * f;
        }
      });
      return;
    case NoiseKind::spatial_dropout: {
      const float scale = 1.0f / (1.0f - amount);
      parallel_rows(m, n, [&](int64_t r) {
        const uint64_t row = static_cast<uint64_t>(first_row + r) * static_cast<uint64_t>(channels);
        for (int64_t c = 0; c < n; ++c) {
          const int64_t i = r * n + c;
          const bool keep = spatial_dropout_keep(seed, layer, step,
                                                 row + static_cast<uint64_t>(c % channels), amount);
          const float f = keep ? scale : 0.0f;
          factor[i] = f;
          y[i] = x[i] * f;
        }
      });
      return;
    }
  }
}

void CpuBackend::dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m,
                                  int64_t n, float rate) {
  const float scale = 1.0f / (1.0f - rate);
  parallel_chunks(m * n, [&](int64_t b, int64_t e) { masked_scale(dy, mask, dx, scale, b, e); });
}

void CpuBackend::relu_dropout_backward(const float* y_after_dropout, const uint8_t*,
                                       const float* dy, float* dz, int64_t m, int64_t n,
                                       float rate) {
  // y > 0 exactly when the unit was kept and its ReLU output was positive.
  const float scale = 1.0f / (1.0f - rate);
  parallel_chunks(
      m * n, [&](int64_t b, int64_t e) { positive_scale(y_after_dropout, dy, dz, scale, b, e); });
}

}  // namespace crossover::cpu
