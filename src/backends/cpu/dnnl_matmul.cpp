#include "backends/cpu/dnnl_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/aligned.h"
#include "core/bits.h"
#include "core/error.h"

namespace crossover::cpu {
namespace {

using dnnl::memory;
constexpr memory::data_type kF32 = memory::data_type::f32;
constexpr memory::data_type kBf16 = memory::data_type::bf16;

void check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success)
    throw Error("cpu", std::string("oneDNN ") + what + " failed (status " +
                           std::to_string(static_cast<int>(status)) + ")");
}

// One float to bf16 as VCVTNE2PS2BF16 does it: round to nearest even, a NaN stays a (quiet) NaN,
// and a denormal input becomes a zero of its sign (the instruction treats denormals as zero).
inline uint16_t bf16_bits(float x) {
  const uint32_t u = crossover::bit_cast<uint32_t>(x);
  if ((u & 0x7F800000u) == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// The vector part: 32 floats at a time. Compiled for AVX512_BF16 alone (the library's baseline is
// x86-64-v3); called only where the backend has checked the CPU has it.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) int64_t to_bf16_avx512(const float* src,
                                                                              uint16_t* dst,
                                                                              int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
    const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);  // elements 0-15 from lo, 16-31 from hi
    _mm512_storeu_si512(dst + i, reinterpret_cast<const __m512i&>(v));
  }
  return i;
}

// oneDNN's blocked bf16 layouts for B(K, N) of its brgemm matmul ("BA16a<nb>b2a"; with AVX512_BF16
// nb is 64, with AMX-BF16 16, 32, 48 or 64 by N): blocks of 32 rows (16 x 2) by nb columns; within
// one, 16 row pairs of nb columns, each column's two rows side by side (the VNNI pair a VDPBF16PS
// or TDPBF16PS multiplies). Where the blocks lie is the descriptor's outer strides (in elements):
// `row_block` between blocks of 32 rows, `column_block` between blocks of nb columns. The padding
// (K up to 32 rows, N up to nb columns) stays zero.
struct BlockedLayout {
  int64_t nb = 64, row_block = 0, column_block = 0;
  int64_t offset(int64_t kk, int64_t nn) const {
    const int64_t block = nb == 64 ? nn >> 6 : nn / nb;  // no division for the usual width
    return block * column_block + kk / 32 * row_block + kk % 32 / 2 * (2 * nb) +
           (nn - block * nb) * 2 + kk % 2;
  }
};

// The layout of `desc` when it is one of those for (k, n): 16a, nb b (a multiple of 16), 2a
// innermost, the padded dims K up to 32 and N up to nb. Else none: a oneDNN reorder makes the copy.
std::optional<BlockedLayout> blocked_layout(const memory::desc& desc, int64_t k, int64_t n) {
  const dnnl_memory_desc_t& d = desc.data;
  if (d.format_kind != dnnl_blocked || d.ndims != 2 || d.data_type != dnnl_bf16) return {};
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  if (b.inner_nblks != 3 || b.inner_blks[0] != 16 || b.inner_idxs[0] != 0 || b.inner_idxs[1] != 1 ||
      b.inner_blks[2] != 2 || b.inner_idxs[2] != 0)
    return {};
  const int64_t nb = b.inner_blks[1];
  if (nb <= 0 || nb % 16 != 0 || d.dims[0] != k || d.dims[1] != n ||
      d.padded_dims[0] != (k + 31) / 32 * 32 || d.padded_dims[1] != (n + nb - 1) / nb * nb ||
      d.offset0 != 0)
    return {};
  return BlockedLayout{.nb = nb, .row_block = b.strides[0], .column_block = b.strides[1]};
}

