// Keras's progress line:
//   Epoch 1/10
//   1875/1875 [==============================] - 1s 95us/step - loss: 0.2950 - accuracy: 0.9148
// Redrawn in place on a terminal (at most a few times a second); one line per epoch otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crossover {

// Where fit's and evaluate's text goes: each call gets one piece (a line, or a redraw of the
// bar), whole. The Python module passes one that writes to Python's sys.stdout.
using TextSink = std::function<void(std::string_view)>;
// C's stdout, flushed after each piece: the command line's output.
TextSink stdout_sink();

// "1s", "95us", "3ms": Keras's compact durations.
std::string format_duration(double seconds);
// "95us/step" from seconds per step.
std::string format_per_step(double seconds_per_step);

class ProgressBar {
 public:
  // out: where to draw; interactive: redraw in place (a terminal) or print once;
  // accuracy_name: what the line calls "accuracy" and "val_accuracy" (Keras prints the name the
  // metric was compiled under: "acc", "sparse_categorical_accuracy").
  ProgressBar(TextSink out, int64_t total_steps, bool interactive,
              std::string accuracy_name = "accuracy");

  // True when enough time has passed since the last draw that a redraw is worth a look at the
  // counters (so the caller reads them only a few times a second).
  bool due(std::chrono::steady_clock::time_point now) const;
  // In-progress line: " 123/1875 [==>....] - ETA: 3s - loss: 0.5000 - accuracy: 0.8000".
  void update(int64_t step, const std::vector<std::pair<std::string, double>>& values,
              std::chrono::steady_clock::time_point now);
  // The final line for the epoch, with its total time and time per step.
  void finish(int64_t steps, double seconds,
              const std::vector<std::pair<std::string, double>>& values);

  static std::string bar(int64_t step, int64_t total, int width = 30);
  static std::string values_text(const std::vector<std::pair<std::string, double>>& values);

 private:
  std::string named_values_text(std::vector<std::pair<std::string, double>> values) const;
  TextSink out_;
  int64_t total_;
  bool interactive_;
  std::string accuracy_name_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// Whether `f` is a terminal.
bool is_terminal(std::FILE* f);

}  // namespace crossover
