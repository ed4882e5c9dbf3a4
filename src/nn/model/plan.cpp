// The step plan: each batch size's buffers, the forward and backward passes (nn/model/plan.h).
#include "nn/model/plan.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"

namespace crossover {

namespace {

// An activity regularizer's factor over a batch of `rows`: Keras divides the penalty by the
// batch's size.
float activity_factor(double factor, int64_t rows) {
  return static_cast<float>(factor / static_cast<double>(rows));
}

}  // namespace

// The gradients of a backward pass: the plan's buffers, each taken and given back (LIFO, so that
// a stack of layers alternates between two); counting only, stand-ins that count how many are in
// use at once.
class StepPlan::GradientPool {
 public:
  GradientPool(StepBuffers* p, bool counting, std::vector<float*>& free_list)
      : count_only(counting), free_(free_list) {
    free_.clear();
    const std::size_t k = count_only ? 0 : p->grads.size();
    for (std::size_t b = k; b-- > 0;) free_.push_back(p->grads[b].as<float>());
  }
  float* take() {
    ++used_;
    most = std::max(most, used_);
    if (count_only) return reinterpret_cast<float*>(static_cast<std::uintptr_t>(used_) * 64);
    if (free_.empty()) throw Error("backward", "internal: the plan has too few gradient buffers");
    float* g = free_.back();
    free_.pop_back();
    return g;
  }
  void give_back(float* g) {
    --used_;
    if (!count_only) free_.push_back(g);
  }

  const bool count_only;
  int most = 0;

