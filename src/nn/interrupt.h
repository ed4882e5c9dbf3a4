// Ctrl-C during fit: the first SIGINT asks training to stop after the current step (the model
// and its weights are kept, and saved if the caller asked); a second one ends the process, or,
// when the guard is told so, goes to the handler that was in place before (Python's, which raises
// KeyboardInterrupt once Python runs again).
#pragma once

namespace crossover {

class InterruptGuard {
 public:
  // Installs the handler (restores the previous one when destroyed).
  explicit InterruptGuard(bool second_ends_process = true);
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool requested();
  static void clear();
  // For tests: behave as if Ctrl-C had been pressed.
  static void request();
};

}  // namespace crossover