// Rows [r0, r1) of B = w (w stored (K, N) row-major, r0 even), columns [c0, c1) (c0 a multiple of
// 16), into `out` in that layout.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pack_rows(
    const float* w, int64_t k, int64_t n, int64_t r0, int64_t r1, const BlockedLayout& layout,
    uint16_t* out, int64_t c0 = 0, int64_t c1 = -1) {
  alignas(64) static constexpr uint16_t kPairs[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                      21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                      11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i pairs = _mm512_load_si512(kPairs);
  if (c1 < 0) c1 = n;
  for (int64_t kk = r0; kk < r1; kk += 2) {
    const float* row0 = w + kk * n;
    const bool second = kk + 1 < k;
    int64_t nn = c0;
    // The pair's place in column block c0 / nb, then 32 elements on per 16 columns, and one
    // block's stride on at each block's end (no division in the loop: nb is not a constant).
    uint16_t* at = out + layout.offset(kk, nn);
    int64_t within = nn % layout.nb;
    for (; nn + 16 <= c1; nn += 16) {  // 16 columns of rows kk and kk + 1: 16 pairs, 64 bytes
      const __m512 lo = _mm512_loadu_ps(row0 + nn);
      const __m512 hi = second ? _mm512_loadu_ps(row0 + n + nn) : _mm512_setzero_ps();
      const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);  // lo's 16, then hi's 16
      _mm512_storeu_si512(at, _mm512_permutexvar_epi16(pairs, reinterpret_cast<const __m512i&>(v)));
      at += 32;
      within += 16;
      if (within == layout.nb) {
        within = 0;
        at += layout.column_block - 2 * layout.nb;
      }
    }
    for (; nn < c1; ++nn) {
      uint16_t* d = out + layout.offset(kk, nn);
      d[0] = bf16_bits(row0[nn]);
      d[1] = second ? bf16_bits(row0[n + nn]) : 0;
    }
  }
}

// GCC 12's own unpack intrinsics start from _mm512_undefined_epi32(), which -Wmaybe-uninitialized
// reports once they are inlined here, and -Wuninitialized at -O1 (the sanitizers' build) where
// transpose<> inlines them (GCC only: clang, which builds the fuzzers, has no such group).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
// r[i] dword j <- r[j] dword i: a 16 x 16 transpose of 32-bit elements in four rounds.
__attribute__((target("avx512f"))) inline void transpose16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // t[2p] lane L: rows 2p, 2p + 1 of columns 4L, 4L + 1
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // r[4g + q] lane L: rows 4g..4g+3 of column 4L + q
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int q = 0; q < 4; ++q) {  // 128-bit lanes: 0x88 takes lanes 0 and 2 of each, 0xdd 1 and 3
    t[q] = _mm512_shuffle_i32x4(r[q], r[q + 4], 0x88);
    t[q + 4] = _mm512_shuffle_i32x4(r[q], r[q + 4], 0xdd);
    t[q + 8] = _mm512_shuffle_i32x4(r[q + 8], r[q + 12], 0x88);
    t[q + 12] = _mm512_shuffle_i32x4(r[q + 8], r[q + 12], 0xdd);
  }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm512_shuffle_i32x4(t[q], t[q + 8], 0x88);
    r[q + 8] = _mm512_shuffle_i32x4(t[q], t[q + 8], 0xdd);
    r[q + 4] = _mm512_shuffle_i32x4(t[q + 4], t[q + 12], 0x88);
    r[q + 12] = _mm512_shuffle_i32x4(t[q + 4], t[q + 12], 0xdd);
  }
}

