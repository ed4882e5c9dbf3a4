#include "perf/recording.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace crossover::perf {

const char* call_name(Call c) {
  switch (c) {
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price) \
  case Call::name:                                                                        \
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

// What each step operation records into its BackendCall `r`: its `record` column in
// backends/backend_ops.h, from its parameters by name.
#define CROSSOVER_UNPAREN(...) __VA_ARGS__
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, recorded, price) \
  void RecordingBackend::name parameters {                                                  \
    unused_arguments arguments;                                                             \
    [[maybe_unused]] BackendCall& r = record(Call::name);                                   \
    CROSSOVER_UNPAREN recorded;                                                             \
  }
#include "backends/backend_ops.h"
#undef CROSSOVER_UNPAREN

std::unique_ptr<Backend::StepGraph> RecordingBackend::capture(std::function<void()> enqueue, bool) {
  return std::make_unique<RecordedStep>(*this, std::move(enqueue));
}

std::size_t RecordingBackend::pool2d_workspace_bytes(const PoolShape& s, int64_t m) {
  // Room for one index per output element, as a real backend would need at most.
  return static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels) * sizeof(int32_t);
}

std::size_t RecordingBackend::rnn_workspace_bytes(const RnnShape& s, int64_t m) {
  // The gates and states of every step, as the CPU's oneDNN keeps them, and the output sequence.
  const int64_t per_step = m * s.units * (rnn_gates(s.cell) + 2);
  return static_cast<std::size_t>(s.steps * per_step + rnn_output_size(s, m)) * sizeof(float);
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
