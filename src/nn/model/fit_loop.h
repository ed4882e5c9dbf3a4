// The fit loop (one part of the model; docs/ARCHITECTURE.md "The model as parts"): one call of
// fit, the epochs of captured training steps over the training rows, with the callbacks, the
// progress line, Ctrl-C, validation and the History it returns. It holds what one fit needs (its
// rows on the device, how its batches split among the ranks, its captured steps, the epoch's
// order of the rows) and runs the model's step (Sequential::Impl::train_step); it runs no layer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/model/impl.h"

namespace crossover {

class FitLoop {
 public:
  // x, y (and the sample or class weights) checked and put where the steps read them, the plan
  // for the batch size and the ranks' parameters shared. The model outlives the loop.
  FitLoop(Sequential& model, Sequential::Impl& m, const Tensor& x, const Tensor& y, FitOptions o);
  History run();

 private:
  using Shard = Sequential::Impl::Shard;
  // How an epoch's steps split the training rows: `full` batches of `batch` rows and a last one
  // of `rest`; with ranks, this rank's rows of each (its plan sized for the largest share,
  // ceil(batch / ranks)).
  struct BatchLayout {
    int64_t batch = 0, full = 0, rest = 0, steps = 0, local_batch = 0;
    RowRange full_rows, rest_rows;
    Shard full_shard, rest_shard;
  };
  static BatchLayout layout_of(int64_t batch, int64_t n_train, int rank, int ranks);

  // The training steps of the full batches and of the last, partial one, captured once (again
  // after a callback changed what a step does: Impl::graphs_dirty).
  void capture();
  // The epoch's order of the training rows onto the device, and the training counters reset for
  // an epoch that starts at batch `first`. With ranks, the order as this rank gathers it: batch
  // s's rows at s * local_batch.
  void start_epoch(int64_t first);
  // The epoch's steps, with the batch hooks and the progress bar; how many ran (fewer when a
  // hook stopped training or Ctrl-C was pressed: the epoch then ends after that step).
  int64_t run_steps(const EpochSteps::Epoch& part, BatchHooks& hooks, ProgressBar& bar,
                    bool interactive, bool stop_on_interrupt);
  // The epoch's record and its logs' values (loss and metrics over every rank's rows), with the
  // validation's when it is due after this epoch.
  EpochRecord finish_epoch(int epoch, int64_t done, double seconds, BatchHooks& test_hooks,
                           std::vector<std::pair<std::string, double>>& values);

  Sequential& model_;
  Sequential::Impl& m_;
  FitOptions o_;
  // class_weight's sample weights (empty without it): the training rows' weights point into it.
  Tensor class_weights_;
  Sequential::Impl::FitData data_;
  uint64_t seed_ = 0;
  BatchLayout layout_;
  Sequential::Impl::Plan* plan_ = nullptr;
  std::unique_ptr<Backend::StepGraph> full_, rest_;
  std::vector<int32_t> order_, local_order_;
};

}  // namespace crossover