// Rows [r0, r1) of w stored (N, K) row-major, for B = w^T (K, N): row nn of w is column nn of B.
// Sixteen rows (aligned to 16) by 32 of K at a time: each row's 16 pairs, transposed, are 16
// stores of the 16 rows' pair p, side by side in the layout. Other rows and K's tail one by one.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void pack_rows_transposed(
    const float* w, int64_t k, int64_t r0, int64_t r1, const BlockedLayout& layout, uint16_t* out) {
  auto one_row = [&](int64_t nn, int64_t from) {
    for (int64_t kk = from; kk < k; ++kk) out[layout.offset(kk, nn)] = bf16_bits(w[nn * k + kk]);
  };
  int64_t nn = r0;
  for (; nn < r1 && nn % 16 != 0; ++nn) one_row(nn, 0);
  for (; nn + 16 <= r1; nn += 16) {
    int64_t kk = 0;
    for (; kk + 32 <= k; kk += 32) {
      __m512i pairs[16];
      for (int i = 0; i < 16; ++i) {
        const float* row = w + (nn + i) * k + kk;
        const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + 16), _mm512_loadu_ps(row));
        pairs[i] = reinterpret_cast<const __m512i&>(v);
      }
      transpose16x16(pairs);
      for (int p = 0; p < 16; ++p)
        _mm512_storeu_si512(out + layout.offset(kk + 2 * p, nn), pairs[p]);
    }
    for (int i = 0; i < 16; ++i) one_row(nn + i, kk);
  }
  for (; nn < r1; ++nn) one_row(nn, 0);
}

// src (rows, cols) float32, row-major, into dst (cols, rows), as float32 or (kBf16) converted to
// bf16: tiles of 16 x 16, transposed as 32-bit elements; the edges past the last whole tiles one
// by one.
template <bool kBf16, class Out>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void transpose(const float* src,
                                                                      int64_t rows, int64_t cols,
                                                                      Out* dst) {
  const int64_t r16 = rows / 16 * 16, c16 = cols / 16 * 16;
  for (int64_t i = 0; i < r16; i += 16)
    for (int64_t j = 0; j < c16; j += 16) {
      __m512i r[16];
      for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_si512(src + (i + c) * cols + j);
      transpose16x16(r);  // r[c]: column j + c of rows i..i + 15
      for (int c = 0; c < 16; ++c) {
        Out* to = dst + (j + c) * rows + i;
        if constexpr (kBf16) {
          const __m256bh v = _mm512_cvtneps_pbh(_mm512_castsi512_ps(r[c]));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), reinterpret_cast<const __m256i&>(v));
        } else {
          _mm512_storeu_si512(to, r[c]);
        }
      }
    }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = i < r16 ? c16 : 0; j < cols; ++j) {
      if constexpr (kBf16)
        dst[j * rows + i] = bf16_bits(src[i * cols + j]);
      else
        dst[j * rows + i] = src[i * cols + j];
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// The plan of one product shape: the primitive, its arguments and its buffers.
struct Plan {
  dnnl::primitive primitive;
  memory src, weights, dst, scratchpad, bias;
  std::vector<dnnl_exec_arg_t> args;
  std::unique_ptr<uint16_t[], AlignedFree> a16, b16;
  std::unique_ptr<unsigned char[], AlignedFree> scratch;
  std::unique_ptr<float[], AlignedFree> out;  // the product before its transpose (as_a_plan)
  int64_t a_elements = 0, b_elements = 0;     // b_elements 0: B is a weights copy (gemm_weights)
  std::string implementation;
};

// A matmul's primitive descriptor with a user scratchpad, and an optional bias and ReLU epilogue.
dnnl::matmul::primitive_desc matmul_pd(const memory::desc& a, const memory::desc& b,
                                       const memory::desc& c, const dnnl::engine& engine,
                                       const memory::desc* bias = nullptr, bool relu = false) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return dnnl::matmul::primitive_desc(
      bias ? dnnl::matmul::desc(a, b, *bias, c) : dnnl::matmul::desc(a, b, c), attr, engine);
}

// p's primitive from pd, its own scratchpad, and the arguments: src, weights and dst as p holds
// them (set before), the scratchpad.
void finish_plan(Plan& p, const dnnl::matmul::primitive_desc& pd, const dnnl::engine& engine) {
  p.implementation = pd.impl_info_str();
  p.primitive = dnnl::matmul(pd);
  const memory::desc s_md = pd.scratchpad_desc();
  p.scratch = make_aligned<unsigned char>(std::max<std::size_t>(s_md.get_size(), 64));
  p.scratchpad = memory(s_md, engine, p.scratch.get());
  p.args = {{DNNL_ARG_SRC, p.src.get()},
            {DNNL_ARG_WEIGHTS, p.weights.get()},
            {DNNL_ARG_DST, p.dst.get()},
            {DNNL_ARG_SCRATCHPAD, p.scratchpad.get()}};
}

