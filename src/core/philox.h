// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// a counter-based generator. The value at (key, counter) is a pure function, so the CPU and
// the GPU draw exactly the same numbers for the same (seed, layer, step, element) without
// sharing any state. This header compiles as host code and as CUDA device code.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define CROSSOVER_HD __host__ __device__ __forceinline__
#else
#define CROSSOVER_HD inline
#endif

namespace crossover {

struct Philox4x32 {
  uint32_t v[4];
};

CROSSOVER_HD uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(p >> 32);
  return static_cast<uint32_t>(p);
}

// Ensures: the Random123 reference output (known-answer test in tests/philox_test.cpp).
CROSSOVER_HD Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                      uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo32(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo32(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// A float in [0, 1) from the top 24 bits: exact in float32, identical on every device.
CROSSOVER_HD float uniform01(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1p-24f; }

// The streams crossover draws from. One seed fixes all of them.
enum class RngStream : uint32_t { init = 1, shuffle = 2, dropout = 3, noise = 4 };

// The four 32-bit draws for elements 4*block .. 4*block+3 of draw `draw` (a step, an epoch) of
// stream `stream` belonging to `owner` (a layer), under `seed`.
CROSSOVER_HD Philox4x32 philox_block(uint64_t seed, RngStream stream, uint32_t owner, uint64_t draw,
                                     uint64_t block) {
  return philox4x32_10(
      static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), static_cast<uint32_t>(draw),
      static_cast<uint32_t>(draw >> 32) ^ (static_cast<uint32_t>(stream) << 24) ^ (owner << 4),
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The uniform number in [0, 1) for element `index`: one of the four of its block.
CROSSOVER_HD float philox_uniform(uint64_t seed, RngStream stream, uint32_t owner, uint64_t draw,
                                  uint64_t index) {
  return uniform01(philox_block(seed, stream, owner, draw, index >> 2).v[index & 3]);
}

// Dropout keeps element `index` of step `step` in layer `layer` when its uniform is >= rate.
CROSSOVER_HD bool dropout_keep(uint64_t seed, uint32_t layer, uint64_t step, uint64_t index,
                               float rate) {
  return philox_uniform(seed, RngStream::dropout, layer, step, index) >= rate;
}

// The noise layers' draws (GaussianNoise, GaussianDropout, SpatialDropout2D; stream `noise`, so
// that Dropout's stream stays as it was).
//
// A standard normal number for element `index`: Box-Muller on the two words of its pair in its
// block (words 0 and 1 for elements 4k and 4k + 1, words 2 and 3 for 4k + 2 and 4k + 3), the
// cosine for the even element and the sine for the odd one. The radius's uniform is in (0, 1],
// so the logarithm is finite: |z| <= sqrt(2 ln 2^24) < 5.8. Computed in float32 with the
// device's logf, sqrtf, cosf and sinf: the CPU and a GPU agree to a few ulps, not bit for bit.
CROSSOVER_HD float philox_normal(uint64_t seed, uint32_t owner, uint64_t draw, uint64_t index) {
  const Philox4x32 r = philox_block(seed, RngStream::noise, owner, draw, index >> 2);
  const int pair = static_cast<int>((index >> 1) & 1);
  const float u1 = static_cast<float>((r.v[2 * pair] >> 8) + 1u) * 0x1p-24f;  // (0, 1]
  const float u2 = uniform01(r.v[2 * pair + 1]);                              // [0, 1)
  const float radius = sqrtf(-2.0f * logf(u1));
  const float angle = 6.28318530717958647692f * u2;
  return (index & 1) ? radius * sinf(angle) : radius * cosf(angle);
}

// SpatialDropout2D keeps channel `index` (row * channels + channel, the row the global batch
// row) of step `step` in layer `layer` when its uniform of the noise stream is >= rate.
CROSSOVER_HD bool spatial_dropout_keep(uint64_t seed, uint32_t layer, uint64_t step, uint64_t index,
                                       float rate) {
  return philox_uniform(seed, RngStream::noise, layer, step, index) >= rate;
}

}  // namespace crossover
