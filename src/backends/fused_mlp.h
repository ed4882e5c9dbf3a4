// SMALL's training step as one kernel (issue 27): for a chain of Dense layers (relu or linear
// hidden activations, an optional Dropout after a hidden layer, a softmax output with a
// cross-entropy loss), the whole step (the batch's gather, forward, loss, backward and the
// optimizer's update) runs as one cooperative CUDA kernel with grid-wide barriers between its
// dependent stages (backends/cuda/fused_mlp.cu), in the arithmetic of kernel_math.h. This header
// is host code: what the step is (FusedMlpStep), which models qualify (fused_mlp_chain) and the
// launch's shape (fused_mlp_launch_shape), so that the rules are tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace crossover {

// The most Dense layers a fused step takes (its kernel's arguments hold them by value).
inline constexpr int kFusedMaxLayers = 8;
// Threads per block of the fused kernel: 8 warps, each tile of 32 x 32 outputs 4 per thread.
inline constexpr int kFusedThreads = 256;
inline constexpr int kFusedTile = 32;

// One Dense layer of the chain: y = act(x . kernel + bias), then (hidden layers) Dropout.
struct FusedDense {
  int64_t in = 0, out = 0;
  ActivationKind activation = ActivationKind::linear;  // hidden: relu, linear; last: softmax
  float dropout = 0.0f;        // the rate of the Dropout that follows (0: none)
  uint32_t dropout_layer = 0;  // that Dropout's index in the model: its Philox stream
  ParamSlot kernel, bias;      // bias.n == 0: no bias
};

// One training step of such a chain, as the kernel runs it. The data: x_rows (n, x_cols) and
// y_rows (n, y_cols) in device memory, the epoch's order `indices` (batch b's rows at
// b * batch, b = counters->batch_index); `rows` rows this step, the loss averaged over
// `mean_rows`; dropout drawn from `seed` and counters->step, as Dropout draws it.
struct FusedMlpStep {
  std::vector<FusedDense> layers;
  LossKind loss = LossKind::sparse_categorical_crossentropy;
  OptimizerConfig optimizer;
  const float* x_rows = nullptr;
  const float* y_rows = nullptr;
  int64_t x_cols = 0, y_cols = 0;
  const int32_t* indices = nullptr;
  int64_t batch = 0, rows = 0, mean_rows = 0;
  uint64_t seed = 0;
};

// The model as the rules see it, one entry per layer in order (a Sequential's stack).
struct FusedLayerView {
  enum class Kind { dense, dropout, reshape, other };  // reshape: Flatten, Input, Reshape
  Kind kind = Kind::other;
  std::string name;  // for the refusal's message
  ActivationKind activation = ActivationKind::linear;
  float rate = 0.0f;  // Dropout's
  bool trainable = true;
  int64_t in_width = 0, out_width = 0;
  const ParamSlot* kernel = nullptr;  // Dense's parameters (bias may be null: use_bias=False)
  const ParamSlot* bias = nullptr;
  // A layer called more than once (shared weights): its gradient is a sum over its calls, which
  // the fused kernel does not make.
  bool shared = false;
};
struct FusedModelView {
  std::vector<FusedLayerView> layers;
  bool chain = true;  // each layer reads the one before (a Sequential, or a functional chain)
  LossKind loss = LossKind::sparse_categorical_crossentropy;
  bool from_logits = false;
  OptimizerConfig optimizer;
  int ranks = 1;
  bool sample_weights = false;
  int extra_metrics = 0;  // compiled metrics beyond the loss's accuracy
  bool fp32 = true;       // the dense GEMMs' precision is fp32 (not tf32, not bf16)
  // A weight has a regularizer (Keras's kernel_regularizer), or a layer's output (its
  // activity_regularizer, an add_loss term): terms the fused step does not compute.
  bool regularized = false;
};

// "" and `step`'s layers, loss and optimizer filled when the model is eligible; otherwise one
// line saying why not (the first rule it breaks). The data fields of `step` are left alone.
std::string fused_mlp_chain(const FusedModelView& model, FusedMlpStep& step);

// Bytes the step's parameters, their gradients and the optimizer's two slots take (three with
// Adam's amsgrad): what must stay in the L2 cache for the fused step to pay.
int64_t fused_mlp_state_bytes(const FusedMlpStep& step);

// The most independent work items any stage of the step has (32 x 32 tiles of a product, or
// groups of kFusedThreads parameters of the update): more blocks than this would only wait.
int64_t fused_mlp_work_items(const FusedMlpStep& step);

struct FusedLaunchShape {
  int blocks = 0, threads = 0;
};
// A cooperative launch must have every block resident at once: at most sms * blocks_per_sm
// blocks, and no more than the work has items; {0, 0} when no block fits (blocks_per_sm < 1).
FusedLaunchShape fused_mlp_launch_shape(int sms, int blocks_per_sm, int64_t work_items);

// How many slices of its depth (split-K) a product of `tiles` 32 x 32 output tiles and `depth`
// takes on `blocks` blocks: enough to give every block an item, at most one per 32-deep chunk,
// at least 1.
int fused_mlp_slices(int64_t depth, int64_t tiles, int blocks);

// What the fused step runs at on one GPU, as `crossover calibrate --device cuda:N` measures it with
// the fused kernel's own code (measure_fused_step_rates, backends/cuda_info.h), saved in the
// profile (perf/profile.h) and read by the cost model (perf/cost_model.h, predict_fused_step).
struct FusedStepRates {
  double grid_sync_seconds = 0;  // one grid-wide barrier of a full cooperative grid of the kernel
  // One block's rate through the kernel's kFusedTile x kFusedTile output tiles (2 * 32 * 32 *
  // depth FLOPs per tile over its seconds), every resident block busy on a tile of its own.
  double block_flops_per_second = 0;
  int blocks_per_sm = 0;  // blocks of the fused kernel resident on one multiprocessor
  int64_t l2_bytes = 0;   // the device's L2 cache: the fused step's state must fit in it
};

// Why a device cannot run `step` fused: no cooperative launch, no block resident, or state
// larger than its L2 (l2_bytes); "" when it can.
std::string fused_mlp_device_problem(const FusedMlpStep& step, bool cooperative, int blocks_per_sm,
                                     int64_t l2_bytes);

}  // namespace crossover