// oneDNN's reorder of float32 `from` (plain, or transposed by strides) into a bf16 layout a
// primitive picked that our packing kernels do not know, with its arguments.
struct Reorder {
  dnnl::primitive primitive;
  memory from, to;
  std::vector<dnnl_exec_arg_t> args;
  Reorder() = default;
  Reorder(const dnnl::engine& engine, const memory::desc& from_md, const float* src,
          const memory::desc& to_md, void* dst)
      : primitive(dnnl::reorder(dnnl::reorder::primitive_desc(engine, from_md, engine, to_md))),
        from(from_md, engine, const_cast<float*>(src)),
        to(to_md, engine, dst),
        args{{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}} {}
};

// A bf16 copy of one weights matrix in the layout `desc` a plan's primitive reads B in, and the
// reorder that makes it from the float32 weights (plain row-major, or transposed by strides).
struct WeightCopy {
  const float* w = nullptr;
  std::size_t bytes = 0;  // of w
  bool tw = false;
  int64_t k = 0, n = 0;  // op(w) is (k, n)
  memory::desc desc;
  std::unique_ptr<unsigned char[], AlignedFree> data;  // zero-filled: the padding stays zero
  std::optional<BlockedLayout> ours;  // desc is one of them: made by pack_rows; else the reorder
  bool plain = false;  // w as stored, in bf16 (by to_bf16), read as a product's A (as_a_plan)
  Reorder reorder;     // where neither ours nor plain
  bool fresh = false;  // made from w's current values
};

}  // namespace

void to_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = to_bf16_avx512(src, dst, n); i < n; ++i) dst[i] = bf16_bits(src[i]);
}

