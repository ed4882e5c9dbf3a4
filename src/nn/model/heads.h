// The loss heads (one part of the model; docs/ARCHITECTURE.md "The model as parts"): compile's
// loss and metrics (one output's, or one head per output of a model of several), what they read
// of the model's outputs (which activation a loss op applies, the targets' columns), a step's
// loss and metric sums on the device, and the results and logs made of those sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "nn/callbacks.h"
#include "nn/layers/kind.h"
#include "nn/metrics.h"
#include "nn/model/graph.h"
#include "nn/model/plan.h"

namespace crossover {

// The loss compile's spec names (a unit's name or alias, losses/list.h), with its argument
// (Keras's default where the spec has none); from_logits only where the unit reads logits.
LossConfig parse_loss(const LossSpec& spec, const char* who);

// The loss of one output of a model of several outputs (compile_outputs).
struct LossHead {
  int layer = 0;
  LossConfig loss;
  std::string loss_name;
  bool from_logits = false;
  float weight = 1.0f;
  std::vector<MetricSpec> metrics;  // under the names they are reported by
  int extra_metrics = 0;
};

struct LossHeads {
  LossHeads(const ModelGraph& g, const std::vector<LayerState>& states, const bool& is_built)
      : graph(g), info(states), built(is_built) {}

  // What the losses read of the model (its parts, at fixed addresses): the graph, the layers'
  // states and whether they are built.
  const ModelGraph& graph;
  const std::vector<LayerState>& info;
  const bool& built;

  // One output's loss, metrics and their settings (with several outputs: the first output's
  // loss, no metrics; `heads` has them all).
  std::string loss_name;
  LossConfig loss;
  bool from_logits = false;
  bool accuracy = false;
  // The compiled metrics in compile's order (nn/metrics.h); those other than the loss's accuracy
  // ("extra") sum into StepCounters::metric_sums in their order.
  std::vector<MetricSpec> metrics;
  int extra_metrics = 0;
  // With several outputs, one loss head per output in model_outputs' order (compile_outputs);
  // empty with one output, whose loss is the fields above. Each head's sums go to its own
  // StepCounters after the model's (tallies()).
  std::vector<LossHead> heads;

  // The StepCounters of one phase (training, evaluation): the model's (its step, learning rate;
  // with one output its loss and metrics), then one per loss head.
  int tallies() const { return 1 + static_cast<int>(heads.size()); }
  const Shape& layers_output_shape() const { return info.back().out_shape; }
  int64_t output_width() const { return info.back().out_width; }

  // A non-flat output (samples of shape (H, W, C)) for this loss and these metrics: Keras
  // computes mean_squared_error, binary_crossentropy and the element-wise metrics element by
  // element and averages them all, which is the flat computation on (N, H*W*C); the losses and
  // metrics that read the last axis as classes would need it per position, which crossover
  // does not do (yet).
  void check_output_for_loss(LossKind kind, const std::string& what,
                             const std::vector<MetricSpec>& specs) const;
  // Each output's loss and metrics on its shape.
  void check_losses() const;
  void check_output_for_loss(LossKind kind, const std::string& what,
                             const std::vector<MetricSpec>& specs, const Shape& out) const;

  // The activation applied by the loss op: that of the last layer if it is Dense or Activation.
  // With from_logits the loss reads the model's output as logits, so the layer applies its own
  // activation, except sigmoid and softmax: Keras takes their input back as the logits (and
  // warns), which is the deferred output.
  int final_activation_layer() const;
  // The same for the output layer `out` under a loss with or without from_logits: `out`, or -1.
  int deferred_layer(int out, bool logits, LossKind kind) const;
  // The outputs the losses read (the last layer's, or each head's), with whether the loss op
  // applies each one's activation (StepPlan's LossOutput). Into a member: a step allocates nothing.
  std::span<const LossOutput> loss_outputs() const;
  // The widths of the buffers the loss heads read and write (StepPlan::for_batch), for input
  // rows of `input_width` floats.
  BufferWidths buffer_widths(int64_t input_width) const;
  // A head's loss_activation and metrics_activate.
  ActivationKind head_loss_activation(const LossHead& h) const;
  bool head_metrics_activate(const LossHead& h) const;
  int64_t head_width(const LossHead& h) const;
  // Its columns of the packed targets: one (a class index) for the sparse loss, else the output's.
  int64_t head_target_width(const LossHead& h) const;
  int64_t head_target_column(std::size_t j) const;
  ActivationKind final_activation() const;
  // The activation the loss op applies to the final output: with from_logits the loss's own
  // softmax or sigmoid of the logits (final_activation_layer).
  ActivationKind loss_activation() const;
  // Whether the metrics read the final sigmoid or softmax of the deferred output: with
  // from_logits, the loss read that output as logits and the model's output is its activation.
  bool metrics_activate() const;
  // The columns of a sample's targets: the packed row's with several outputs.
  int64_t target_columns() const;

  // Each compiled metric beyond the loss's accuracy: its per-sample values over these m rows of
  // the model's output, added to its sum in ctr (device memory; no call without such metrics).
  void metric_sums(Backend& backend, const StepPlan& steps, const StepBuffers& plan, int64_t m,
                   bool training, StepCounters* ctr) const;
  // Each output's loss over these m rows (its targets' columns of the packed batch first), into
  // its head's counters after ctr, and in training its gradient, times its weight, into
  // plan.grads[j] (backward's pending gradient of that output); then its metrics. `weights`:
  // the batch's sample weights, or null.
  void head_losses(Backend& backend, const StepPlan& steps, StepBuffers& plan, const float* weights,
                   int64_t m, int64_t mean_rows, bool training, StepCounters* ctr) const;

  // The loss and the compiled metrics of the sums in c, as logs name them, in compile's order.
  std::vector<std::pair<std::string, double>> metric_values(const StepCounters& c,
                                                            const std::string& prefix) const;
  // The metrics beyond "accuracy", by name, from the sums in c.
  std::vector<std::pair<std::string, double>> extra_results(const StepCounters& c) const;
  // The result of a phase's counters (the model's, then each head's): with several outputs the
  // loss is the sum of weight x each output's mean loss, and `metrics` each output's loss then
  // each output's metrics (EvaluateResult).
  EvaluateResult result_of(std::span<const StepCounters> t) const;
  std::vector<std::pair<std::string, double>> values_of(std::span<const StepCounters> t,
                                                        const std::string& prefix) const;
  std::vector<std::pair<std::string, double>> named_values(
      double loss_value, double accuracy_value,
      const std::vector<std::pair<std::string, double>>& extra, const std::string& prefix) const;

 private:
  mutable std::vector<LossOutput> loss_outputs_;
};

}  // namespace crossover
