// gemm_libs: which GEMM library is fastest at the batch-32 shapes of the seed models' training
// steps (issue 10, item 2)? oneDNN 2.6 (the engine's), libxsmm (JIT small GEMMs), BLIS and, in a
// second executable built from this same file, oneDNN 3.x.
//
// Every GEMM of a SMALL (784-128-10) and a BIG (784-1000-1000-10) step at batch 32, row-major,
// with the transposes the engine uses (gemm_bench.h: y = x.W + b (relu), dW = x^T.dy,
// dx = dy.W^T), is timed at each thread count in these variants:
//   <lib>.engine  the engine's call pattern (src/backends/cpu/cpu_backend_impl.h, for_blocks): the
//                 output split into one block of whole 16-column (dW: 16-row) strips per thread,
//                 one single-threaded library call per block inside our own OpenMP region, the
//                 bias and ReLU applied by the same thread right after; one inline call when the
//                 GEMM is under 2^19 flops or too narrow to split.
//   <lib>.lib     one call with the library's own threading (bias/ReLU: a pass after the call).
//   onednnN.matmul  oneDNN's matmul primitive, made once, bias and ReLU fused as post-ops.
// libxsmm has no threading of its own here, and its JIT (1.17) cannot transpose its A operand:
// for dx = dy.W^T it reads a W^T kept by the plan, whose upkeep (one transpose of W per step) is
// timed on its own at the end.
//
// Each variant's result is checked against a double-precision reference (max |error| / max
// |reference|, with the output poisoned first) at every shape and thread count, so a wrong
// mapping cannot look fast. Timing (gemm_bench.h): per round, 21 batches of about 2 ms; the best
// batch and the median batch; the best of each over the rounds; rounds rotate the order of the
// variants, with a pause between variants so that spinning workers go to sleep. The last lines
// say how much of the CPUs other processes took during the run.
//
// Usage: gemm_libs [--threads=1,2] [--rounds=N] [--only=variant,...] [--quick]
// Results: docs/GEMM.md.

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gemm_bench.h"

#ifdef GEMM_LIBS_ONEDNN3
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#endif
#ifdef GEMM_LIBS_XSMM
#include <libxsmm.h>
#endif
#ifdef GEMM_LIBS_BLIS
#include <blis.h>
#endif

namespace {

using namespace gemm_bench;  // NOLINT(build/namespaces): the shared bench helpers

// ---- options ---------------------------------------------------------------------------------

struct Options {
  std::vector<int> threads{1, 2};
  int rounds = 5;
  std::vector<std::string> only;  // variant names; empty: all
  bool wants(const std::string& v) const {
    return only.empty() || std::find(only.begin(), only.end(), v) != only.end();
  }
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--threads=", 0) == 0) {
      o.threads.clear();
      for (auto& t : split(a.substr(10))) o.threads.push_back(std::max(1, std::atoi(t.c_str())));
    } else if (a.rfind("--rounds=", 0) == 0) {
      o.rounds = std::max(1, std::atoi(a.c_str() + 9));
    } else if (a.rfind("--only=", 0) == 0) {
      o.only = split(a.substr(7));
    } else if (a == "--quick") {
      o.rounds = 1;
      g_batches = 7;
    } else {
      std::fprintf(stderr,
                   "usage: gemm_libs [--threads=1,2] [--rounds=N] [--only=variant,...] "
                   "[--quick]\n");
      std::exit(2);
    }
  }
  return o;
}

// ---- one GEMM of the step and its blocks -----------------------------------------------------