struct DnnlMatmulBf16::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // Key: ta, tb, m, n, k, whether B is a weights copy (then in the layout the primitive picks),
  // and the epilogue: a bias, a ReLU.
  std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, bool, bool, bool>, Plan> plans;
  std::vector<WeightCopy> copies;
  int64_t reorders = 0;
  // With AMX-BF16, a product by transposed weights reads them as its A operand, plain (as_a_plan),
  // so the update writes them with a plain conversion instead of a transposing pack.
  const bool amx = cpu_bf16_support().amx_bf16;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Plan> as_a_plans;

  // c^T(n, m) = w(n, k) . a(m, k)^T, into the plan's `out`: w a plain bf16 copy (set per call), a
  // converted into b16 (read transposed, by strides).
  Plan& as_a_plan(int64_t m, int64_t n, int64_t k) {
    const auto key = std::make_tuple(m, n, k);
    auto it = as_a_plans.find(key);
    if (it != as_a_plans.end()) return it->second;
    Plan p;
    const memory::desc a_md({n, k}, kBf16, memory::dims{k, 1});
    const memory::desc b_md({k, m}, kBf16, memory::dims{1, k});
    const memory::desc c_md({n, m}, kF32, memory::dims{m, 1});
    const dnnl::matmul::primitive_desc pd = matmul_pd(a_md, b_md, c_md, engine);
    p.b_elements = m * k;
    p.b16 = make_aligned<uint16_t>(static_cast<std::size_t>(p.b_elements));
    p.out = make_aligned<float>(static_cast<std::size_t>(n * m));
    p.src = memory(a_md, engine, nullptr);  // the copy, set per call
    p.weights = memory(b_md, engine, p.b16.get());
    p.dst = memory(c_md, engine, p.out.get());
    finish_plan(p, pd, engine);
    return as_a_plans.emplace(key, std::move(p)).first->second;
  }

  // The weight gradient in row blocks (gradient_operands, gradient_rows): the shape, x^T in bf16,
  // a plan per block height and thread (key: rows, m, n, slot), and dy packed in each B layout
  // those plans read (with the reorder that makes one our kernel does not know).
  struct PackedB {
    memory::desc desc;
    std::optional<BlockedLayout> ours;
    std::unique_ptr<unsigned char[], AlignedFree> data;  // zero-filled: the padding stays zero
    Reorder reorder;                                     // where not ours (its source set per call)
  };
  int64_t grad_m = 0, grad_k = 0, grad_n = 0, grad_rows = 0;
  std::unique_ptr<uint16_t[], AlignedFree> xt16;
  int64_t xt16_elements = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, Plan> grad_plans;
  std::vector<PackedB> packed_dy;

  Plan& grad_plan(int64_t rows, int64_t m, int64_t n, int slot) {
    const auto key = std::make_tuple(rows, m, n, slot);
    auto it = grad_plans.find(key);
    if (it != grad_plans.end()) return it->second;
    Plan p;
    const memory::desc a_md({rows, m}, kBf16, memory::dims{m, 1});
    const memory::desc b_md({m, n}, kBf16, memory::format_tag::any);
    const memory::desc c_md({rows, n}, kF32, memory::dims{n, 1});
    const dnnl::matmul::primitive_desc pd = matmul_pd(a_md, b_md, c_md, engine);
    p.src = memory(a_md, engine, nullptr);                   // x^T's rows, set per call
    p.weights = memory(pd.weights_desc(), engine, nullptr);  // dy packed, set per call
    p.dst = memory(c_md, engine, nullptr);                   // dw's rows, set per call
    finish_plan(p, pd, engine);
    return grad_plans.emplace(key, std::move(p)).first->second;
  }

  // dy (m, n) packed in `desc`: found or made (allocated once).
  PackedB& packed(const memory::desc& desc, int64_t m, int64_t n) {
    for (PackedB& b : packed_dy)
      if (b.desc == desc) return b;
    PackedB b{.desc = desc,
              .ours = blocked_layout(desc, m, n),
              .data = make_aligned<unsigned char>(std::max<std::size_t>(desc.get_size(), 64))};
    if (!b.ours)
      b.reorder = Reorder(engine, memory::desc({m, n}, kF32, memory::dims{n, 1}), nullptr, desc,
                          b.data.get());
    packed_dy.push_back(std::move(b));
    return packed_dy.back();
  }

  Plan& plan(bool ta, bool tb, int64_t m, int64_t n, int64_t k, bool weights_copy = false,
             bool bias = false, bool relu = false) {
    const auto key = std::make_tuple(ta, tb, m, n, k, weights_copy, bias, relu);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    Plan p;
    // Logical (m, k), (k, n) and (m, n); a transposed operand is described by its strides.
    const memory::desc a_md({m, k}, kBf16, ta ? memory::dims{1, m} : memory::dims{k, 1});
    const memory::desc b_md =
        weights_copy ? memory::desc({k, n}, kBf16, memory::format_tag::any)
                     : memory::desc({k, n}, kBf16, tb ? memory::dims{1, k} : memory::dims{n, 1});
    const memory::desc c_md({m, n}, kF32, memory::dims{n, 1});
    const memory::desc bias_md({1, n}, kF32, memory::dims{n, 1});
    const dnnl::matmul::primitive_desc pd =
        matmul_pd(a_md, b_md, c_md, engine, bias ? &bias_md : nullptr, relu);
    p.a_elements = m * k;
    p.b_elements = weights_copy ? 0 : k * n;
    p.a16 = make_aligned<uint16_t>(static_cast<std::size_t>(p.a_elements));
    p.src = memory(a_md, engine, p.a16.get());
    if (weights_copy) {
      p.weights = memory(pd.weights_desc(), engine, nullptr);  // a copy's, set per call
    } else {
      p.b16 = make_aligned<uint16_t>(static_cast<std::size_t>(p.b_elements));
      p.weights = memory(b_md, engine, p.b16.get());
    }
    p.dst = memory(c_md, engine, nullptr);
    finish_plan(p, pd, engine);
    if (bias) {
      p.bias = memory(bias_md, engine, nullptr);  // the caller's, set per call
      p.args.push_back({DNNL_ARG_BIAS, p.bias.get()});
    }
    return plans.emplace(key, std::move(p)).first->second;
  }

  // The copy of w (float32, op(w) = w (k, n) or, with tw, w^T of w stored (n, k)) in `desc`: found,
  // or made (allocated once) and left to be filled.
  // The plain bf16 layout of w stored (n, k), for op(w) = w^T (k, n).
  static memory::desc plain_transposed(int64_t k, int64_t n) {
    return memory::desc({n, k}, kBf16, memory::dims{k, 1});
  }
  WeightCopy& copy(const float* w, bool tw, int64_t k, int64_t n, const memory::desc& desc) {
    const std::size_t bytes = static_cast<std::size_t>(k * n) * sizeof(float);
    for (WeightCopy& c : copies)
      if (c.w == w && c.bytes == bytes && c.tw == tw && c.desc == desc) return c;
    WeightCopy c{.w = w,
                 .bytes = bytes,
                 .tw = tw,
                 .k = k,
                 .n = n,
                 .desc = desc,
                 .data = make_aligned<unsigned char>(std::max<std::size_t>(desc.get_size(), 64)),
                 .ours = blocked_layout(desc, k, n),
                 .plain = tw && desc == plain_transposed(k, n)};
    if (!c.ours && !c.plain)
      c.reorder =
          Reorder(engine, memory::desc({k, n}, kF32, tw ? memory::dims{1, k} : memory::dims{n, 1}),
                  w, desc, c.data.get());
    copies.push_back(std::move(c));
    return copies.back();
  }
};

