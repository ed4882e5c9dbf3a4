// What a training step asks of its backend, recorded call by call.
//
// The cost model's op list is made of these records (perf/cost_model.h prices each call in one
// table), taken from the model's own step: Sequential::trace_training_step runs one step exactly
// as fit runs each step, on a RecordingBackend installed with CompileOptions::make_backend (and,
// for a GPU's naive mode, wrapped in the NaiveBackend, whose copies and sync are then recorded
// too). Nothing in perf/ restates the step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "nn/collective.h"

namespace crossover::perf {

// Every Backend call that does work on the device: one value per step operation of
// backends/backend_ops.h, in its order, then the ranks' sum.
enum class Call {
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price) name,
#include "backends/backend_ops.h"
  // Not a Backend call: the gradients summed across the ranks (Collective::allreduce_sum), made
  // between the backward pass and the optimizer step when training over ranks. Recorded by a
  // RecordingCollective into the same list, so that the step's op list holds it in its place.
  allreduce,
};
// "dense_forward", ... (the Backend method's name).
const char* call_name(Call c);

// One call, with the arguments its cost depends on (no pointers).
struct BackendCall {
  Call call = Call::synchronize;
  std::string scope;  // the model's set_scope when it was made: "dense_1", "batch x", "loss", ...
  // The shape, as backend.h names it: dense_*: x(m, k) . w(k, n); gather_rows: m rows of n
  // columns; activation_*, dropout_*, loss_forward_backward: (m, n) (n = classes for the loss);
  // fill: n elements.
  int64_t m = 0, k = 0, n = 0;
  ActivationKind act = ActivationKind::linear;  // dense_forward's epilogue, activation_*, the
                                                // loss's output activation
  bool bias = false;      // dense_forward: adds a bias; dense_backward_weights: a bias gradient
  bool in_place = false;  // activation_*: the output is the input (y == x, dx == dy)
  LossKind loss = LossKind::sparse_categorical_crossentropy;
  bool gradient = false;          // loss_forward_backward: writes d_out
  OptimizerConfig optimizer;      // optimizer_step, dense_backward_weights_update
  std::vector<int64_t> segments;  // the parameter tensors they update: each one's elements
  int64_t bytes = 0;              // upload, download, allreduce (n floats: 4 n)
  int ranks = 1;                  // allreduce: the ranks summed over
  ConvShape conv;                 // conv2d_* (m samples); bias as for dense
  PoolShape pool;                 // pool2d_* (m samples); gradient: forward in training
  BatchNormShape norm;            // batchnorm_* (m samples)
  RnnShape rnn;                   // rnn_* (m sequences); gradient: forward in training
};

// A backend that computes nothing and records every call made while a captured step is replayed
// (Backend::capture, then replay: exactly the calls of one step, not the setting up around it).
// Its memory is address space only, reserved and inaccessible: a model of any width costs no
// memory, and anything that read backend memory directly would fault rather than see made-up
// values. upload does nothing; download and download_async write zeros.
class RecordingBackend;

// The ranks of a training step as the cost model prices them: a Collective of `ranks` ranks
// (this process is rank 0) that sums nothing and records each float allreduce made inside a
// replay into the recorder's list (record_into) as Call::allreduce (n floats, the scope, the
// ranks). The other calls (the epoch's loss sums, the start's broadcast) are outside the step
// and do nothing.
class RecordingCollective final : public Collective {
 public:
  explicit RecordingCollective(int ranks);
  void record_into(RecordingBackend* recorder) { recorder_ = recorder; }
  int rank() const override { return 0; }
  int size() const override { return ranks_; }
  void allreduce_sum(float* data, int64_t n) override;
  void allreduce_sum(double*, int64_t) override {}
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  std::string description() const override;

 private:
  RecordingBackend* recorder_ = nullptr;
  int ranks_ = 1;
};

class RecordingBackend final : public Backend {
 public:
  // fuses_weight_update: what the device recorded for answers (the CPU fuses, a GPU does not), so
  // that the model makes the calls it makes there.
  explicit RecordingBackend(std::string device_name = "cpu", bool fuses_weight_update = true);
  ~RecordingBackend() override;
  RecordingBackend(const RecordingBackend&) = delete;
  RecordingBackend& operator=(const RecordingBackend&) = delete;

  // The calls of every replay so far, in order.
  const std::vector<BackendCall>& calls() const { return calls_; }
  int64_t replays() const { return replays_; }

  std::string device_name() const override { return device_name_; }
  // Unbounded: the recorder reserves address space, never memory, so a model of any width can be
  // recorded (the device it is priced for is not asked).
  MemoryAvailable available_memory() const override {
    return {std::numeric_limits<std::size_t>::max(), "the recorder (address space only)"};
  }
  void* allocate(std::size_t bytes) override;
  void release(void* p) noexcept override;
  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool use_graph) override;
  bool fuses_weight_update() const override { return fuses_weight_update_; }
  bool has_conv2d() const override { return true; }      // the CPU and CUDA backends both have them
  bool has_batch_norm() const override { return true; }  // both backends have it too
  bool has_rnn() const override { return true; }  // priced for a GPU too, which measures none yet
  std::size_t rnn_workspace_bytes(const RnnShape& s, int64_t m) override;
  std::size_t pool2d_workspace_bytes(const PoolShape& s, int64_t m) override;
  void batchnorm_prepare(const BatchNormShape&, int64_t) override {}
  // Every step operation, recorded (recording.cpp says what each one keeps).
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price) \
  void name parameters override;
#include "backends/backend_ops.h"
  void set_scope(std::string_view name) override { scope_ = name; }

 private:
  friend class RecordedStep;
  friend class RecordingCollective;
  // A call of kind `c` with the current scope, kept when inside a replay.
  BackendCall& record(Call c);

  std::string device_name_;
  bool fuses_weight_update_ = true;
  std::string scope_;
  bool in_step_ = false;
  int64_t replays_ = 0;
  std::vector<BackendCall> calls_;
  BackendCall discard_;                        // what record() hands out outside a replay
  std::map<void*, std::size_t> reservations_;  // address -> bytes reserved
};

}  // namespace crossover::perf
