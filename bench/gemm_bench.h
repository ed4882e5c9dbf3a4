// Shared by the GEMM benchmarks (gemm_choice, gemm_libs): the timing of short batches of calls,
// aligned buffers, the GEMM shapes of the seed models' training steps, a oneDNN matmul made once
// as a static plan would, and what the machine was doing during the run. Header-only: each
// benchmark is one executable that includes it once. Compiles against oneDNN 2.x and 3.x.
#pragma once

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace gemm_bench {

inline std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t p = 0;
  while (p <= s.size()) {
    std::size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

// ---- timing ----------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

inline double g_batch_s = 0.002;  // target duration of one timed batch (short: fewer preemptions)
inline int g_batches = 21;        // batches per round

// Seconds per call: the best (fastest) batch and the median batch; over rounds, the best of
// each. On a loaded machine the best batch is the one that ran undisturbed.
struct Timing {
  double best = 1e30, med = 1e30;
  void merge(const Timing& t) {
    best = std::min(best, t.best);
    med = std::min(med, t.med);
  }
  bool valid() const { return best < 1e29; }
};

// This thread's CPU time: with one thread all the work runs on the calling thread (OpenBLAS and
// oneDNN run a 1-thread call inline), so it measures the work without the time that other
// processes took the CPU away, which wall time includes on a loaded machine.
inline double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
inline bool g_use_thread_cpu = false;  // time with thread_cpu_s() instead of the wall clock

// Seconds per call of f (warm-up first, then g_batches batches of calibrated size).
inline Timing time_call(const std::function<void()>& f) {
  auto t0 = Clock::now();
  int warm = 0;
  while (warm < 3 || seconds_since(t0) < 0.01) {
    f();
    ++warm;
  }
  double per = seconds_since(t0) / warm;
  long n = std::max(1L, static_cast<long>(g_batch_s / std::max(per, 1e-9)));
  std::vector<double> v;
  for (int b = 0; b < g_batches; ++b) {
    auto t = Clock::now();
    const double c0 = g_use_thread_cpu ? thread_cpu_s() : 0.0;
    for (long i = 0; i < n; ++i) f();
    const double dt = g_use_thread_cpu ? thread_cpu_s() - c0 : seconds_since(t);
    v.push_back(dt / static_cast<double>(n));
  }
  std::sort(v.begin(), v.end());
  return Timing{v.front(), v[v.size() / 2]};
}

inline void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// 64-byte aligned float buffer, filled with small random values.
struct Buf {
  float* p = nullptr;
  std::size_t n = 0;
  Buf() = default;
  explicit Buf(std::size_t count, unsigned seed = 1) : n(count) {
    p = static_cast<float*>(std::aligned_alloc(64, ((count * 4 + 63) / 64) * 64 + 64));
    std::mt19937 g(seed);
    std::uniform_real_distribution<float> d(-0.5f, 0.5f);
    for (std::size_t i = 0; i < count; ++i) p[i] = d(g);
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
  Buf& operator=(Buf&& o) noexcept {
    std::swap(p, o.p);
    std::swap(n, o.n);
    return *this;
  }
  ~Buf() { std::free(p); }
};

// ---- the shapes ------------------------------------------------------------------------------

enum class Epi { none, bias, bias_relu };

// C (M x N) = op(A) (M x K) . op(B) (K x N), all row-major.
// transA: A is stored K x M (dW = x^T.dy); transB: B is stored N x K (dx = dy.W^T).
struct Shape {
  const char* model;
  const char* role;
  int M, K, N;
  bool transA, transB;
  Epi epi;
  double flops() const { return 2.0 * M * N * K; }
};

inline std::vector<Shape> shapes(bool peak) {
  std::vector<Shape> s = {
      {"SMALL", "fwd", 32, 784, 128, false, false, Epi::bias_relu},
      {"SMALL", "fwd", 32, 128, 10, false, false, Epi::bias},
      {"SMALL", "dW", 784, 32, 128, true, false, Epi::none},
      {"SMALL", "dW", 128, 32, 10, true, false, Epi::none},
      {"SMALL", "dx", 32, 10, 128, false, true, Epi::none},
      {"BIG", "fwd", 32, 784, 1000, false, false, Epi::bias_relu},
      {"BIG", "fwd", 32, 1000, 1000, false, false, Epi::bias_relu},
      {"BIG", "fwd", 32, 1000, 10, false, false, Epi::bias},
      {"BIG", "dW", 784, 32, 1000, true, false, Epi::none},
      {"BIG", "dW", 1000, 32, 1000, true, false, Epi::none},
      {"BIG", "dW", 1000, 32, 10, true, false, Epi::none},
      {"BIG", "dx", 32, 10, 1000, false, true, Epi::none},
      {"BIG", "dx", 32, 1000, 1000, false, true, Epi::none},
  };
  if (peak) s.push_back({"PEAK", "ref", 4096, 4096, 4096, false, false, Epi::none});
  return s;
}

inline const char* epi_name(Epi e) {
  return e == Epi::bias_relu ? "+b,relu" : e == Epi::bias ? "+b" : "";
}

// ---- oneDNN ----------------------------------------------------------------------------------

inline dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}
inline dnnl::stream& cpu_stream() {
  static dnnl::stream s(cpu_engine());
  return s;
}

// One matmul, created once (as the engine's static plan would) on caller-owned buffers.
struct DnnlGemm {
  dnnl::matmul prim;
  dnnl::matmul::primitive_desc pd;
  dnnl::memory a, b, bias, c, scratch;
  std::unordered_map<int, dnnl::memory> args;  // for the C++ API
  std::vector<dnnl_exec_arg_t> cargs;          // for the C API
  std::string impl;

  DnnlGemm(const Shape& s, const float* A, const float* B, const float* bias_p, float* C,
           bool user_scratchpad = true) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    auto& eng = cpu_engine();
    dnnl::memory::desc ad({s.M, s.K}, dt::f32, s.transA ? tag::ba : tag::ab);
    dnnl::memory::desc bd({s.K, s.N}, dt::f32, s.transB ? tag::ba : tag::ab);
    dnnl::memory::desc cd({s.M, s.N}, dt::f32, tag::ab);
    dnnl::memory::desc biasd({1, s.N}, dt::f32, tag::ab);
    dnnl::primitive_attr attr;
    if (s.epi == Epi::bias_relu) {
      dnnl::post_ops po;
#if DNNL_VERSION_MAJOR >= 3
      po.append_eltwise(dnnl::algorithm::eltwise_relu, 0.f, 0.f);
#else
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
#endif
      attr.set_post_ops(po);
    }
    if (user_scratchpad) attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
#if DNNL_VERSION_MAJOR >= 3
    if (s.epi == Epi::none)
      pd = dnnl::matmul::primitive_desc(eng, ad, bd, cd, attr);
    else
      pd = dnnl::matmul::primitive_desc(eng, ad, bd, biasd, cd, attr);
#else
    if (s.epi == Epi::none)
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, cd), attr, eng);
    else
      pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(ad, bd, biasd, cd), attr, eng);