DnnlMatmulBf16::DnnlMatmulBf16() = default;
DnnlMatmulBf16::~DnnlMatmulBf16() = default;

DnnlMatmulBf16::State& DnnlMatmulBf16::state() {
  if (!state_) state_ = std::make_unique<State>();
  return *state_;
}

const char* DnnlMatmulBf16::implementation(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
  return state().plan(ta, tb, m, n, k).implementation.c_str();
}

namespace {

// f(begin, end) over [0, extent), split across `threads` threads at multiples of `align`; on the
// calling thread alone when `serial` (too little work for a fork-join) or threads <= 1.
template <class F>
void split_aligned(int64_t extent, int64_t align, int threads, bool serial, F&& f) {
  if (threads <= 1 || serial) {
    f(0, extent);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    auto at = [&](int64_t i) {
      return std::min(extent, (extent * i / nt + align - 1) / align * align);
    };
    const int64_t begin = at(t), end = t + 1 == nt ? extent : at(t + 1);
    if (begin < end) f(begin, end);
  }
}

// a into the plan's a16 and, for a plain B, b into its b16: one range split across the threads, in
// blocks of 32 elements.
void convert_operands(Plan& p, const float* a, const float* b, int threads) {
  const int64_t total = p.a_elements + p.b_elements;
  auto convert = [&](int64_t begin, int64_t end) {
    if (begin < p.a_elements)
      to_bf16(a + begin, p.a16.get() + begin, std::min(end, p.a_elements) - begin);
    if (end > p.a_elements) {
      const int64_t b0 = std::max(begin, p.a_elements) - p.a_elements;
      to_bf16(b + b0, p.b16.get() + b0, end - p.a_elements - b0);
    }
  };
  split_aligned(total, 32, threads, total < (1 << 15), convert);
}

// Rows [r0, r1) of c.w (as stored) into the copy.
void pack_copy_rows(const WeightCopy& c, int64_t r0, int64_t r1) {
  auto* out = reinterpret_cast<uint16_t*>(c.data.get());
  if (c.plain)  // w stored (n, k): its rows r0..r1 in place
    to_bf16(c.w + r0 * c.k, out + r0 * c.k, (r1 - r0) * c.k);
  else if (c.tw)
    pack_rows_transposed(c.w, c.k, r0, r1, *c.ours, out);
  else
    pack_rows(c.w, c.k, c.n, r0, r1, *c.ours, out);
}

// All of w into its copy, rows split across the threads in blocks of 16 (whole VNNI pairs, and
// whole tiles of pack_rows_transposed).
void pack_copy(WeightCopy& c, int threads) {
  const int64_t rows = c.tw ? c.n : c.k;  // rows of w as stored
  split_aligned(rows, 16, threads, c.k * c.n < (1 << 15),
                [&](int64_t r0, int64_t r1) { pack_copy_rows(c, r0, r1); });
}

void execute(const dnnl::primitive& primitive, const dnnl::stream& stream,
             const std::vector<dnnl_exec_arg_t>& args, const char* what) {
  check(dnnl_primitive_execute(primitive.get(), stream.get(), static_cast<int>(args.size()),
                               args.data()),
        what);
}

}  // namespace

