// gemm_choice: which CPU GEMM library should the CPU backend use, oneDNN or OpenBLAS?
//
// A standalone measurement (it does not link crossover_lib). It times, at the GEMM shapes of one
// training step of the two seed models at batch 32 (row-major; y = x.W (+b, relu), dW = x^T.dy,
// dx = dy.W^T), both libraries with 1 and 2 threads, plus 4096^3 as a reference of peak; the
// per-call cost of oneDNN's execute (C++ API with an unordered_map of args vs the C API with a
// prebuilt dnnl_exec_arg_t array) and of a tiny cblas_sgemm; whether a call allocates heap
// memory (malloc family and mmap are interposed below and counted); one whole training step
// (GEMMs + OpenMP elementwise work + Adam) per library, which shows how each library's thread
// pool gets on with the engine's OpenMP pool; and the memory bandwidth (a streaming triad).
//
// Results and the decision: docs/GEMM.md. Timing, buffers, shapes and the oneDNN matmul:
// gemm_bench.h.
//
// Usage: gemm_choice [--sections=env,gemm,overhead,alloc,step,bw] [--threads=1,2] [--rounds=N]
//                    [--only=onednn|openblas] [--quick]
//
// Timing: after a warm-up, a round times 21 batches of calls, each batch about 2 ms (at least
// one call); per round the best batch and the median batch; reported: the best over rounds of
// each (5 rounds by default; 4096^3: 3 batches of one call, 2 rounds). On a quiet machine the
// two agree; on a loaded one (other processes, see the last line) the best batch is the
// undisturbed speed and the median shows the disturbance. The 1-thread training step is timed
// with the thread's CPU time (all its work runs on the calling thread), which leaves out the
// time other processes held the CPU; everything else is wall time.
// Rounds alternate the libraries (A B A B ...), with a pause between them so that the other
// library's spinning worker threads have gone to sleep; compare ratios within one run, the
// machine may be shared.

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "gemm_bench.h"

