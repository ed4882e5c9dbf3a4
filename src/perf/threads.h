// How many CPU threads a model trains fastest with on this machine, by measurement.
//
// Each op's parallel region costs a fork-join whose price depends on the machine far more than
// its core count says: on a 16-core virtual machine (the H200's host) SMALL's step took 163 us at
// 8 threads and 707 us at 16, and a width-32 MLP 57 us at one thread and 1684 us at 16, while
// BIG was fastest at 16 (bench/RESULTS.md). So `--threads 0` does not mean "all cores": the
// commands time a few real steps at each candidate count, train with the fastest, and keep the
// choice for the next run.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/sequential.h"
#include "perf/cost_model.h"

namespace crossover::perf {

struct ThreadsTrial {
  int threads = 0;
  double seconds_per_step = 0;
};

struct ThreadsChoice {
  int threads = 1;
  std::vector<ThreadsTrial> trials;  // in the order tried
  double seconds = 0;                // wall time of the whole measurement
  // "8 threads (1: 236 us, 2: 262 us, 4: 243 us, 8: 163 us, 16: 707 us a step)"
  std::string summary() const;
};

// [{"threads", "seconds_per_step"}], as the JSON of the commands and the kept choices hold them.
nlohmann::json trials_json(const std::vector<ThreadsTrial>& trials);

// 1, 2, 4, ... below `max_threads`, then `max_threads` (at least 1).
std::vector<int> thread_candidates(int max_threads);

// The rule, on trials in increasing thread counts: a count is preferred to a smaller one only when
// it is at least 5% faster than the best so far (noise, and the machine's other users, favour
// fewer threads). Returns the chosen count (1 without trials).
int pick_threads(const std::vector<ThreadsTrial>& trials);
// Whether to stop trying larger counts: the last trial was 2.5x slower than the best so far (past
// the optimum a larger team only costs more).
bool past_the_optimum(const std::vector<ThreadsTrial>& trials);

// `make(t)` returns the model compiled for the CPU with t threads. Each candidate trains up to
// `steps` batches of (x, y) after a warm-up (perf::time_steps: the median of short epochs), at
// most `max_seconds_each`; past_the_optimum ends the trials early; the two fastest, when within
// 1.5x of each other, are timed once more (each keeps its faster time); pick_threads chooses.
ThreadsChoice fastest_cpu_threads(const std::function<Sequential(int)>& make, const Tensor& x,
                                  const Tensor& y, int64_t batch, int max_threads,
                                  int64_t steps = 24, double max_seconds_each = 0.5);

// Whether a saved count still holds here now: a machine that has become busy can make a count
// that was fastest when quiet many times slower (issue 10: on 2 cores, with 4 other busy
// processes, 2 threads took 16-46 ms a step where one took 0.45-0.6 ms). Times `threads` and one
// thread (a few steps each); it holds unless `threads` is now 1.5x slower than one thread. One
// thread always holds.
struct ThreadsRecheck {
  bool holds = true;
  ThreadsTrial saved, one;
};
ThreadsRecheck recheck_threads(const std::function<Sequential(int)>& make, const Tensor& x,
                               const Tensor& y, int64_t batch, int threads, int64_t steps = 16,
                               double max_seconds_each = 0.3);

// A choice is kept, per machine, in the user's profile folder (threads/<this CPU's slug>.json,
// beside its profiles), keyed by the model's step (its op list at that batch size) and batch size:
// a second run trains at the same count (bit-identical results, and the same profile, so nothing
// is calibrated again), and by its precision (a bf16 step is not an fp32 step; an fp32 key is
// what it was before precisions, so earlier choices stay found). Delete the file to measure again.
std::string threads_choice_key(const ModelDesc& model, int64_t batch,
                               Precision precision = Precision::fp32);
std::string threads_choice_path();
std::optional<ThreadsChoice> saved_threads_choice(const std::string& key);
// Adds or replaces the entry (read, change, write to a temporary file and rename; a concurrent
// writer's entry may be lost, and is then measured again).
void save_threads_choice(const std::string& key, const std::string& what, const ThreadsChoice& c);

// The CPU thread count a run trains with, as the commands' --threads and Python's fit choose it:
// `requested` when positive, as it is; 0: the count `make(t)` (the model compiled for the CPU with
// t threads) trains fastest with here, measured on the first batches of (x, y)
// (fastest_cpu_threads). With a `key` (threads_choice_key), a choice saved by an earlier run is
// reused while recheck_threads says it still holds (else measured again for this run, and the
// saved one kept), and a new one saved. `say`, when given, gets one line saying what was chosen;
// `what` names the model in it ("SMALL at batch 32"), `how_to_pin` how to give a count instead
// ("--threads N").
struct ThreadsForRun {
  int threads = 1;
  std::optional<ThreadsChoice> choice;  // when measured (now or by an earlier run)
  std::string chosen_by = "user";       // "user", "measurement", "saved measurement", "all cores"
};
ThreadsForRun cpu_threads_for_run(int requested, const std::function<Sequential(int)>& make,
                                  const Tensor& x, const Tensor& y, int64_t batch,
                                  const std::function<void(const std::string&)>& say,
                                  const std::string& what, const std::string& key,
                                  const std::string& how_to_pin);

// The same for a model built in code (Python's): make(t) compiles copies of `model`'s layers as
// `model` is compiled (optimizer with its current learning rate, loss, metrics, precision) for the
// CPU with t threads and `seed`, given the input shape of (x) when its first layer has none; the
// choice is keyed and saved as the commands key theirs, so `crossover train` and Python share it.
// Requires a compiled model.
ThreadsForRun cpu_threads_for_model(const Sequential& model, const Tensor& x, const Tensor& y,
                                    int64_t batch, uint64_t seed,
                                    const std::function<void(const std::string&)>& say,
                                    const std::string& how_to_pin);

}  // namespace crossover::perf
