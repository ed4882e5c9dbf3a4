#include "perf/recording.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace crossover::perf {

const char* call_name(Call c) {
  switch (c) {
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase) \
  case Call::name:                                                         \
    return #name;
#include "backends/backend_ops.h"
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

// What each step operation records into its BackendCall `r`, from its parameters as
// backends/backend_ops.h names them. An operation without its line here does not compile.
#define RECORD_upload r.bytes = static_cast<int64_t>(bytes)
#define RECORD_download std::memset(host_dst, 0, bytes), r.bytes = static_cast<int64_t>(bytes)
// The download it is: the op list prices them alike.
#define RECORD_download_async RECORD_download, r.call = Call::download
#define RECORD_fill r.n = n
#define RECORD_synchronize
#define RECORD_gather_rows r.m = m, r.n = cols
#define RECORD_dense_forward r.m = m, r.k = k, r.n = n, r.act = act, r.bias = b != nullptr
#define RECORD_dense_backward_weights r.m = m, r.k = k, r.n = n, r.bias = db != nullptr
#define RECORD_dense_backward_input r.m = m, r.k = k, r.n = n
#define RECORD_conv2d_forward r.conv = s, r.m = m, r.act = act, r.bias = b != nullptr
#define RECORD_conv2d_backward_input r.conv = s, r.m = m
#define RECORD_conv2d_backward_weights r.conv = s, r.m = m, r.bias = db != nullptr
#define RECORD_conv2d_transpose_forward r.conv = s, r.m = m, r.bias = b != nullptr
#define RECORD_conv2d_transpose_backward_input r.conv = s, r.m = m
#define RECORD_conv2d_transpose_backward_weights r.conv = s, r.m = m, r.bias = db != nullptr
#define RECORD_pool2d_forward r.pool = s, r.m = m, r.gradient = workspace != nullptr
#define RECORD_pool2d_backward r.pool = s, r.m = m
#define RECORD_upsample2d_forward r.pool = s, r.m = m
#define RECORD_upsample2d_backward r.pool = s, r.m = m
#define RECORD_batchnorm_forward_training r.norm = s, r.m = m
#define RECORD_batchnorm_forward_inference r.norm = s, r.m = m
#define RECORD_batchnorm_backward r.norm = s, r.m = m
#define RECORD_batchnorm_update_moving r.norm = s, r.m = 1
#define RECORD_layernorm_forward \
  r.m = rows, r.n = n, r.bias = beta != nullptr, r.gradient = mean != nullptr
#define RECORD_layernorm_backward r.m = rows, r.n = n, r.bias = dgamma || dbeta
#define RECORD_activation_forward r.m = m, r.n = n, r.act = act, r.in_place = x == y
#define RECORD_activation_backward r.m = m, r.n = n, r.act = act, r.in_place = dx == dy
#define RECORD_add r.n = n
#define RECORD_copy_columns r.m = rows, r.n = cols
#define RECORD_binary_forward r.m = s.rows, r.n = s.cols
#define RECORD_binary_backward \
  r.m = s.rows, r.n = s.cols, r.gradient = da != nullptr || db != nullptr
#define RECORD_row_sum r.m = rows, r.n = cols
#define RECORD_permute r.m = m, r.n = permute_values(s)
#define RECORD_dropout_forward r.m = m, r.n = n
#define RECORD_dropout_backward r.m = m, r.n = n
#define RECORD_relu_dropout_backward r.m = m, r.n = n
#define RECORD_noise_forward r.m = m, r.n = n
#define RECORD_loss_forward_backward \
  r.m = m, r.n = c, r.loss = loss.kind, r.act = act, r.gradient = d_out != nullptr
#define RECORD_metric_sum r.m = m, r.n = c, r.k = target_cols
#define RECORD_optimizer_step \
  r.optimizer = config;       \
  for (const ParamSlot& p : params) r.segments.push_back(p.n)
#define RECORD_dense_backward_weights_update                                 \
  r.m = m, r.k = k, r.n = n, r.bias = bias != nullptr, r.optimizer = config; \
  r.segments.push_back(kernel.n);                                            \
  if (bias) r.segments.push_back(bias->n)
#define RECORD_advance_batch

#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase) \
  void RecordingBackend::name parameters {                                 \
    unused_arguments arguments;                                            \
    [[maybe_unused]] BackendCall& r = record(Call::name);                  \
    RECORD_##name;                                                         \
  }
#include "backends/backend_ops.h"

std::unique_ptr<Backend::StepGraph> RecordingBackend::capture(std::function<void()> enqueue, bool) {
  return std::make_unique<RecordedStep>(*this, std::move(enqueue));
}

std::size_t RecordingBackend::pool2d_workspace_bytes(const PoolShape& s, int64_t m) {
  // Room for one index per output element, as a real backend would need at most.
  return static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels) * sizeof(int32_t);
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