// A problem: the operands of one shape (Shape: C(M x N) = op(A).op(B), row-major, gemm_bench.h).
struct Problem {
  Shape s;
  Buf A, B, bias, C;
  std::vector<double> ref;  // C in double precision, epilogue applied
  explicit Problem(const Shape& sh)
      : s(sh),
        A(static_cast<std::size_t>(sh.M) * sh.K, 11),
        B(static_cast<std::size_t>(sh.K) * sh.N, 12),
        bias(sh.N, 13),
        C(static_cast<std::size_t>(sh.M) * sh.N, 14) {
    ref.resize(static_cast<std::size_t>(sh.M) * sh.N);
    for (int i = 0; i < s.M; ++i)
      for (int j = 0; j < s.N; ++j) {
        double r = 0;
        for (int k = 0; k < s.K; ++k) {
          const double a = s.transA ? A.p[static_cast<std::size_t>(k) * s.M + i]
                                    : A.p[static_cast<std::size_t>(i) * s.K + k];
          const double b = s.transB ? B.p[static_cast<std::size_t>(j) * s.K + k]
                                    : B.p[static_cast<std::size_t>(k) * s.N + j];
          r += a * b;
        }
        if (s.epi != Epi::none) r += bias.p[j];
        if (s.epi == Epi::bias_relu) r = std::max(r, 0.0);
        ref[static_cast<std::size_t>(i) * s.N + j] = r;
      }
  }
  // max |C - ref| / max |ref|
  double rel_error() const {
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const double d = std::fabs(static_cast<double>(C.p[i]) - ref[i]);
      worst = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(worst, d);
      scale = std::max(scale, std::fabs(ref[i]));
    }
    return worst / std::max(scale, 1e-30);
  }
  // The engine splits fwd and dx by columns of C, dW (A transposed) by rows.
  bool split_rows() const { return s.transA; }
  int extent() const { return split_rows() ? s.M : s.N; }
};

// A block of one GEMM: C[r0:r1, c0:c1] as a GEMM of its own (pointers and leading dimensions).
struct Sub {
  int M, N, K;
  bool transA, transB;
  const float* A;
  int lda;
  const float* B;
  int ldb;
  float* C;
  int ldc;
};

Sub sub_of(const Problem& p, int b0, int b1) {
  const Shape& s = p.s;
  Sub u{
      s.M,   s.N, s.K, s.transA, s.transB, p.A.p, s.transA ? s.M : s.K, p.B.p, s.transB ? s.K : s.N,
      p.C.p, s.N};
  if (p.split_rows()) {  // rows b0..b1 of C: columns b0..b1 of the stored (K x M) A
    u.M = b1 - b0;
    u.A = p.A.p + b0;
    u.C = p.C.p + static_cast<std::size_t>(b0) * s.N;
  } else {  // columns b0..b1 of C
    u.N = b1 - b0;
    u.B = s.transB ? p.B.p + static_cast<std::size_t>(b0) * s.K : p.B.p + b0;
    u.C = p.C.p + b0;
  }
  return u;
}

// The engine's split (cpu_backend_impl.h, for_blocks_with_index): blocks of multiples of 16, one
// per thread; one inline block when the GEMM is small or narrow.
constexpr double kParallelGemmFlops = 1 << 19;
struct Split {
  std::vector<std::pair<int, int>> blocks;
  bool parallel = false;
};
Split engine_split(const Problem& p, int threads) {
  const int extent = p.extent();
  const int nt = std::min(threads, std::max(1, extent / 16));
  Split sp;
  if (nt == 1 || p.s.flops() < kParallelGemmFlops) {
    sp.blocks.push_back({0, extent});
    return sp;
  }
  sp.parallel = true;
  for (int t = 0; t < nt; ++t) {
    const int b = std::min(extent, (extent * t / nt + 15) / 16 * 16);
    const int e = t + 1 == nt ? extent : std::min(extent, (extent * (t + 1) / nt + 15) / 16 * 16);
    sp.blocks.push_back({b, e});
  }
  return sp;
}

// Bias (+ReLU) on columns c0..c1 of every row of C, as the engine does after a block's GEMM.
void epilogue(const Problem& p, int c0, int c1) {
  if (p.s.epi == Epi::none) return;
  const bool relu = p.s.epi == Epi::bias_relu;
  const float* b = p.bias.p;
  for (int r = 0; r < p.s.M; ++r) {
    float* row = p.C.p + static_cast<std::size_t>(r) * p.s.N;
    if (relu)
      for (int j = c0; j < c1; ++j) row[j] = std::max(row[j] + b[j], 0.0f);
    else
      for (int j = c0; j < c1; ++j) row[j] += b[j];
  }
}

