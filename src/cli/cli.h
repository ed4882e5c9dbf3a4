// The crossover command: shared pieces of its subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/sequential.h"
#include "perf/calibrate.h"

namespace crossover::cli {

// Messages on stdout unless --quiet; warnings and errors always go to stderr.
struct Output {
  bool quiet = false;
  void say(const std::string& line) const {
    if (!quiet) std::printf("%s\n", line.c_str());
  }
};

// --model: "small", "big", a layer list ("dense:128:relu,dropout:0.2,dense:10:softmax", input
// flattened), or a Keras model JSON file. sample_shape: the data's per-sample shape.
Sequential model_from_spec(const std::string& spec, const Shape& sample_shape, int num_classes);

// Refuses, before any work, an output path that cannot be written (missing folder, a folder in
// the way, no permission). Throws Error naming the flag and the path.
void check_writable(const std::string& flag, const std::string& path);
// Writes `doc` to path atomically (temporary file in the same folder, then rename).
void write_json_file(const std::string& flag, const std::string& path, const nlohmann::json& doc);

// The JSON "model" object: name, layers (Keras class names and settings), parameters,
// input_shape.
nlohmann::json model_json(const Sequential& model, const std::string& name);

// "cpu" plus the CPU's model name, or "cuda:N".
std::string device_description(const std::string& device);

// --profile FILE and --no-calibrate: how a command that predicts this CPU finds its profile
// (docs/PROFILE.md, "On demand"). One helper for compare, explain, sweep and train.
struct ProfileFlags {
  std::string profile;
  bool no_calibrate = false;
};
void add_profile_options(CLI::App* cmd, ProfileFlags& flags);
// The CPU profile to predict `workloads` with (perf::cpu_profile_for): calibrates this CPU first
// where no saved profile matches it (or the one that does lacks their shapes), with a progress
// line on stderr unless `quiet`. `what` names the workloads for that line ("SMALL at batch 32").
perf::CpuProfileChoice cpu_profile_for_run(const ProfileFlags& flags, int threads, bool quiet,
                                           std::vector<perf::Workload> workloads,
                                           const std::string& what);
// {"source": PATH, "calibrated_now": bool} (docs/JSON.md), null without a profile.
nlohmann::json profile_json(const perf::CpuProfileChoice& choice);
// "SMALL" and "BIG" for the built-in models, the spec itself otherwise.
std::string model_label(const std::string& spec);

// The subcommands.
void add_train(CLI::App& app);
void add_evaluate(CLI::App& app);
void add_predict(CLI::App& app);
void add_devices(CLI::App& app);
void add_calibrate(CLI::App& app);
void add_explain(CLI::App& app);
void add_compare(CLI::App& app);
void add_sweep(CLI::App& app);

}  // namespace crossover::cli