 private:
  std::vector<float*>& free_;
  int used_ = 0;
};

StepBuffers& StepPlan::for_batch(int64_t batch, const BufferWidths& widths,
                                 std::span<const LossOutput> outputs) {
  auto it = plans_.find(batch);
  if (it != plans_.end()) return it->second;
  const ModelGraph& graph = *model_.graph;
  const std::vector<LayerState>& info = *model_.states;
  Backend& be = backend();
  int64_t max_width = widths.input;
  for (const LayerState& li : info) max_width = std::max({max_width, li.in_width, li.out_width});
  const int gradients = std::max(2, backward(nullptr, 0, outputs, nullptr, true));
  // What the blocks below add up to, checked before the first of them is allocated.
  const auto rows = static_cast<double>(batch);
  const bool predictions = widths.predictions > 0;
  double plan_bytes = float_bytes(batch * widths.input) +
                      (predictions ? 2 : 1) * float_bytes(batch * widths.targets) +
                      gradients * rows * max_width * sizeof(float);
  for (std::size_t j = 0; j < widths.head_targets.size(); ++j)
    plan_bytes +=
        float_bytes(batch * widths.head_targets[j]) +
        (widths.head_predictions[j] > 0 ? float_bytes(batch * widths.head_predictions[j]) : 0.0);
  // Each layer's workspace (dropout's mask, max pooling's, batch normalization's statistics),
  // as its kind sizes it (with the backend, which also prepares that shape).
  std::vector<std::size_t> workspace(graph.size(), 0);
  for (std::size_t i = 0; i < graph.size(); ++i) {
    if (!info[i].aliases_input) plan_bytes += rows * info[i].out_width * sizeof(float);
    workspace[i] = layer_kind(graph.layers[i]).workspace_bytes(graph.layers[i], info[i], be, batch);
    plan_bytes += static_cast<double>(workspace[i]);
  }
  check_fits(be, graph.name, plan_bytes,
             "a batch of " + std::to_string(batch) + " samples: its activations and gradients",
             ": use a smaller batch size");
  StepBuffers& p = plans_[batch];
  p.batch = batch;
  auto floats = [&](int64_t n) {
    return DeviceBlock(be, static_cast<std::size_t>(std::max<int64_t>(n, 16)) * sizeof(float));
  };
  p.input = floats(batch * widths.input);
  p.targets = floats(batch * widths.targets);
  if (predictions) p.predictions = floats(batch * widths.predictions);
  for (std::size_t j = 0; j < widths.head_targets.size(); ++j) {
    p.head_targets.push_back(floats(batch * widths.head_targets[j]));
    p.head_predictions.push_back(widths.head_predictions[j] > 0
                                     ? floats(batch * widths.head_predictions[j])
                                     : DeviceBlock());
  }
  for (int k = 0; k < gradients; ++k) p.grads.push_back(floats(batch * max_width));
  p.outputs.resize(graph.size());
  p.masks.resize(graph.size());
  for (std::size_t i = 0; i < graph.size(); ++i) {
    if (!info[i].aliases_input) p.outputs[i] = floats(batch * info[i].out_width);
    if (workspace[i] > 0) p.masks[i] = DeviceBlock(be, workspace[i]);
  }
  return p;
}

StepBuffers* StepPlan::find(int64_t batch) {
  auto it = plans_.find(batch);
  return it == plans_.end() ? nullptr : &it->second;
}

float* StepPlan::layer_output(const StepBuffers& plan, std::size_t i, bool training) const {
  const ModelGraph& graph = *model_.graph;
  const std::vector<LayerState>& info = *model_.states;
  for (;;) {
    const bool alias =
        info[i].aliases_input ||
        (layer_kind(graph.layers[i]).identity_outside_training(graph.layers[i]) && !training);
    if (!alias) return plan.outputs[i].as<float>();
    if (graph.inputs[i].empty()) return plan.input.as<float>();
    i = static_cast<std::size_t>(graph.inputs[i].front());
  }
}

const float* StepPlan::layer_input(const StepBuffers& plan, std::size_t i, bool training,
                                   std::size_t k) const {
  const ModelGraph& graph = *model_.graph;
  return graph.inputs[i].empty()
             ? plan.input.as<float>()
             : layer_output(plan, static_cast<std::size_t>(graph.inputs[i][k]), training);
}

void StepPlan::forward(StepBuffers& plan, int64_t m, bool training, bool final_activation,
                       std::span<const LossOutput> outputs, uint64_t seed, StepCounters* ctr,
                       int64_t first_row, int64_t loss_rows) {
  const ModelGraph& graph = *model_.graph;
  const std::vector<LayerState>& info = *model_.states;
  Backend& be = backend();
  for (std::size_t i = 0; i < graph.size(); ++i) {
    const Layer& l = graph.layers[i];
    const float* x = layer_input(plan, i, training);
    float* y = plan.outputs[i].as<float>();
    be.set_scope(l.name);
    if (graph.inputs[i].empty() && graph.several_inputs()) {  // its columns of the packed batch
      be.copy_columns(x, graph.packed_width, graph.input_column[i], y, info[i].out_width, 0, m,
                      info[i].out_width);
      continue;
    }
    xs_.clear();
    for (std::size_t k = 0; k < std::max<std::size_t>(graph.inputs[i].size(), 1); ++k)
      xs_.push_back(layer_input(plan, i, training, k));
    // The first loss output of this layer says whether the loss op applies its activation.
    bool deferred = false;
    for (const LossOutput& o : outputs)
      if (static_cast<std::size_t>(o.layer) == i) {
        deferred = o.deferred;
        break;
      }
    ForwardStep step{{be, l, info[i], model_.arena->slots, static_cast<uint32_t>(i), m, x, y,
                      plan.masks[i].as<void>(), xs_},
                     training,
                     !final_activation && deferred,
                     seed,
                     ctr,
                     first_row,
                     loss_rows};
    step.trainable = (*model_.trains)[i] != 0;
    layer_kind(l).forward(step);
    if (loss_rows > 0 && ctr && l.activity.any()) {  // Keras's: R(output) / the batch's size
      be.regularize(layer_output(plan, i, training), nullptr, m * info[i].out_width,
                    activity_factor(l.activity.l1, loss_rows),
                    activity_factor(l.activity.l2, loss_rows), 0.0f, ctr, loss_rows);
    }
  }
}

void StepPlan::update_moving_statistics(StepBuffers& plan) const {
  const ModelGraph& graph = *model_.graph;
  Backend& be = backend();
  for (std::size_t i = 0; i < graph.size(); ++i) {
    const LayerKind& kind = layer_kind(graph.layers[i]);
    if (!kind.has_moving_statistics()) continue;
    if (!(*model_.trains)[i]) continue;  // frozen: in inference mode, its statistics kept
    be.set_scope(graph.layers[i].name);
    kind.update_moving_statistics({be, graph.layers[i], (*model_.states)[i], model_.arena->slots,
                                   static_cast<uint32_t>(i), plan.batch, nullptr, nullptr,
                                   plan.masks[i].as<void>()});
  }
}

int StepPlan::backward(StepBuffers* plan, int64_t m, std::span<const LossOutput> outputs,
                       const StepCounters* update, bool count_only, int64_t loss_rows) {
  const ModelGraph& graph = *model_.graph;
  const std::vector<LayerState>& info = *model_.states;
  const ParameterArena& arena = *model_.arena;
  const std::vector<char>& trains = *model_.trains;
  const std::vector<bool>& needs_grad = *model_.needs_grad;
  GradientPool pool{plan, count_only, free_};
  const std::size_t n = graph.size();
  // Each layer's output gradient, once it has one, and whether its activation's gradient is
  // applied in it.
  pending_.assign(n, nullptr);
  done_.assign(n, 0);
  // Each loss output's gradient: the loss op handled the layer's activation when the layer
  // defers it (Dense, Activation); another layer (a Conv2D making an image) applied its own.
  for (const LossOutput& o : outputs) {
    pending_[static_cast<std::size_t>(o.layer)] = pool.take();
    done_[static_cast<std::size_t>(o.layer)] = o.deferred ? 1 : 0;
  }
  // An add_loss term that no layer reads: its gradient starts from zero (its backward adds the
  // term's).
  for (std::size_t i = 0; i < n && (loss_rows > 0 || count_only); ++i) {
    if (!layer_kind(graph.layers[i]).adds_loss() || pending_[i] || !needs_grad[i]) continue;
    pending_[i] = pool.take();
    if (!count_only) backend().fill(pending_[i], 0.0f, m * info[i].out_width);
  }
  for (std::size_t i = n; i-- > 0;) {
    if (!needs_grad[i] || !pending_[i]) continue;
    const Layer& l = graph.layers[i];
    const LayerKind& kind = layer_kind(l);
    bool wants_input_grad = false;
    for (int j : graph.inputs[i]) wants_input_grad = wants_input_grad || needs_grad[j];
    // A dropout directly above a relu layer applies the relu's gradient too, when it is the
    // relu's only reader.
    const int below = graph.inputs[i].size() == 1 ? graph.inputs[i][0] : -1;
    const bool after_relu =
        below >= 0 && graph.readers[below] == 1 && !graph.layers[below].activity.any() &&
        layer_kind(graph.layers[below]).applies_activation() &&
        info[static_cast<std::size_t>(below)].activation.kind == ActivationKind::relu;
    float* spare = pool.take();
    input_grads_.clear();
    xs_.clear();
    if (kind.merges()) {
      for (int j : graph.inputs[i]) input_grads_.push_back(needs_grad[j] ? pool.take() : nullptr);
      for (std::size_t k = 0; plan && k < graph.inputs[i].size(); ++k)
        xs_.push_back(layer_input(*plan, i, true, k));  // what Multiply's gradient reads
    }
    // A shared layer's call: its gradients summed over the calls (accumulates), its update
    // left to optimizer_step.
    const bool summed = graph.accumulates[i] && !count_only && trains[i];
    BackwardStep step{{backend(), l, info[i], summed ? arena.call_slots[i] : arena.slots,
                       static_cast<uint32_t>(i), m, plan ? layer_input(*plan, i, true) : nullptr,
                       plan ? layer_output(*plan, i, true) : nullptr,
                       plan ? plan->masks[i].as<void>() : nullptr, xs_},
                      pending_[i],
                      spare,
                      static_cast<bool>(done_[i]),
                      !wants_input_grad,
                      after_relu,
                      graph.called_again(i) ? nullptr : update,
                      model_.optimizer,
                      input_grads_,
                      loss_rows};
    step.trainable = trains[i] != 0;
    if (!count_only) {
      backend().set_scope(l.name);
      if (loss_rows > 0 && l.activity.any()) {
        // Its activity regularizer's gradient joins the output's (never one past the activation:
        // neither the loss op nor a dropout applies a penalized layer's).
        if (done_[i])
          throw Error("backward",
                      "internal: an activity regularizer's gradient "
                      "after its layer's activation");
        backend().regularize(layer_output(*plan, i, true), step.g, m * info[i].out_width,
                             activity_factor(l.activity.l1, loss_rows),
                             activity_factor(l.activity.l2, loss_rows), 0.0f, nullptr, 0);
      }
      kind.backward(step);
      if (summed) arena.add_call_gradients(backend(), graph, i, trains);
    }
    pool.give_back(step.spare);
    if (kind.merges()) {
      pool.give_back(step.g);
      for (std::size_t k = 0; k < graph.inputs[i].size(); ++k)
        if (input_grads_[k]) deliver(pool, graph.inputs[i][k], input_grads_[k], false, m);
    } else if (wants_input_grad) {
      deliver(pool, graph.inputs[i][0], step.g, step.activation_done, m);
    } else {
      pool.give_back(step.g);
    }
  }
  for (float* g : pending_)
    if (g) pool.give_back(g);  // gradients of layers below the first with parameters
  return pool.most;
}

void StepPlan::deliver(GradientPool& pool, int j, float* g, bool activation_done, int64_t m) {
  const auto u = static_cast<std::size_t>(j);
  if (!pending_[u]) {
    pending_[u] = g;
    done_[u] = activation_done;
    return;
  }
  // (Counting, no layer ran: activation_done is the reader's input flag, not its result.)
  if ((activation_done || done_[u]) && !pool.count_only)
    throw Error("backward", "internal: an activation gradient applied by one of several readers");
  if (!pool.count_only) {
    backend().set_scope(model_.graph->layers[u].name);
    backend().add(pending_[u], g, pending_[u], m * (*model_.states)[u].out_width);
  }
  pool.give_back(g);
}

}  // namespace crossover
