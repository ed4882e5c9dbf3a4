// ActivityRegularization (Keras's layer: the identity with an activity regularizer) and AddLoss
// (a traced call()'s add_loss term): no buffer of their own (their output is their input's), no
// weights. The model's passes apply a layer's activity penalty (nn/model/plan.cpp, for every
// kind); AddLoss's term is its own forward and backward here. Both are Backend::regularize.
#include "nn/layers/activity_regularization.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer ActivityRegularization(double l1, double l2) {
  if (!(std::isfinite(l1) && l1 >= 0.0 && std::isfinite(l2) && l2 >= 0.0))
    throw Error("ActivityRegularization",
                fmt::format("l1 and l2 must be finite numbers >= 0, got {} and {}", l1, l2));
  Layer l;
  l.type = LayerType::activity_regularization;
  l.activity = {Regularizer::Kind::l1_l2, l1, l2};
  return l;
}

Layer AddLoss(double scale, bool mean) {
  if (!std::isfinite(scale))
    throw Error("add_loss",
                fmt::format("the term's factor must be a finite number, got {}", scale));
  Layer l;
  l.type = LayerType::add_loss;
  AddLossArgs& a = l.args<AddLossArgs>();
  a.scale = scale;
  a.mean = mean;
  return l;
}

namespace {

using namespace keras_config;

// The output is the input's buffer.
void identity_build(LayerBuilder& b) { b.state.aliases_input = true; }

class ActivityRegularizationKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::activity_regularization; }
  std::string_view class_name() const override { return "ActivityRegularization"; }
  std::string_view base_name() const override { return "activity_regularization"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"l1", 0.0}, {"l2", 0.0}};
  }
  bool keeps_shape() const override { return true; }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["l1"] = l.activity.l1;
    j["l2"] = l.activity.l2;
  }
  // Keras's config: l1 and l2 (its activity_regularizer is theirs, not written).
  void from_keras(Reader& cfg, Layer& l) const override {
    if (const json* a = cfg.find("activity_regularizer"); a && !a->is_null())
      cfg.fail("activity_regularizer", "ActivityRegularization takes l1 and l2 instead");
    const double l1 = cfg.number("l1", 0.0), l2 = cfg.number("l2", 0.0);
    for (const auto& [key, v] : {std::pair{"l1", l1}, std::pair{"l2", l2}})
      if (!(std::isfinite(v) && v >= 0.0))
        cfg.fail(key, fmt::format("must be a finite number >= 0, got {}", v));
    l.activity = ActivityRegularization(l1, l2).activity;
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c.erase("activity_regularizer");
    c["l1"] = l.activity.l1;
    c["l2"] = l.activity.l2;
  }
  void build(LayerBuilder& b) const override { identity_build(b); }
};

class AddLossKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::add_loss; }
  std::string_view class_name() const override { return "AddLoss"; }
  std::string_view base_name() const override { return "add_loss"; }
  bool keeps_shape() const override { return true; }
  bool adds_loss() const override { return true; }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const AddLossArgs& a = l.args<AddLossArgs>();
    j["scale"] = a.scale;
    j["op"] = a.mean ? "mean" : "sum";
  }
  [[noreturn]] static void no_keras_class(const Layer& l) {
    throw Error(l.name,
                "an add_loss() term of a custom layer's call() has no Keras layer class: writing "
                "or reading it in a Keras model file is not supported (yet); save the weights "
                "instead");
  }
  void from_keras(Reader&, Layer& l) const override { no_keras_class(l); }
  void to_keras(const Layer& l, ojson&) const override { no_keras_class(l); }
  void build(LayerBuilder& b) const override { identity_build(b); }

  // The factor of each value in the term over a batch of `rows` (the global batch's): the mean
  // divides by every value of the batch, the sum by none.
  static float linear(const LayerStep& s, int64_t rows) {
    const AddLossArgs& a = s.layer.args<AddLossArgs>();
    const double values = static_cast<double>(rows) * static_cast<double>(s.state.out_width);
    return static_cast<float>(a.mean ? a.scale / std::max(values, 1.0) : a.scale);
  }
  // The term, times the batch's rows, into the step's loss sum (whose mean over the rows is the
  // batch's loss): each rank its rows' share.
  void forward(const ForwardStep& s) const override {
    if (s.loss_rows <= 0 || !s.counters) return;
    s.backend.regularize(s.x, nullptr, s.m * s.state.out_width, 0.0f, 0.0f, linear(s, s.loss_rows),
                         s.counters, s.loss_rows);
  }
  // Its gradient added to the output's (which the model made zero when no layer reads it).
  void backward(BackwardStep& s) const override {
    if (s.loss_rows > 0 && !s.first)
      s.backend.regularize(s.x, s.g, s.m * s.state.out_width, 0.0f, 0.0f, linear(s, s.loss_rows),
                           nullptr, 0);
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& activity_regularization_layer_kind() {
  static const ActivityRegularizationKind kind;
  return kind;
}

const LayerKind& add_loss_layer_kind() {
  static const AddLossKind kind;
  return kind;
}

}  // namespace crossover
