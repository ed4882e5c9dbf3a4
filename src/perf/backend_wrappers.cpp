#include "perf/backend_wrappers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace crossover::perf {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
int64_t ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}
int64_t ns(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e9)); }
}  // namespace

double PhaseTimes::unattributed_seconds() const {
  double attributed = 0;
  for (double s : seconds) attributed += s;
  return std::max(0.0, step_wall_seconds - attributed - instrument_seconds);
}

// ---- TimingBackend ----------------------------------------------------------------------------
TimingBackend::TimingBackend(std::unique_ptr<Backend> inner, bool instrument)
    : ForwardingBackend(std::move(inner)), instrument_(instrument) {
  if (instrument_) {
    // The round trip of a synchronize() with nothing to wait for: the part of each bracketing
    // wait that is not the call's work. The median of a few.
    std::vector<double> t;
    inner_->synchronize();
    for (int i = 0; i < 31; ++i) {
      const auto a = Clock::now();
      inner_->synchronize();
      t.push_back(since(a, Clock::now()));
    }
    std::nth_element(t.begin(), t.begin() + 15, t.end());
    sync_floor_ = t[15];
  }
}

template <class F>
void TimingBackend::timed(Call call, F&& f) {
  // The host time of a copy or a synchronize() is the phase's work; of a kernel, its launch.
  const Phase phase = call_phase(call);
  const bool host_is_phase =
      phase == Phase::h2d_copy || phase == Phase::d2h_copy || phase == Phase::sync_wait;
  if (!enabled_ || !in_step_) {
    f();
    return;
  }
  if (call == Call::synchronize && instrument_) {
    // Everything before was already waited for; this costs the round trip.
    const auto t0 = Clock::now();
    f();
    const auto t1 = Clock::now();
    const double t = since(t0, t1);
    if (tracing_)
      times_.traced_calls.push_back({.call = call,
                                     .position = static_cast<int64_t>(position_),
                                     .step = times_.steps,
                                     .start = ns(t0),
                                     .end = ns(t1)});
    times_.seconds[static_cast<std::size_t>(phase)] += t;
    ++times_.calls;
    if (times_.by_position.size() <= position_) times_.by_position.resize(position_ + 1, 0.0);
    times_.by_position[position_++] += t;
    return;
  }
  const auto a = Clock::now();
  if (instrument_) inner_->synchronize();
  const auto t0 = Clock::now();
  f();
  const auto t1 = Clock::now();
  const auto p = static_cast<std::size_t>(phase);
  ++times_.calls;
  if (times_.by_position.size() <= position_) times_.by_position.resize(position_ + 1, 0.0);
  TracedCall traced{.call = call,
                    .position = static_cast<int64_t>(position_),
                    .step = times_.steps,
                    .start = ns(t0),
                    .end = ns(t1)};
  double& at = times_.by_position[position_++];
  if (!instrument_) {
    times_.seconds[p] += since(t0, t1);
    at += since(t0, t1);
    if (tracing_) times_.traced_calls.push_back(traced);
    return;
  }
  inner_->synchronize();
  const auto t2 = Clock::now();
  const double host = since(t0, t1), wait = since(t1, t2);
  times_.seconds[host_is_phase ? p : static_cast<std::size_t>(Phase::host_overhead)] += host;
  times_.seconds[p] += std::max(0.0, wait - sync_floor_);
  at += (host_is_phase ? host : 0.0) + std::max(0.0, wait - sync_floor_);
  if (tracing_) {
    // The device's share as explain counts it: a copy from its start, a kernel after its launch.
    traced.device_start = host_is_phase ? traced.start : traced.end;
    traced.device_end = traced.end + ns(std::max(0.0, wait - sync_floor_));
    times_.traced_calls.push_back(traced);
  }
  times_.instrument_seconds += since(a, t0) + std::min(wait, sync_floor_);
}

void TimingCollective::allreduce_sum(float* data, int64_t n) {
  TimingBackend* t = *timing_;
  if (!t || !t->enabled_ || !t->in_step_) {
    inner_->allreduce_sum(data, n);
    return;
  }
  // Waiting for a slower rank is not the allreduce's own cost: a barrier first, its time counted
  // as sync_wait (the cost model assumes ranks of equal speed), then the allreduce timed alone.
  const auto a = Clock::now();
  inner_->barrier();
  const auto b = Clock::now();
  t->times_.seconds[static_cast<std::size_t>(Phase::sync_wait)] += since(a, b);
  if (t->tracing_)
    t->times_.traced_calls.push_back({.call = Call::allreduce,
                                      .barrier = true,
                                      .step = t->times_.steps,
                                      .start = ns(a),
                                      .end = ns(b)});
  t->timed(Call::allreduce, [&] { inner_->allreduce_sum(data, n); });
}

class TimedGraph final : public Backend::StepGraph {
 public:
  TimedGraph(TimingBackend& owner, std::unique_ptr<Backend::StepGraph> inner)
      : owner_(owner), inner_(std::move(inner)) {}
  void replay() override {
    if (!owner_.enabled_) {
      inner_->replay();
      return;
    }
    owner_.in_step_ = true;
    owner_.position_ = 0;
    const auto t0 = Clock::now();
    try {
      inner_->replay();
    } catch (...) {
      owner_.in_step_ = false;
      throw;
    }
    const auto t1 = Clock::now();
    owner_.times_.step_wall_seconds += since(t0, t1);
    if (owner_.tracing_) owner_.times_.traced_steps.push_back({ns(t0), ns(t1)});
    owner_.times_.steps += 1;
    owner_.in_step_ = false;
  }

