// The CPU backend: GEMMs from oneDNN (see docs/GEMM.md for why), everything else as plain loops
// that the compiler vectorises, threaded with OpenMP (the runtime oneDNN itself uses, so the two
// share one thread pool). A step allocates nothing: every buffer comes from the model's plan.
#include <cpuid.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <string>

#include "backends/backend.h"
#include "backends/cpu/dnnl_conv.h"
#include "backends/cpu/dnnl_matmul.h"
#include "backends/kernel_math.h"
#include "backends/losses/list.h"
#include "core/aligned.h"
#include "core/bits.h"
#include "core/error.h"
#include "core/machine.h"
#include "core/philox.h"

namespace crossover {
namespace {

// Elementwise loops below this many elements run on one thread: a fork-join costs more.
constexpr int64_t kParallelThreshold = 1 << 15;
constexpr int64_t kParallelGatherFloats = 1 << 13;

// Row-major C(m, n) = alpha * op(A) . op(B) + beta * C.
void sgemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  dnnl_status_t s = dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (s != dnnl_success)
    throw Error("cpu", "oneDNN sgemm failed (status " + std::to_string(static_cast<int>(s)) +
                           ") for shape m=" + std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k));
}

// Adam over n elements: a plain function of restrict pointers, so that it vectorises.
__attribute__((noinline)) void adam_range(float one_minus_beta1, float one_minus_beta2,
                                          float epsilon, float alpha, float decay, float grad_scale,
                                          float lo, float hi, float* __restrict w,
                                          const float* __restrict g, float* __restrict m,
                                          float* __restrict v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = std::min(std::max(g[i] * grad_scale, lo), hi);
    optimizers::adam_update(one_minus_beta1, one_minus_beta2, epsilon, alpha, decay, w[i], gi, m[i],
                            v[i]);
  }
}

// The same with amsgrad: v_hat, the running maximum of v, in v's place in the step.
__attribute__((noinline)) void adam_amsgrad_range(float one_minus_beta1, float one_minus_beta2,
                                                  float epsilon, float alpha, float decay,
                                                  float grad_scale, float lo, float hi,
                                                  float* __restrict w, const float* __restrict g,
                                                  float* __restrict m, float* __restrict v,
                                                  float* __restrict v_hat, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = std::min(std::max(g[i] * grad_scale, lo), hi);
    optimizers::adam_amsgrad_update(one_minus_beta1, one_minus_beta2, epsilon, alpha, decay, w[i],
                                    gi, m[i], v[i], v_hat[i]);
  }
}

// Adam with amsgrad needs its third slot: a caller that gives none is an internal error.
void require_amsgrad_slots(const OptimizerConfig& config, std::span<const ParamSlot> params) {
  if (config.kind != OptimizerKind::adam || !config.args.adam.amsgrad) return;
  for (const ParamSlot& p : params)
    if (p.n > 0 && p.slot3 == nullptr)
      throw Error("cpu", "optimizer_step: Adam with amsgrad needs a third slot (velocity_hat)");
}

// The high and low 32 bits of each lane's product with m (32 x 32 -> 64 bits, eight lanes):
// AVX2 multiplies the even lanes; the odd lanes are shifted down, multiplied, and blended back.
inline void mul_hi_lo(__m256i a, uint32_t m, __m256i& hi, __m256i& lo) {
  const __m256i mv = _mm256_set1_epi32(static_cast<int>(m));
  const __m256i even = _mm256_mul_epu32(a, mv);                        // lanes 0, 2, 4, 6
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), mv);  // lanes 1, 3, 5, 7
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// g when y > 0, else +0, in integer operations that vectorise (a float select stays a branch):
// a positive float is a positive int32, and the mask is all ones or all zeros.
inline float keep_if_positive(float y, float g) {
  const uint32_t mask = 0u - static_cast<uint32_t>(crossover::bit_cast<int32_t>(y) > 0);
  return crossover::bit_cast<float>(crossover::bit_cast<uint32_t>(g) & mask);
}

