// The CPU backend's bf16 GEMMs (--precision bf16): oneDNN's matmul primitive with bfloat16 source
// and weights and a float32 destination (float32 accumulation), on CPUs with AVX512_BF16 or
// AMX-BF16. oneDNN 2.6's C API has no bf16 gemm function, hence the primitive.
//
// The float32 operands are converted to bfloat16 copies (round to nearest even) by our own
// AVX-512 kernel into buffers of the product's plan, then the primitive runs on the copies. A plan
// (the primitive, its scratchpad and the bf16 buffers) is made the first time a shape is asked for
// and kept; a later call only converts and runs. oneDNN 2.6's dnnl_primitive_execute itself makes
// a few small heap allocations per call (its argument map), as for the convolutions.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace crossover::cpu {

// dst[i] = bf16(src[i]) (round to nearest even; NaN stays NaN) for i < n, as uint16 bit patterns.
// Needs AVX512_BF16 for the vector part; the tail is scalar.
void to_bf16(const float* src, uint16_t* dst, int64_t n);

class DnnlMatmulBf16 {
 public:
  DnnlMatmulBf16();
  ~DnnlMatmulBf16();
  DnnlMatmulBf16(const DnnlMatmulBf16&) = delete;
  DnnlMatmulBf16& operator=(const DnnlMatmulBf16&) = delete;

  // Row-major c(m, n) = op(a) . op(b) with op(a) (m, k) and op(b) (k, n); a is stored (m, k)
  // row-major, or (k, m) when ta; b is stored (k, n), or (n, k) when tb. Both are whole,
  // contiguous matrices. The conversion runs on `threads` threads, the product on oneDNN's
  // (OpenMP's current count).
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b,
            float* c, int threads);

  // The implementation oneDNN chose for a shape ("brg:avx512_core_bf16", ...), planning it.
  const char* implementation(bool ta, bool tb, int64_t m, int64_t n, int64_t k);

  struct State;

 private:
  State& state();
  std::unique_ptr<State> state_;
};

}  // namespace crossover::cpu
