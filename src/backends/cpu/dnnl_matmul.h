// The CPU backend's bf16 GEMMs (--precision bf16): oneDNN's matmul primitive with bfloat16 source
// and weights and a float32 destination (float32 accumulation), on CPUs with AVX512_BF16 or
// AMX-BF16. oneDNN 2.6's C API has no bf16 gemm function, hence the primitive.
//
// gemm: both float32 operands are converted to bfloat16 copies (round to nearest even) by our own
// AVX-512 kernel into buffers of the product's plan, then the primitive runs on the copies (and
// repacks the plain bf16 B into its blocked layout inside each call).
// gemm_weights: for a product by a layer's weights (dense forward, input gradient), a bf16 copy of
// the weights is kept in the blocked layout the primitive asks for (weights format `any`), made by
// our own AVX-512 kernel (or, for a layout it does not know, a oneDNN reorder) straight from the
// float32 weights when first needed and again only after weights_changed() said they changed, or
// by the optimizer's fused update as it writes the weights (write_rows): a product then converts
// only its activations (m rows).
// A plan (the primitive, its scratchpad and the bf16 buffers) is made the first time a shape is
// asked for and kept, as is each weights copy; a later call only converts and runs. oneDNN 2.6's
// dnnl_primitive_execute itself makes a few small heap allocations per call (its argument map), as
// for the convolutions.
#pragma once

#include <cstddef>
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

  // Row-major c(m, n) = act(a(m, k) . op(w) + bias(n)): a as in gemm (stored (m, k)); op(w) = w
  // stored (k, n), or w^T of w stored (n, k) when tw; bias (float32) when not null, act ReLU when
  // relu, both as the primitive's own epilogue. The product reads the blocked bf16 copy of w,
  // remade from w first when w changed since (weights_changed) or is new.
  void gemm_weights(bool tw, int64_t m, int64_t n, int64_t k, const float* a, const float* w,
                    float* c, int threads, const float* bias = nullptr, bool relu = false);

  // The weight gradient dw(k, n) = x(m, k)^T . dy(m, n) in blocks of rows, for an update that
  // takes each block while it is in cache: gradient_operands converts x (transposed) and packs dy
  // once and plans every block (on the calling thread, outside a parallel region); then
  // gradient_rows(r0, r1, dw, slot) writes rows [r0, r1) of dw, on the calling thread (inside a
  // parallel region oneDNN runs serially). r0 is a multiple of gradient_block_rows(k, n), and r1
  // r0 plus it or k; concurrent calls need distinct slots below gradient_operands' `slots`.
  static int64_t gradient_block_rows(int64_t k, int64_t n);
  void gradient_operands(int64_t m, int64_t k, int64_t n, const float* x, const float* dy,
                         int slots);
  void gradient_rows(int64_t r0, int64_t r1, float* dw, int slot);

  // The float32 memory [begin, begin + bytes) was written: copies of weights in it are remade at
  // their next use. Costs a scan of the copies (a few per layer), no memory work.
  void weights_changed(const void* begin, std::size_t bytes);

  // [begin, begin + bytes) holds other data now (memory handed out anew): copies of weights that
  // were there are dropped, so that none of another shape is ever taken for the new weights.
  void forget(const void* begin, std::size_t bytes);

  // Rows [r0, r1) of w (as stored, r0 even) into each copy of w our own kernel makes (oneDNN's
  // BA16a<nb>b2a layouts, nb as the primitive chose it): for the fused optimizer update, right
  // after it wrote those rows, while they are in cache. Disjoint rows may be written from several
  // threads at once. Then weights_rewritten(w) once every row is done.
  void write_rows(const float* w, int64_t r0, int64_t r1) const;
  // All of w was written, and write_rows has brought its copies up to date: those copies are
  // fresh, any other copy of w (made by a oneDNN reorder) is remade at its next use.
  void weights_rewritten(const float* w);

  // How many weights copies exist, and how many reorders have made or remade one (for tests).
  int64_t weight_copies() const;
  int64_t weight_reorders() const;

  // The implementation oneDNN chose for a shape ("brg:avx512_core_bf16", ...), planning it.
  const char* implementation(bool ta, bool tb, int64_t m, int64_t n, int64_t k);

  struct State;

 private:
  State& state();
  std::unique_ptr<State> state_;
};

}  // namespace crossover::cpu
