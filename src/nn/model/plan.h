// The step plan (one part of the model; docs/ARCHITECTURE.md "The model as parts"): the buffers
// of each batch size, and the forward and backward passes over the graph that use them. The first
// pass at a batch size fixes every activation and gradient buffer for it; a step then allocates
// nothing. The plan reads the model's other parts (the graph, the layers' states, the parameter
// arena) and never changes them, except the gradients backward writes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "nn/device_memory.h"
#include "nn/layers/kind.h"
#include "nn/model/graph.h"
#include "nn/model/parameters.h"

namespace crossover {

// The buffers of one batch size.
struct StepBuffers {
  int64_t batch = 0;
  DeviceBlock input, targets;
  // The batch's sample weights (batch floats): allocated by the first fit or evaluate with
  // sample weights (Sequential::Impl::with_weights), empty otherwise.
  DeviceBlock weights;
  // The gradients of the backward pass, each (batch, the widest layer): as many as it ever has
  // in use at once (gradient_buffers), two for a stack of layers. The loss writes into the first
  // (with several outputs, output j's loss into the j-th).
  std::vector<DeviceBlock> grads;
  std::vector<DeviceBlock> outputs;  // per layer (empty block when the layer aliases)
  // Per dropout layer; per max-pooling layer, its workspace; per batch normalization, the
  // batch's mean and variance (channels each) that its backward pass reads.
  std::vector<DeviceBlock> masks;
  // The model's output (batch, outputs) that the compiled metrics read, written by the loss;
  // empty without metrics beyond "accuracy", or with from_logits (they read the logits).
  DeviceBlock predictions;
  // training_forward's outputs with the final activation applied (batch, outputs), when that
  // activation is not linear: allocated by its first call at this batch size.
  DeviceBlock activated;
  // Several outputs: each head's targets (batch, its target columns), copied from `targets`
  // (the packed row) before its loss; and its `predictions` as above (with metrics beyond
  // "accuracy").
  std::vector<DeviceBlock> head_targets, head_predictions;
};

// The widths (floats per sample) of the buffers the loss heads read and write, besides the
// layers': the input row, the target row, the predictions (0: none), and per head of several
// outputs its targets and its predictions (0: none).
struct BufferWidths {
  int64_t input = 0, targets = 0, predictions = 0;
  std::vector<int64_t> head_targets, head_predictions;
};

// An output that a loss reads: its layer, and whether the loss op applies that layer's
// activation (the layer defers it: forward leaves it out in training, backward starts from the
// gradient with respect to the pre-activation output). Backward starts from one gradient per
// loss output, in this order: plan.grads[j] for the j-th.
struct LossOutput {
  int layer = 0;
  bool deferred = false;
};

// What the plan reads of the model: its parts, owned by the model, at fixed addresses.
struct PlanInputs {
  const std::unique_ptr<Backend>* backend = nullptr;
  const ModelGraph* graph = nullptr;
  const std::vector<LayerState>* states = nullptr;
  const ParameterArena* arena = nullptr;
  // Per layer: it trains (Layer::trainable as compiled); its output needs a gradient.
  const std::vector<char>* trains = nullptr;
  const std::vector<bool>* needs_grad = nullptr;
  const OptimizerConfig* optimizer = nullptr;  // a fused update's (backward with `update`)
};

class StepPlan {
 public:
  explicit StepPlan(PlanInputs model) : model_(model) {}

  // The buffers of this batch size, allocated at its first use (after a check that the device
  // has the memory) for these widths and these loss outputs.
  StepBuffers& for_batch(int64_t batch, const BufferWidths& widths,
                         std::span<const LossOutput> outputs);
  // Those of a batch size used before, or null.
  StepBuffers* find(int64_t batch);
  // Every batch size's buffers freed (the model's shapes or memory changed).
  void clear() { plans_.clear(); }

  // The output of layer i during a pass (dropout aliases its input outside training; Flatten
  // and Reshape always).
  float* layer_output(const StepBuffers& plan, std::size_t i, bool training) const;
  // The last layer's output (the model's, with one output) during a pass.
  float* final_output(const StepBuffers& plan, bool training) const {
    return layer_output(plan, model_.graph->size() - 1, training);
  }
  // Layer i's k-th input.
  const float* layer_input(const StepBuffers& plan, std::size_t i, bool training,
                           std::size_t k = 0) const;

  // Forward over m rows of plan.input. In training the deferred activations (`outputs`) are
  // left to the loss op; with `final_activation` (predict) every activation is applied.
  // first_row: the global batch row of plan.input's row 0 (dropout draws by the global row).
  // loss_rows > 0 (a pass whose loss is asked for: fit's and evaluate's steps; the global
  // batch's rows): each layer's activity regularizer (Layer::activity, divided by loss_rows as
  // Keras divides it by the batch's size) and each add_loss term (AddLoss) adds its penalty,
  // times loss_rows, to ctr's loss sum.
  void forward(StepBuffers& plan, int64_t m, bool training, bool final_activation,
               std::span<const LossOutput> outputs, uint64_t seed, StepCounters* ctr,
               int64_t first_row = 0, int64_t loss_rows = 0);
  // After a training forward pass: each batch normalization's moving statistics take in the
  // batch's (Keras updates them in the layer's call in training).
  void update_moving_statistics(StepBuffers& plan) const;

  // Backward from the loss gradients (plan.grads[j] for outputs[j]) down to the first layers
  // with parameters, in reverse layer order. Each layer's output gradient is one of plan.grads
  // while it is pending: a layer's backward leaves its input's gradient in a buffer that becomes
  // the input's (in a stack, the two buffers alternate); where a layer's output has several
  // readers, their gradients are added into the first one's. With `update` (a training step's
  // counters, when the backend fuses the update and the exchange allows it), each layer's
  // parameters are updated with their gradient as it is made; without, the gradients are left
  // for optimizer_step or for reading. With `count_only` (plan null) no call is made: it returns
  // how many of the buffers the pass has in use at once. loss_rows > 0 (forward's): the activity
  // regularizers' and add_loss terms' gradients join their outputs' (an add_loss term that no
  // layer reads starts from zero).
  int backward(StepBuffers* plan, int64_t m, std::span<const LossOutput> outputs,
               const StepCounters* update = nullptr, bool count_only = false,
               int64_t loss_rows = 0);

 private:
  class GradientPool;
  Backend& backend() const { return **model_.backend; }
  // Layer j's output gradient g from one reader: j's pending gradient if it has none yet, else
  // added into it over the step's m rows. `activation_done`: the reader applied j's activation
  // gradient (only a sole reader may).
  void deliver(GradientPool& pool, int j, float* g, bool activation_done, int64_t m);

  PlanInputs model_;
  std::map<int64_t, StepBuffers> plans_;
  // Kept between passes: a step allocates nothing.
  std::vector<const float*> xs_;  // the inputs of the layer a pass runs
  std::vector<float*> pending_, input_grads_, free_;
  std::vector<char> done_;
};

}  // namespace crossover
