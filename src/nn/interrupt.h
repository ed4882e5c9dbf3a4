// Ctrl-C during fit: the first SIGINT asks training to stop after the current step (the model
// and its weights are kept, and saved if the caller asked); a second one ends the process.
#pragma once

namespace crossover {

class InterruptGuard {
 public:
  InterruptGuard();  // installs the handler (restores the previous one when destroyed)
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool requested();
  static void clear();
  // For tests: behave as if Ctrl-C had been pressed.
  static void request();
};

}  // namespace crossover
