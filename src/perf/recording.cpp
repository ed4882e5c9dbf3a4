#include "perf/recording.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace crossover::perf {

const char* call_name(Call c) {
  switch (c) {
    case Call::upload:
      return "upload";
    case Call::download:
      return "download";
    case Call::fill:
      return "fill";
    case Call::synchronize:
      return "synchronize";
    case Call::gather_rows:
      return "gather_rows";
    case Call::dense_forward:
      return "dense_forward";
    case Call::dense_backward_weights:
      return "dense_backward_weights";
    case Call::dense_backward_weights_update:
      return "dense_backward_weights_update";
    case Call::dense_backward_input:
      return "dense_backward_input";
    case Call::activation_forward:
      return "activation_forward";
    case Call::activation_backward:
      return "activation_backward";
    case Call::dropout_forward:
      return "dropout_forward";
    case Call::dropout_backward:
      return "dropout_backward";
    case Call::relu_dropout_backward:
      return "relu_dropout_backward";
    case Call::loss_forward_backward:
      return "loss_forward_backward";
    case Call::optimizer_step:
      return "optimizer_step";
    case Call::advance_batch:
      return "advance_batch";
    case Call::conv2d_forward:
      return "conv2d_forward";
    case Call::conv2d_backward_input:
      return "conv2d_backward_input";
    case Call::conv2d_backward_weights:
      return "conv2d_backward_weights";
    case Call::pool2d_forward:
      return "pool2d_forward";
    case Call::pool2d_backward:
      return "pool2d_backward";
    case Call::batchnorm_forward_training:
      return "batchnorm_forward_training";
    case Call::batchnorm_forward_inference:
      return "batchnorm_forward_inference";
    case Call::batchnorm_backward:
      return "batchnorm_backward";
    case Call::batchnorm_update_moving:
      return "batchnorm_update_moving";
    case Call::allreduce:
      return "allreduce";
  }
  return "?";
}

// Replaying a recorded step makes its calls again, recorded (a CUDA graph would replay the
// captured kernels; what matters here is the calls, and enqueue makes the same ones each time).
class RecordedStep final : public Backend::StepGraph {
 public:
  RecordedStep(RecordingBackend& owner, std::function<void()> enqueue)
      : owner_(owner), enqueue_(std::move(enqueue)) {}
  void replay() override {
    owner_.in_step_ = true;
    try {
      enqueue_();
    } catch (...) {
      owner_.in_step_ = false;
      throw;
    }
    owner_.in_step_ = false;
    ++owner_.replays_;
  }

 private:
  RecordingBackend& owner_;
  std::function<void()> enqueue_;
};

RecordingBackend::RecordingBackend(std::string device_name, bool fuses_weight_update)
    : device_name_(std::move(device_name)), fuses_weight_update_(fuses_weight_update) {}

RecordingBackend::~RecordingBackend() {
  for (const auto& [p, bytes] : reservations_) munmap(p, bytes);
}

void* RecordingBackend::allocate(std::size_t bytes) {
  // Address space, not memory: reserved, never committed, and faulting if touched.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + page - 1) / page * page;
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw Error("recording backend",
                "cannot reserve " + std::to_string(bytes) + " bytes of address space");
  reservations_[p] = size;
  return p;
}

void RecordingBackend::release(void* p) noexcept {
  auto it = reservations_.find(p);
  if (it == reservations_.end()) return;
  munmap(it->first, it->second);
  reservations_.erase(it);
}

BackendCall& RecordingBackend::record(Call c) {
  if (!in_step_) {
    discard_ = {};
    return discard_;
  }
  BackendCall& r = calls_.emplace_back();
  r.call = c;
  r.scope = scope_;
  return r;
}