 private:
  TimingBackend& owner_;
  std::unique_ptr<Backend::StepGraph> inner_;
};

std::unique_ptr<Backend::StepGraph> TimingBackend::capture(std::function<void()> enqueue,
                                                           bool use_graph) {
  return std::make_unique<TimedGraph>(*this, inner_->capture(std::move(enqueue), use_graph));
}

#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price) \
  void TimingBackend::name parameters {                                                   \
    timed(Call::name, [&] { inner_->name arguments; });                                   \
  }
#include "backends/backend_ops.h"

// ---- NaiveBackend -----------------------------------------------------------------------------
unsigned char* NaiveBackend::shadow(const void* p, std::size_t bytes) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = shadows_.upper_bound(a);
  if (it == shadows_.begin()) return nullptr;
  --it;
  if (a + bytes > it->first + it->second.size()) return nullptr;
  return it->second.data() + (a - it->first);
}

void NaiveBackend::release(void* p) noexcept {
  shadows_.erase(reinterpret_cast<uintptr_t>(p));
  inner_->release(p);
}

void NaiveBackend::upload(void* dst, const void* src, std::size_t bytes) {
  inner_->upload(dst, src, bytes);
  if (bytes == 0) return;
  if (unsigned char* s = shadow(dst, bytes)) {
    std::memcpy(s, src, bytes);
    return;
  }
  // A new region: drop any older one it overlaps.
  const auto a = reinterpret_cast<uintptr_t>(dst);
  auto it = shadows_.upper_bound(a);
  if (it != shadows_.begin() && std::prev(it)->first + std::prev(it)->second.size() > a) --it;
  while (it != shadows_.end() && it->first < a + bytes) it = shadows_.erase(it);
  const auto* from = static_cast<const unsigned char*>(src);
  shadows_.emplace(a, std::vector<unsigned char>(from, from + bytes));
}

std::unique_ptr<Backend::StepGraph> NaiveBackend::capture(std::function<void()> enqueue, bool) {
  return inner_->capture(std::move(enqueue), false);
}

void NaiveBackend::read_back(StepCounters* counters) {
  // What a typical loop does after each step (loss.item()): read the step's numbers, waiting for
  // the device. The host copy then knows the next batch index.
  if (unsigned char* s = shadow(counters, sizeof(StepCounters)))
    inner_->download_async(s, counters, sizeof(StepCounters));
  inner_->synchronize();
}

void NaiveBackend::gather_rows(const float* src, int64_t cols, const int32_t* indices,
                               int64_t batch, const StepCounters* counters, int64_t m, float* dst) {
  const auto* ctr = reinterpret_cast<const StepCounters*>(shadow(counters, sizeof(StepCounters)));
  if (ctr == nullptr) {
    // Never uploaded: read it once.
    StepCounters c;
    inner_->synchronize();
    inner_->download(&c, counters, sizeof c);
    upload(const_cast<StepCounters*>(counters), &c, sizeof c);
    ctr = reinterpret_cast<const StepCounters*>(shadow(counters, sizeof(StepCounters)));
  }
  const int64_t first = ctr->batch_index * batch;
  const auto* idx = reinterpret_cast<const int32_t*>(
      shadow(indices + first, static_cast<std::size_t>(m) * sizeof(int32_t)));
  if (idx == nullptr)
    throw std::logic_error("naive mode: the batch order was not uploaded through the backend");
  const auto a = reinterpret_cast<uintptr_t>(src);
  auto it = shadows_.upper_bound(a);
  if (it == shadows_.begin())
    throw std::logic_error("naive mode: the data set was not uploaded through the backend");
  --it;
  const auto* base = reinterpret_cast<const float*>(it->second.data() + (a - it->first));
  const std::size_t available = (it->first + it->second.size() - a) / sizeof(float);
  staging_.resize(static_cast<std::size_t>(m * cols));
  for (int64_t i = 0; i < m; ++i) {
    const auto row = static_cast<std::size_t>(idx[i]);
    if ((row + 1) * static_cast<std::size_t>(cols) > available)
      throw std::logic_error("naive mode: a batch row lies outside the uploaded data set");
    std::memcpy(staging_.data() + i * cols, base + row * static_cast<std::size_t>(cols),
                static_cast<std::size_t>(cols) * sizeof(float));
  }
  // The batch, from pageable host memory to the device (a copy the resident mode never makes).
  inner_->upload(dst, staging_.data(), staging_.size() * sizeof(float));
  ++host_batches_;
}

void NaiveBackend::optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                                  StepCounters* counters) {
  inner_->optimizer_step(config, params, counters);
  read_back(counters);
}

void NaiveBackend::advance_batch(StepCounters* counters) {
  inner_->advance_batch(counters);
  read_back(counters);
}

}  // namespace crossover::perf
