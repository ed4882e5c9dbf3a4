// The gradient exchange (one part of the model; docs/ARCHITECTURE.md "The model as parts"): what
// happens to a step's gradients between backward and the optimizer, and what the ranks share
// besides. One process: nothing (the gradients are the batch's), and backward may update each
// layer as its gradient is made. Ranks (compile's Collective): every rank's gradients summed
// (MPI on the CPU's host memory, NCCL on a GPU's), after the whole backward pass. Overlapping the
// sum with backward would be a third exchange, each layer's gradients sent as backward makes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backends/backend.h"
#include "nn/collective.h"

namespace crossover {

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;
  virtual int ranks() const { return 1; }
  virtual int rank() const { return 0; }
  // Whether backward may update each layer with its gradient as it is made (the fused update):
  // only where no other rank's gradients are still to come.
  virtual bool backward_may_update() const { return true; }
  // The step's gradients (n floats at grads, on `backend`) summed with the other ranks'.
  virtual void sum_gradients(Backend& /*backend*/, float* /*grads*/, int64_t /*n*/) {}
  // Every rank starts from rank 0's parameters and optimizer state (`bytes` at `data`) and
  // optimizer step: identical by the seed already, unless the ranks loaded different files.
  virtual void share_parameters(Backend& /*backend*/, void* /*data*/, std::size_t /*bytes*/,
                                int64_t& /*step*/) {}
  // n host values added over every rank (loss, accuracy and metric sums, sample counts).
  virtual void sum(double* /*values*/, int /*n*/) {}
};

// The exchange for compile's collective: none (null, or one rank) is the one process's.
std::unique_ptr<GradientExchange> make_gradient_exchange(Collective* collective);

}  // namespace crossover