void RecordingBackend::upload(void*, const void*, std::size_t bytes) {
  record(Call::upload).bytes = static_cast<int64_t>(bytes);
}
void RecordingBackend::download(void* host_dst, const void*, std::size_t bytes) {
  std::memset(host_dst, 0, bytes);
  record(Call::download).bytes = static_cast<int64_t>(bytes);
}
void RecordingBackend::download_async(void* host_dst, const void* src, std::size_t bytes) {
  download(host_dst, src, bytes);
}
void RecordingBackend::fill(float*, float, int64_t n) { record(Call::fill).n = n; }
void RecordingBackend::synchronize() { record(Call::synchronize); }

std::unique_ptr<Backend::StepGraph> RecordingBackend::capture(std::function<void()> enqueue, bool) {
  return std::make_unique<RecordedStep>(*this, std::move(enqueue));
}

void RecordingBackend::gather_rows(const float*, int64_t cols, const int32_t*, int64_t,
                                   const StepCounters*, int64_t m, float*) {
  BackendCall& r = record(Call::gather_rows);
  r.m = m;
  r.n = cols;
}
void RecordingBackend::dense_forward(const float*, const float*, const float* b, float*, int64_t m,
                                     int64_t k, int64_t n, ActivationKind act) {
  BackendCall& r = record(Call::dense_forward);
  r.m = m, r.k = k, r.n = n;
  r.act = act;
  r.bias = b != nullptr;
}
void RecordingBackend::dense_backward_weights(const float*, const float*, float*, float* db,
                                              int64_t m, int64_t k, int64_t n) {
  BackendCall& r = record(Call::dense_backward_weights);
  r.m = m, r.k = k, r.n = n;
  r.bias = db != nullptr;
}
void RecordingBackend::dense_backward_weights_update(const float*, const float*,
                                                     const ParamSlot& kernel, const ParamSlot* bias,
                                                     int64_t m, int64_t k, int64_t n,
                                                     const OptimizerConfig& config,
                                                     const StepCounters*) {
  BackendCall& r = record(Call::dense_backward_weights_update);
  r.m = m, r.k = k, r.n = n;
  r.bias = bias != nullptr;
  r.optimizer = config;
  r.segments.push_back(kernel.n);
  if (bias) r.segments.push_back(bias->n);
}
void RecordingBackend::dense_backward_input(const float*, const float*, float*, int64_t m,
                                            int64_t k, int64_t n) {
  BackendCall& r = record(Call::dense_backward_input);
  r.m = m, r.k = k, r.n = n;
}
void RecordingBackend::activation_forward(ActivationKind act, const float* x, float* y, int64_t m,
                                          int64_t n) {
  BackendCall& r = record(Call::activation_forward);
  r.m = m, r.n = n;
  r.act = act;
  r.in_place = x == y;
}
void RecordingBackend::activation_backward(ActivationKind act, const float*, const float* dy,
                                           float* dx, int64_t m, int64_t n) {
  BackendCall& r = record(Call::activation_backward);
  r.m = m, r.n = n;
  r.act = act;
  r.in_place = dx == dy;
}
void RecordingBackend::dropout_forward(const float*, float*, uint8_t*, int64_t m, int64_t n, float,
                                       uint64_t, uint32_t, const StepCounters*, int64_t) {
  BackendCall& r = record(Call::dropout_forward);
  r.m = m, r.n = n;
}
void RecordingBackend::dropout_backward(const float*, const uint8_t*, float*, int64_t m, int64_t n,
                                        float) {
  BackendCall& r = record(Call::dropout_backward);
  r.m = m, r.n = n;
}
void RecordingBackend::relu_dropout_backward(const float*, const uint8_t*, const float*, float*,
                                             int64_t m, int64_t n, float) {
  BackendCall& r = record(Call::relu_dropout_backward);
  r.m = m, r.n = n;
}
void RecordingBackend::loss_forward_backward(LossKind loss, ActivationKind act, const float*,
                                             const float*, float*, float* d_out, int64_t m,
                                             int64_t c, StepCounters*, int64_t) {
  BackendCall& r = record(Call::loss_forward_backward);
  r.m = m, r.n = c;
  r.loss = loss;
  r.act = act;
  r.gradient = d_out != nullptr;
}
void RecordingBackend::optimizer_step(const OptimizerConfig& config,
                                      std::span<const ParamSlot> params, StepCounters*) {
  BackendCall& r = record(Call::optimizer_step);
  r.optimizer = config;
  for (const ParamSlot& p : params) r.segments.push_back(p.n);
}
void RecordingBackend::advance_batch(StepCounters*) { record(Call::advance_batch); }

