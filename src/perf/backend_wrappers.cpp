#include "perf/backend_wrappers.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace crossover::perf {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
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
      call == Call::upload || call == Call::download || call == Call::synchronize;
  if (!enabled_ || !in_step_) {
    f();
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
  double& at = times_.by_position[position_++];
  if (!instrument_) {
    times_.seconds[p] += since(t0, t1);
    at += since(t0, t1);
    return;
  }
  inner_->synchronize();
  const auto t2 = Clock::now();
  const double host = since(t0, t1), wait = since(t1, t2);
  times_.seconds[host_is_phase ? p : static_cast<std::size_t>(Phase::host_overhead)] += host;
  times_.seconds[p] += std::max(0.0, wait - sync_floor_);
  at += (host_is_phase ? host : 0.0) + std::max(0.0, wait - sync_floor_);
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
  t->times_.seconds[static_cast<std::size_t>(Phase::sync_wait)] += since(a, Clock::now());
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
    owner_.times_.step_wall_seconds += since(t0, Clock::now());
    owner_.times_.steps += 1;
    owner_.in_step_ = false;
  }

 private:
  TimingBackend& owner_;
  std::unique_ptr<Backend::StepGraph> inner_;
};

void TimingBackend::upload(void* dst, const void* src, std::size_t bytes) {
  timed(Call::upload, [&] { inner_->upload(dst, src, bytes); });
}
void TimingBackend::download(void* dst, const void* src, std::size_t bytes) {
  timed(Call::download, [&] { inner_->download(dst, src, bytes); });
}
void TimingBackend::download_async(void* dst, const void* src, std::size_t bytes) {
  timed(Call::download, [&] { inner_->download_async(dst, src, bytes); });
}
void TimingBackend::fill(float* dst, float value, int64_t n) {
  timed(Call::fill, [&] { inner_->fill(dst, value, n); });
}
void TimingBackend::synchronize() {
  if (!enabled_ || !in_step_ || !instrument_) {
    timed(Call::synchronize, [&] { inner_->synchronize(); });
    return;
  }
  // Instrumented: everything before was already waited for; this costs the round trip.
  const auto t0 = Clock::now();
  inner_->synchronize();
  const double t = since(t0, Clock::now());
  times_.seconds[static_cast<std::size_t>(call_phase(Call::synchronize))] += t;
  ++times_.calls;
  if (times_.by_position.size() <= position_) times_.by_position.resize(position_ + 1, 0.0);
  times_.by_position[position_++] += t;
}
std::unique_ptr<Backend::StepGraph> TimingBackend::capture(std::function<void()> enqueue,
                                                           bool use_graph) {
  return std::make_unique<TimedGraph>(*this, inner_->capture(std::move(enqueue), use_graph));
}
void TimingBackend::gather_rows(const float* src, int64_t cols, const int32_t* indices,
                                int64_t batch, const StepCounters* counters, int64_t m,
                                float* dst) {
  timed(Call::gather_rows,
        [&] { inner_->gather_rows(src, cols, indices, batch, counters, m, dst); });
}
void TimingBackend::dense_forward(const float* x, const float* w, const float* b, float* y,
                                  int64_t m, int64_t k, int64_t n, ActivationKind act) {
  timed(Call::dense_forward, [&] { inner_->dense_forward(x, w, b, y, m, k, n, act); });
}
void TimingBackend::dense_backward_weights(const float* x, const float* dy, float* dw, float* db,
                                           int64_t m, int64_t k, int64_t n) {
  timed(Call::dense_backward_weights,
        [&] { inner_->dense_backward_weights(x, dy, dw, db, m, k, n); });
}
void TimingBackend::dense_backward_weights_update(const float* x, const float* dy,
                                                  const ParamSlot& kernel, const ParamSlot* bias,
                                                  int64_t m, int64_t k, int64_t n,
                                                  const OptimizerConfig& config,
                                                  const StepCounters* counters) {
  timed(Call::dense_backward_weights_update, [&] {
    inner_->dense_backward_weights_update(x, dy, kernel, bias, m, k, n, config, counters);
  });
}
void TimingBackend::dense_backward_input(const float* dy, const float* w, float* dx, int64_t m,
                                         int64_t k, int64_t n) {
  timed(Call::dense_backward_input, [&] { inner_->dense_backward_input(dy, w, dx, m, k, n); });
}
void TimingBackend::conv2d_forward(const ConvShape& s, const float* x, const float* w,
                                   const float* b, float* y, int64_t m, ActivationKind act) {
  timed(Call::conv2d_forward, [&] { inner_->conv2d_forward(s, x, w, b, y, m, act); });
}
void TimingBackend::conv2d_backward_input(const ConvShape& s, const float* dy, const float* w,
                                          float* dx, int64_t m) {
  timed(Call::conv2d_backward_input, [&] { inner_->conv2d_backward_input(s, dy, w, dx, m); });
}
void TimingBackend::conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy,
                                            float* dw, float* db, int64_t m) {
  timed(Call::conv2d_backward_weights,
        [&] { inner_->conv2d_backward_weights(s, x, dy, dw, db, m); });
}
void TimingBackend::pool2d_forward(const PoolShape& s, const float* x, float* y, void* workspace,
                                   int64_t m) {
  timed(Call::pool2d_forward, [&] { inner_->pool2d_forward(s, x, y, workspace, m); });
}
void TimingBackend::pool2d_backward(const PoolShape& s, const float* dy, const void* workspace,
                                    float* dx, int64_t m) {
  timed(Call::pool2d_backward, [&] { inner_->pool2d_backward(s, dy, workspace, dx, m); });
}
void TimingBackend::batchnorm_forward_training(const BatchNormShape& s, const float* x,
                                               const float* gamma, const float* beta, float* y,
                                               float* mean, float* variance, int64_t m) {
  timed(Call::batchnorm_forward_training,
        [&] { inner_->batchnorm_forward_training(s, x, gamma, beta, y, mean, variance, m); });
}
void TimingBackend::batchnorm_forward_inference(const BatchNormShape& s, const float* x,
                                                const float* gamma, const float* beta,
                                                const float* mean, const float* variance, float* y,
                                                int64_t m) {
  timed(Call::batchnorm_forward_inference,
        [&] { inner_->batchnorm_forward_inference(s, x, gamma, beta, mean, variance, y, m); });
}
void TimingBackend::batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                                       const float* gamma, const float* mean, const float* variance,
                                       float* dx, float* dgamma, float* dbeta, int64_t m) {
  timed(Call::batchnorm_backward,
        [&] { inner_->batchnorm_backward(s, x, dy, gamma, mean, variance, dx, dgamma, dbeta, m); });
}
void TimingBackend::batchnorm_update_moving(const BatchNormShape& s, const float* mean,
                                            const float* variance, float* moving_mean,
                                            float* moving_variance, double momentum) {
  timed(Call::batchnorm_update_moving, [&] {
    inner_->batchnorm_update_moving(s, mean, variance, moving_mean, moving_variance, momentum);
  });
}
void TimingBackend::activation_forward(ActivationKind act, const float* x, float* y, int64_t m,
                                       int64_t n) {
  timed(Call::activation_forward, [&] { inner_->activation_forward(act, x, y, m, n); });
}
void TimingBackend::activation_backward(ActivationKind act, const float* y, const float* dy,
                                        float* dx, int64_t m, int64_t n) {
  timed(Call::activation_backward, [&] { inner_->activation_backward(act, y, dy, dx, m, n); });
}
void TimingBackend::dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n,
                                    float rate, uint64_t seed, uint32_t layer,
                                    const StepCounters* counters, int64_t first_row) {
  timed(Call::dropout_forward,
        [&] { inner_->dropout_forward(x, y, mask, m, n, rate, seed, layer, counters, first_row); });
}
void TimingBackend::dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m,
                                     int64_t n, float rate) {
  timed(Call::dropout_backward, [&] { inner_->dropout_backward(dy, mask, dx, m, n, rate); });
}
void TimingBackend::relu_dropout_backward(const float* y, const uint8_t* mask, const float* dy,
                                          float* dz, int64_t m, int64_t n, float rate) {
  timed(Call::relu_dropout_backward,
        [&] { inner_->relu_dropout_backward(y, mask, dy, dz, m, n, rate); });
}
void TimingBackend::loss_forward_backward(LossKind loss, ActivationKind act, const float* out,
                                          const float* targets, float* probs, float* d_out,
                                          int64_t m, int64_t c, StepCounters* counters,
                                          int64_t mean_rows) {
  timed(Call::loss_forward_backward, [&] {
    inner_->loss_forward_backward(loss, act, out, targets, probs, d_out, m, c, counters, mean_rows);
  });
}
void TimingBackend::optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                                   StepCounters* counters) {
  timed(Call::optimizer_step, [&] { inner_->optimizer_step(config, params, counters); });
}
void TimingBackend::advance_batch(StepCounters* counters) {
  timed(Call::advance_batch, [&] { inner_->advance_batch(counters); });
}

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