#endif
    prim = dnnl::matmul(pd);
    impl = pd.impl_info_str();
    a = dnnl::memory(ad, eng, const_cast<float*>(A));
    b = dnnl::memory(bd, eng, const_cast<float*>(B));
    c = dnnl::memory(cd, eng, C);
    args = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    if (s.epi != Epi::none) {
      bias = dnnl::memory(biasd, eng, const_cast<float*>(bias_p));
      args[DNNL_ARG_BIAS] = bias;
    }
    if (user_scratchpad && pd.scratchpad_desc().get_size() > 0) {
      scratch = dnnl::memory(pd.scratchpad_desc(), eng);  // owned by the plan, allocated once
      args[DNNL_ARG_SCRATCHPAD] = scratch;
    }
    for (auto& [k, m] : args) cargs.push_back({k, m.get()});
  }
  std::size_t scratch_bytes() const { return pd.scratchpad_desc().get_size(); }
  // The C API with a prebuilt argument array: what the engine would call.
  void run_c() const {
    dnnl_status_t st = dnnl_primitive_execute(prim.get(), cpu_stream().get(),
                                              static_cast<int>(cargs.size()), cargs.data());
    if (st != dnnl_success) {
      std::fprintf(stderr, "dnnl_primitive_execute failed: %d\n", static_cast<int>(st));
      std::exit(1);
    }
#if DNNL_VERSION_MAJOR >= 3
    // oneDNN 3.x from PyPI is a SYCL build: its CPU stream is an asynchronous SYCL queue.
    dnnl_stream_wait(cpu_stream().get());
#endif
  }
  // The C++ API with a prebuilt unordered_map.
  void run_cpp() const { prim.execute(cpu_stream(), args); }
};

inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "?";
}

// Other processes on a 2-core machine disturb the 2-thread numbers most: print the load.
inline void print_loadavg(const char* when) {
  std::ifstream f("/proc/loadavg");
  std::string l;
  std::getline(f, l);
  std::printf("load average %s: %s\n", when, l.c_str());
}

// CPU seconds used by the whole machine (/proc/stat, all states but idle and iowait) and by
// this process: their difference tells how much the other processes took during the run.
inline double machine_busy_s() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  long long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  f >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
  const long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}
inline double self_cpu_s() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

// Started at the top of main; report() at the end prints the load average and the share of the
// machine the other processes took meanwhile.
class OthersLoad {
 public:
  OthersLoad() : busy0_(machine_busy_s()), self0_(self_cpu_s()), wall0_(Clock::now()) {}
  void report() const {
    print_loadavg("at end");
    const double wall = seconds_since(wall0_);
    const double others = (machine_busy_s() - busy0_) - (self_cpu_s() - self0_);
    std::printf(
        "other processes used %.0f%% of the machine's %u CPUs during this run (%.0f s); "
        "above ~5%%, distrust the 2-thread numbers\n",
        100.0 * std::max(0.0, others) / (wall * std::thread::hardware_concurrency()),
        std::thread::hardware_concurrency(), wall);
  }

 private:
  double busy0_, self0_;
  Clock::time_point wall0_;
};

inline std::string fmt2(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

}  // namespace gemm_bench