// ---- allocation counting --------------------------------------------------------------------
// The executable defines the malloc family and mmap; the dynamic linker binds every shared
// library's calls (libdnnl, libopenblas, libgomp, libstdc++'s operator new) to these. They count
// and forward to glibc.

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {
std::atomic<long> g_allocs{0};       // malloc, calloc, realloc, memalign, posix_memalign, ...
std::atomic<long> g_alloc_bytes{0};  // bytes requested by those
std::atomic<long> g_mmaps{0};        // mmap calls that reached the interposed mmap
inline void count_alloc(std::size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  g_alloc_bytes.fetch_add(static_cast<long>(n), std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(std::size_t n) noexcept {
  count_alloc(n);
  return __libc_malloc(n);
}
void* calloc(std::size_t a, std::size_t b) noexcept {
  count_alloc(a * b);
  return __libc_calloc(a, b);
}
void* realloc(void* p, std::size_t n) noexcept {
  count_alloc(n);
  return __libc_realloc(p, n);
}
void free(void* p) noexcept { __libc_free(p); }
void* memalign(std::size_t al, std::size_t n) noexcept {
  count_alloc(n);
  return __libc_memalign(al, n);
}
void* aligned_alloc(std::size_t al, std::size_t n) noexcept {
  count_alloc(n);
  return __libc_memalign(al, n);
}
int posix_memalign(void** out, std::size_t al, std::size_t n) noexcept {
  count_alloc(n);
  if (al < sizeof(void*) || (al & (al - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(al, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(std::size_t n) noexcept {
  count_alloc(n);
  return __libc_memalign(static_cast<std::size_t>(sysconf(_SC_PAGESIZE)), n);
}
void* mmap(void* addr, std::size_t len, int prot, int flags, int fd, off_t off) noexcept {
  g_mmaps.fetch_add(1, std::memory_order_relaxed);
  return reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}
}

namespace {

using namespace gemm_bench;  // NOLINT(build/namespaces): the shared bench helpers

struct AllocCount {
  double allocs = 0, bytes = 0, mmaps = 0;  // per call
};

// Allocations per call of f, over n calls, after f has already run (warm).
AllocCount count_allocs(const std::function<void()>& f, int n = 20) {
  f();
  const long a0 = g_allocs.load(), b0 = g_alloc_bytes.load(), m0 = g_mmaps.load();
  for (int i = 0; i < n; ++i) f();
  AllocCount c;
  c.allocs = static_cast<double>(g_allocs.load() - a0) / n;
  c.bytes = static_cast<double>(g_alloc_bytes.load() - b0) / n;
  c.mmaps = static_cast<double>(g_mmaps.load() - m0) / n;
  return c;
}

// ---- options ---------------------------------------------------------------------------------

struct Options {
  std::vector<std::string> sections{"env", "gemm", "overhead", "alloc", "step", "bw"};
  std::vector<int> threads{1, 2};
  int rounds = 5;
  std::string only;  // "", "onednn", "openblas"
  bool quick = false;
  bool has(const std::string& s) const {
    return std::find(sections.begin(), sections.end(), s) != sections.end();
  }
  bool lib(const std::string& l) const { return only.empty() || only == l; }
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* key) -> const char* {
      std::size_t n = std::strlen(key);
      return a.compare(0, n, key) == 0 ? a.c_str() + n : nullptr;
    };
    if (const char* v = val("--sections=")) {
      o.sections = split(v);
    } else if (const char* v2 = val("--threads=")) {
      o.threads.clear();
      for (auto& t : split(v2)) o.threads.push_back(std::atoi(t.c_str()));
    } else if (const char* v3 = val("--rounds=")) {
      o.rounds = std::max(1, std::atoi(v3));
    } else if (const char* v4 = val("--only=")) {
      o.only = v4;
    } else if (a == "--quick") {
      o.quick = true;
      o.rounds = 1;
    } else {
      std::fprintf(stderr,
                   "usage: gemm_choice [--sections=env,gemm,overhead,alloc,step,bw] "
                   "[--threads=1,2] [--rounds=N] [--only=onednn|openblas] [--quick]\n");
      std::exit(2);
    }
  }
  return o;
}

void set_threads(int n) {
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

// ---- OpenBLAS --------------------------------------------------------------------------------

void blas_gemm(const Shape& s, const float* A, const float* B, float* C) {
  const int lda = s.transA ? s.M : s.K;  // A stored K x M when transposed
  const int ldb = s.transB ? s.K : s.N;  // B stored N x K when transposed
  cblas_sgemm(CblasRowMajor, s.transA ? CblasTrans : CblasNoTrans,
              s.transB ? CblasTrans : CblasNoTrans, s.M, s.N, s.K, 1.f, A, lda, B, ldb, 0.f, C,
              s.N);
}

// ---- correctness check (both libraries against a double-precision reference) -----------------

double check_shape(const Shape& s) {
  Buf A(static_cast<std::size_t>(s.M) * s.K, 3), B(static_cast<std::size_t>(s.K) * s.N, 4),
      bias(s.N, 5), C1(static_cast<std::size_t>(s.M) * s.N),
      C2(static_cast<std::size_t>(s.M) * s.N);
  DnnlGemm g(s, A.p, B.p, bias.p, C1.p);
  g.run_c();
  blas_gemm(s, A.p, B.p, C2.p);
  double worst = 0;
  for (int i = 0; i < s.M; ++i)
    for (int j = 0; j < s.N; ++j) {
      double ref = 0;
      for (int k = 0; k < s.K; ++k) {
        double a = s.transA ? A.p[static_cast<std::size_t>(k) * s.M + i]
                            : A.p[static_cast<std::size_t>(i) * s.K + k];
        double b = s.transB ? B.p[static_cast<std::size_t>(j) * s.K + k]
                            : B.p[static_cast<std::size_t>(k) * s.N + j];
        ref += a * b;
      }
      double r1 = ref;
      if (s.epi != Epi::none) r1 += bias.p[j];
      if (s.epi == Epi::bias_relu) r1 = std::max(r1, 0.0);
      std::size_t ij = static_cast<std::size_t>(i) * s.N + j;
      worst = std::max(worst, std::fabs(r1 - C1.p[ij]));
      worst = std::max(worst, std::fabs(ref - C2.p[ij]));
    }
  return worst;
}

// ---- section: environment --------------------------------------------------------------------

void section_env() {
  const dnnl_version_t* v = dnnl_version();
  std::printf("## environment\n");
  std::printf("cpu: %s, %u hardware threads\n", cpu_model().c_str(),
              std::thread::hardware_concurrency());
  const int isa = static_cast<int>(dnnl_get_effective_cpu_isa());
  const char* isa_name = isa == dnnl_cpu_isa_avx512_core_amx    ? "avx512_core_amx"
                         : isa == dnnl_cpu_isa_avx512_core_bf16 ? "avx512_core_bf16"
                         : isa == dnnl_cpu_isa_avx512_core_vnni ? "avx512_core_vnni"
                         : isa == dnnl_cpu_isa_avx512_core      ? "avx512_core"
                         : isa == dnnl_cpu_isa_avx2             ? "avx2"
                                                                : "other";
  std::printf("oneDNN %d.%d.%d, cpu runtime %s, effective ISA %s (0x%x)\n", v->major, v->minor,
              v->patch, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other", isa_name, isa);
  std::printf("OpenBLAS: %s; core %s; parallel %d (0 serial, 1 pthreads, 2 OpenMP)\n",
              openblas_get_config(), openblas_get_corename(), openblas_get_parallel());
  for (const char* e :
       {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OPENBLAS_BLOCK_FACTOR",
        "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "DNNL_MAX_CPU_ISA"}) {
    const char* val = std::getenv(e);
    std::printf("%s=%s\n", e, val ? val : "(unset)");
  }
  print_loadavg("at start");
  std::printf("\n");
}

// ---- section: GEMM rates ---------------------------------------------------------------------

void section_gemm(const Options& o) {
  const auto sh = shapes(true);
  const bool do_dnnl = o.lib("onednn"), do_blas = o.lib("openblas");
  std::printf("## correctness (max abs error vs double reference, both libraries)\n");
  set_threads(1);
  double worst = 0;
  for (const auto& s : sh)
    if (s.M < 4096) worst = std::max(worst, check_shape(s));
  std::printf("max abs error: %.2e\n\n", worst);

  for (int nt : o.threads) {
    set_threads(nt);
    // Buffers per shape; oneDNN primitives created after the thread count is set (some
    // implementations plan their work split at creation).
    struct Item {
      Shape s;
      Buf A, B, bias, C;
      std::unique_ptr<DnnlGemm> g;
      Timing t_dnnl, t_blas;
      AllocCount al_dnnl, al_blas;
    };
    std::vector<Item> items;
    for (const auto& s : sh) {
      Item it{s,
              Buf(static_cast<std::size_t>(s.M) * s.K, 1),
              Buf(static_cast<std::size_t>(s.K) * s.N, 2),
              Buf(s.N, 3),
              Buf(static_cast<std::size_t>(s.M) * s.N, 4),
              nullptr};
      it.g = std::make_unique<DnnlGemm>(s, it.A.p, it.B.p, it.bias.p, it.C.p);
      items.push_back(std::move(it));
    }
    for (int r = 0; r < o.rounds; ++r) {
      for (int lib = 0; lib < 2; ++lib) {
        int which = (r % 2 == 0) ? lib : 1 - lib;  // alternate the order of the libraries
        if ((which == 0 && !do_dnnl) || (which == 1 && !do_blas)) continue;
        pause_ms(300);  // let the other library's workers stop spinning
        for (auto& it : items) {
          bool big = it.s.M >= 4096;
          if (big && r > 1) continue;  // ~1 s per call: two rounds are enough
          int saved = g_batches;
          if (big) g_batches = 3;
          if (which == 0) {
            DnnlGemm* g = it.g.get();
            it.t_dnnl.merge(time_call([g] { g->run_c(); }));
          } else {
            Item* p = &it;
            it.t_blas.merge(time_call([p] { blas_gemm(p->s, p->A.p, p->B.p, p->C.p); }));
          }
          g_batches = saved;
        }
      }
    }
    for (auto& it : items) {
      if (it.s.M >= 4096) continue;
      DnnlGemm* g = it.g.get();
      Item* p = &it;
      if (do_dnnl) it.al_dnnl = count_allocs([g] { g->run_c(); });
      if (do_blas) it.al_blas = count_allocs([p] { blas_gemm(p->s, p->A.p, p->B.p, p->C.p); });
    }

    std::printf(
        "## GEMM, %d thread%s (GFLOP/s = 2MNK / best-batch time; med/best = median "
        "batch over best batch, 1.0 on a quiet machine; oneDNN: C API execute, user "
        "scratchpad, bias/relu fused; OpenBLAS: plain cblas_sgemm)\n",
        nt, nt > 1 ? "s" : "");
    std::printf(
        "| model | role | (MxK).(KxN) | epilogue | oneDNN GF/s | OpenBLAS GF/s | oneDNN us "
        "| OpenBLAS us | oneDNN/OpenBLAS speed | med/best oneDNN | med/best OpenBLAS "
        "| allocs/call oneDNN | allocs/call OpenBLAS | oneDNN impl |\n");
    std::printf("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    double sum_d[2] = {0, 0}, sum_b[2] = {0, 0};
    for (auto& it : items) {
      const Shape& s = it.s;
      char dims[64];
      std::snprintf(dims, sizeof dims, "(%dx%d).(%dx%d)%s%s", s.M, s.K, s.K, s.N,
                    s.transA ? " A^T" : "", s.transB ? " B^T" : "");
      const bool have_d = do_dnnl && it.t_dnnl.valid(), have_b = do_blas && it.t_blas.valid();
      const double td = it.t_dnnl.best, tb = it.t_blas.best;
      double gd = have_d ? s.flops() / td * 1e-9 : 0;
      double gb = have_b ? s.flops() / tb * 1e-9 : 0;
      bool peak = s.M >= 4096;
      std::printf(
          "| %s | %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %s | %s "
          "| %s |\n",
          s.model, s.role, dims, epi_name(s.epi), gd, gb, have_d ? td * 1e6 : 0,
          have_b ? tb * 1e6 : 0, (have_d && have_b) ? tb / td : 0, have_d ? it.t_dnnl.med / td : 0,
          have_b ? it.t_blas.med / tb : 0, peak ? "-" : fmt2(it.al_dnnl.allocs).c_str(),
          peak ? "-" : fmt2(it.al_blas.allocs).c_str(), it.g->impl.c_str());
      if (!peak) {
        int m = std::strcmp(s.model, "SMALL") == 0 ? 0 : 1;
        sum_d[m] += td;
        sum_b[m] += tb;
      }
    }
    if (do_dnnl && do_blas)
      std::printf(
          "| SMALL | sum of the step's GEMMs | | | | | %.1f | %.1f | %.2f | | | | | |\n"
          "| BIG | sum of the step's GEMMs | | | | | %.1f | %.1f | %.2f | | | | | |\n",
          sum_d[0] * 1e6, sum_b[0] * 1e6, sum_b[0] / sum_d[0], sum_d[1] * 1e6, sum_b[1] * 1e6,
          sum_b[1] / sum_d[1]);
    std::printf("\n");
    std::fflush(stdout);
  }
}

// ---- section: per-call overhead --------------------------------------------------------------

void section_overhead(const Options& o) {
  set_threads(1);
  std::printf(
      "## per-call cost, 1 thread (allocs = heap allocations per call, counted by the "
      "interposed malloc family and mmap)\n");
  std::printf(
      "| call | shape | us/call (best batch) | us/call (median batch) | allocs/call | "
      "bytes/call | mmap/call |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|\n");
  const Shape tiny{"", "", 1, 1, 1, false, false, Epi::none};
  const Shape small{"", "", 32, 10, 128, false, true, Epi::none};
  for (const Shape& s : {tiny, small}) {
    char dims[48];
    std::snprintf(dims, sizeof dims, "%dx%dx%d", s.M, s.K, s.N);
    Buf A(static_cast<std::size_t>(s.M) * s.K), B(static_cast<std::size_t>(s.K) * s.N), bias(s.N),
        C(static_cast<std::size_t>(s.M) * s.N);
    DnnlGemm g(s, A.p, B.p, bias.p, C.p, /*user_scratchpad=*/true);
    DnnlGemm gl(s, A.p, B.p, bias.p, C.p, /*user_scratchpad=*/false);
    dnnl::memory ma = g.a, mb = g.b, mc = g.c, ms = g.scratch;
    struct Case {
      const char* name;
      std::function<void()> f;
      bool dnnl;
    };
    std::vector<Case> cases = {
        {"oneDNN C API dnnl_primitive_execute, prebuilt dnnl_exec_arg_t[]", [&] { g.run_c(); },
         true},
        {"oneDNN C++ execute, prebuilt unordered_map", [&] { g.run_cpp(); }, true},
        {"oneDNN C++ execute, map built per call {{SRC,a},{WEIGHTS,b},{DST,c}(,{SCRATCHPAD,s})}",
         [&] {
           if (ms)
             g.prim.execute(cpu_stream(), {{DNNL_ARG_SRC, ma},
                                           {DNNL_ARG_WEIGHTS, mb},
                                           {DNNL_ARG_DST, mc},
                                           {DNNL_ARG_SCRATCHPAD, ms}});
           else
             g.prim.execute(cpu_stream(),
                            {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
         },
         true},
        {"oneDNN C API, library-managed scratchpad", [&] { gl.run_c(); }, true},
        {"OpenBLAS cblas_sgemm", [&] { blas_gemm(s, A.p, B.p, C.p); }, false},
    };
    for (auto& c : cases) {
      if (!o.lib(c.dnnl ? "onednn" : "openblas")) continue;
      Timing t;
      for (int r = 0; r < o.rounds; ++r) t.merge(time_call(c.f));
      AllocCount al = count_allocs(c.f, 200);
      std::printf("| %s | %s | %.2f | %.2f | %.2f | %.0f | %.2f |\n", c.name, dims, t.best * 1e6,
                  t.med * 1e6, al.allocs, al.bytes, al.mmaps);
    }
  }
  std::printf("\n");
}

// ---- section: allocation by thread count and scratchpad mode, all shapes ----------------------

void section_alloc(const Options& o) {
  std::printf("## heap allocations per call at the step shapes (after one warm-up call)\n");
  std::printf(
      "| threads | shape | oneDNN user scratchpad, C API | oneDNN library scratchpad, "
      "C++ map | oneDNN bytes/call | oneDNN user scratchpad bytes | OpenBLAS allocs | "
      "OpenBLAS bytes/call | OpenBLAS mmaps |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int nt : o.threads) {
    set_threads(nt);
    for (const auto& s : shapes(false)) {
      Buf A(static_cast<std::size_t>(s.M) * s.K), B(static_cast<std::size_t>(s.K) * s.N), bias(s.N),
          C(static_cast<std::size_t>(s.M) * s.N);
      DnnlGemm g(s, A.p, B.p, bias.p, C.p, true);
      DnnlGemm gl(s, A.p, B.p, bias.p, C.p, false);
      AllocCount a1 = count_allocs([&] { g.run_c(); });
      AllocCount a2 = count_allocs([&] { gl.run_cpp(); });
      AllocCount a3 = count_allocs([&] { blas_gemm(s, A.p, B.p, C.p); });
      std::printf("| %d | %s %s %dx%dx%d | %.2f | %.2f | %.0f | %zu | %.2f | %.0f | %.2f |\n", nt,
                  s.model, s.role, s.M, s.K, s.N, a1.allocs, a2.allocs, a1.bytes, g.scratch_bytes(),
                  a3.allocs, a3.bytes, a3.mmaps);
    }
  }
  std::printf("\n");
}

// ---- section: a whole training step -----------------------------------------------------------

// The engine's elementwise work: f(begin, end) over [0, n), split across the OpenMP threads
// (64-element aligned chunks). With one thread it runs inline: libgomp allocates a team for
// every parallel region of one thread, so an engine that wants no allocation per step must not
// open a parallel region then.
int g_nt = 1;
template <class F>
void par_range(long n, F&& f) {
  if (g_nt <= 1 || n < 64) {
    f(0L, n);
    return;
  }
#pragma omp parallel num_threads(g_nt)
  {
    const long T = omp_get_num_threads(), t = omp_get_thread_num();
    const long chunk = ((n + T - 1) / T + 63) / 64 * 64;
    const long b = std::min(n, t * chunk), e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}
// GEMMs from the library under test; the rest (bias+relu for OpenBLAS, softmax-CE gradient,
// relu gradient, bias gradient, Adam) is OpenMP-parallel code, as in the engine. This is where
// OpenBLAS's pthread pool and the engine's OpenMP pool meet.

struct StepModel {
  int B = 32;
  std::vector<int> dims;  // 784, hidden..., 10
  std::vector<Buf> W, b, dW, db, mW, vW, mb, vb;
  std::vector<Buf> act;   // act[0] = x, act[i] = output of layer i
  std::vector<Buf> grad;  // grad[i] = dL/d act[i]
  std::vector<int> labels;
  // 16 batches of random inputs and labels, copied into act[0] at the start of each step (as
  // the engine's shuffled gather does), so that the step does not keep fitting one batch.
  static constexpr int kBatches = 16;
  Buf data;
  std::vector<int> data_labels;
  long batch_no = 0;
  // oneDNN plan
  std::vector<std::unique_ptr<DnnlGemm>> fwd, bwdW, bwdX;
  std::vector<Shape> sf, sw, sx;
  long t = 0;

  explicit StepModel(std::vector<int> d) : dims(std::move(d)) {
    const int L = static_cast<int>(dims.size()) - 1;
    act.emplace_back(static_cast<std::size_t>(B) * dims[0], 7);
    grad.emplace_back(static_cast<std::size_t>(B) * dims[0], 7);
    data = Buf(static_cast<std::size_t>(kBatches) * B * dims[0], 99);
    for (std::size_t i = 0; i < data.n; ++i) data.p[i] += 0.5f;  // [0, 1), like scaled MNIST
    std::mt19937 rng(5);
    for (int i = 0; i < kBatches * B; ++i) data_labels.push_back(static_cast<int>(rng() % 10));
    labels.assign(B, 0);
    for (int l = 0; l < L; ++l) {
      const std::size_t in = dims[l], out = dims[l + 1];
      W.emplace_back(in * out, 10 + l);
      b.emplace_back(out, 20 + l);
      dW.emplace_back(in * out);
      db.emplace_back(out);
      mW.emplace_back(in * out);
      vW.emplace_back(in * out);
      mb.emplace_back(out);
      vb.emplace_back(out);
      for (auto* v : {&mW.back(), &vW.back(), &mb.back(), &vb.back()})
        std::fill(v->p, v->p + v->n, 0.f);
      act.emplace_back(static_cast<std::size_t>(B) * out);
      grad.emplace_back(static_cast<std::size_t>(B) * out);
      const bool last = l == L - 1;
      sf.push_back(
          {"", "fwd", B, dims[l], dims[l + 1], false, false, last ? Epi::bias : Epi::bias_relu});
      sw.push_back({"", "dW", dims[l], B, dims[l + 1], true, false, Epi::none});
      sx.push_back({"", "dx", B, dims[l + 1], dims[l], false, true, Epi::none});
    }
  }
  void plan_dnnl() {
    fwd.clear();
    bwdW.clear();
    bwdX.clear();
    for (std::size_t l = 0; l < W.size(); ++l) {
      fwd.push_back(std::make_unique<DnnlGemm>(sf[l], act[l].p, W[l].p, b[l].p, act[l + 1].p));
      bwdW.push_back(std::make_unique<DnnlGemm>(sw[l], act[l].p, grad[l + 1].p, nullptr, dW[l].p));
      bwdX.push_back(std::make_unique<DnnlGemm>(sx[l], grad[l + 1].p, W[l].p, nullptr, grad[l].p));
    }
  }

  void step(bool dnnl) {
    const int L = static_cast<int>(W.size());
    {
      const int k = static_cast<int>(batch_no++ % kBatches);
      const std::size_t n = static_cast<std::size_t>(B) * dims[0];
      std::memcpy(act[0].p, data.p + k * n, n * sizeof(float));
      std::copy_n(data_labels.begin() + k * B, B, labels.begin());
    }
    for (int l = 0; l < L; ++l) {
      const int N = dims[l + 1];
      if (dnnl) {
        fwd[l]->run_c();
      } else {
        blas_gemm(sf[l], act[l].p, W[l].p, act[l + 1].p);
        float* y = act[l + 1].p;
        const float* bb = b[l].p;
        const bool relu = l < L - 1;
        par_range(B, [=](long i0, long i1) {
          for (long i = i0; i < i1; ++i)
            for (int j = 0; j < N; ++j) {
              float v = y[i * N + j] + bb[j];
              y[i * N + j] = relu ? std::max(v, 0.f) : v;
            }
        });
      }
    }
    // softmax cross-entropy gradient, mean over the batch
    {
      const int N = dims[L];
      const float* z = act[L].p;
      float* g = grad[L].p;
      const int* lab = labels.data();
      const int Bn = B;
      par_range(Bn, [=](long i0, long i1) {
        for (long i = i0; i < i1; ++i) {
          float mx = z[i * N];
          for (int j = 1; j < N; ++j) mx = std::max(mx, z[i * N + j]);
          float s = 0;
          for (int j = 0; j < N; ++j) s += std::exp(z[i * N + j] - mx);
          for (int j = 0; j < N; ++j)
            g[i * N + j] = (std::exp(z[i * N + j] - mx) / s - (j == lab[i] ? 1.f : 0.f)) / Bn;
        }
      });
    }
    for (int l = L - 1; l >= 0; --l) {
      const int N = dims[l + 1];
      float* g = grad[l + 1].p;
      if (l < L - 1) {  // relu gradient
        const float* y = act[l + 1].p;
        const int n = B * N;
        par_range(n, [=](long i0, long i1) {
          for (long i = i0; i < i1; ++i) g[i] = y[i] > 0.f ? g[i] : 0.f;
        });
      }
      if (dnnl)
        bwdW[l]->run_c();
      else
        blas_gemm(sw[l], act[l].p, g, dW[l].p);
      {
        float* d = db[l].p;
        const int Bn = B;
        par_range(N, [=](long j0, long j1) {
          for (long j = j0; j < j1; ++j) d[j] = 0.f;
          for (int i = 0; i < Bn; ++i)
            for (long j = j0; j < j1; ++j) d[j] += g[i * N + j];
        });
      }
      if (l > 0) {
        if (dnnl)
          bwdX[l]->run_c();
        else
          blas_gemm(sx[l], g, W[l].p, grad[l].p);
      }
    }
    adam();
  }

  void adam() {
    ++t;
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;
    const float alpha = lr * std::sqrt(1.f - std::pow(b2, static_cast<float>(t))) /
                        (1.f - std::pow(b1, static_cast<float>(t)));
    for (std::size_t l = 0; l < W.size(); ++l) {
      adam_one(W[l].p, dW[l].p, mW[l].p, vW[l].p, static_cast<long>(W[l].n), alpha, b1, b2, eps);
      adam_one(b[l].p, db[l].p, mb[l].p, vb[l].p, static_cast<long>(b[l].n), alpha, b1, b2, eps);
    }
  }
  // A separate function with restrict pointers: written inline in the lambda, GCC 12
  // vectorised the OpenMP-outlined copy but not the inline (1-thread) one, 5x slower.
  __attribute__((noinline)) static void adam_kernel(float* __restrict w, const float* __restrict g,
                                                    float* __restrict m, float* __restrict v,
                                                    long i0, long i1, float alpha, float b1,
                                                    float b2, float eps) {
#pragma omp simd
    for (long i = i0; i < i1; ++i) {
      float mi = b1 * m[i] + (1.f - b1) * g[i];
      float vi = b2 * v[i] + (1.f - b2) * g[i] * g[i];
      m[i] = mi;
      v[i] = vi;
      w[i] -= alpha * mi / (std::sqrt(vi) + eps);
    }
  }
  static void adam_one(float* w, const float* g, float* m, float* v, long n, float alpha, float b1,
                       float b2, float eps) {
    par_range(n, [=](long i0, long i1) { adam_kernel(w, g, m, v, i0, i1, alpha, b1, b2, eps); });
  }
  long params() const {
    long n = 0;
    for (std::size_t l = 0; l < W.size(); ++l) n += static_cast<long>(W[l].n + b[l].n);
    return n;
  }
};

// Flush-to-zero and denormals-are-zero in the calling thread and the OpenMP workers. Without it
// Adam slows down by 10x or more once dead ReLU units (exactly zero gradient rows) let the first
// moment decay into denormals: the engine should set these too. (OpenBLAS's own pthreads are
// not reached by this; they only see GEMM inputs, which are written by FTZ threads here.)
void set_ftz_daz(int nt) {
  _mm_setcsr(_mm_getcsr() | 0x8040);
#pragma omp parallel num_threads(nt)
  _mm_setcsr(_mm_getcsr() | 0x8040);
}

void section_step(const Options& o) {
  std::printf(
      "## one training step, batch 32 (GEMMs by the library; elementwise work, "
      "bias gradient and Adam in OpenMP threads with FTZ/DAZ; us per step, best batch "
      "(median batch); 1 thread: CPU time of the thread, 2 threads: wall time)\n");
  std::printf(
      "| model | threads | oneDNN us/step | OpenBLAS us/step | OpenBLAS/oneDNN time | "
      "Adam alone us | allocs/step oneDNN | allocs/step OpenBLAS |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int nt : o.threads) {
    set_threads(nt);
    set_ftz_daz(nt);
    g_nt = nt;
    g_use_thread_cpu = nt == 1;
    for (auto dims : {std::vector<int>{784, 128, 10}, std::vector<int>{784, 1000, 1000, 10}}) {
      StepModel m(dims);
      m.plan_dnnl();
      Timing td, tb, ta;
      for (int r = 0; r < o.rounds; ++r) {
        for (int lib = 0; lib < 2; ++lib) {
          int which = (r % 2 == 0) ? lib : 1 - lib;
          if ((which == 0 && !o.lib("onednn")) || (which == 1 && !o.lib("openblas"))) continue;
          pause_ms(300);
          if (which == 0)
            td.merge(time_call([&] { m.step(true); }));
          else
            tb.merge(time_call([&] { m.step(false); }));
        }
        pause_ms(300);
        ta.merge(time_call([&] { m.adam(); }));
      }
      AllocCount ad, ab;
      if (o.lib("onednn")) ad = count_allocs([&] { m.step(true); });
      if (o.lib("openblas")) ab = count_allocs([&] { m.step(false); });
      std::printf(
          "| %s (%ld params) | %d | %.1f (%.1f) | %.1f (%.1f) | %.2f (%.2f) | %.1f (%.1f) "
          "| %.1f | %.1f |\n",
          dims.size() == 3 ? "SMALL" : "BIG", m.params(), nt, td.best * 1e6, td.med * 1e6,
          tb.best * 1e6, tb.med * 1e6, tb.best / td.best, tb.med / td.med, ta.best * 1e6,
          ta.med * 1e6, ad.allocs, ab.allocs);
      std::fflush(stdout);
    }
  }
  g_use_thread_cpu = false;
  std::printf("\n");
}

// ---- section: memory bandwidth ---------------------------------------------------------------

void section_bw(const Options& o) {
  std::printf(
      "## memory bandwidth: triad a[i] = b[i] + s*c[i], float, OpenMP static schedule "
      "(256 MiB: DRAM; 29 MiB: the size of the BIG model's Adam state w, g, m, v)\n");
  std::printf(
      "| working set | threads | GB/s (3 arrays counted, STREAM convention) | best ms | "
      "median ms | GB/s from the thread's CPU time (1 thread only) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  double gbs_at[2][3] = {{0, 0, 0}, {0, 0, 0}};  // [DRAM, in-cache][threads]
  for (std::size_t total : {std::size_t{256} << 20, std::size_t{29} << 20}) {
    const long n = static_cast<long>(total / 12);
    float* a = static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64));
    float* bb = static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64));
    float* c = static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64));
    const int tmax = *std::max_element(o.threads.begin(), o.threads.end());
#pragma omp parallel for schedule(static) num_threads(tmax)
    for (long i = 0; i < n; ++i) {
      a[i] = 0.f;
      bb[i] = 1.f;
      c[i] = 2.f;
    }
    const double bytes = 3.0 * 4.0 * static_cast<double>(n);
    for (int nt : o.threads) {
      std::vector<double> v, vc;
      const int reps = total > (std::size_t{64} << 20) ? 40 : 400;
      for (int r = 0; r < reps; ++r) {
        const float s = 0.5f + 1e-6f * static_cast<float>(r);
        auto t0 = Clock::now();
        const double c0 = thread_cpu_s();
#pragma omp parallel for simd schedule(static) num_threads(nt)
        for (long i = 0; i < n; ++i) a[i] = bb[i] + s * c[i];
        vc.push_back(thread_cpu_s() - c0);
        v.push_back(seconds_since(t0));
      }
      std::sort(v.begin(), v.end());
      std::sort(vc.begin(), vc.end());
      const double gbs = bytes / v[0] * 1e-9;
      if (nt <= 2) gbs_at[total > (std::size_t{64} << 20) ? 0 : 1][nt] = gbs;
      std::printf("| %zu MiB | %d | %.1f | %.2f | %.2f | %s |\n", total >> 20, nt, gbs, v[0] * 1e3,
                  v[v.size() / 2] * 1e3, nt == 1 ? fmt2(bytes / vc[0] * 1e-9).c_str() : "-");
    }
    volatile float sink = a[n / 2];
    (void)sink;
    std::free(a);
    std::free(bb);
    std::free(c);
  }
  // Adam reads w, g, m, v and writes w, m, v: 28 bytes per parameter. (The triad's store
  // stream also costs a read for ownership, so an in-place update can beat these floors.)
  const double big_params = 784.0 * 1000 + 1000 + 1000.0 * 1000 + 1000 + 1000.0 * 10 + 10;
  for (int nt : {1, 2})
    if (gbs_at[0][nt] > 0 && gbs_at[1][nt] > 0)
      std::printf(
          "Adam floor, BIG (%.0f params x 28 B), %d thread%s: %.2f ms from DRAM, %.2f ms "
          "in cache\n",
          big_params, nt, nt > 1 ? "s" : "", big_params * 28.0 / (gbs_at[0][nt] * 1e9) * 1e3,
          big_params * 28.0 / (gbs_at[1][nt] * 1e9) * 1e3);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  const OthersLoad load;
  if (o.quick) g_batches = 7;
  if (o.has("env")) section_env();
  if (o.has("gemm")) section_gemm(o);
  if (o.has("overhead")) section_overhead(o);
  if (o.has("alloc")) section_alloc(o);
  if (o.has("step")) section_step(o);
  if (o.has("bw")) section_bw(o);
  load.report();
  return 0;
}
