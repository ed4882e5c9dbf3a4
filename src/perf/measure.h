// Measuring training the way the engine runs it: compile a model for a device and mode, run a
// number of steps through Sequential::fit, and read fit's own epoch timing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/tensor.h"
#include "nn/sequential.h"
#include "perf/backend_wrappers.h"
#include "perf/cost_model.h"

namespace crossover::perf {

// A data set as the commands train on it: float32 images in [0, 1] and float class indices.
struct TrainingData {
  Tensor x_train, y_train, x_test, y_test;
  Shape sample_shape;  // (28, 28)
  int classes = 10;
  std::string name, path;
};
// data::load_data(spec, say), converted once.
TrainingData load_training_data(const std::string& spec,
                                const std::function<void(const std::string&)>& say);

struct RunConfig {
  std::string device = "cpu";  // "cpu", "cuda:N"
  Mode mode = Mode::resident;  // naive: graphs off and the NaiveBackend (GPU; any backend works)
  int threads = 0;
  uint64_t seed = 0;
  Precision precision = Precision::fp32;  // the dense GEMMs' (CompileOptions::precision)
  // Resident mode without a graph (explain's instrumented GPU run): one launch per op, but the
  // data stays on the device and nothing is synchronised per step.
  bool no_graph = false;
  // Wrap the backend in a TimingBackend (instrumented on a GPU); its address is stored here.
  TimingBackend** timing = nullptr;
  // Train over these ranks (CompileOptions::collective; null: one process). With `timing`, the
  // step's allreduce is timed too (TimingCollective).
  std::shared_ptr<Collective> collective;
};

// compile(Adam, sparse_categorical_crossentropy, accuracy) for the device and mode.
void compile_for(Sequential& model, const RunConfig& config);

// "cpu" or "cuda:N" (a plain "cuda" is cuda:0).
bool is_gpu_device(const std::string& device);

struct StepTiming {
  double seconds_per_step = 0;  // median over the measured epochs of their mean step (fit's timing)
  double mean_seconds_per_step = 0;  // mean over all measured steps
  int64_t steps = 0;                 // steps measured
  int64_t batch = 0;                 // the batch size actually used (at most the samples given)
  double wall_seconds = 0;           // the whole measurement, warm-up included
  bool capped = false;               // stopped early by max_seconds
};

// Trains `steps` full batches of `batch` rows of (x, y) after a short warm-up (two steps, not
// counted), stopping early once `max_seconds` have passed after at least one measured epoch.
// The steps run as about eight short epochs (chunks of the data, sized so that the time cap is
// respected); the step time is the median of the epochs' mean steps. With `timing`, the timing
// backend counts the measured steps only. A model compiled over ranks is given them as `ranks`
// (every rank calls this together): the epochs' length and when to stop are rank 0's, so that
// every rank trains the same number of steps; each rank's figures are its own.
StepTiming time_steps(Sequential& model, const Tensor& x, const Tensor& y, int64_t batch,
                      int64_t steps, double max_seconds, TimingBackend* timing = nullptr,
                      Collective* ranks = nullptr);

// Largest relative difference between two sets of weights: max over tensors of
// max |a - b| / max |a| (0 when identical). Throws Error when the sets do not match.
double max_relative_weight_difference(const std::vector<NamedTensor>& a,
                                      const std::vector<NamedTensor>& b);

}  // namespace crossover::perf
