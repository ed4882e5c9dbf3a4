#include "ranks/mpi.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <thread>

#include "core/error.h"

#if defined(CROSSOVER_HAVE_MPI)
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace crossover::dist {

#if defined(CROSSOVER_HAVE_MPI)

namespace {

bool g_parallel = false;

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(call, std::string(text, static_cast<std::size_t>(len)));
}

// The watchdog's view of the main thread: the collective call it is in (null: none) and since
// when (steady clock, nanoseconds), and the timeout in nanoseconds (0: no watchdog).
std::atomic<const char*> g_waiting_in{nullptr};
std::atomic<int64_t> g_waiting_since{0};
std::atomic<int64_t> g_timeout_ns{0};
int g_rank = 0, g_size = 1;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Marks the main thread as waiting in `call` for as long as it lives.
class Waiting {
 public:
  explicit Waiting(const char* call) {
    g_waiting_since.store(now_ns());
    g_waiting_in.store(call);
  }
  ~Waiting() { g_waiting_in.store(nullptr); }
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;
};

[[noreturn]] void watch() {
  for (;;) {
    const int64_t timeout = g_timeout_ns.load();
    // A tenth of the timeout between looks (at most a second): it fires within 10% of it.
    const int64_t pause = std::clamp<int64_t>(timeout / 10, 1'000'000, 1'000'000'000);
    std::this_thread::sleep_for(std::chrono::nanoseconds(pause));
    // The start read before and after the call's name: when both agree, the name is that wait's
    // (the main thread stores a wait's start before its name, and starts only increase).
    const int64_t since = g_waiting_since.load();
    const char* call = g_waiting_in.load();
    if (!call || timeout == 0 || g_waiting_since.load() != since) continue;
    const int64_t waited = now_ns() - since;
    if (waited <= timeout) continue;
    std::fflush(stdout);
    std::fprintf(stderr,
                 "crossover: error: rank %d of %d: waited %.1f s in %s for the other ranks "
                 "(--rank-timeout %g): one of them is stuck or far slower; ending every rank\n",
                 g_rank, g_size, static_cast<double>(waited) * 1e-9, call,
                 static_cast<double>(timeout) * 1e-9);
    std::fflush(stderr);
    // mpirun ends the other ranks when one exits non-zero (orte_abort_on_non_zero_status).
    _exit(1);
  }
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  const Waiting waiting("MPI_Finalize");
  MPI_Finalize();
}

// MPI counts are ints: larger buffers go in pieces of at most 2^30 elements.
template <class T, class F>
void in_pieces(T* data, int64_t n, F&& f) {
  constexpr int64_t kPiece = int64_t{1} << 30;
  for (int64_t b = 0; b < n; b += kPiece) f(data + b, static_cast<int>(std::min(kPiece, n - b)));
}

}  // namespace

bool built_with_mpi() { return true; }

std::shared_ptr<MpiWorld> world() {
  static std::shared_ptr<MpiWorld> the_world;  // one per process, kept until exit
  if (the_world) return the_world;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    std::atexit(finalize_at_exit);
  }
  auto w = std::shared_ptr<MpiWorld>(new MpiWorld());
  check(MPI_Comm_rank(MPI_COMM_WORLD, &w->rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &w->size_), "MPI_Comm_size");
  MPI_Comm local;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->rank_, MPI_INFO_NULL, &local),
        "MPI_Comm_split_type");
  check(MPI_Comm_rank(local, &w->local_rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(local, &w->local_size_), "MPI_Comm_size");
  MPI_Comm_free(&local);
  g_parallel = w->size_ > 1;
  g_rank = w->rank_;
  g_size = w->size_;
  the_world = w;
  return w;
}

void MpiWorld::allreduce_sum(float* data, int64_t n) {
  const Waiting waiting("MPI_Allreduce");
  in_pieces(data, n, [](float* p, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, p, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
  });
}

void MpiWorld::allreduce_sum(double* data, int64_t n) {
  const Waiting waiting("MPI_Allreduce");
  in_pieces(data, n, [](double* p, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, p, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
  });
}

// A rank may wait here for long (the others wait for rank 0's calibration before it shares the
// profile): it polls with short sleeps instead of Open MPI's busy wait, which would take a core
// from the rank being waited for. Broadcasts are never inside a training step.
void MpiWorld::broadcast(void* data, std::size_t bytes, int root) {
  const Waiting waiting("MPI_Ibcast");
  in_pieces(static_cast<char*>(data), static_cast<int64_t>(bytes), [root](char* p, int count) {
    MPI_Request request;
    check(MPI_Ibcast(p, count, MPI_BYTE, root, MPI_COMM_WORLD, &request), "MPI_Ibcast");
    for (int done = 0;;) {
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) break;
      const timespec pause{0, 100'000};  // 0.1 ms
      nanosleep(&pause, nullptr);
    }
  });
}

void MpiWorld::barrier() {
  const Waiting waiting("MPI_Barrier");
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void MpiWorld::set_timeout(double seconds) {
  if (size_ < 2) return;
  // At most 10^9 s (about 30 years: forever, in nanoseconds that still fit); NaN: never.
  const double capped = seconds > 0 ? std::min(seconds, 1e9) : 0.0;
  g_timeout_ns.store(static_cast<int64_t>(capped * 1e9));
  static std::once_flag started;
  if (capped > 0) std::call_once(started, [] { std::thread(watch).detach(); });
}

std::string MpiWorld::description() const {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, static_cast<std::size_t>(len));
  if (const auto comma = v.find(','); comma != std::string::npos) v.resize(comma);
  return fmt::format("MPI ({}), {} ranks", v, size_);
}

void abort_all_if_parallel(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized && g_parallel) MPI_Abort(MPI_COMM_WORLD, code);
}

std::string rank_prefix() {
  int initialized = 0, rank = 0, size = 1;
  MPI_Initialized(&initialized);
  if (!initialized || !g_parallel) return "";
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return fmt::format("rank {} of {}: ", rank, size);
}

#else  // built without MPI

bool built_with_mpi() { return false; }

std::shared_ptr<MpiWorld> world() {
  throw Error("MPI",
              "this crossover was built without MPI (CROSSOVER_MPI=OFF, or no libopenmpi-dev "
              "when it was configured)");
}

void MpiWorld::allreduce_sum(float*, int64_t) { world(); }
void MpiWorld::allreduce_sum(double*, int64_t) { world(); }
void MpiWorld::broadcast(void*, std::size_t, int) { world(); }
void MpiWorld::barrier() { world(); }
void MpiWorld::set_timeout(double) {}
std::string MpiWorld::description() const { return "no MPI"; }
void abort_all_if_parallel(int) {}
std::string rank_prefix() { return ""; }

#endif

}  // namespace crossover::dist
