#include "nn/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <utility>

namespace crossover {

bool is_terminal(std::FILE* f) { return ::isatty(::fileno(f)) == 1; }

TextSink stdout_sink() {
  return [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
}

std::string format_duration(double s) {
  if (s >= 1.0) return fmt::format("{}s", static_cast<long long>(std::llround(s)));
  if (s >= 1e-3) return fmt::format("{}ms", static_cast<long long>(std::llround(s * 1e3)));
  return fmt::format("{}us", static_cast<long long>(std::llround(s * 1e6)));
}

std::string format_per_step(double s) { return format_duration(s) + "/step"; }

ProgressBar::ProgressBar(TextSink out, int64_t total_steps, bool interactive,
                         std::string accuracy_name)
    : out_(std::move(out)),
      total_(total_steps),
      interactive_(interactive),
      accuracy_name_(std::move(accuracy_name)) {
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

bool ProgressBar::due(std::chrono::steady_clock::time_point now) const {
  return interactive_ && now - last_draw_ >= std::chrono::milliseconds(250);
}

std::string ProgressBar::bar(int64_t step, int64_t total, int width) {
  std::string b = "[";
  const int64_t filled = total > 0 ? step * width / total : width;
  for (int i = 0; i < width; ++i) {
    if (i < filled - 1 || (i == filled - 1 && step >= total))
      b += '=';
    else if (i == filled - 1)
      b += '>';
    else
      b += '.';
  }
  return b + "]";
}

std::string ProgressBar::values_text(const std::vector<std::pair<std::string, double>>& values) {
  std::string s;
  for (const auto& [k, v] : values) s += fmt::format(" - {}: {:.4f}", k, v);
  return s;
}

std::string ProgressBar::named_values_text(
    std::vector<std::pair<std::string, double>> values) const {
  for (auto& [key, value] : values) {
    if (key == "accuracy") key = accuracy_name_;
    if (key == "val_accuracy") key = "val_" + accuracy_name_;
  }
  return values_text(values);
}

void ProgressBar::update(int64_t step, const std::vector<std::pair<std::string, double>>& values,
                         std::chrono::steady_clock::time_point now) {
  last_draw_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta =
      step > 0 ? elapsed / static_cast<double>(step) * static_cast<double>(total_ - step) : 0.0;
  const int digits = static_cast<int>(std::to_string(total_).size());
  out_(fmt::format("\r{:>{}}/{} {} - ETA: {}{}\x1b[K", step, digits, total_, bar(step, total_),
                   format_duration(eta), named_values_text(values)));
}

void ProgressBar::finish(int64_t steps, double seconds,
                         const std::vector<std::pair<std::string, double>>& values) {
  const double per_step = steps > 0 ? seconds / static_cast<double>(steps) : 0.0;
  out_(fmt::format("{}{}/{} {} - {} {}{}{}\n", interactive_ ? "\r" : "", steps, total_,
                   bar(steps, total_), format_duration(seconds), format_per_step(per_step),
                   named_values_text(values), interactive_ ? "\x1b[K" : ""));
}

}  // namespace crossover
