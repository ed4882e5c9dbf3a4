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

// Forwards every call to `inner`.
class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  Backend& inner() { return *inner_; }

  std::string device_name() const override { return inner_->device_name(); }
  void* allocate(std::size_t bytes) override { return inner_->allocate(bytes); }
  MemoryAvailable available_memory() const override { return inner_->available_memory(); }
  void release(void* p) noexcept override { inner_->release(p); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    inner_->upload(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    inner_->download(dst, src, bytes);
  }
  void download_async(void* dst, const void* src, std::size_t bytes) override {
    inner_->download_async(dst, src, bytes);
  }
  void fill(float* dst, float value, int64_t n) override { inner_->fill(dst, value, n); }
  void host_wrote(void* p, std::size_t bytes) override { inner_->host_wrote(p, bytes); }
  void synchronize() override { inner_->synchronize(); }
  void allreduce_sum(float* data, int64_t n, DeviceCollective& with) override {
    inner_->allreduce_sum(data, n, with);
  }
  void broadcast(void* data, std::size_t bytes, int root, DeviceCollective& with) override {
    inner_->broadcast(data, bytes, root, with);
  }
  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool use_graph) override {
    return inner_->capture(std::move(enqueue), use_graph);
  }
  void gather_rows(const float* src, int64_t cols, const int32_t* indices, int64_t batch,
                   const StepCounters* counters, int64_t m, float* dst) override {
    inner_->gather_rows(src, cols, indices, batch, counters, m, dst);
  }
  void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k,
                     int64_t n, ActivationKind act) override {
    inner_->dense_forward(x, w, b, y, m, k, n, act);
  }
  void dense_backward_weights(const float* x, const float* dy, float* dw, float* db, int64_t m,
                              int64_t k, int64_t n) override {
    inner_->dense_backward_weights(x, dy, dw, db, m, k, n);
  }
  bool fuses_weight_update() const override { return inner_->fuses_weight_update(); }
  void dense_backward_weights_update(const float* x, const float* dy, const ParamSlot& kernel,
                                     const ParamSlot* bias, int64_t m, int64_t k, int64_t n,
                                     const OptimizerConfig& config,
                                     const StepCounters* counters) override {
    inner_->dense_backward_weights_update(x, dy, kernel, bias, m, k, n, config, counters);
  }
  void dense_backward_input(const float* dy, const float* w, float* dx, int64_t m, int64_t k,
                            int64_t n) override {
    inner_->dense_backward_input(dy, w, dx, m, k, n);
  }
  void activation_forward(ActivationKind act, const float* x, float* y, int64_t m,
                          int64_t n) override {
    inner_->activation_forward(act, x, y, m, n);
  }
  void activation_backward(ActivationKind act, const float* y, const float* dy, float* dx,
                           int64_t m, int64_t n) override {
    inner_->activation_backward(act, y, dy, dx, m, n);
  }
  void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n, float rate,
                       uint64_t seed, uint32_t layer, const StepCounters* counters,
                       int64_t first_row) override {
    inner_->dropout_forward(x, y, mask, m, n, rate, seed, layer, counters, first_row);
  }
  void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m, int64_t n,
                        float rate) override {
    inner_->dropout_backward(dy, mask, dx, m, n, rate);
  }
  void relu_dropout_backward(const float* y, const uint8_t* mask, const float* dy, float* dz,
                             int64_t m, int64_t n, float rate) override {
    inner_->relu_dropout_backward(y, mask, dy, dz, m, n, rate);
  }
  void loss_forward_backward(LossKind loss, ActivationKind act, const float* out,
                             const float* targets, float* probs, float* d_out, int64_t m, int64_t c,
                             StepCounters* counters, int64_t mean_rows) override {
    inner_->loss_forward_backward(loss, act, out, targets, probs, d_out, m, c, counters, mean_rows);
  }
  void optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                      StepCounters* counters) override {
    inner_->optimizer_step(config, params, counters);
  }
  void advance_batch(StepCounters* counters) override { inner_->advance_batch(counters); }
  bool has_conv2d() const override { return inner_->has_conv2d(); }
  void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                      int64_t m, ActivationKind act) override {
    inner_->conv2d_forward(s, x, w, b, y, m, act);
  }
  void conv2d_backward_input(const ConvShape& s, const float* dy, const float* w, float* dx,
                             int64_t m) override {
    inner_->conv2d_backward_input(s, dy, w, dx, m);
  }
  void conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw,
                               float* db, int64_t m) override {
    inner_->conv2d_backward_weights(s, x, dy, dw, db, m);
  }
  std::size_t pool2d_workspace_bytes(const PoolShape& s, int64_t m) override {
    return inner_->pool2d_workspace_bytes(s, m);
  }
  void pool2d_forward(const PoolShape& s, const float* x, float* y, void* workspace,
                      int64_t m) override {
    inner_->pool2d_forward(s, x, y, workspace, m);
  }
  void pool2d_backward(const PoolShape& s, const float* dy, const void* workspace, float* dx,
                       int64_t m) override {
    inner_->pool2d_backward(s, dy, workspace, dx, m);
  }
  bool has_batch_norm() const override { return inner_->has_batch_norm(); }
  void batchnorm_prepare(const BatchNormShape& s, int64_t m) override {
    inner_->batchnorm_prepare(s, m);
  }
  void batchnorm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, float* y, float* mean, float* variance,
                                  int64_t m) override {
    inner_->batchnorm_forward_training(s, x, gamma, beta, y, mean, variance, m);
  }
  void batchnorm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                   const float* beta, const float* mean, const float* variance,
                                   float* y, int64_t m) override {
    inner_->batchnorm_forward_inference(s, x, gamma, beta, mean, variance, y, m);
  }
  void batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                          const float* gamma, const float* mean, const float* variance, float* dx,
                          float* dgamma, float* dbeta, int64_t m) override {
    inner_->batchnorm_backward(s, x, dy, gamma, mean, variance, dx, dgamma, dbeta, m);
  }
  void batchnorm_update_moving(const BatchNormShape& s, const float* mean, const float* variance,
                               float* moving_mean, float* moving_variance,
                               double momentum) override {
    inner_->batchnorm_update_moving(s, mean, variance, moving_mean, moving_variance, momentum);
  }
  void set_scope(std::string_view name) override { inner_->set_scope(name); }

 protected:
  std::unique_ptr<Backend> inner_;
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
  void reset() { times_ = {}; }
  const PhaseTimes& times() const { return times_; }
  bool instrumented() const { return instrument_; }

  void upload(void* dst, const void* src, std::size_t bytes) override;
  void download(void* dst, const void* src, std::size_t bytes) override;
  void download_async(void* dst, const void* src, std::size_t bytes) override;
  void fill(float* dst, float value, int64_t n) override;
  void synchronize() override;
  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool use_graph) override;
  void gather_rows(const float* src, int64_t cols, const int32_t* indices, int64_t batch,
                   const StepCounters* counters, int64_t m, float* dst) override;
  void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k,
                     int64_t n, ActivationKind act) override;
  void dense_backward_weights(const float* x, const float* dy, float* dw, float* db, int64_t m,
                              int64_t k, int64_t n) override;
  void dense_backward_weights_update(const float* x, const float* dy, const ParamSlot& kernel,
                                     const ParamSlot* bias, int64_t m, int64_t k, int64_t n,
                                     const OptimizerConfig& config,
                                     const StepCounters* counters) override;
  void dense_backward_input(const float* dy, const float* w, float* dx, int64_t m, int64_t k,
                            int64_t n) override;
  void activation_forward(ActivationKind act, const float* x, float* y, int64_t m,
                          int64_t n) override;
  void activation_backward(ActivationKind act, const float* y, const float* dy, float* dx,
                           int64_t m, int64_t n) override;
  void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n, float rate,
                       uint64_t seed, uint32_t layer, const StepCounters* counters,
                       int64_t first_row) override;
  void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m, int64_t n,
                        float rate) override;
  void relu_dropout_backward(const float* y, const uint8_t* mask, const float* dy, float* dz,
                             int64_t m, int64_t n, float rate) override;
  void loss_forward_backward(LossKind loss, ActivationKind act, const float* out,
                             const float* targets, float* probs, float* d_out, int64_t m, int64_t c,
                             StepCounters* counters, int64_t mean_rows) override;
  void optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                      StepCounters* counters) override;
  void advance_batch(StepCounters* counters) override;
  void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                      int64_t m, ActivationKind act) override;
  void conv2d_backward_input(const ConvShape& s, const float* dy, const float* w, float* dx,
                             int64_t m) override;
  void conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw,
                               float* db, int64_t m) override;
  void pool2d_forward(const PoolShape& s, const float* x, float* y, void* workspace,
                      int64_t m) override;
  void pool2d_backward(const PoolShape& s, const float* dy, const void* workspace, float* dx,
                       int64_t m) override;
  void batchnorm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, float* y, float* mean, float* variance,
                                  int64_t m) override;
  void batchnorm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                   const float* beta, const float* mean, const float* variance,
                                   float* y, int64_t m) override;
  void batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                          const float* gamma, const float* mean, const float* variance, float* dx,
                          float* dgamma, float* dbeta, int64_t m) override;
  void batchnorm_update_moving(const BatchNormShape& s, const float* mean, const float* variance,
                               float* moving_mean, float* moving_variance,
                               double momentum) override;

 private:
  friend class TimedGraph;
  friend class TimingCollective;
  // Times `f`, the backend call `call`, into call_phase(call).
  template <class F>
  void timed(Call call, F&& f);

  bool instrument_ = false;
  bool enabled_ = true;
  bool in_step_ = false;
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
