#include "backends/fused_mlp.h"

#include <fmt/format.h>

#include <algorithm>

#include "backends/optimizers/visit.h"

namespace crossover {

namespace {

const char* activation_word(ActivationKind a) {
  switch (a) {
    case ActivationKind::linear:
      return "linear";
    case ActivationKind::relu:
      return "relu";
    case ActivationKind::softmax:
      return "softmax";
    default:
      return "another activation";
  }
}

std::string rules_broken(const FusedModelView& m) {
  if (!m.chain) return "the model is not a chain of layers";
  if (m.ranks > 1) return fmt::format("it trains on {} ranks (one process only)", m.ranks);
  if (m.sample_weights) return "the fit has sample or class weights";
  if (m.extra_metrics > 0) return "it computes metrics beyond the loss's accuracy";
  if (m.regularized)
    return "a weight or a layer's output has a regularizer, or a layer adds a loss";
  if (!m.fp32) return "its dense products are not fp32";
  if (m.loss != LossKind::sparse_categorical_crossentropy &&
      m.loss != LossKind::categorical_crossentropy)
    return "its loss is not a (sparse) categorical cross-entropy";
  if (m.from_logits) return "its loss reads logits (from_logits=True)";
  if (m.optimizer.clipnorm > 0.0f || m.optimizer.tensor_clipnorm > 0.0f)
    return "its optimizer clips by a norm (global_clipnorm or clipnorm)";
  return "";
}

}  // namespace

std::string fused_mlp_chain(const FusedModelView& model, FusedMlpStep& step) {
  if (std::string why = rules_broken(model); !why.empty()) return why;
  std::vector<FusedDense> chain;
  bool dropout_allowed = false;  // right after a hidden Dense
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const FusedLayerView& l = model.layers[i];
    if (l.shared)
      return fmt::format("layer '{}' is called more than once (shared weights)", l.name);
    switch (l.kind) {
      case FusedLayerView::Kind::reshape:
        if (!chain.empty()) return fmt::format("layer '{}' reshapes between Dense layers", l.name);
        break;
      case FusedLayerView::Kind::dropout:
        if (!dropout_allowed)
          return fmt::format("Dropout '{}' does not follow a Dense layer directly", l.name);
        if (l.rate > 0.0f) {
          chain.back().dropout = l.rate;
          chain.back().dropout_layer = static_cast<uint32_t>(i);
        }
        dropout_allowed = false;
        break;
      case FusedLayerView::Kind::dense: {
        if (!l.trainable) return fmt::format("Dense '{}' is frozen", l.name);
        if (!l.kernel) return fmt::format("Dense '{}' has no kernel", l.name);
        if (!chain.empty() && chain.back().out != l.in_width)
          return fmt::format("Dense '{}' does not read the layer before it", l.name);
        if (chain.size() == static_cast<std::size_t>(kFusedMaxLayers))
          return fmt::format("it has more than {} Dense layers", kFusedMaxLayers);
        FusedDense d;
        d.in = l.in_width;
        d.out = l.out_width;
        d.activation = l.activation;
        d.kernel = *l.kernel;
        if (l.bias) d.bias = *l.bias;
        chain.push_back(d);
        dropout_allowed = true;
        break;
      }
      case FusedLayerView::Kind::other:
        return fmt::format("layer '{}' is neither Dense nor Dropout", l.name);
    }
  }
  if (chain.empty()) return "it has no Dense layer";
  if (model.layers.back().kind != FusedLayerView::Kind::dense) return "its last layer is not Dense";
  for (std::size_t i = 0; i + 1 < chain.size(); ++i)
    if (chain[i].activation != ActivationKind::relu &&
        chain[i].activation != ActivationKind::linear)
      return fmt::format("a hidden Dense layer's activation is {} (relu or linear only)",
                         activation_word(chain[i].activation));
  if (chain.back().activation != ActivationKind::softmax)
    return fmt::format("the last Dense layer's activation is {} (softmax only)",
                       activation_word(chain.back().activation));
  step.layers = std::move(chain);
  step.loss = model.loss;
  step.optimizer = model.optimizer;
  return "";
}

int64_t fused_mlp_state_bytes(const FusedMlpStep& step) {
  int64_t floats = 0;
  for (const FusedDense& d : step.layers) floats += d.kernel.n + d.bias.n;
  // Values, gradients and two slots; Adam's amsgrad a third (velocity_hat).
  const int64_t per_parameter = optimizer_third_slot(step.optimizer) ? 5 : 4;
  return floats * per_parameter * static_cast<int64_t>(sizeof(float));
}

int64_t fused_mlp_work_items(const FusedMlpStep& step) {
  const auto tiles = [](int64_t a) { return (a + kFusedTile - 1) / kFusedTile; };
  int64_t most = 1, params = 0;
  for (const FusedDense& d : step.layers) {
    most = std::max(most, tiles(step.rows) * tiles(d.out));  // forward
    most = std::max(most, tiles(d.in) * tiles(d.out));       // weight gradient
    most = std::max(most, tiles(step.rows) * tiles(d.in));   // input gradient
    params += d.kernel.n + d.bias.n;
  }
  return std::max(most, (params + kFusedThreads - 1) / kFusedThreads);
}

FusedLaunchShape fused_mlp_launch_shape(int sms, int blocks_per_sm, int64_t work_items) {
  if (sms < 1 || blocks_per_sm < 1) return {};
  const int64_t resident = static_cast<int64_t>(sms) * blocks_per_sm;
  return {static_cast<int>(std::clamp<int64_t>(work_items, 1, resident)), kFusedThreads};
}

int fused_mlp_slices(int64_t depth, int64_t tiles, int blocks) {
  const int64_t chunks = (depth + kFusedTile - 1) / kFusedTile;
  if (tiles < 1 || blocks < 1) return 1;
  return static_cast<int>(std::clamp<int64_t>(blocks / tiles, 1, std::max<int64_t>(chunks, 1)));
}

std::string fused_mlp_device_problem(const FusedMlpStep& step, bool cooperative, int blocks_per_sm,
                                     int64_t l2_bytes) {
  if (!cooperative) return "the device has no cooperative launch";
  if (blocks_per_sm < 1) return "no block of the fused kernel fits on a multiprocessor";
  const int64_t bytes = fused_mlp_state_bytes(step);
  if (bytes > l2_bytes)
    return fmt::format(
        "the parameters with their gradients and optimizer state ({:.1f} MB) exceed the L2 cache "
        "({:.1f} MB)",
        static_cast<double>(bytes) / 1e6, static_cast<double>(l2_bytes) / 1e6);
  return "";
}

}  // namespace crossover
