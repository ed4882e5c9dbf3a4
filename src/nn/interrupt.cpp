#include "nn/interrupt.h"

#include <atomic>
#include <csignal>

namespace crossover {
namespace {

std::atomic<bool> g_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_sigint(int) {
  if (g_requested.exchange(true)) {
    // Second Ctrl-C: the user means it.
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
  }
}

}  // namespace

static struct sigaction g_previous;
static int g_depth = 0;

InterruptGuard::InterruptGuard() {
  if (g_depth++ == 0) {
    g_requested.store(false);
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
