// The CPU backend: GEMMs from oneDNN (see docs/GEMM.md for why), everything else as plain loops
// that the compiler vectorises, threaded with OpenMP (the runtime oneDNN itself uses, so the two
// share one thread pool). A step allocates nothing: every buffer comes from the model's plan.
// This file: its construction, memory and transfers, and the factory; the ops are defined by group
// in the cpu_*.cpp files beside it (the class: cpu_backend_impl.h).
#include <cpuid.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend_impl.h"
#include "core/aligned.h"
#include "core/error.h"
#include "core/machine.h"

namespace crossover {
namespace cpu {
namespace {

// gather_rows copies its rows on one thread below this many floats.
constexpr int64_t kParallelGatherFloats = 1 << 13;

void flush_denormals() { _mm_setcsr(_mm_getcsr() | 0x8040); }  // FTZ | DAZ

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

}  // namespace

CpuBackend::CpuBackend(int threads, Precision precision)
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

std::string CpuBackend::device_name() const { return "cpu"; }

void* CpuBackend::allocate(std::size_t bytes) {
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
MemoryAvailable CpuBackend::available_memory() const { return host_memory_available(); }
void CpuBackend::release(void* p) noexcept { std::free(p); }
void CpuBackend::upload(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  weights_changed(dst, bytes);
}
void CpuBackend::host_wrote(void* dst, std::size_t bytes) { weights_changed(dst, bytes); }
bool CpuBackend::reads_host_memory() const { return true; }
void CpuBackend::download(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void CpuBackend::download_async(void* dst, const void* src, std::size_t bytes) {
  download(dst, src, bytes);
}
void CpuBackend::fill(float* dst, float value, int64_t n) {
  std::fill(dst, dst + n, value);
  weights_changed(dst, static_cast<std::size_t>(n) * sizeof(float));
}
void CpuBackend::synchronize() {}

std::unique_ptr<Backend::StepGraph> CpuBackend::capture(std::function<void()> enqueue, bool) {
  struct Replay final : StepGraph {
    std::function<void()> fn;
    void replay() override { fn(); }
  };
  auto g = std::make_unique<Replay>();
  g->fn = std::move(enqueue);
  return g;
}

void CpuBackend::gather_rows(const float* src, int64_t cols, const int32_t* indices, int64_t batch,
                             const StepCounters* counters, int64_t m, float* dst) {
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

}  // namespace cpu

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
  return std::make_unique<cpu::CpuBackend>(threads, precision);
}

}  // namespace crossover
