// The gradient exchange between backward and the optimizer (nn/model/exchange.h).
#include "nn/model/exchange.h"

namespace crossover {

namespace {

// Data parallelism over a Collective's ranks: the whole gradient summed after backward.
class AllreduceExchange final : public GradientExchange {
 public:
  explicit AllreduceExchange(Collective& c) : c_(c) {}
  int ranks() const override { return c_.size(); }
  int rank() const override { return c_.rank(); }
  bool backward_may_update() const override { return false; }

  // The CPU's memory is the host's: the collective (MPI) sums it. A GPU's is summed by the
  // collective's device side (NCCL) on the step's stream, inside the step's graph (compile made
  // sure there is one).
  void sum_gradients(Backend& backend, float* grads, int64_t n) override {
    if (host_memory(backend))
      c_.allreduce_sum(grads, n);
    else
      backend.allreduce_sum(grads, n, *c_.on_device());
  }

  void share_parameters(Backend& backend, void* data, std::size_t bytes, int64_t& step) override {
    backend.synchronize();
    if (host_memory(backend)) {
      c_.broadcast(data, bytes, 0);
      backend.host_wrote(data, bytes);
    } else {
      backend.broadcast(data, bytes, 0, *c_.on_device());
      backend.synchronize();
    }
    c_.broadcast(&step, sizeof step, 0);
  }

  void sum(double* values, int n) override { c_.allreduce_sum(values, n); }

 private:
  // Whether the backend's memory is the host's, which the collective sums itself (the CPU's).
  static bool host_memory(const Backend& backend) { return backend.device_name() == "cpu"; }
  Collective& c_;
};

}  // namespace

std::unique_ptr<GradientExchange> make_gradient_exchange(Collective* collective) {
  if (!collective || collective->size() < 2) return std::make_unique<GradientExchange>();
  return std::make_unique<AllreduceExchange>(*collective);
}

}  // namespace crossover
