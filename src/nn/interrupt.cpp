#include "nn/interrupt.h"

#include <signal.h>

#include <atomic>
#include <csignal>

namespace crossover {
namespace {

std::atomic<bool> g_requested{false};
std::atomic<bool> g_second_ends_process{true};
static_assert(std::atomic<bool>::is_always_lock_free);
struct sigaction g_previous;
int g_depth = 0;

// The handler runs on a stack of its own (SA_ONSTACK), never on the interrupted thread's: oneDNN's
// JIT GEMM kernels keep data below the stack pointer, and a handler frame pushed there corrupted
// them (heap corruption after a Ctrl-C during fit, about one press in five, seen from Python).
alignas(64) char g_signal_stack[64 * 1024];
stack_t g_previous_stack;
bool g_stack_installed = false;

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

InterruptGuard::InterruptGuard(bool second_ends_process, bool pass_on) : pass_on_(pass_on) {
  if (g_depth++ == 0) {
    g_requested.store(false);
    g_second_ends_process.store(second_ends_process);
    stack_t ss{};
    ss.ss_sp = g_signal_stack;
    ss.ss_size = sizeof g_signal_stack;
    g_stack_installed = sigaltstack(&ss, &g_previous_stack) == 0;
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_previous);
  }
}

InterruptGuard::~InterruptGuard() {
  if (--g_depth == 0) {
    sigaction(SIGINT, &g_previous, nullptr);
    if (g_stack_installed) sigaltstack(&g_previous_stack, nullptr);
    g_stack_installed = false;
    // At a safe point (not inside a kernel), with the previous handler back in place.
    if (pass_on_ && g_requested.exchange(false)) std::raise(SIGINT);
  }
}

bool InterruptGuard::requested() { return g_requested.load(std::memory_order_relaxed); }
void InterruptGuard::clear() { g_requested.store(false); }
void InterruptGuard::request() { g_requested.store(true); }

}  // namespace crossover
