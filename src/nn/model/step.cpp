// The step plan: the buffers of one batch size, the forward and backward passes, a training
// and an evaluation step.

#include <algorithm>
#include <cstddef>

#include "backends/fused_mlp.h"
#include "nn/device_memory.h"
#include "nn/layers/kind.h"
#include "nn/metrics.h"
#include "nn/model/impl.h"

namespace crossover {

void Sequential::Impl::plan_fused_step(const Plan& plan, const DeviceData& d, uint64_t seed) {
  fused_mlp.reset();
  fused_note.clear();
  if (!copts.fused_step) return;
  if (graph.several_outputs()) {
    fused_note = "fused step not used: the model has several outputs";
    return;
  }
  FusedModelView v;
  v.loss = losses.loss.kind;
  v.from_logits = losses.from_logits;
  v.optimizer = opt;
  v.ranks = ranks();
  v.sample_weights = d.w_rows != nullptr;
  v.extra_metrics = losses.extra_metrics;
  v.fp32 = copts.precision == "fp32";
  v.regularized = arena.regularized(trains) || graph.has_loss_terms();
  for (std::size_t i = 0; i < graph.layers.size(); ++i) {
    const Layer& l = graph.layers[i];
    const LayerInfo& li = info[i];
    v.chain = v.chain && (i == 0 ? graph.inputs[i].empty()
                                 : graph.inputs[i].size() == 1 &&
                                       graph.inputs[i][0] + 1 == static_cast<int>(i));
    FusedLayerView lv;
    layer_kind(l).describe_fused(l, lv);
    // The fused step's Dense takes flat samples: one on several axes is another kind to it.
    if (lv.kind == FusedLayerView::Kind::dense && li.in_shapes.front().size() > 1)
      lv.kind = FusedLayerView::Kind::other;
    lv.name = l.name;
    lv.activation = li.activation.kind;
    lv.trainable = trains[i] != 0;
    lv.shared = graph.called_again(i);
    lv.in_width = li.in_width;
    lv.out_width = li.out_width;
    // A Dense's kernel is its first parameter, whatever its name (a traced custom layer's).
    if (lv.kind == FusedLayerView::Kind::dense && !li.params.empty())
      lv.kernel = &arena.slots[static_cast<std::size_t>(li.params.front().index)];
    if (const int b = li.param("bias"); b >= 0) lv.bias = &arena.slots[static_cast<std::size_t>(b)];
    v.layers.push_back(lv);
  }
  FusedMlpStep step;
  std::string why = fused_mlp_chain(v, step);
  if (why.empty()) why = backend->fused_mlp_problem(step);
  if (!why.empty()) {
    fused_note = "fused step not used: " + why;
    return;
  }
  step.x_rows = d.x_rows;
  step.y_rows = d.y_rows;
  step.x_cols = d.x_cols;
  step.y_cols = d.y_cols;
  step.indices = d.indices.as<int32_t>();
  step.batch = plan.batch;
  step.seed = seed;
  fused_mlp = std::move(step);
}

bool Sequential::Impl::fused_update() const {
  // A regularizer's gradient joins the weight's after backward: no update inside it.
  return backend->fuses_weight_update() && opt.clipnorm == 0.0f && opt.tensor_clipnorm == 0.0f &&
         !arena.regularized(trains);
}

void Sequential::Impl::gather_batch(Plan& plan, const DeviceData& d, int64_t m,
                                    const StepCounters* ctr) {
  backend->set_scope("batch x");
  backend->gather_rows(d.x_rows, d.x_cols, d.indices.as<int32_t>(), plan.batch, ctr, m,
                       plan.input.as<float>());
  backend->set_scope("batch y");
  backend->gather_rows(d.y_rows, d.y_cols, d.indices.as<int32_t>(), plan.batch, ctr, m,
                       plan.targets.as<float>());
  if (d.w_rows) {
    backend->set_scope("batch weights");
    backend->gather_rows(d.w_rows, 1, d.indices.as<int32_t>(), plan.batch, ctr, m,
                         plan.weights.as<float>());
  }
}

const float* Sequential::Impl::batch_weights(const Plan& plan, const DeviceData& d) {
  return d.w_rows ? plan.weights.as<float>() : nullptr;
}

void Sequential::Impl::with_weights(Plan& plan, const DeviceData& d) {
  if (d.w_rows && plan.weights.bytes() == 0)
    plan.weights = DeviceBlock(
        *backend, static_cast<std::size_t>(std::max<int64_t>(plan.batch, 16)) * sizeof(float));
}

void Sequential::Impl::train_step(Plan& plan, const DeviceData& d, const Shard& s, uint64_t seed) {
  StepCounters* ctr = train_counters();
  const bool parallel = ranks() > 1;
  // With ranks, the update must see the summed gradient: no layer is updated in backward.
  const bool fused = fused_update() && exchange->backward_may_update();
  if (fused_mlp && s.rows > 0) {  // one kernel (plan_fused_step)
    fused_mlp->optimizer = opt;   // as a callback may have left it
    fused_mlp->rows = s.rows;
    fused_mlp->mean_rows = s.global_rows;
    backend->set_scope("fused step");
    backend->fused_mlp_step(*fused_mlp, ctr);
    backend->set_scope("");
    return;
  }
  float* grads = arena.gradients();
  if (s.rows > 0) {
    gather_batch(plan, d, s.rows, ctr);
    forward(plan, s.rows, true, false, seed, ctr, s.first_row, s.global_rows);
    update_moving_statistics(plan);
    backend->set_scope("loss");
    // The gradient of the loss summed over these rows over the global batch's rows: the ranks'
    // gradients add up to the global batch's mean gradient.
    if (losses.heads.empty()) {
      backend->loss_forward_backward(
          losses.loss, losses.loss_activation(), final_output(plan, true), plan.targets.as<float>(),
          batch_weights(plan, d), plan.predictions.as<float>(), plan.grads[0].as<float>(), s.rows,
          output_width(), ctr, s.global_rows);
      losses.metric_sums(*backend, steps, plan, s.rows, true, ctr);
    } else {
      losses.head_losses(*backend, steps, plan, batch_weights(plan, d), s.rows, s.global_rows, true,
                         ctr);
    }
    backward(&plan, s.rows, fused ? ctr : nullptr, s.global_rows);
  } else {
    // A rank with no rows in this batch (fewer rows than ranks) adds nothing to the sum.
    backend->set_scope("allreduce");
    backend->fill(grads, 0.0f, arena.floats);
  }
  if (parallel) {  // between backward and the optimizer: the ranks' gradients summed
    backend->set_scope("allreduce");
    exchange->sum_gradients(*backend, grads, arena.floats);
  }
  if (arena.regularized(trains)) {  // each rank its rows' share of the penalty, all its gradient
    backend->set_scope("regularizers");
    arena.regularize(*backend, true, trains, ctr, s.rows);
  }
  backend->set_scope("optimizer");
  // Fused: every Dense layer was updated in backward; the other layers' parameters (none in an
  // MLP) and the step's bookkeeping remain. Never the moving statistics.
  backend->optimizer_step(
      opt, fused ? std::span(arena.unfused_slots) : std::span(arena.trainable_slots), ctr);
  backend->set_scope("");
}

void Sequential::Impl::eval_step(Plan& plan, const DeviceData& d, int64_t m) {
  StepCounters* ctr = eval_counters();
  gather_batch(plan, d, m, ctr);
  forward(plan, m, false, false, 0, ctr, 0, m);
  backend->set_scope("loss");
  if (losses.heads.empty()) {
    backend->loss_forward_backward(
        losses.loss, losses.loss_activation(), final_output(plan, false), plan.targets.as<float>(),
        batch_weights(plan, d), plan.predictions.as<float>(), nullptr, m, output_width(), ctr, m);
    losses.metric_sums(*backend, steps, plan, m, false, ctr);
  } else {
    losses.head_losses(*backend, steps, plan, batch_weights(plan, d), m, m, false, ctr);
  }
  if (arena.regularized(trains)) {  // Keras's evaluate loss holds them too
    backend->set_scope("regularizers");
    arena.regularize(*backend, false, trains, ctr, m);
  }
  backend->set_scope("");
  backend->advance_batch(ctr);
}

}  // namespace crossover