// Runs f(block index, b0, b1) for each block of the split: inline, or one block per thread of
// our own OpenMP region (the library call inside then runs on that thread alone).
template <class F>
void run_split(const Split& sp, const Problem& p, F&& f) {
  if (!sp.parallel) {
    // As the engine does: else oneDNN 2.x opens a region of its own (and allocates).
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    f(0, 0, p.extent());
    omp_set_num_threads(saved);
    return;
  }
  const int nb = static_cast<int>(sp.blocks.size());
#pragma omp parallel num_threads(nb)
  {
    const int t = omp_get_thread_num();
    if (t < nb) f(t, sp.blocks[t].first, sp.blocks[t].second);
  }
}

// The engine-pattern runner for a library whose per-block call is call(block index, Sub).
template <class Call>
std::function<void()> engine_runner(Problem& p, int threads, Call call) {
  auto sp = std::make_shared<Split>(engine_split(p, threads));
  Problem* pp = &p;
  return [sp, pp, call] {
    run_split(*sp, *pp, [&](int t, int b0, int b1) {
      if (b1 <= b0) return;
      call(t, sub_of(*pp, b0, b1));
      if (!pp->split_rows()) epilogue(*pp, b0, b1);
    });
  };
}

// ---- the libraries ---------------------------------------------------------------------------

void dnnl_call(const Sub& u) {
  const dnnl_status_t st = dnnl_sgemm(u.transA ? 'T' : 'N', u.transB ? 'T' : 'N', u.M, u.N, u.K,
                                      1.0f, u.A, u.lda, u.B, u.ldb, 0.0f, u.C, u.ldc);
  if (st != dnnl_success) {
    std::fprintf(stderr, "dnnl_sgemm failed: %d\n", static_cast<int>(st));
    std::exit(1);
  }
}

#ifdef GEMM_LIBS_BLIS
void blis_call(const Sub& u, rntm_t* rntm) {
  float one = 1.0f, zero = 0.0f;
  // BLIS takes both strides of every operand: row-major is rs = ld, cs = 1, no mapping needed.
  bli_sgemm_ex(u.transA ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
               u.transB ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, u.M, u.N, u.K, &one,
               const_cast<float*>(u.A), u.lda, 1, const_cast<float*>(u.B), u.ldb, 1, &zero, u.C,
               u.ldc, 1, nullptr, rntm);
}
std::shared_ptr<rntm_t> blis_threads(int n) {
  auto r = std::make_shared<rntm_t>();
  bli_rntm_init(r.get());
  bli_rntm_set_num_threads(n, r.get());
  return r;
}
#endif

#ifdef GEMM_LIBS_XSMM
// libxsmm is column-major: row-major C = op(A).op(B) is column-major C^T = op(B)^T.op(A)^T, so
// the kernel gets (B, A) as its (A, B), M' = N, N' = M; a transposed row-major A becomes its
// transposed B (supported), a transposed row-major B its transposed A, which the 1.17 JIT does
// not support (dispatch returns NULL). So dx = dy.W^T reads a W^T that the plan keeps: made here
// once, outside the timing; keeping it up to date costs one transpose of W per step, which
// section "W^T upkeep" times on its own (xsmm_transpose).
struct XsmmPlan {
  std::vector<libxsmm_smmfunction> kernels;  // per block
  std::vector<float> bt;                     // B^T, K x N row-major (dx only)
};

// B (N x K row-major) to bt (K x N row-major) with libxsmm's out-of-place transpose (in its
// column-major terms: a K x N matrix with ld K becomes N x K with ld N).
void xsmm_transpose(const Problem& p, float* bt) {
  libxsmm_otrans(bt, p.B.p, sizeof(float), p.s.K, p.s.N, p.s.K, p.s.N);
}

