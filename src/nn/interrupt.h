// Ctrl-C during fit: the first SIGINT asks training to stop after the current step (the model
// and its weights are kept, and saved if the caller asked); a second one ends the process, or,
// when the guard is told so, goes to the handler that was in place before (Python's, which raises
// KeyboardInterrupt once Python runs again).
#pragma once

namespace crossover {

class InterruptGuard {
 public:
  // Installs the handler (restores the previous one when destroyed). `pass_on`: for a fit that
  // does not stop on Ctrl-C (the thread measurement's trials), a press during it is not lost: the
  // outermost guard, when destroyed, raises SIGINT again for the handler it restored (Python's:
  // KeyboardInterrupt; the default: the process ends as Ctrl-C ends it).
  explicit InterruptGuard(bool second_ends_process = true, bool pass_on = false);
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool requested();
  static void clear();
  // For tests: behave as if Ctrl-C had been pressed.
  static void request();

 private:
  bool pass_on_ = false;
};

}  // namespace crossover
