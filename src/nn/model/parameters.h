// The parameter arena (one part of the model; docs/ARCHITECTURE.md "The model as parts"): every
// parameter's values, gradients and optimizer slots in one block of device memory, and the views
// of it that the step reads (ParamSlot: all parameters, those a step updates, those a fused step
// leaves to the optimizer, a shared layer's calls' own gradients).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "nn/device_memory.h"
#include "nn/layers/kind.h"
#include "nn/model/graph.h"

namespace crossover {

// Refuses, before anything is allocated, memory the device does not have: a model or a batch
// too large for the machine is the user's input, to be told in bytes (naming `model`), not an
// internal error. Sizes are doubles so that an absurd request is reported rather than overflowed.
void check_fits(const Backend& backend, const std::string& model, double bytes,
                const std::string& what, const std::string& advice);
// The bytes of a block of n floats (at least 16).
double float_bytes(int64_t n);

struct ParameterArena {
  // Every parameter in the layers' order (the model's build), and the floats of one section.
  std::vector<LayerParam> params;
  int64_t floats = 0;
  // values | grads | slot1 | slot2 (| slot3: Adam's amsgrad, `slot3`), each `floats`.
  DeviceBlock block;
  bool slot3 = false;
  std::vector<ParamSlot> slots;  // every parameter, in params' order
  // What optimizer_step updates: the trainable parameters (not the moving statistics, nor a
  // frozen layer's: their weight decay and clipnorm see only these).
  std::vector<ParamSlot> trainable_slots;
  // The parameters a fused training step leaves to optimizer_step: those of layers other than
  // Dense (whose update is fused into its weight gradient, Backend::fuses_weight_update).
  std::vector<ParamSlot> unfused_slots;
  // A shared layer's calls that add their gradients into a later call's (ModelGraph::
  // accumulates): per entry, the slots with its layer's gradients pointing into call_grads.
  std::vector<std::vector<ParamSlot>> call_slots;
  DeviceBlock call_grads;

  bool allocated() const { return block.bytes() > 0; }
  float* data() const { return block.as<float>(); }
  float* gradients() const { return data() + floats; }
  float* value(const LayerParam& p) const { return data() + p.offset; }
  float* grad(const LayerParam& p) const { return gradients() + p.offset; }
  // Slot k (1, 2, or 3 where the arena has it: null otherwise) of p.
  float* slot(const LayerParam& p, int k) const;
  // The optimizer's state slots per parameter: 2, or 3 with slot3.
  int state_slots() const { return slot3 ? 3 : 2; }
  // Every parameter's floats; trainable: Keras's "Trainable params", which follow
  // layer.trainable at once.
  int64_t count() const;
  int64_t trainable_count(const std::vector<Layer>& layers) const;
  // Whether a training step updates p: a trainable variable of a layer the model was compiled
  // with trainable (`trains`, per layer).
  static bool updates(const LayerParam& p, const std::vector<char>& trains);

  // The block for `optimizer`'s slots (Adagrad's accumulators at their initial value, every other
  // slot at zero) and the views, on `backend`; a block too large for it is refused (check_fits).
  void allocate(Backend& backend, const ModelGraph& graph, const std::vector<char>& trains,
                const OptimizerConfig& optimizer);
  // Frees the blocks (before their backend goes).
  void reset();
  // Each parameter's initializer (the layer's: Keras's defaults are glorot-uniform kernels and
  // zero biases), drawn on the host (nn/initializers.h).
  void initialize(Backend& backend, uint64_t seed) const;
  // Whether a parameter that trains has a regularizer (Keras's kernel_regularizer, ...).
  bool regularized(const std::vector<char>& trains) const;
  // Keras's regularizers, in a step of `rows` rows: each trainable parameter's penalty into the
  // step's loss sum, and in training its gradient into the parameter's (Backend::regularize).
  // Keras counts the trainable weights' regularizers only: a frozen layer's adds nothing.
  void regularize(Backend& backend, bool training, const std::vector<char>& trains,
                  StepCounters* counters, int64_t rows) const;
  // After the backward call of entry i: its weight gradients (in call_grads) added into the
  // parameters' (a later call of the same layer wrote those).
  void add_call_gradients(Backend& backend, const ModelGraph& graph, std::size_t i,
                          const std::vector<char>& trains) const;

 private:
  void allocate_call_gradients(Backend& backend, const ModelGraph& graph);
};

}  // namespace crossover
