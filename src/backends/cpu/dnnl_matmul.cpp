#include "backends/cpu/dnnl_matmul.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "core/aligned.h"
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
  const uint32_t u = std::bit_cast<uint32_t>(x);
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

// The plan of one product shape: the primitive, its arguments and its buffers.
struct Plan {
  dnnl::primitive primitive;
  memory src, weights, dst, scratchpad;
  std::vector<dnnl_exec_arg_t> args;
  std::unique_ptr<uint16_t[], AlignedFree> a16, b16;
  std::unique_ptr<unsigned char[], AlignedFree> scratch;
  int64_t a_elements = 0, b_elements = 0;
  std::string implementation;
};

}  // namespace

void to_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = to_bf16_avx512(src, dst, n); i < n; ++i) dst[i] = bf16_bits(src[i]);
}

struct DnnlMatmulBf16::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t>, Plan> plans;

  Plan& plan(bool ta, bool tb, int64_t m, int64_t n, int64_t k) {
    const auto key = std::make_tuple(ta, tb, m, n, k);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    Plan p;
    // Logical (m, k), (k, n) and (m, n); a transposed operand is described by its strides.
    const memory::desc a_md({m, k}, kBf16, ta ? memory::dims{1, m} : memory::dims{k, 1});
    const memory::desc b_md({k, n}, kBf16, tb ? memory::dims{1, k} : memory::dims{n, 1});
    const memory::desc c_md({m, n}, kF32, memory::dims{n, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
    p.implementation = pd.impl_info_str();
    p.primitive = dnnl::matmul(pd);
    p.a_elements = m * k;
    p.b_elements = k * n;
    p.a16 = make_aligned<uint16_t>(static_cast<std::size_t>(p.a_elements));
    p.b16 = make_aligned<uint16_t>(static_cast<std::size_t>(p.b_elements));
    p.src = memory(a_md, engine, p.a16.get());
    p.weights = memory(b_md, engine, p.b16.get());
    p.dst = memory(c_md, engine, nullptr);
    const memory::desc s_md = pd.scratchpad_desc();
    p.scratch = make_aligned<unsigned char>(std::max<std::size_t>(s_md.get_size(), 64));
    p.scratchpad = memory(s_md, engine, p.scratch.get());
    p.args = {{DNNL_ARG_SRC, p.src.get()},
              {DNNL_ARG_WEIGHTS, p.weights.get()},
              {DNNL_ARG_DST, p.dst.get()},
              {DNNL_ARG_SCRATCHPAD, p.scratchpad.get()}};
    return plans.emplace(key, std::move(p)).first->second;
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

void DnnlMatmulBf16::gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                          const float* b, float* c, int threads) {
  State& s = state();
  Plan& p = s.plan(ta, tb, m, n, k);
  const int64_t total = p.a_elements + p.b_elements;
  // Both conversions as one range split across the threads, in blocks of 32 elements.
  auto convert = [&](int64_t begin, int64_t end) {
    if (begin < p.a_elements)
      to_bf16(a + begin, p.a16.get() + begin, std::min(end, p.a_elements) - begin);
    if (end > p.a_elements) {
      const int64_t b0 = std::max(begin, p.a_elements) - p.a_elements;
      to_bf16(b + b0, p.b16.get() + b0, end - p.a_elements - b0);
    }
  };
  if (threads <= 1 || total < (1 << 15)) {
    convert(0, total);
  } else {
#pragma omp parallel num_threads(threads)
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = std::min(total, (total * t / nt + 31) / 32 * 32);
      const int64_t end =
          t + 1 == nt ? total : std::min(total, (total * (t + 1) / nt + 31) / 32 * 32);
      if (begin < end) convert(begin, end);
    }
  }
  check(dnnl_memory_set_data_handle(p.dst.get(), c), "set_data_handle");
  check(dnnl_primitive_execute(p.primitive.get(), s.stream.get(), static_cast<int>(p.args.size()),
                               p.args.data()),
        "matmul execute");
}

}  // namespace crossover::cpu