std::function<void()> xsmm_runner(Problem& p, int threads) {
  const Split sp = engine_split(p, threads);
  auto plan = std::make_shared<XsmmPlan>();
  if (p.s.transB) {
    plan->bt.resize(static_cast<std::size_t>(p.s.K) * p.s.N);
    xsmm_transpose(p, plan->bt.data());
  }
  for (std::size_t t = 0; t < sp.blocks.size(); ++t) {
    const Sub u = sub_of(p, sp.blocks[t].first, sp.blocks[t].second);
    libxsmm_smmfunction k = nullptr;
    if (u.M > 0 && u.N > 0) {
      const float alpha = 1.0f, beta = 0.0f;
      const int flags = u.transA ? LIBXSMM_GEMM_FLAG_TRANS_B : 0;
      const libxsmm_blasint lda = u.transB ? p.s.N : u.ldb, ldb = u.lda, ldc = u.ldc;
      k = libxsmm_smmdispatch(u.N, u.M, u.K, &lda, &ldb, &ldc, &alpha, &beta, &flags, nullptr);
      if (k == nullptr) {
        std::fprintf(stderr, "libxsmm: no JIT kernel for %s %s %dx%dx%d block %zu\n", p.s.model,
                     p.s.role, p.s.M, p.s.K, p.s.N, t);
        std::exit(1);
      }
    }
    plan->kernels.push_back(k);
  }
  Problem* pp = &p;
  return engine_runner(p, threads, [plan, pp](int t, const Sub& u) {
    // the block of columns of C starts at column (u.C - C) of B^T
    const float* b = u.transB ? plan->bt.data() + (u.C - pp->C.p) : u.B;
    plan->kernels[static_cast<std::size_t>(t)](b, u.A, u.C);
  });
}
#endif

// ---- the variants ----------------------------------------------------------------------------

// prepare(problem, threads) makes the call to time (after setting up the thread count);
// scope(threads, f) runs f (preparation, check and timing) under that variant's thread setting.
struct Variant {
  std::string name;
  std::function<std::function<void()>(Problem&, int)> prepare;
  std::function<void(int, const std::function<void()>&)> scope;
};

#ifdef GEMM_LIBS_ONEDNN3
// oneDNN 3.x from PyPI runs on TBB. Its own threading gets an arena of `threads`; the engine
// pattern (our OpenMP threads, one call each) limits TBB to the calling thread.
void tbb_scope(int threads, const std::function<void()>& f) {
  oneapi::tbb::task_arena arena(threads);
  arena.execute(f);
}
void tbb_serial_scope(int, const std::function<void()>& f) {
  oneapi::tbb::global_control gc(oneapi::tbb::global_control::max_allowed_parallelism, 1);
  f();
}
#else
void omp_scope(int threads, const std::function<void()>& f) {
  omp_set_num_threads(threads);
  f();
}
#endif

std::vector<Variant> variants() {
  std::vector<Variant> v;
#ifdef GEMM_LIBS_ONEDNN3
  const std::string d = "onednn3";
  auto lib_scope = tbb_scope;
  auto eng_scope = tbb_serial_scope;
#else
  const std::string d = "onednn2";
  auto lib_scope = omp_scope;
  auto eng_scope = omp_scope;  // oneDNN runs serially inside our region's threads
#endif
  v.push_back({d + ".engine",
               [](Problem& p, int nt) {
                 return engine_runner(p, nt, [](int, const Sub& u) { dnnl_call(u); });
               },
               eng_scope});
  v.push_back({d + ".lib",
               [](Problem& p, int) -> std::function<void()> {
                 Problem* pp = &p;
                 return [pp] {
                   dnnl_call(sub_of(*pp, 0, pp->extent()));
                   epilogue(*pp, 0, pp->s.N);
                 };
               },
               lib_scope});
  v.push_back({d + ".matmul",
               [](Problem& p, int) -> std::function<void()> {
                 auto g = std::make_shared<DnnlGemm>(p.s, p.A.p, p.B.p, p.bias.p, p.C.p);
                 return [g] { g->run_c(); };
               },
               lib_scope});
#ifdef GEMM_LIBS_XSMM
  v.push_back({"libxsmm.engine", xsmm_runner, omp_scope});
#endif
#ifdef GEMM_LIBS_BLIS
  v.push_back({"blis.engine",
               [](Problem& p, int nt) {
                 auto one = blis_threads(1);
                 return engine_runner(p, nt, [one](int, const Sub& u) { blis_call(u, one.get()); });
               },
               omp_scope});
  v.push_back({"blis.lib",
               [](Problem& p, int nt) -> std::function<void()> {
                 auto r = blis_threads(nt);
                 Problem* pp = &p;
                 return [pp, r] {
                   blis_call(sub_of(*pp, 0, pp->extent()), r.get());
                   epilogue(*pp, 0, pp->s.N);
                 };
               },
               omp_scope});
#endif
  return v;
}