void RecordingBackend::conv2d_forward(const ConvShape& s, const float*, const float*,
                                      const float* b, float*, int64_t m, ActivationKind act) {
  BackendCall& r = record(Call::conv2d_forward);
  r.conv = s, r.m = m, r.act = act, r.bias = b != nullptr;
}
void RecordingBackend::conv2d_backward_input(const ConvShape& s, const float*, const float*, float*,
                                             int64_t m) {
  BackendCall& r = record(Call::conv2d_backward_input);
  r.conv = s, r.m = m;
}
void RecordingBackend::conv2d_backward_weights(const ConvShape& s, const float*, const float*,
                                               float*, float* db, int64_t m) {
  BackendCall& r = record(Call::conv2d_backward_weights);
  r.conv = s, r.m = m, r.bias = db != nullptr;
}
std::size_t RecordingBackend::pool2d_workspace_bytes(const PoolShape& s, int64_t m) {
  // Room for one index per output element, as a real backend would need at most.
  return static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels) * sizeof(int32_t);
}
void RecordingBackend::pool2d_forward(const PoolShape& s, const float*, float*, void* workspace,
                                      int64_t m) {
  BackendCall& r = record(Call::pool2d_forward);
  r.pool = s, r.m = m, r.gradient = workspace != nullptr;
}
void RecordingBackend::pool2d_backward(const PoolShape& s, const float*, const void*, float*,
                                       int64_t m) {
  BackendCall& r = record(Call::pool2d_backward);
  r.pool = s, r.m = m;
}
void RecordingBackend::batchnorm_forward_training(const BatchNormShape& s, const float*,
                                                  const float*, const float*, float*, float*,
                                                  float*, int64_t m) {
  BackendCall& r = record(Call::batchnorm_forward_training);
  r.norm = s, r.m = m;
}
void RecordingBackend::batchnorm_forward_inference(const BatchNormShape& s, const float*,
                                                   const float*, const float*, const float*,
                                                   const float*, float*, int64_t m) {
  BackendCall& r = record(Call::batchnorm_forward_inference);
  r.norm = s, r.m = m;
}
void RecordingBackend::batchnorm_backward(const BatchNormShape& s, const float*, const float*,
                                          const float*, const float*, const float*, float*, float*,
                                          float*, int64_t m) {
  BackendCall& r = record(Call::batchnorm_backward);
  r.norm = s, r.m = m;
}
void RecordingBackend::batchnorm_update_moving(const BatchNormShape& s, const float*, const float*,
                                               float*, float*, double) {
  BackendCall& r = record(Call::batchnorm_update_moving);
  r.norm = s, r.m = 1;
}

// ---- RecordingCollective ----------------------------------------------------------------------
RecordingCollective::RecordingCollective(int ranks) : ranks_(ranks) {
  if (ranks < 1) throw Error("cost model", "a step needs at least one rank");
}

void RecordingCollective::allreduce_sum(float*, int64_t n) {
  if (!recorder_) return;
  BackendCall& r = recorder_->record(Call::allreduce);
  r.n = n;
  r.bytes = n * static_cast<int64_t>(sizeof(float));
  r.ranks = ranks_;
}

std::string RecordingCollective::description() const {
  return std::to_string(ranks_) + " ranks (recorded)";
}

}  // namespace crossover::perf
