#include "nn/interrupt.h"

#include <atomic>
#include <csignal>

namespace crossover {
namespace {

std::atomic<bool> g_requested{false};
std::atomic<bool> g_second_ends_process{true};
static_assert(std::atomic<bool>::is_always_lock_free);
struct sigaction g_previous;
int g_depth = 0;

extern "C" void on_sigint(int) {
  if (!g_requested.exchange(true)) {
    // The next Ctrl-C goes to the handler that was there before (Python's, for instance).
    if (!g_second_ends_process.load()) sigaction(SIGINT, &g_previous, nullptr);
    return;
  }
  // Second Ctrl-C: the user means it.
  std::signal(SIGINT, SIG_DFL);
  std::raise(SIGINT);
}

}  // namespace

InterruptGuard::InterruptGuard(bool second_ends_process) {
  if (g_depth++ == 0) {
    g_requested.store(false);
    g_second_ends_process.store(second_ends_process);
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_previous);
  }
}

InterruptGuard::~InterruptGuard() {
  if (--g_depth == 0) sigaction(SIGINT, &g_previous, nullptr);
}

bool InterruptGuard::requested() { return g_requested.load(std::memory_order_relaxed); }
void InterruptGuard::clear() { g_requested.store(false); }
void InterruptGuard::request() { g_requested.store(true); }

}  // namespace crossover