// ---- layer normalization, one row of n features (the model's rows are independent) ----
// Sums in 8 interleaved partial sums, added pairwise at the end: the compiler vectorises the
// loop without reassociating anything, and the order depends on n alone.
constexpr int64_t kLanes = 8;
template <class F>
inline float lane_sum(int64_t n, F&& term) {
  float acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += term(j + l);
  for (int64_t l = 0; j < n; ++j, ++l) acc[l] += term(j);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The row's mean, then its biased variance from the mean (two passes), then y in Keras 3's
// order: inv = gamma * rstd, y = x * inv + (beta - mean * inv).
void layernorm_row_forward(const float* __restrict x, const float* __restrict gamma,
                           const float* __restrict beta, float* __restrict y, int64_t n,
                           float epsilon, float& mean, float& rstd) {
  const float count = static_cast<float>(n);
  const float mu = lane_sum(n, [&](int64_t j) { return x[j]; }) / count;
  const float var = lane_sum(n, [&](int64_t j) { return (x[j] - mu) * (x[j] - mu); }) / count;
  const float rs = 1.0f / std::sqrt(var + epsilon);
  mean = mu, rstd = rs;
  for (int64_t j = 0; j < n; ++j) {
    const float inv = (gamma ? gamma[j] : 1.0f) * rs;
    y[j] = x[j] * inv + ((beta ? beta[j] : 0.0f) - mu * inv);
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - mean) * rstd.
void layernorm_row_backward(const float* __restrict x, const float* __restrict dy,
                            const float* __restrict gamma, float mu, float rs, float* __restrict dx,
                            int64_t n) {
  const float count = static_cast<float>(n);
  auto g = [&](int64_t j) { return gamma ? dy[j] * gamma[j] : dy[j]; };
  const float mean_g = lane_sum(n, g) / count;
  const float mean_gx = lane_sum(n, [&](int64_t j) { return g(j) * ((x[j] - mu) * rs); }) / count;
  for (int64_t j = 0; j < n; ++j) dx[j] = rs * (g(j) - mean_g - (x[j] - mu) * rs * mean_gx);
}

// dgamma += dy * xhat, dbeta += dy over columns [c0, c1) of one row (vectorised across them).
void layernorm_row_params(const float* __restrict x, const float* __restrict dy, float mu, float rs,
                          float* __restrict dgamma, float* __restrict dbeta, int64_t c0,
                          int64_t c1) {
  for (int64_t j = c0; j < c1; ++j) {
    dgamma[j] += dy[j] * ((x[j] - mu) * rs);
    dbeta[j] += dy[j];
  }
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

void flush_denormals() { _mm_setcsr(_mm_getcsr() | 0x8040); }  // FTZ | DAZ

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The number after the word `key` in `path` (a /proc or /sys file), or its first word when key
// is null; false when there is none (no file, or "max").
bool read_number(const char* path, const char* key, double& value) {
  std::ifstream f(path);
  if (key == nullptr) return static_cast<bool>(f >> value);
  std::string word;
  while (f >> word)
    if (word == key) return static_cast<bool>(f >> value);
  return false;
}

// What the kernel can hand out without swapping (MemAvailable), lowered to what a cgroup v2
// memory limit (a container's) still allows; free pages (sysconf) where /proc is not mounted.
MemoryAvailable host_memory_available() {
  MemoryAvailable m;
  double kib = 0;
  if (read_number("/proc/meminfo", "MemAvailable:", kib)) {
    m = {static_cast<std::size_t>(kib * 1024), "MemAvailable in /proc/meminfo"};
  } else {
    m = {static_cast<std::size_t>(::sysconf(_SC_AVPHYS_PAGES)) *
             static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)),
         "free pages from sysconf"};
  }
  double limit = 0, used = 0;  // memory.max is "max" when unlimited: no number, no limit
  if (read_number("/sys/fs/cgroup/memory.max", nullptr, limit) &&
      read_number("/sys/fs/cgroup/memory.current", nullptr, used)) {
    const double left = std::max(0.0, limit - used);
    if (left < static_cast<double>(m.bytes))
      m = {static_cast<std::size_t>(left), "the cgroup's memory.max less memory.current"};
  }
  return m;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, Precision precision)
      : bf16_(precision == Precision::bf16), amx_(bf16_ && cpu_bf16_support().amx_bf16) {
    threads_ = threads > 0 ? threads : omp_get_num_procs();
    omp_set_num_threads(threads_);
    // Flush denormals to zero in every thread that computes (as TensorFlow does): without it,
    // Adam's moments of dead ReLU units decay into denormals and the update runs 10x slower.
    flush_denormals();
    if (threads_ > 1) {
#pragma omp parallel num_threads(threads_)
      flush_denormals();
    }
  }

  std::string device_name() const override { return "cpu"; }

  void* allocate(std::size_t bytes) override {
    try {
      void* p = make_aligned<unsigned char>(bytes).release();
      if (bf16_) matmul_.forget(p, bytes);  // where a released block's weights may have been
      return p;
    } catch (const std::bad_alloc&) {
      const MemoryAvailable a = available_memory();
      throw Error("cpu", "out of memory: cannot allocate " +
                             bytes_to_string(static_cast<double>(bytes)) + "; " +
                             bytes_to_string(static_cast<double>(a.bytes)) + " available (" +
                             a.source + ")");
    }
  }
  MemoryAvailable available_memory() const override { return host_memory_available(); }
  void release(void* p) noexcept override { std::free(p); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
    weights_changed(dst, bytes);
  }
  void host_wrote(void* dst, std::size_t bytes) override { weights_changed(dst, bytes); }
  bool reads_host_memory() const override { return true; }
  void download(void* dst, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void download_async(void* dst, const void* src, std::size_t bytes) override {
    download(dst, src, bytes);
  }
  void fill(float* dst, float value, int64_t n) override {
    std::fill(dst, dst + n, value);
    weights_changed(dst, static_cast<std::size_t>(n) * sizeof(float));
  }
  void synchronize() override {}

  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool) override {
    struct Replay final : StepGraph {
      std::function<void()> fn;
      void replay() override { fn(); }
    };
    auto g = std::make_unique<Replay>();
    g->fn = std::move(enqueue);
    return g;
  }

  void gather_rows(const float* src, int64_t cols, const int32_t* indices, int64_t batch,
                   const StepCounters* counters, int64_t m, float* dst) override {
    const int32_t* idx = indices + counters->batch_index * batch;
    const std::size_t row_bytes = static_cast<std::size_t>(cols) * sizeof(float);
    // The rows are scattered through a data set larger than the caches: each thread waiting on
    // its own rows' misses doubles the misses in flight (14 us -> 11 us for a batch of 32 x 784 on
    // the Zen 3).
    parallel_chunks_above(m * cols, kParallelGatherFloats, m, [&](int64_t r0, int64_t r1) {
      for (int64_t i = r0; i < r1; ++i)
        std::memcpy(dst + i * cols, src + static_cast<int64_t>(idx[i]) * cols, row_bytes);
    });
  }

  // The dense ops split their output into one block per thread and call oneDNN's sgemm on each
  // block from inside our own parallel region (oneDNN then runs single-threaded): a block's bias,
  // activation or bias gradient is applied by the same thread while the block is in its cache,
  // and no call allocates (oneDNN's own threading allocates per call; docs/GEMM.md).
  //
  // A layer's weights stay with one thread: the weight gradient and its fused update, and the
  // input gradient, each give thread t the same block of rows of w (for_blocks over k), and so
  // does the forward when w is the larger operand (below). Then w's rows and the optimizer's state
  // for them stay in that core's cache from step to step, instead of w's lines crossing between
  // the cores twice a step (docs/PERF.md, "weights that stay with a thread").
  void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k,
                     int64_t n, ActivationKind act) override {
    // y(m, n) = x(m, k) . w(k, n). In bf16 the product is one oneDNN matmul on its own threads,
    // the bias and ReLU its post-ops.
    const bool relu = act == ActivationKind::relu;
    if (bf16_)
      gemm_bf16_weights(false, m, n, k, x, w, y, b, relu);
    else if (weights_stay_with_threads(m, k, n))
      forward_by_weight_rows(x, w, b, y, m, k, n, relu);
    else
      for_blocks(n, 2 * m * n * k, [&](int64_t c0, int64_t c1) {
        if (c1 <= c0) return;
        sgemm('N', 'N', m, c1 - c0, k, 1.0f, x, k, w + c0, n, 0.0f, y + c0, n);
        if (b == nullptr && !relu) return;
        for (int64_t r = 0; r < m; ++r) {
          float* row = y + r * n;
          if (b && relu) {
            for (int64_t j = c0; j < c1; ++j) row[j] = std::max(row[j] + b[j], 0.0f);
          } else if (b) {
            for (int64_t j = c0; j < c1; ++j) row[j] += b[j];
          } else {
            for (int64_t j = c0; j < c1; ++j) row[j] = std::max(row[j], 0.0f);
          }
        }
      });
    // Sigmoid, tanh and softmax (softmax needs whole rows): a second pass, as on the GPU.
    if (act != ActivationKind::linear && !relu) activation_forward(act, 0.0f, y, y, m, n);
  }

  // backend.h's cpu_forward_splits_weight_rows for this backend. Where the state cannot stay in
  // L2 (BIG's 784x1000 and 1000x1000 layers at 2 threads), the split only adds the partial sums:
  // measured 1.15x slower for BIG on the Zen 4 (docs/PERF.md).
  bool weights_stay_with_threads(int64_t m, int64_t k, int64_t n) const {
    return cpu_forward_splits_weight_rows(m, k, n, threads_, l2_bytes_);
  }

  // y = x . w as a sum over the threads' blocks of rows of w (the reduction dimension, split as
  // the weight gradient splits it): each thread's product x(:, r0:r1) . w(r0:r1, :) goes to its
  // own partial sum, and after a barrier each thread adds up a block of y's elements over the
  // partials in thread order, with the bias and ReLU. The sums' order, and so the bits, depend on
  // the team's size nt; the partials take nt * m * n floats (room for threads_ is kept), fewer
  // than w's k * n when this is chosen (k >= threads * m). On one thread it is the plain product.
  // The barrier needs every thread of the team to call the block function, which
  // for_blocks_with_index does (also for an empty block).
  void forward_by_weight_rows(const float* x, const float* w, const float* b, float* y, int64_t m,
                              int64_t k, int64_t n, bool relu) {
    float* partials = partial_sums(threads_ * m * n);
    for_blocks_with_index(k, 2 * m * n * k, [&](int64_t r0, int64_t r1, int64_t t, int64_t nt) {
      const int64_t size = m * n;
      float* own = nt == 1 ? y : partials + t * size;
      if (r1 > r0)
        sgemm('N', 'N', m, n, r1 - r0, 1.0f, x + r0, k, w + r0 * n, n, 0.0f, own, n);
      else
        std::fill(own, own + size, 0.0f);
      if (nt > 1) {
#pragma omp barrier
      }
      // This thread's elements of y, [e0, e1), row by row: partials[0] + ... + partials[nt - 1].
      const int64_t e1 = size * (t + 1) / nt;
      for (int64_t e = size * t / nt; e < e1;) {
        const int64_t r = e / n, j0 = e - r * n, j1 = std::min(n, j0 + (e1 - e));
        float* out = y + r * n;
        const float* first = nt == 1 ? out : partials + r * n;
        for (int64_t j = j0; j < j1; ++j) {
          float sum = first[j];
          for (int64_t u = 1; u < nt; ++u) sum += partials[u * size + r * n + j];
          if (b) sum += b[j];
          out[j] = relu ? std::max(sum, 0.0f) : sum;
        }
        e += j1 - j0;
      }
    });
  }

  void dense_backward_weights(const float* x, const float* dy, float* dw, float* db, int64_t m,
                              int64_t k, int64_t n) override {
    weight_gradient(x, dy, dw, db, m, k, n, nullptr);
  }

  bool fuses_weight_update() const override { return true; }

  // The weight gradient with the update applied by each thread to the rows it has just computed,
  // while they are in its cache, instead of in a pass over every parameter at the end.
  void dense_backward_weights_update(const float* x, const float* dy, const ParamSlot& kernel,
                                     const ParamSlot* bias, int64_t m, int64_t k, int64_t n,
                                     const OptimizerConfig& config,
                                     const StepCounters* counters) override {
    if (config.clipnorm > 0.0f || config.tensor_clipnorm > 0.0f)
      throw Error("cpu", "dense_backward_weights_update: clipnorm needs the gradient's norm first");
    require_amsgrad_slots(config, {&kernel, 1});
    if (bias) require_amsgrad_slots(config, {bias, 1});
    const float lr = scheduled_learning_rate(config.schedule, counters->step);
    const int64_t t = counters->step + 1;
    const BlockUpdate update{config, update_constants(config, lr, t, *counters), kernel, bias};
    weight_gradient(x, dy, kernel.grad, bias ? bias->grad : nullptr, m, k, n, &update);
    if (bf16_) matmul_.weights_rewritten(kernel.value);  // the update wrote the bf16 copies too
  }

  void dense_backward_input(const float* dy, const float* w, float* dx, int64_t m, int64_t k,
                            int64_t n) override {
    // dx(m, k) = dy(m, n) . w(k, n)^T: blocks of columns of dx (rows of w).
    if (bf16_) {
      gemm_bf16_weights(true, m, k, n, dy, w, dx);
      return;
    }
    for_blocks(k, 2 * m * n * k, [&](int64_t c0, int64_t c1) {
      if (c1 <= c0) return;
      sgemm('N', 'T', m, c1 - c0, n, 1.0f, dy, n, w + c0 * n, n, 0.0f, dx + c0, k);
    });
  }

  // Convolution and pooling: oneDNN's primitives (backends/cpu/dnnl_conv.h).
  bool has_conv2d() const override { return true; }
  void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                      int64_t m, ActivationKind act) override {
    conv_.conv_forward(s, x, w, b, y, m, act);
  }
  void conv2d_backward_input(const ConvShape& s, const float* dy, const float* w, float* dx,
                             int64_t m) override {
    conv_.conv_backward_input(s, dy, w, dx, m);
  }
  void conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw,
                               float* db, int64_t m) override {
    conv_.conv_backward_weights(s, x, dy, dw, db, m);
  }
  // The transposed convolution as the convolution it transposes: its forward is that
  // convolution's backward-data primitive (oneDNN's deconvolution is the same arithmetic), its
  // input gradient the convolution's forward, its kernel gradient the convolution's
  // backward-weights with the roles of x and dy exchanged; the bias is a pass of our own.
  void conv2d_transpose_forward(const ConvShape& s, const float* x, const float* w, const float* b,
                                float* y, int64_t m) override {
    conv_.conv_backward_input(s, x, w, y, m);
    if (!b) return;
    const int64_t c = s.in_c;
    parallel_rows(m * s.in_h, s.in_w * c, [&](int64_t r) {
      float* row = y + r * s.in_w * c;
      for (int64_t i = 0; i < s.in_w; ++i)
        for (int64_t j = 0; j < c; ++j) row[i * c + j] += b[j];
    });
  }
  void conv2d_transpose_backward_input(const ConvShape& s, const float* dy, const float* w,
                                       float* dx, int64_t m) override {
    conv_.conv_forward(s, dy, w, nullptr, dx, m, ActivationKind::linear);
  }
  void conv2d_transpose_backward_weights(const ConvShape& s, const float* x, const float* dy,
                                         float* dw, float* db, int64_t m) override {
    conv_.conv_backward_weights(s, dy, x, dw, nullptr, m);
    if (db) column_sums(dy, m * s.in_h * s.in_w, s.in_c, 0, s.in_c, db);
  }
  // Pooling: loops of our own over channels-last data, vectorised across the channels. oneDNN
  // 2.6's jit:avx2 max pooling on NHWC ran at about 1 GB/s (40% of the MNIST convnet's step on
  // Zen 3, bench/RESULTS.md). Max: the window's first maximum in row-major order wins a tie (as
  // oneDNN did, and the CUDA kernels do); the workspace holds its offset in the sample (int32
  // per output element), where backward sends the gradient. Average: the sum over the window's
  // real elements divided by their count (padding never counts, TensorFlow's 'same').
  std::size_t pool2d_workspace_bytes(const PoolShape& s, int64_t m) override {
    if (s.kind != PoolKind::max) return 0;
    return static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels) * sizeof(int32_t);
  }
  void pool2d_forward(const PoolShape& s, const float* x, float* y, void* workspace,
                      int64_t m) override {
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
  void pool2d_backward(const PoolShape& s, const float* dy, const void* workspace, float* dx,
                       int64_t m) override {
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

  // Batch normalization: oneDNN's primitive (backends/cpu/dnnl_conv.h); the moving statistics
  // update is C multiply-adds.
  bool has_batch_norm() const override { return true; }
  void batchnorm_prepare(const BatchNormShape& s, int64_t m) override {
    conv_.batchnorm_prepare(s, m);
  }
  void batchnorm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, float* y, float* mean, float* variance,
                                  int64_t m) override {
    conv_.batchnorm_forward_training(s, x, gamma, beta, y, mean, variance, m);
  }
  void batchnorm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                   const float* beta, const float* mean, const float* variance,
                                   float* y, int64_t m) override {
    conv_.batchnorm_forward_inference(s, x, gamma, beta, mean, variance, y, m);
  }
  void batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                          const float* gamma, const float* mean, const float* variance, float* dx,
                          float* dgamma, float* dbeta, int64_t m) override {
    conv_.batchnorm_backward(s, x, dy, gamma, mean, variance, dx, dgamma, dbeta, m);
  }
  void batchnorm_update_moving(const BatchNormShape& s, const float* mean, const float* variance,
                               float* moving_mean, float* moving_variance,
                               double momentum) override {
    batchnorm_moving_update(s.channels, mean, variance, moving_mean, moving_variance, momentum);
  }

  // Layer normalization: rows in parallel for y and dx (each row's sums on one thread); dgamma
  // and dbeta in parallel over blocks of columns, each summed over the rows in row order, so the
  // gradients are the same at any thread count and need no scratch.
  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, int64_t rows, int64_t n,
                         float epsilon) override {
    parallel_rows(rows, n, [&](int64_t r) {
      float mu = 0.0f, rs = 0.0f;
      layernorm_row_forward(x + r * n, gamma, beta, y + r * n, n, epsilon, mu, rs);
      if (mean) mean[r] = mu;
      if (rstd) rstd[r] = rs;
    });
  }
  void layernorm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                          const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                          int64_t n) override {
    if (dgamma || dbeta) {
      constexpr int64_t kBlock = 64;  // columns per task: a cache line of each of dgamma, dbeta
      // The one not asked for (scale=False or center=False) is summed into scratch.
      float* scratch = dgamma && dbeta ? nullptr : scratch_row(n);
      float* sg = dgamma ? dgamma : scratch;
      float* sb = dbeta ? dbeta : scratch;
      parallel_rows((n + kBlock - 1) / kBlock, rows * kBlock, [&](int64_t block) {
        const int64_t c0 = block * kBlock, c1 = std::min(n, c0 + kBlock);
        std::fill(sg + c0, sg + c1, 0.0f);
        std::fill(sb + c0, sb + c1, 0.0f);
        for (int64_t r = 0; r < rows; ++r)
          layernorm_row_params(x + r * n, dy + r * n, mean[r], rstd[r], sg, sb, c0, c1);
      });
    }
    parallel_rows(rows, n, [&](int64_t r) {
      layernorm_row_backward(x + r * n, dy + r * n, gamma, mean[r], rstd[r], dx + r * n, n);
    });
  }

  void activation_forward(ActivationKind act, float alpha, const float* x, float* y, int64_t m,
                          int64_t n) override {
    const int64_t total = m * n;
    switch (act) {
      case ActivationKind::linear:
        if (x != y) std::copy(x, x + total, y);
        return;
      case ActivationKind::relu:
        parallel_for(total, [&](int64_t i) { y[i] = std::max(x[i], 0.0f); });
        return;
      case ActivationKind::sigmoid:
        parallel_for(total, [&](int64_t i) { y[i] = sigmoid(x[i]); });
        return;
      case ActivationKind::tanh:
        parallel_for(total, [&](int64_t i) { y[i] = std::tanh(x[i]); });
        return;
      case ActivationKind::softmax:
        parallel_rows(m, n, [&](int64_t r) { softmax_row(x + r * n, y + r * n, n); });
        return;
      default:  // elu, selu, leaky_relu, gelu, softplus, swish, exponential
        parallel_for(total, [&](int64_t i) { y[i] = activation_value(act, x[i], alpha); });
        return;
    }
  }

  void activation_backward(ActivationKind act, float alpha, const float* x, const float* y,
                           const float* dy, float* dx, int64_t m, int64_t n) override {
    const int64_t total = m * n;
    switch (act) {
      case ActivationKind::linear:
        if (dx != dy) std::copy(dy, dy + total, dx);
        return;
      case ActivationKind::relu:
        parallel_for(total, [&](int64_t i) { dx[i] = keep_if_positive(y[i], dy[i]); });
        return;
      case ActivationKind::sigmoid:
        parallel_for(total, [&](int64_t i) { dx[i] = dy[i] * y[i] * (1.0f - y[i]); });
        return;
      case ActivationKind::tanh:
        parallel_for(total, [&](int64_t i) { dx[i] = dy[i] * (1.0f - y[i] * y[i]); });
        return;
      case ActivationKind::softmax:
        // dx_j = y_j * (dy_j - sum_i dy_i y_i)
        parallel_rows(m, n, [&](int64_t r) {
          const float* yr = y + r * n;
          const float* dyr = dy + r * n;
          float* dxr = dx + r * n;
          float dot = 0.0f;
          for (int64_t j = 0; j < n; ++j) dot += dyr[j] * yr[j];
          for (int64_t j = 0; j < n; ++j) dxr[j] = yr[j] * (dyr[j] - dot);
        });
        return;
      case ActivationKind::gelu:
      case ActivationKind::swish:  // from the input x
        parallel_for(total, [&](int64_t i) {
          dx[i] = dy[i] * activation_derivative(act, x[i], y[i], alpha);
        });
        return;
      default:  // elu, selu, leaky_relu, softplus, exponential: from the output y
        parallel_for(total, [&](int64_t i) {
          dx[i] = dy[i] * activation_derivative(act, 0.0f, y[i], alpha);
        });
        return;
    }
  }

  void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n, float rate,
                       uint64_t seed, uint32_t layer, const StepCounters* counters,
                       int64_t first_row) override {
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
      dropout_blocks(x + head, y + head, mask + head, rest, rate, scale, seed, layer, step, base,
                     b0, b1);
    });
  }

  void noise_forward(NoiseKind kind, const float* x, float* y, float* factor, int64_t m, int64_t n,
                     int64_t channels, float amount, uint64_t seed, uint32_t layer,
                     const StepCounters* counters, int64_t first_row) override {
    const uint64_t step = static_cast<uint64_t>(counters->step);
    const uint64_t first = static_cast<uint64_t>(first_row) * static_cast<uint64_t>(n);
    switch (kind) {
      case NoiseKind::gaussian_noise:
        parallel_chunks(m * n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            y[i] =
                x[i] + amount * philox_normal(seed, layer, step, first + static_cast<uint64_t>(i));
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
          const uint64_t row =
              static_cast<uint64_t>(first_row + r) * static_cast<uint64_t>(channels);
          for (int64_t c = 0; c < n; ++c) {
            const int64_t i = r * n + c;
            const bool keep = spatial_dropout_keep(
                seed, layer, step, row + static_cast<uint64_t>(c % channels), amount);
            const float f = keep ? scale : 0.0f;
            factor[i] = f;
            y[i] = x[i] * f;
          }
        });
        return;
      }
    }
  }

  // ---- nearest-neighbour upsampling: one input row (a sample's row of in_w pixels) per task;
  // the forward writes the first output row of its block and copies it down the block, the
  // backward sums the block's rows and columns in order (the same at any thread count) ----
  void upsample2d_forward(const PoolShape& s, const float* x, float* y, int64_t m) override {
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
  void upsample2d_backward(const PoolShape& s, const float* dy, float* dx, int64_t m) override {
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

  // ---- merging layers and a graph's gradients ----
  void add(const float* a, const float* b, float* y, int64_t n) override {
    parallel_chunks(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) y[i] = a[i] + b[i];
    });
  }
  void copy_columns(const float* src, int64_t src_cols, int64_t src_col, float* dst,
                    int64_t dst_cols, int64_t dst_col, int64_t rows, int64_t cols) override {
    parallel_chunks_above(rows * cols, kParallelThreshold, rows, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        std::copy_n(src + r * src_cols + src_col, cols, dst + r * dst_cols + dst_col);
    });
  }

  // ---- permuting each sample's axes: one sample per task, its output in order (an odometer
  // over y's outer axes, the last axis a strided run of x) ----
  void permute(const PermuteShape& s, const float* x, float* y, int64_t m) override {
    const int rank = s.rank;
    const int64_t values = permute_values(s);
    if (rank == 0 || values == 0) return;
    // x's strides, then y's axis i as a dimension and a stride into x.
    int64_t in_stride[PermuteShape::kMaxRank], dim[PermuteShape::kMaxRank],
        stride[PermuteShape::kMaxRank];
    int64_t step = 1;
    for (int a = rank; a-- > 0;) in_stride[a] = step, step *= s.in[a];
    for (int i = 0; i < rank; ++i) dim[i] = s.in[s.perm[i]], stride[i] = in_stride[s.perm[i]];
    const int64_t inner = dim[rank - 1], inner_stride = stride[rank - 1];
    parallel_rows(m, values, [&](int64_t n) {
      const float* in = x + n * values;
      float* out = y + n * values;
      int64_t at[PermuteShape::kMaxRank] = {};
      int64_t offset = 0;  // into the sample of x, of y's position (at, 0)
      for (int64_t done = 0; done < values; done += inner) {
        for (int64_t j = 0; j < inner; ++j) out[done + j] = in[offset + j * inner_stride];
        for (int i = rank - 2; i >= 0; --i) {  // the next position of the outer axes
          offset += stride[i];
          if (++at[i] < dim[i]) break;
          offset -= stride[i] * dim[i];
          at[i] = 0;
        }
      }
    });
  }

  // ---- element-wise arithmetic with broadcasting, row sums ----
  void binary_forward(BinaryOp op, const BinaryShape& s, const float* a, const float* b,
                      float* y) override {
    const int64_t cols = s.cols;
    parallel_rows(s.rows, cols, [&](int64_t r) {
      for (int64_t c = 0; c < cols; ++c)
        y[r * cols + c] = binary_value(op, operand_at(a, s.a, s.a_value, r, c, cols),
                                       operand_at(b, s.b, s.b_value, r, c, cols));
    });
  }
  void binary_backward(BinaryOp op, const BinaryShape& s, const float* a, const float* b,
                       const float* dy, float* da, float* db) override {
    const int64_t rows = s.rows, cols = s.cols;
    auto share = [&](int64_t r, int64_t c, bool of_a) {
      const BinaryGrad g =
          binary_gradient(op, operand_at(a, s.a, s.a_value, r, c, cols),
                          operand_at(b, s.b, s.b_value, r, c, cols), dy[r * cols + c]);
      return of_a ? g.a : g.b;
    };
    // Each operand's gradient, summed in float32 in row order over the axes it was broadcast
    // along (per row for a column, per column for a row, everything for a scalar).
    auto gradient = [&](float* o, Broadcast how, bool first) {
      if (!o) return;
      switch (how) {
        case Broadcast::full:
          parallel_rows(rows, cols, [&](int64_t r) {
            for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = share(r, c, first);
          });
          break;
        case Broadcast::column:
          parallel_rows(rows, cols, [&](int64_t r) {
            float sum = 0.0f;
            for (int64_t c = 0; c < cols; ++c) sum += share(r, c, first);
            o[r] = sum;
          });
          break;
        case Broadcast::row:
          std::fill_n(o, cols, 0.0f);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) o[c] += share(r, c, first);
          break;
        case Broadcast::scalar: {
          float sum = 0.0f;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c) sum += share(r, c, first);
          o[0] = sum;
          break;
        }
      }
    };
    gradient(da, s.a, true);
    gradient(db, s.b, false);
  }
  void row_sum(const float* x, float* y, int64_t rows, int64_t cols, float scale) override {
    parallel_rows(rows, cols, [&](int64_t r) {
      float sum = 0.0f;
      for (int64_t c = 0; c < cols; ++c) sum += x[r * cols + c];
      y[r] = sum * scale;
    });
  }

  void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m, int64_t n,
                        float rate) override {
    const float scale = 1.0f / (1.0f - rate);
    parallel_chunks(m * n, [&](int64_t b, int64_t e) { masked_scale(dy, mask, dx, scale, b, e); });
  }

  void relu_dropout_backward(const float* y_after_dropout, const uint8_t*, const float* dy,
                             float* dz, int64_t m, int64_t n, float rate) override {
    // y > 0 exactly when the unit was kept and its ReLU output was positive.
    const float scale = 1.0f / (1.0f - rate);
    parallel_chunks(
        m * n, [&](int64_t b, int64_t e) { positive_scale(y_after_dropout, dy, dz, scale, b, e); });
  }

  void loss_forward_backward(LossConfig loss, ActivationKind act, const float* out,
                             const float* targets, const float* weights, float* probs, float* d_out,
                             int64_t m, int64_t c, StepCounters* counters,
                             int64_t mean_rows) override {
    double loss_sum = 0.0, correct = 0.0;
    const float inv_m = 1.0f / static_cast<float>(mean_rows);
    for (int64_t r = 0; r < m; ++r) {
      const float* z = out + r * c;
      float* p = probs ? probs + r * c : scratch_row(c);
      float* d = d_out ? d_out + r * c : nullptr;
      const LossRow row = weights
                              ? weighted_loss_row(loss, act, z, targets, weights, r, c, p, d, inv_m)
                              : loss_row(loss, act, z, targets, r, c, p, d, inv_m);
      loss_sum += row.loss;
      correct += row.correct;
    }
    if (counters) {
      counters->loss_sum += loss_sum;
      counters->correct_sum += correct;
      counters->sample_count += static_cast<double>(m);
    }
  }

  void metric_sum(MetricKind kind, const float* pred, const float* targets, int64_t m, int64_t c,
                  int64_t target_cols, float parameter, double* sum) override {
    double s = 0.0;  // in row order, as the loss's sums
    for (int64_t r = 0; r < m; ++r)
      s += metric_row(kind, pred + r * c, targets, r, c, target_cols, parameter);
    *sum += s;
  }

  void optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                      StepCounters* counters) override {
    require_amsgrad_slots(config, params);
    const int64_t t = counters->step + 1;
    const float lr = scheduled_learning_rate(config.schedule, counters->step);
    counters->learning_rate = lr;
    float grad_scale = 1.0f;
    if (config.clipnorm > 0.0f) {
      double sum_squares = 0.0;
      for (const ParamSlot& p : params)
        for (int64_t i = 0; i < p.n; ++i) sum_squares += static_cast<double>(p.grad[i]) * p.grad[i];
      grad_scale = clipnorm_scale(config.clipnorm, sum_squares);
    }
    counters->grad_scale = grad_scale;
    const UpdateConstants uc = update_constants(config, lr, t, *counters);
    for (const ParamSlot& p : params) {
      // Keras's clipnorm: the tensor's own norm, one more pass over its gradient.
      const float scale = config.tensor_clipnorm > 0.0f
                              ? tensor_clip_divisor(config.tensor_clipnorm, sum_of_squares(p))
                              : grad_scale;
      update_tensor(config, uc, scale, p);
      weights_changed(p.value, static_cast<std::size_t>(p.n) * sizeof(float));
    }
    record_step(config, uc, *counters, t);
    counters->step += 1;
    counters->batch_index += 1;
  }

  void advance_batch(StepCounters* counters) override { counters->batch_index += 1; }

 private:
  template <class F>
  void parallel_for(int64_t total, F&& f) {
    if (total < kParallelThreshold || threads_ == 1) {
      for (int64_t i = 0; i < total; ++i) f(i);
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < total; ++i) f(i);
  }
  template <class F>
  void parallel_rows(int64_t m, int64_t n, F&& f) {
    if (m * n < kParallelThreshold || threads_ == 1) {
      for (int64_t r = 0; r < m; ++r) f(r);
      return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) f(r);
  }

  static double sum_of_squares(const ParamSlot& p) {
    double s = 0.0;
    for (int64_t i = 0; i < p.n; ++i) s += static_cast<double>(p.grad[i]) * p.grad[i];
    return s;
  }

  // One parameter tensor, a loop per optimizer; chunks of it per thread.
  void update_tensor(const OptimizerConfig& config, const UpdateConstants& constants,
                     float grad_scale, const ParamSlot& p) {
    parallel_chunks(p.n, [&](int64_t begin, int64_t end) {
      update_range(config, constants, grad_scale, p, begin, end);
    });
  }

  // Elements [begin, end) of one parameter tensor, on the calling thread. The constants are loaded
  // into locals first and clipping is a branch-free clamp, so each loop vectorises.
  static void update_range(const OptimizerConfig& config, const UpdateConstants& constants,
                           float grad_scale, const ParamSlot& p, int64_t begin, int64_t end) {
    const OptimizerConfig c = config;
    const UpdateConstants u = constants;
    const float decay = decay_factor(c, u, p.decay);
    const float hi = c.clipvalue > 0.0f ? c.clipvalue : std::numeric_limits<float>::infinity();
    const float lo = -hi;
    float* __restrict w = p.value;
    const float* __restrict g = p.grad;
    float* __restrict s1 = p.slot1;
    float* __restrict s2 = p.slot2;
    float* __restrict s3 = p.slot3;
    if (c.kind == OptimizerKind::adam && c.tensor_clipnorm <= 0.0f) {
      // Adam's own loop: the clamp is branch-free, so it vectorises (the optimizer most run).
      using optimizers::Adam;
      const auto eps = static_cast<float>(c.args.adam.epsilon);
      if (c.args.adam.amsgrad)
        adam_amsgrad_range(u.k[Adam::one_minus_beta1], u.k[Adam::one_minus_beta2], eps,
                           u.k[Adam::alpha], decay, grad_scale, lo, hi, w + begin, g + begin,
                           s1 + begin, s2 + begin, s3 + begin, end - begin);
      else
        adam_range(u.k[Adam::one_minus_beta1], u.k[Adam::one_minus_beta2], eps, u.k[Adam::alpha],
                   decay, grad_scale, lo, hi, w + begin, g + begin, s1 + begin, s2 + begin,
                   end - begin);
      return;
    }
    switch (c.kind) {
#define CROSSOVER_RANGE(kind, Unit)                                                    \
  case OptimizerKind::kind:                                                            \
    for (int64_t i = begin; i < end; ++i)                                              \
      optimizers::Unit::element(c.args.kind, u, decay, w[i],                           \
                                clipped_gradient(c, g[i], grad_scale), s1, s2, s3, i); \
    return;
      CROSSOVER_OPTIMIZERS(CROSSOVER_RANGE)
#undef CROSSOVER_RANGE
    }
  }

  // db[c0, c1) = column sums of dy(m, n) over those columns.
  static void column_sums(const float* dy, int64_t m, int64_t n, int64_t c0, int64_t c1,
                          float* db) {
    for (int64_t j = c0; j < c1; ++j) db[j] = 0.0f;
    for (int64_t r = 0; r < m; ++r) {
      const float* row = dy + r * n;
      for (int64_t j = c0; j < c1; ++j) db[j] += row[j];
    }
  }

  struct BlockUpdate {
    const OptimizerConfig& config;
    UpdateConstants constants;
    const ParamSlot& kernel;
    const ParamSlot* bias;
  };

  // dw(k, n) = x(m, k)^T . dy(m, n) in one block of rows of dw per thread, db(n) = column sums
  // of dy in one block of columns per thread; with `update`, each thread updates its blocks as
  // soon as it has computed them, from its own cache, with no parallel region of its own.
  // Smaller blocks, to keep each in L2 until its update, measured slower: oneDNN's sgemm on
  // 16-row blocks of a 1000x1000 gradient ran at 59 GFLOP/s against 73 for the whole block on
  // the Zen 3, 1 thread (bench/cpu_calls), and the update gained less than that (docs/PERF.md).
  // In bf16 the product is one oneDNN matmul first, and the blocks only do the rest.
  void weight_gradient(const float* x, const float* dy, float* dw, float* db, int64_t m, int64_t k,
                       int64_t n, const BlockUpdate* update) {
    // With AMX, a narrow gradient (a classifier's 10 columns) in float32: its bf16 product and
    // conversions cost 4x the sgemm (measured 53 against 13 us a step for BIG's 1000 x 10).
    const bool bf16_product = bf16_ && !(amx_ && n < 64);
    if (bf16_product && amx_) {
      weight_gradient_in_blocks(x, dy, dw, db, m, k, n, update);
      return;
    }
    if (bf16_product) gemm_bf16(true, false, k, n, m, x, dy, dw);
    for_blocks_with_index(k, 2 * m * n * k, [&](int64_t r0, int64_t r1, int64_t t, int64_t nt) {
      if (r1 > r0) {
        if (!bf16_product)
          sgemm('T', 'N', r1 - r0, n, m, 1.0f, x + r0, k, dy, n, 0.0f, dw + r0 * n, n);
        if (update) update_rows(*update, r0, r1, n);
      }
      bias_gradient_part(dy, db, m, n, t, nt, update);
    });
  }

  // Rows [r0, r1) of a kernel (n columns) updated by the fused step, from this thread's cache; in
  // bf16 16 rows at a time, each written into the weights' bf16 copies at once (instead of a
  // pass over all of the weights before the next product).
  void update_rows(const BlockUpdate& update, int64_t r0, int64_t r1, int64_t n) {
    const int64_t rows = bf16_ ? kCopyRows : r1 - r0;
    for (int64_t c0 = r0; c0 < r1; c0 += rows) {
      const int64_t c1 = std::min(r1, c0 + rows);
      update_range(update.config, update.constants, 1.0f, update.kernel, c0 * n, c1 * n);
      if (bf16_) matmul_.write_rows(update.kernel.value, c0, c1);
    }
  }

  // Thread t of nt's block of columns of db(n) = column sums of dy(m, n), and its bias update
  // (nothing without db).
  static void bias_gradient_part(const float* dy, float* db, int64_t m, int64_t n, int64_t t,
                                 int64_t nt, const BlockUpdate* update) {
    if (db == nullptr) return;
    const int64_t c0 = n * t / nt, c1 = n * (t + 1) / nt;
    column_sums(dy, m, n, c0, c1, db);
    if (update && update->bias)
      update_range(update->config, update->constants, 1.0f, *update->bias, c0, c1);
  }

  // Rows of a kernel updated and then written into its bf16 copies in one go (even: whole pairs).
  static constexpr int64_t kCopyRows = 16;

  // The bf16 weight gradient on a CPU with AMX: blocks of rows of dw (about 256 KB each,
  // DnnlMatmulBf16::gradient_rows), each thread a run of whole blocks (the same rows every step),
  // each block updated and written into the weights' bf16 copies right after its product, while
  // it is in this core's cache: dw never makes a round trip through L3. Measured on a Xeon with
  // AMX (bench/RESULTS.md, 2026-12-07); CPUs with AVX512_BF16 alone keep the whole product.
  void weight_gradient_in_blocks(const float* x, const float* dy, float* dw, float* db, int64_t m,
                                 int64_t k, int64_t n, const BlockUpdate* update) {
    const int64_t rows = cpu::DnnlMatmulBf16::gradient_block_rows(k, n);
    const int64_t blocks = (k + rows - 1) / rows;
    const int nt = static_cast<int>(
        std::min<int64_t>(2 * m * n * k < kParallelGemmFlops ? 1 : threads_, blocks));
    matmul_.gradient_operands(m, k, n, x, dy, nt);
    auto run = [&](int t) {
      for (int64_t b = blocks * t / nt; b < blocks * (t + 1) / nt; ++b) {
        const int64_t r0 = b * rows, r1 = std::min(k, r0 + rows);
        matmul_.gradient_rows(r0, r1, dw, t);
        if (update) update_rows(*update, r0, r1, n);
      }
      bias_gradient_part(dy, db, m, n, t, nt, update);
    };
    if (nt == 1) {
      omp_set_num_threads(1);  // oneDNN would otherwise open its own parallel region
      run(0);
      omp_set_num_threads(threads_);
      return;
    }
#pragma omp parallel num_threads(nt)
    run(omp_get_thread_num());
  }

  // Below this many flops a GEMM runs on one thread: a fork-join costs a few microseconds.
  static constexpr int64_t kParallelGemmFlops = 1 << 19;

  // Row-major c(m, n) = op(a) . op(b) with bf16 operands and float32 accumulation
  // (backends/cpu/dnnl_matmul.h); a small product runs on one thread, as the sgemm blocks do.
  void gemm_bf16(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
                 float* c) {
    on_gemm_threads(m, n, k, [&](int nt) { matmul_.gemm(ta, tb, m, n, k, a, b, c, nt); });
  }
  // The same by a layer's weights w, through their blocked bf16 copy: c(m, n) = a(m, k) . w(k, n),
  // or . w^T of w stored (n, k) when tw.
  void gemm_bf16_weights(bool tw, int64_t m, int64_t n, int64_t k, const float* a, const float* w,
                         float* c, const float* bias = nullptr, bool relu = false) {
    on_gemm_threads(m, n, k,
                    [&](int nt) { matmul_.gemm_weights(tw, m, n, k, a, w, c, nt, bias, relu); });
  }
  template <class F>
  void on_gemm_threads(int64_t m, int64_t n, int64_t k, F&& f) {
    const int nt = 2 * m * n * k < kParallelGemmFlops ? 1 : threads_;
    if (nt != threads_) omp_set_num_threads(nt);
    f(nt);
    if (nt != threads_) omp_set_num_threads(threads_);
  }

  // Memory [p, p + bytes) was written other than by the products: bf16 weights copies made from it
  // are stale and are remade at their next use (a scan of a few entries; none in fp32).
  void weights_changed(const void* p, std::size_t bytes) {
    if (bf16_) matmul_.weights_changed(p, bytes);
  }

  // f(begin, end, thread, threads) over [0, extent) in blocks of multiples of 16 (whole cache
  // lines and vectors), one per thread; one thread when the work is small.
  template <class F>
  void for_blocks_with_index(int64_t extent, int64_t flops, F&& f) {
    const int64_t nt = std::min<int64_t>(threads_, std::max<int64_t>(1, extent / 16));
    if (nt == 1 || flops < kParallelGemmFlops) {
      // oneDNN would otherwise open its own parallel region, which allocates on every call.
      omp_set_num_threads(1);
      f(0, extent, 0, 1);
      omp_set_num_threads(threads_);
      return;
    }
#pragma omp parallel num_threads(static_cast <int>(nt))
    {
      const int64_t t = omp_get_thread_num();
      const int64_t n = omp_get_num_threads();
      const int64_t begin = std::min(extent, (extent * t / n + 15) / 16 * 16);
      const int64_t end =
          t + 1 == n ? extent : std::min(extent, (extent * (t + 1) / n + 15) / 16 * 16);
      // Also when empty: f may have other work for thread t, or a barrier
      // (forward_by_weight_rows) that every thread of the team must reach.
      f(begin, end, t, n);
    }
  }
  template <class F>
  void for_blocks(int64_t extent, int64_t flops, F&& f) {
    for_blocks_with_index(extent, flops, [&](int64_t b, int64_t e, int64_t, int64_t) { f(b, e); });
  }

  // f(begin, end) over [0, total) split evenly across the threads.
  template <class F>
  void parallel_chunks(int64_t total, F&& f) {
    parallel_chunks_above(total, kParallelThreshold, total, std::forward<F>(f));
  }
  // f(begin, end) over [0, total) split evenly across the threads when `work` is at least
  // `threshold`, else on the calling thread.
  template <class F>
  void parallel_chunks_above(int64_t work, int64_t threshold, int64_t total, F&& f) {
    if (work < threshold || threads_ == 1) {
      f(0, total);
      return;
    }
#pragma omp parallel
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t chunk = (total + nt - 1) / nt;
      const int64_t begin = std::min(total, t * chunk), end = std::min(total, begin + chunk);
      if (begin < end) f(begin, end);
    }
  }

  float* partial_sums(int64_t c) {
    if (static_cast<int64_t>(partials_size_) < c) {
      partials_ = make_aligned<float>(static_cast<std::size_t>(c));
      partials_size_ = static_cast<std::size_t>(c);
    }
    return partials_.get();
  }

  float* scratch_row(int64_t c) {
    if (static_cast<int64_t>(scratch_size_) < c) {
      scratch_ = make_aligned<float>(static_cast<std::size_t>(c));
      scratch_size_ = static_cast<std::size_t>(c);
    }
    return scratch_.get();
  }

  int threads_ = 1;
  int64_t l2_bytes_ = cpu_info().l2_bytes;  // a core's; 0 where sysfs does not say
  bool bf16_ = false;                       // the dense GEMMs in bf16 (Precision::bf16)
  bool amx_ = false;                        // bf16 on a CPU with AMX-BF16
  cpu::DnnlConv conv_;
  cpu::DnnlMatmulBf16 matmul_;
  std::unique_ptr<float[], AlignedFree> scratch_;
  std::size_t scratch_size_ = 0;
  std::unique_ptr<float[], AlignedFree> partials_;  // forward_by_weight_rows's partial sums
  std::size_t partials_size_ = 0;
};

}  // namespace

