// Backends that wrap another one (installed with CompileOptions::wrap_backend), so perf/ can time
// and change how a model runs without touching model code:
//
//   TimingBackend: times every backend call of a training step and adds it to a phase
//                  (gemm, elementwise, optimizer, copies, sync); explain uses it.
//   NaiveBackend:  runs a step the way typical framework code does: each batch gathered on the
//                  host from pageable memory and copied to the device, one launch per op, no
//                  graph, and the step's counters read back (a sync) after every step; compare,
//                  explain and sweep use it for a GPU's "naive" mode.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "nn/collective.h"
#include "perf/cost_model.h"
#include "perf/recording.h"

namespace crossover::perf {

// Forwards every call of backends/backend_ops.h to `inner` (reads_host_memory keeps Backend's
// default: see backend.h).
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  Backend& inner() { return *inner_; }

#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price) \
  void name parameters override { inner_->name arguments; }
#define CROSSOVER_BACKEND_SETUP(type, name, parameters, arguments, qualifiers, fallback) \
  type name parameters qualifiers override { return inner_->name arguments; }
#include "backends/backend_ops.h"

 protected:
  std::unique_ptr<Backend> inner_;
};

// One backend call of a timed step as it happened (TimingBackend::set_tracing): steady-clock
// nanoseconds. `start`..`end` is the call on the host thread (on the CPU, its whole cost; on an
// instrumented GPU, its launch or its copy); `device_start`..`device_end` (instrumented only,
// else both 0) the device time explain attributes to it: the wait after the call less an idle
// synchronize()'s round trip (from the call's start for a copy, whose host time is the copy).
struct TracedCall {
  Call call = Call::synchronize;
  bool barrier = false;   // the ranks' barrier before an allreduce (position -1), not a call
  int64_t position = -1;  // the call's position within its step (PhaseTimes::by_position)
  int64_t step = 0;       // the step (replay) it was made in, from 0
  int64_t start = 0, end = 0;
  int64_t device_start = 0, device_end = 0;
};
// One timed step (a replay of the captured step): steady-clock nanoseconds.
struct TracedStep {
  int64_t start = 0, end = 0;
};

// What a TimingBackend measured over the steps it saw.
struct PhaseTimes {
  std::array<double, kPhaseCount> seconds{};  // attributed to each phase, summed over steps
  double step_wall_seconds = 0;               // wall time of the steps (graph replays), summed
  double instrument_seconds = 0;              // spent in the decorator's own synchronize() calls
  int64_t steps = 0;
  int64_t calls = 0;
  // Seconds by the call's position within its step (summed over steps): the n-th call of a step
  // is the n-th op of the cost model's list (less its host-overhead op), so explain can put a
  // measured time next to each op.
  std::vector<double> by_position;
  // host_overhead is what the step's wall time holds beyond the attributed calls and the
  // instrumentation: the model's own host code between calls, and the launches (GPU).
  double unattributed_seconds() const;
  // With tracing on (TimingBackend::set_tracing): every step and every call in it, in order.
  std::vector<TracedStep> traced_steps;
  std::vector<TracedCall> traced_calls;
};

// Times each backend call made inside a step (a replay of a captured step) and adds it to its
// phase. On the CPU every call is synchronous, so the wall time of a call is exactly its cost.
// With `instrument` (for a GPU, whose calls return before the work is done), each call is
// bracketed by synchronize(): the host time of the call counts as host overhead (the launch),
// the wait after it, less the round trip of an idle synchronize(), as the call's phase. That
// serialises the GPU: honest about where device time goes, not about the step's total, which
// explain takes from a plain run.
class TimingBackend final : public ForwardingBackend {
 public:
  TimingBackend(std::unique_ptr<Backend> inner, bool instrument);

  void set_enabled(bool on) { enabled_ = on; }
  // Also keep each step's and each call's start and end (PhaseTimes::traced_*), for a timeline.
  void set_tracing(bool on) { tracing_ = on; }
  void reset() { times_ = {}; }
  const PhaseTimes& times() const { return times_; }
  bool instrumented() const { return instrument_; }

  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool use_graph) override;
  // Every step operation, timed into its phase (backend_ops.h).
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price) \
  void name parameters override;
#include "backends/backend_ops.h"

 private:
  friend class TimedGraph;
  friend class TimingCollective;
  // Times `f`, the backend call `call`, into call_phase(call).
  template <class F>
  void timed(Call call, F&& f);

  bool instrument_ = false;
  bool enabled_ = true;
  bool in_step_ = false;
  bool tracing_ = false;
  std::size_t position_ = 0;
  double sync_floor_ = 0;  // an idle synchronize(), measured at construction (instrument only)
  PhaseTimes times_;
};

// The ranks' collective as explain times it: forwards every call to `inner`, and times each
// float allreduce made inside a step by `timing` (into Phase::allreduce, at its position in the
// step, as TimingBackend times a backend call): the seconds this rank spends in the collective
// call. Before it, a barrier (timed run only): the time this rank waits there for the slowest
// rank goes to Phase::sync_wait, so that the allreduce is its own cost, not the ranks' imbalance
// (which the cost model does not predict: it assumes ranks of equal speed). The epoch's loss
// sums (outside the step) are not timed.
class TimingCollective final : public Collective {
 public:
  TimingCollective(std::shared_ptr<Collective> inner, TimingBackend* const* timing)
      : inner_(std::move(inner)), timing_(timing) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void allreduce_sum(float* data, int64_t n) override;
  void allreduce_sum(double* data, int64_t n) override { inner_->allreduce_sum(data, n); }
  void broadcast(void* data, std::size_t bytes, int root) override {
    inner_->broadcast(data, bytes, root);
  }
  void barrier() override { inner_->barrier(); }
  std::string description() const override { return inner_->description(); }

 private:
  std::shared_ptr<Collective> inner_;
  TimingBackend* const* timing_;  // the timing backend, once compile has made it
};

// Runs each step as a naive framework loop does (see the top of this file). Keeps a host copy
// of everything uploaded (the data set, the shuffled order, the step counters: the pageable host
// memory batches come from), gathers each batch there and uploads it, and after each optimizer
// step (or evaluation step) reads the step counters back and synchronizes. Never uses a graph.
// Works on any backend: on the CPU it trains exactly as the plain backend does (a test checks).
class NaiveBackend final : public ForwardingBackend {
 public:
  explicit NaiveBackend(std::unique_ptr<Backend> inner) : ForwardingBackend(std::move(inner)) {}

  void release(void* p) noexcept override;
  void upload(void* dst, const void* src, std::size_t bytes) override;
  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool use_graph) override;
  void gather_rows(const float* src, int64_t cols, const int32_t* indices, int64_t batch,
                   const StepCounters* counters, int64_t m, float* dst) override;
  void optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                      StepCounters* counters) override;
  void advance_batch(StepCounters* counters) override;

  // Batches gathered on the host and uploaded so far (tests).
  int64_t host_batches() const { return host_batches_; }

 private:
  // The host copy holding device address p (nullptr when p was never uploaded).
  unsigned char* shadow(const void* p, std::size_t bytes);
  void read_back(StepCounters* counters);

  std::map<uintptr_t, std::vector<unsigned char>> shadows_;  // device address -> host copy
  std::vector<float> staging_;
  int64_t host_batches_ = 0;
};

}  // namespace crossover::perf