void DnnlMatmulBf16::gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                          const float* b, float* c, int threads) {
  State& s = state();
  Plan& p = s.plan(ta, tb, m, n, k);
  convert_operands(p, a, b, threads);
  check(dnnl_memory_set_data_handle(p.dst.get(), c), "set_data_handle");
  execute(p.primitive, s.stream, p.args, "matmul execute");
}

void DnnlMatmulBf16::gemm_weights(bool tw, int64_t m, int64_t n, int64_t k, const float* a,
                                  const float* w, float* c, int threads, const float* bias,
                                  bool relu) {
  State& s = state();
  // (A product with a short inner dimension, k, keeps the blocked copy: AMX's A tiles would be
  // mostly padding, measured 2.3x slower for 1000 x 10 weights.)
  const bool as_a = tw && s.amx && bias == nullptr && !relu && k >= 64;
  Plan& p = as_a ? s.as_a_plan(m, n, k) : s.plan(false, tw, m, n, k, true, bias != nullptr, relu);
  WeightCopy& copy =
      s.copy(w, tw, k, n, as_a ? State::plain_transposed(k, n) : p.weights.get_desc());
  if (!copy.fresh) {
    if (copy.ours || copy.plain)
      pack_copy(copy, threads);
    else
      execute(copy.reorder.primitive, s.stream, copy.reorder.args, "reorder to bf16 weights");
    copy.fresh = true;
    ++s.reorders;
  }
  if (as_a) {                                  // c^T = w . a^T, then transposed into c
    convert_operands(p, nullptr, a, threads);  // a, the B operand here, into the plan's b16
    check(dnnl_memory_set_data_handle(p.src.get(), copy.data.get()), "set_data_handle");
    execute(p.primitive, s.stream, p.args, "matmul execute");
    transpose<false>(p.out.get(), n, m, c);
    return;
  }
  convert_operands(p, a, nullptr, threads);
  check(dnnl_memory_set_data_handle(p.weights.get(), copy.data.get()), "set_data_handle");
  if (bias) check(dnnl_memory_set_data_handle(p.bias.get(), const_cast<float*>(bias)), "bias");
  check(dnnl_memory_set_data_handle(p.dst.get(), c), "set_data_handle");
  execute(p.primitive, s.stream, p.args, "matmul execute");
}

int64_t DnnlMatmulBf16::gradient_block_rows(int64_t k, int64_t n) {
  const int64_t rows =
      std::max<int64_t>(64, (int64_t{1} << 16) / std::max<int64_t>(n, 1)) / 16 * 16;
  return std::min(rows, k);
}