int max_cpu_threads() { return 4 * omp_get_num_procs(); }

bool cpu_forward_splits_weight_rows(int64_t m, int64_t k, int64_t n, int threads,
                                    int64_t l2_bytes) {
  return threads > 1 && k >= threads * m && 16 * k * n <= threads * l2_bytes;
}

std::string cpu_threads_problem(int64_t threads) {
  if (threads < 0) return "must be 0 (all cores) or positive, not " + std::to_string(threads);
  if (threads > max_cpu_threads())
    return fmt::format(
        "{} is more than {}, 4 x the {} logical cores: more threads than cores only wait for "
        "each other",
        threads, max_cpu_threads(), omp_get_num_procs());
  return "";
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return make_cpu_backend(threads, Precision::fp32, CpuBf16Support{});
}

CpuBf16Support cpu_bf16_support() {
  CpuBf16Support s;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(1, 0, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return s;
  const uint64_t xcr0 = _xgetbv(0);
  const bool avx512_state = (xcr0 & 0xE6) == 0xE6;      // SSE, AVX, opmask, ZMM0-15, ZMM16-31
  const bool tile_state = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return s;
  const bool avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1;
  s.amx_bf16 = ((d >> 22) & 1) && tile_state;
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  if (a >= 1 && __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1))
    s.avx512_bf16 = ((a1 >> 5) & 1) && avx512f && avx512bw && avx512_state;
  return s;
}

