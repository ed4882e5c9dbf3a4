// explain: where one training step's time goes, measured and predicted, phase by phase, and what
// would change it.
//
// Method (docs/PERF.md):
//  1. A plain run (no decorator) of N steps gives the true step time T (fit's own timing).
//  2. A timed run of the same N steps, the backend wrapped in a TimingBackend, gives each
//     phase's share. CPU: every call is synchronous, so a call's wall time is exact; the rest of
//     the step's wall time is host overhead; the split is scaled to T (the decorator's own cost
//     is small but not zero). GPU: the timed run is instrumented (synchronize() around each
//     call, no graph); each phase gets the device time its calls waited for, and host overhead
//     is what T holds beyond them (if they add up to more than T, they are scaled down to it).
//  3. The cost model predicts each phase from the profile.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/sequential.h"
#include "perf/backend_wrappers.h"
#include "perf/cost_model.h"
#include "perf/profile.h"

namespace crossover::perf {

struct ExplainConfig {
  std::function<Sequential()> make_model;  // a fresh, uncompiled model
  const Tensor* x = nullptr;               // training data
  const Tensor* y = nullptr;
  int64_t batch = kDefaultBatchSize;
  std::string device = "cpu";
  Mode mode = Mode::resident;
  int threads = 0;
  uint64_t seed = 0;
  Precision precision = Precision::fp32;  // trained and predicted in (bf16: the bf16 GEMM rates)
  int64_t steps = 200;
  double max_seconds = 20;              // per run (plain, timed)
  std::optional<Profile> profile;       // to predict with (nullopt: no prediction)
  std::vector<Profile> other_profiles;  // for what-if sentences (a GPU profile, on the CPU)
  // Over ranks (the CPU; every rank calls run_explain together, under mpirun): `batch` is the
  // global batch, each rank's step takes its share, and the allreduce is timed in the step (on
  // each rank; rank 0's result is the one to show). Null: one process.
  std::shared_ptr<Collective> collective;
  // Keep the timed run's every step and call (ExplainResult::raw.traced_*) for a timeline
  // (perf/trace.h).
  bool trace = false;
  // Also predict the fused step (backends/fused_mlp.h, train --fused-step) beside the unfused
  // resident one (ExplainResult::fused): from the profile on a GPU, from each GPU profile of
  // other_profiles on the CPU. The runs measured are the unfused ones either way.
  bool fused_step = false;
};

// The fused step predicted on one GPU beside its unfused resident step, from one profile.
struct FusedComparison {
  std::string device;          // the GPU's name ("NVIDIA H200")
  std::string profile;         // the profile's file
  double unfused_seconds = 0;  // the unfused resident step from the same profile (0: not priced)
  FusedPrediction fused;
};

struct ExplainResult {
  std::array<double, kPhaseCount> measured{};   // seconds per step
  std::array<double, kPhaseCount> predicted{};  // seconds per step (0 without a profile)
  bool has_prediction = false;
  double step_measured = 0, step_predicted = 0;
  int64_t steps_measured = 0, batch = 0;
  int ranks = 1;
  int64_t rank_rows = 0;  // the rows of the largest rank's share of a batch (the batch: 1 rank)
  std::string method;     // how the split was measured, one sentence
  std::vector<Op> ops;    // the cost model's op list
  Prediction prediction;  // per op
  Floor floor;            // the roofline floor (cost_model.h), with the prediction
  std::vector<double> op_measured;     // per op, seconds per step (scaled as the phases); empty
                                       // when the calls did not line up with the op list
  std::vector<std::string> sentences;  // what dominates and what would change it
  PhaseTimes raw;                      // the timed run's totals
  double timed_step_wall = 0;          // the timed run's seconds per step
  std::vector<FusedComparison> fused;  // with ExplainConfig::fused_step (one sentence each too)
};

ExplainResult run_explain(const ExplainConfig& config);

// A measured step below this share of its roofline floor is not noise: the floor is wrong.
inline constexpr double kBelowFloor = 0.95;
// Whether the measured step beat its roofline floor (below kBelowFloor of it): no step can, so
// the profile's rates are too low for the machine now (calibrated while other work ran).
bool below_floor(const ExplainResult& r);
// The command that measures this machine afresh at `profile`'s thread count (or on its GPU) into
// the default folder, where explain looks first. Never `--out` the profile's own file: one given
// with --profile may be another machine's.
std::string recalibrate_command(const Profile* profile);
// explain's sentence on the physical floor: the step against its roofline and GEMM floors, the
// memory levels its bytes were priced at, and, when below_floor(r), the command to recalibrate
// the profile it was priced from.
std::string floor_sentence(const ExplainResult& r, const Profile* profile = nullptr);

// "1.23 ms", "456 us", "2.31 s".
std::string human_seconds(double seconds);

// One line: "The fused step (--fused-step) on NVIDIA H200 is predicted at 21 us a step against
// the unfused 54 us (2.6x faster): ...", or why it is unpriced or cannot run.
std::string fused_step_sentence(const FusedPrediction& f, double unfused_seconds,
                                const std::string& device_name);

}  // namespace crossover::perf