void DnnlMatmulBf16::gradient_operands(int64_t m, int64_t k, int64_t n, const float* x,
                                       const float* dy, int slots) {
  State& s = state();
  s.grad_m = m, s.grad_k = k, s.grad_n = n, s.grad_rows = gradient_block_rows(k, n);
  if (s.xt16_elements < m * k) {
    s.xt16 = make_aligned<uint16_t>(static_cast<std::size_t>(m * k));
    s.xt16_elements = m * k;
  }
  transpose<true>(x, m, k, s.xt16.get());
  // Every plan the blocks will run (whole blocks and the last one's height, on each slot), made
  // here and not inside the threads' region; dy packed once in each layout they read.
  const int64_t tail = k % s.grad_rows;
  std::vector<memory::desc> done;
  for (int slot = 0; slot < slots; ++slot)
    for (const int64_t rows : {s.grad_rows, tail}) {
      if (rows == 0) continue;
      const Plan& p = s.grad_plan(rows, m, n, slot);
      const memory::desc& desc = p.weights.get_desc();
      State::PackedB& b = s.packed(desc, m, n);
      if (std::find(done.begin(), done.end(), desc) != done.end()) continue;
      done.push_back(desc);
      if (b.ours) {
        pack_rows(dy, m, n, 0, m, *b.ours, reinterpret_cast<uint16_t*>(b.data.get()));
      } else {
        check(dnnl_memory_set_data_handle(b.reorder.from.get(), const_cast<float*>(dy)),
              "set_data_handle");
        execute(b.reorder.primitive, s.stream, b.reorder.args, "reorder of dy to bf16");
      }
    }
}

void DnnlMatmulBf16::gradient_rows(int64_t r0, int64_t r1, float* dw, int slot) {
  State& s = *state_;
  Plan& p = s.grad_plan(r1 - r0, s.grad_m, s.grad_n, slot);
  const State::PackedB& b = s.packed(p.weights.get_desc(), s.grad_m, s.grad_n);
  check(dnnl_memory_set_data_handle(p.src.get(), s.xt16.get() + r0 * s.grad_m), "set_data_handle");
  check(dnnl_memory_set_data_handle(p.weights.get(), b.data.get()), "set_data_handle");
  check(dnnl_memory_set_data_handle(p.dst.get(), dw + r0 * s.grad_n), "set_data_handle");
  execute(p.primitive, s.stream, p.args, "matmul execute");
}

namespace {

bool overlaps(const WeightCopy& c, const void* begin, std::size_t bytes) {
  const auto lo = reinterpret_cast<std::uintptr_t>(begin);
  const auto w = reinterpret_cast<std::uintptr_t>(c.w);
  return w < lo + bytes && lo < w + c.bytes;
}

}  // namespace

void DnnlMatmulBf16::weights_changed(const void* begin, std::size_t bytes) {
  if (!state_) return;
  for (WeightCopy& c : state_->copies)
    if (overlaps(c, begin, bytes)) c.fresh = false;
}

void DnnlMatmulBf16::forget(const void* begin, std::size_t bytes) {
  if (!state_) return;
  std::erase_if(state_->copies, [&](const WeightCopy& c) { return overlaps(c, begin, bytes); });
}

void DnnlMatmulBf16::write_rows(const float* w, int64_t r0, int64_t r1) const {
  if (!state_) return;
  for (const WeightCopy& c : state_->copies)
    if (c.w == w && (c.ours || c.plain)) pack_copy_rows(c, r0, r1);
}

void DnnlMatmulBf16::weights_rewritten(const float* w) {
  if (!state_) return;
  for (WeightCopy& c : state_->copies)
    if (c.w == w) c.fresh = c.ours || c.plain;
}

int64_t DnnlMatmulBf16::weight_copies() const {
  return state_ ? static_cast<int64_t>(state_->copies.size()) : 0;
}

int64_t DnnlMatmulBf16::weight_reorders() const { return state_ ? state_->reorders : 0; }

}  // namespace crossover::cpu