std::string cpu_bf16_problem(const CpuBf16Support& isa) {
  if (isa.avx512_bf16) return "";
  // The bf16 copies are made by an AVX512_BF16 kernel: AMX alone (no such CPU is sold) is not
  // enough for this build.
  if (isa.amx_bf16)
    return "needs AVX512_BF16 (for the bf16 conversion); this CPU has AMX-BF16 only";
  return "needs AVX512_BF16 or AMX-BF16 on the CPU; this CPU has neither (train in fp32, or on a "
         "GPU)";
}

std::string cpu_precision_problem(Precision precision, const CpuBf16Support& isa) {
  if (precision == Precision::tf32)
    return "tf32 is a GPU precision; the CPU trains in fp32 or bf16";
  if (precision == Precision::bf16) return cpu_bf16_problem(isa);
  return "";
}

std::unique_ptr<Backend> make_cpu_backend(int threads, Precision precision,
                                          const CpuBf16Support& isa) {
  if (const std::string why = cpu_threads_problem(threads); !why.empty())
    throw Error("threads", why);
  if (const std::string why = cpu_precision_problem(precision, isa); !why.empty())
    throw Error(std::string("precision ") + precision_name(precision), why);
  return std::make_unique<CpuBackend>(threads, precision);
}

}  // namespace crossover