// ---- environment -----------------------------------------------------------------------------

std::string cpuinfo_field(const char* key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  const std::size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0 && (line[n] == ' ' || line[n] == '\t' || line[n] == ':'))
      return line.substr(line.find(':') + 2);
  return "?";
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

void print_env() {
  std::printf("## environment\n");
  std::printf("cpu: %s (family %s, model %s, stepping %s), %u hardware threads\n",
              cpu_model().c_str(), cpuinfo_field("cpu family").c_str(),
              cpuinfo_field("model").c_str(), cpuinfo_field("stepping").c_str(),
              std::thread::hardware_concurrency());
  const std::vector<std::string> flags = split_words(cpuinfo_field("flags"));
  std::printf("isa flags:");
  for (const char* f : {"avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile"})
    if (std::find(flags.begin(), flags.end(), f) != flags.end()) std::printf(" %s", f);
  std::printf("\n");
  const dnnl_version_t* v = dnnl_version();
  const int isa = static_cast<int>(dnnl_get_effective_cpu_isa());
  std::printf("oneDNN %d.%d.%d (cpu runtime %s), effective ISA 0x%x (avx2 = 0x%x)\n", v->major,
              v->minor, v->patch,
              v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
              : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                                                   : "other",
              isa, static_cast<int>(dnnl_cpu_isa_avx2));
#ifdef GEMM_LIBS_XSMM
  libxsmm_init();
  std::printf("libxsmm %s, JIT target %s\n", LIBXSMM_CONFIG_VERSION, libxsmm_get_target_arch());
#endif
#ifdef GEMM_LIBS_BLIS
  std::printf("BLIS %s, sub-configuration %s, threading %s\n", bli_info_get_version_str(),
              bli_arch_string(bli_arch_query_id()), bli_info_get_enable_openmp() ? "OpenMP" : "?");
#endif
  for (const char* e : {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "BLIS_NUM_THREADS",
                        "LIBXSMM_TARGET", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* val = std::getenv(e);
    std::printf("%s=%s\n", e, val ? val : "(unset)");
  }
  print_loadavg("at start");
  std::printf("\n");
}

// ---- the measurement -------------------------------------------------------------------------

void run(const Options& o) {
  std::vector<Variant> vs;
  for (auto& v : variants())
    if (o.wants(v.name)) vs.push_back(v);
  std::vector<std::unique_ptr<Problem>> ps;
  for (const auto& s : shapes(false)) ps.push_back(std::make_unique<Problem>(s));
  const std::size_t nv = vs.size(), np = ps.size();

  for (int nt : o.threads) {
    // times[v][p], errors[v][p]
    std::vector<std::vector<Timing>> t(nv, std::vector<Timing>(np));
    std::vector<std::vector<double>> err(nv, std::vector<double>(np, 0));
    for (int r = 0; r < o.rounds; ++r)
      for (std::size_t i = 0; i < nv; ++i) {
        const std::size_t vi = (i + static_cast<std::size_t>(r)) % nv;  // rotate the order
        pause_ms(200);  // let the previous variant's workers stop spinning
        vs[vi].scope(nt, [&] {
          for (std::size_t pi = 0; pi < np; ++pi) {
            Problem& p = *ps[pi];
            auto call = vs[vi].prepare(p, nt);
            if (r == 0) {
              std::fill(p.C.p, p.C.p + p.C.n, std::numeric_limits<float>::quiet_NaN());
              call();
              err[vi][pi] = p.rel_error();
            }
            t[vi][pi].merge(time_call(call));
          }
        });
      }

    std::printf("## %d thread%s: us per call, best batch (median batch)\n", nt, nt > 1 ? "s" : "");
    std::printf("| model | GEMM | (MxK).(KxN) |");
    for (auto& v : vs) std::printf(" %s |", v.name.c_str());
    std::printf("\n|---|---|---|");
    for (std::size_t i = 0; i < nv; ++i) std::printf("---:|");
    std::printf("\n");
    for (const char* model : {"SMALL", "BIG"}) {
      std::vector<double> sb(nv, 0), sm(nv, 0);
      for (std::size_t pi = 0; pi < np; ++pi) {
        const Shape& s = ps[pi]->s;
        if (std::strcmp(s.model, model) != 0) continue;
        std::printf("| %s | %s %s | (%dx%d).(%dx%d)%s |", s.model, s.role, epi_name(s.epi), s.M,
                    s.K, s.K, s.N,
                    s.transA   ? " A^T"
                    : s.transB ? " B^T"
                               : "");
        for (std::size_t vi = 0; vi < nv; ++vi) {
          std::printf(" %.2f (%.2f) |", t[vi][pi].best * 1e6, t[vi][pi].med * 1e6);
          sb[vi] += t[vi][pi].best;
          sm[vi] += t[vi][pi].med;
        }
        std::printf("\n");
      }
      std::printf("| **%s** | **step's GEMMs** | |", model);
      for (std::size_t vi = 0; vi < nv; ++vi)
        std::printf(" **%.1f** (%.1f) |", sb[vi] * 1e6, sm[vi] * 1e6);
      std::printf("\n| %s | speed vs %s, best (median) | |", model, vs[0].name.c_str());
      for (std::size_t vi = 0; vi < nv; ++vi)
        std::printf(" %.2fx (%.2fx) |", sb[0] / sb[vi], sm[0] / sm[vi]);
      std::printf("\n");
    }
    std::printf("\nmax relative error vs double reference, %d thread%s:", nt, nt > 1 ? "s" : "");
    bool bad = false;
    for (std::size_t vi = 0; vi < nv; ++vi) {
      const double e = *std::max_element(err[vi].begin(), err[vi].end());
      std::printf(" %s %.1e;", vs[vi].name.c_str(), e);
      bad = bad || !(e < 1e-5);
    }
    std::printf("\n\n");
    if (bad) {
      std::fprintf(stderr, "gemm_libs: a variant's result is wrong (error above 1e-5)\n");
      std::exit(1);
    }
    std::fflush(stdout);
  }
#ifdef GEMM_LIBS_XSMM
  if (o.wants("libxsmm.engine")) {
    std::printf("## W^T upkeep for libxsmm's dx (one libxsmm_otrans of W per step), 1 thread\n");
    for (auto& pp : ps) {
      if (!pp->s.transB) continue;
      std::vector<float> bt(static_cast<std::size_t>(pp->s.K) * pp->s.N);
      Problem* p = pp.get();
      Timing tt;
      for (int r = 0; r < o.rounds; ++r)
        tt.merge(time_call([p, &bt] { xsmm_transpose(*p, bt.data()); }));
      std::printf("%s W %dx%d: %.2f us (%.2f)\n", p->s.model, p->s.N, p->s.K, tt.best * 1e6,
                  tt.med * 1e6);
    }
    std::printf("\n");
  }
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const OthersLoad load;
  print_env();
  run(o);
  load.report();
  return 0;
}
