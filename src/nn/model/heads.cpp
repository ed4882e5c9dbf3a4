// The loss heads (nn/model/heads.h): which activation a loss applies, the checks of an output
// against its loss and metrics, a step's loss and metric sums, and the results they make.
#include "nn/model/heads.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "backends/losses/list.h"
#include "core/error.h"
#include "nn/layers/kind.h"
#include "nn/metrics.h"

namespace crossover {

// The loss compile's spec names (a unit's name or alias, losses/list.h), with its argument
// (Keras's default where the spec has none); from_logits only where the unit reads logits.
LossConfig parse_loss(const LossSpec& spec, const char* who) {
  const std::optional<LossKind> kind = find_loss(spec.name);
  if (!kind) throw Error(who, "unknown loss '" + spec.name + "': expected " + loss_names());
  const losses::LossRules& rules = loss_rules(*kind);
  if (spec.from_logits && rules.logits == ActivationKind::linear)
    throw Error(who, "from_logits applies to the cross-entropies, not " + spec.name);
  LossConfig c(*kind);
  if (!rules.parameter.empty()) {
    const double v = std::isnan(spec.parameter) ? rules.parameter_default : spec.parameter;
    if (const std::string why = loss_parameter_problem(rules, v); !why.empty())
      throw Error(who, fmt::format("{}: {}", rules.name, why));
    c.parameter = static_cast<float>(v);
  } else if (!std::isnan(spec.parameter)) {
    throw Error(who, fmt::format("{} takes no argument", rules.name));
  }
  return c;
}

void LossHeads::check_output_for_loss(LossKind kind, const std::string& what,
                                      const std::vector<MetricSpec>& specs) const {
  check_output_for_loss(kind, what, specs, layers_output_shape());
}

void LossHeads::check_losses() const {
  if (heads.empty()) return check_output_for_loss(loss.kind, loss_name, metrics);
  for (const LossHead& h : heads)
    check_output_for_loss(h.loss.kind, h.loss_name, h.metrics,
                          info[static_cast<std::size_t>(h.layer)].out_shape);
}

void LossHeads::check_output_for_loss(LossKind kind, const std::string& what,
                                      const std::vector<MetricSpec>& specs,
                                      const Shape& out) const {
  if (out.size() == 1) return;
  const auto refuse = [&](const std::string& thing) {
    throw Error(graph.name,
                fmt::format("{} on an output of shape {} reads the last axis as classes "
                            "at each position, which crossover does not compute (yet): "
                            "Flatten the output to (C,), or use mean_squared_error or "
                            "binary_crossentropy",
                            thing, shape_to_string(out)));
  };
  if (loss_rules(kind).classes_on_last_axis) refuse("the loss " + what);
  // "accuracy" is the loss kernel's count: element by element (Keras's binary accuracy) only
  // for binary_crossentropy; mean_squared_error's compares each sample's argmax.
  for (const MetricSpec& spec : specs)
    if (spec.loss_accuracy && !loss_rules(kind).elementwise)
      refuse("the metric " + spec.name + " with the loss " + what);
  for (const MetricSpec& spec : specs)
    if (!spec.loss_accuracy && spec.kind != MetricKind::mean_absolute_error &&
        spec.kind != MetricKind::mean_squared_error && spec.kind != MetricKind::binary_accuracy)
      refuse("the metric " + spec.name);
}

int LossHeads::final_activation_layer() const {
  return deferred_layer(static_cast<int>(graph.layers.size()) - 1, from_logits, loss.kind);
}

int LossHeads::deferred_layer(int out, bool logits, LossKind kind) const {
  const Layer& l = graph.layers[static_cast<std::size_t>(out)];
  // An activity regularizer reads the activated output.
  if (!layer_kind(l).defers_activation() || l.activity.any()) return -1;
  const ActivationKind a = layer_kind(l).activation(l).kind;
  // A softmax over the last axis of samples of several axes is the layer's own: the loss ops
  // apply theirs over the whole sample. (Binary cross-entropy reads its input as sigmoid
  // logits, element by element, as Keras 3 does.)
  if (a == ActivationKind::softmax && !loss_rules(kind).elementwise && built &&
      info[static_cast<std::size_t>(out)].out_shape.size() > 1)
    return -1;
  if (logits && a != ActivationKind::linear && a != ActivationKind::sigmoid &&
      a != ActivationKind::softmax)
    return -1;
  return out;
}

std::span<const LossOutput> LossHeads::loss_outputs() const {
  loss_outputs_.clear();
  if (heads.empty())
    loss_outputs_.push_back({static_cast<int>(graph.size()) - 1, final_activation_layer() >= 0});
  for (const LossHead& h : heads)
    loss_outputs_.push_back({h.layer, deferred_layer(h.layer, h.from_logits, h.loss.kind) >= 0});
  return loss_outputs_;
}

BufferWidths LossHeads::buffer_widths(int64_t input_width) const {
  BufferWidths w;
  w.input = input_width;
  w.targets = heads.empty() ? output_width() : target_columns();
  if (extra_metrics > 0 && (!from_logits || metrics_activate())) w.predictions = output_width();
  for (const LossHead& h : heads) {
    w.head_targets.push_back(head_target_width(h));
    w.head_predictions.push_back(h.extra_metrics > 0 ? head_width(h) : 0);
  }
  return w;
}

ActivationKind LossHeads::head_loss_activation(const LossHead& h) const {
  if (h.from_logits) return loss_rules(h.loss.kind).logits;
  if (deferred_layer(h.layer, false, h.loss.kind) < 0) return ActivationKind::linear;
  const Layer& l = graph.layers[static_cast<std::size_t>(h.layer)];
  return layer_kind(l).activation(l).kind;
}

bool LossHeads::head_metrics_activate(const LossHead& h) const {
  if (!h.from_logits || deferred_layer(h.layer, true, h.loss.kind) < 0) return false;
  const Layer& l = graph.layers[static_cast<std::size_t>(h.layer)];
  return layer_kind(l).activation(l).kind != ActivationKind::linear;
}

int64_t LossHeads::head_width(const LossHead& h) const {
  return info[static_cast<std::size_t>(h.layer)].out_width;
}

int64_t LossHeads::head_target_width(const LossHead& h) const {
  return loss_rules(h.loss.kind).class_index_targets ? 1 : head_width(h);
}

int64_t LossHeads::head_target_column(std::size_t j) const {
  int64_t c = 0;
  for (std::size_t k = 0; k < j; ++k) c += head_target_width(heads[k]);
  return c;
}

ActivationKind LossHeads::final_activation() const {
  const int f = final_activation_layer();
  if (f < 0) return ActivationKind::linear;
  const Layer& l = graph.layers[static_cast<std::size_t>(f)];
  return layer_kind(l).activation(l).kind;
}

ActivationKind LossHeads::loss_activation() const {
  if (!from_logits) return final_activation();
  return loss_rules(loss.kind).logits;
}

bool LossHeads::metrics_activate() const {
  return from_logits && final_activation() != ActivationKind::linear;
}

void LossHeads::metric_sums(Backend& backend, const StepPlan& steps, const StepBuffers& plan,
                            int64_t m, bool training, StepCounters* ctr) const {
  if (extra_metrics == 0) return;
  backend.set_scope("metrics");
  const float* predictions =
      from_logits ? steps.final_output(plan, training) : plan.predictions.as<float>();
  if (metrics_activate()) {  // the model's output, from the logits the loss read
    const LayerActivation& a = info.back().activation;
    backend.activation_forward(a.kind, a.alpha, predictions, plan.predictions.as<float>(), m,
                               output_width());
    predictions = plan.predictions.as<float>();
  }
  auto* sums =
      reinterpret_cast<double*>(reinterpret_cast<char*>(ctr) + offsetof(StepCounters, metric_sums));
  int slot = 0;
  for (const MetricSpec& spec : metrics)
    if (!spec.loss_accuracy)
      backend.metric_sum(spec.kind, predictions, plan.targets.as<float>(), m, output_width(),
                         target_columns(), spec.parameter, sums + slot++);
}

void LossHeads::head_losses(Backend& backend, const StepPlan& steps, StepBuffers& plan,
                            const float* weights, int64_t m, int64_t mean_rows, bool training,
                            StepCounters* ctr) const {
  const int64_t packed = target_columns();
  for (std::size_t j = 0; j < heads.size(); ++j) {
    const LossHead& h = heads[j];
    const int64_t c = head_width(h), tc = head_target_width(h);
    float* targets = plan.head_targets[j].as<float>();
    float* predictions = plan.head_predictions[j].as<float>();
    float* d_out = training ? plan.grads[j].as<float>() : nullptr;
    StepCounters* hc = ctr + 1 + j;  // after the model's own
    const float* out = steps.layer_output(plan, static_cast<std::size_t>(h.layer), training);
    backend.copy_columns(plan.targets.as<float>(), packed, head_target_column(j), targets, tc, 0, m,
                         tc);
    backend.loss_forward_backward(h.loss, head_loss_activation(h), out, targets, weights,
                                  h.from_logits ? nullptr : predictions, d_out, m, c, hc,
                                  mean_rows);
    if (d_out && h.weight != 1.0f) {
      BinaryShape s;
      s.rows = m;
      s.cols = c;
      s.b = Broadcast::scalar;
      s.b_value = h.weight;
      backend.binary_forward(BinaryOp::multiply, s, d_out, nullptr, d_out);
    }
    if (h.extra_metrics == 0) continue;
    const float* pred = h.from_logits ? out : predictions;
    if (head_metrics_activate(h)) {
      const LayerActivation& a = info[static_cast<std::size_t>(h.layer)].activation;
      backend.activation_forward(a.kind, a.alpha, out, predictions, m, c);
      pred = predictions;
    }
    auto* sums = reinterpret_cast<double*>(reinterpret_cast<char*>(hc) +
                                           offsetof(StepCounters, metric_sums));
    int slot = 0;
    for (const MetricSpec& spec : h.metrics)
      if (!spec.loss_accuracy)
        backend.metric_sum(spec.kind, pred, targets, m, c, tc, spec.parameter, sums + slot++);
  }
}

int64_t LossHeads::target_columns() const {
  if (!heads.empty()) return head_target_column(heads.size());
  return loss_rules(loss.kind).class_index_targets ? 1 : output_width();
}

std::vector<std::pair<std::string, double>> LossHeads::metric_values(
    const StepCounters& c, const std::string& prefix) const {
  const double n = std::max(c.sample_count, 1.0);
  return named_values(c.loss_sum / n, c.correct_sum / n, extra_results(c), prefix);
}

std::vector<std::pair<std::string, double>> LossHeads::extra_results(const StepCounters& c) const {
  std::vector<std::pair<std::string, double>> v;
  int slot = 0;
  for (const MetricSpec& spec : metrics)
    if (!spec.loss_accuracy)
      v.emplace_back(spec.name, metric_result(spec, c.metric_sums[slot++], c.sample_count));
  return v;
}

EvaluateResult LossHeads::result_of(std::span<const StepCounters> t) const {
  const StepCounters& c = t[0];
  EvaluateResult r;
  const double n = std::max(c.sample_count, 1.0);
  if (heads.empty()) {
    r.samples = static_cast<int64_t>(c.sample_count);
    r.loss = c.loss_sum / n;
    r.accuracy = c.correct_sum / n;
    r.metrics = extra_results(c);
    return r;
  }
  r.samples = static_cast<int64_t>(t[1].sample_count);
  // The regularizers' and add_loss terms' penalties, which the model's own counters hold.
  r.loss = c.loss_sum / std::max(t[1].sample_count, 1.0);
  for (std::size_t j = 0; j < heads.size(); ++j) {
    const StepCounters& hc = t[1 + j];
    const double loss_j = hc.loss_sum / std::max(hc.sample_count, 1.0);
    r.loss += heads[j].weight * loss_j;
    r.metrics.emplace_back(graph.layers[static_cast<std::size_t>(heads[j].layer)].name + "_loss",
                           loss_j);
  }
  for (std::size_t j = 0; j < heads.size(); ++j) {
    const StepCounters& hc = t[1 + j];
    int slot = 0;
    for (const MetricSpec& spec : heads[j].metrics)
      r.metrics.emplace_back(spec.name,
                             spec.loss_accuracy
                                 ? hc.correct_sum / std::max(hc.sample_count, 1.0)
                                 : metric_result(spec, hc.metric_sums[slot++], hc.sample_count));
  }
  return r;
}

std::vector<std::pair<std::string, double>> LossHeads::values_of(std::span<const StepCounters> t,
                                                                 const std::string& prefix) const {
  if (heads.empty()) return metric_values(t[0], prefix);
  const EvaluateResult r = result_of(t);
  return named_values(r.loss, r.accuracy, r.metrics, prefix);
}

std::vector<std::pair<std::string, double>> LossHeads::named_values(
    double loss_value, double accuracy_value,
    const std::vector<std::pair<std::string, double>>& extra, const std::string& prefix) const {
  std::vector<std::pair<std::string, double>> v;
  v.emplace_back(prefix + "loss", loss_value);
  if (!heads.empty()) {  // several outputs: every value is in `extra` (result_of)
    for (const auto& [key, value] : extra) v.emplace_back(prefix + key, value);
    return v;
  }
  std::size_t next = 0;
  for (const MetricSpec& spec : metrics) {
    if (spec.loss_accuracy) {
      v.emplace_back(prefix + "accuracy", accuracy_value);
    } else {
      v.emplace_back(prefix + extra[next].first, extra[next].second);
      ++next;
    }
  }
  return v;
}

}  // namespace crossover
