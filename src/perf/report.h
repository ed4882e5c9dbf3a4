// The report page (`crossover report`): what compare, explain and sweep measured, rendered as one
// self-contained HTML document (inline SVG and CSS, nothing loaded from outside, no script) that
// answers the seed's question on this machine: which device trains the seed's models faster, where
// one step's time goes on each, where the crossover lies, and why, in sentences made from the
// numbers. The page is built from the commands' own JSON documents (docs/JSON.md), not from a
// second copy of their logic.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/machine.h"
#include "perf/cost_model.h"
#include "perf/profile.h"

namespace crossover::perf {

// One step's time split into phases (seconds per step), on one device and mode, measured or
// predicted: one stacked bar.
struct StepSplit {
  std::string device;       // "cpu", "cuda:0"
  std::string device_name;  // "AMD EPYC 7B13", "NVIDIA H200"
  std::string mode;         // "resident", "naive"
  bool measured = false;
  std::array<double, kPhaseCount> phase_seconds{};
  double step_seconds() const;
};

// The bars of an explain --json document: its measured split and, where it has one, its
// predicted split.
std::vector<StepSplit> step_splits_of_explain(const nlohmann::json& explain);

// One of the seed's models.
struct ReportModel {
  std::string label;                           // "SMALL"
  std::string spec;                            // "small"
  nlohmann::json compare;                      // compare --json
  std::vector<StepSplit> steps;                // measured (explain) and predicted (profiles) splits
  std::vector<std::string> explain_sentences;  // explain's own summary, per measured device
};

struct ReportInput {
  std::string title;         // "Why is the GPU slower for the small Keras MLP?"
  std::string command_line;  // how the page was made
  std::string created;       // ISO 8601 UTC
  std::vector<ReportModel> models;
  nlohmann::json sweep;   // sweep --json (null: no sweep)
  std::string sweep_svg;  // sweep --plot's chart
  CpuInfo cpu;
  std::optional<Profile> cpu_profile;  // the CPU's rates the predictions used
  std::vector<Profile> gpu_profiles;   // the GPU profiles found (predicted rows)
  std::vector<std::string> gpus;       // the GPUs present ("cuda:0 NVIDIA H200"); empty: none
};

// The plain-words answer: a few sentences from the numbers (which device wins each model and by
// how much, what a step is made of on each, where the crossover lies).
std::vector<std::string> report_sentences(const ReportInput& in);

// A horizontal stacked bar chart of `steps` (one bar each, a segment per phase, on one time
// scale), as an SVG document.
std::string svg_step_bars(const std::string& title, const std::vector<StepSplit>& steps);

// The whole page (UTF-8, starting with "<!DOCTYPE html>").
std::string report_html(const ReportInput& in);

}  // namespace crossover::perf
