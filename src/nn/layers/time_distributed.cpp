// TimeDistributed: the layer it holds (Layer::inner[0]) applied to each time step. A sample of
// shape (T, ...) is T rows of the inner layer's input, so a batch of m samples is the inner
// layer's batch of m * T rows in the same buffers: Keras's own TimeDistributed calls the layer on
// each step in turn, and each row's result is the same.
#include "nn/layers/time_distributed.h"

#include <fmt/format.h>

#include <array>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

namespace {

// Why the engine cannot apply `inner` per time step; empty when it can.
std::string inner_problem(const Layer& inner) {
  const LayerKind& k = layer_kind(inner);
  if (k.is_model_input()) return "an InputLayer is not a layer to apply";
  if (k.merges()) return fmt::format("{} takes several inputs", k.class_name());
  if (k.has_moving_statistics())
    return fmt::format(
        "{} inside TimeDistributed is not supported (yet): Keras computes its "
        "statistics per time step",
        k.class_name());
  return {};
}

}  // namespace

Layer TimeDistributed(Layer layer) {
  if (const std::string why = inner_problem(layer); !why.empty())
    throw Error("TimeDistributed", why);
  Layer l;
  l.type = LayerType::time_distributed;
  l.inner = {std::move(layer)};
  return l;
}

namespace {

using namespace keras_config;

class TimeDistributedKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::time_distributed; }
  std::string_view class_name() const override { return "TimeDistributed"; }
  std::string_view base_name() const override { return "time_distributed"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{
        required("layer", {{"class_name", "Dense"}, {"config", {{"units", 2}}}})};
  }
  std::string_view inner_attribute(const Layer&, std::size_t) const override { return "layer"; }

  void describe(const Layer& l, nlohmann::json& j) const override {
    j["layer"] = std::string(layer_kind(inner(l)).class_name());
  }

  // ---- Keras config: {"layer": <the layer, serialized>} ----
  void from_keras(Reader& cfg, Layer& l) const override {
    Layer in = cfg.layer("layer", "TimeDistributed needs the layer it applies");
    if (const std::string why = inner_problem(in); !why.empty()) cfg.fail("layer", why);
    l.inner = {std::move(in)};
  }
  void to_keras(const Layer& l, ojson& c) const override { c["layer"] = layer_json(inner(l)); }
  bool keras_build_config() const override { return true; }

  // ---- what the model asks: the inner layer's ----
  bool identity_outside_training(const Layer& l) const override {
    return layer_kind(inner(l)).identity_outside_training(inner(l));
  }
  bool random_in_training(const Layer& l) const override {
    return layer_kind(inner(l)).random_in_training(inner(l));
  }
  void check_device(const Layer& l, const Backend& b, int ranks) const override {
    layer_kind(inner(l)).check_device(inner(l), b, ranks);
  }

  // (T, ...) -> (T, <the inner layer's output for ...>)
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    if (l.inner.size() != 1) throw Error(l.name, "internal: TimeDistributed holds one layer");
    if (b.shape.size() < 2)
      throw Error(l.name,
                  "TimeDistributed needs samples of at least two axes (time, ...), but "
                  "receives samples of shape " +
                      shape_to_string(b.shape));
    const Shape step(b.shape.begin() + 1, b.shape.end());
    const Shape out = b.build_inner(0, step);
    if (out.empty()) throw Error(l.name, "the layer it applies gives no output per time step");
    b.state.aliases_input = b.state.inner[0].aliases_input;
    Shape shape{b.shape.front()};
    shape.insert(shape.end(), out.begin(), out.end());
    b.shape = std::move(shape);
  }

  std::size_t workspace_bytes(const Layer& l, const LayerState& li, Backend& backend,
                              int64_t batch) const override {
    return layer_kind(inner(l)).workspace_bytes(inner(l), li.inner[0], backend, batch * steps(li));
  }

  void forward(const ForwardStep& s) const override {
    const Layer& in = inner(s.layer);
    const std::array<const float*, 1> xs{s.x};
    ForwardStep f{{s.backend, in, s.state.inner[0], s.slots, s.index, s.m * steps(s.state), s.x,
                   s.y, s.workspace, xs, s.trainable && in.trainable},
                  s.training,
                  false,
                  s.seed,
                  s.counters,
                  s.first_row * steps(s.state)};
    layer_kind(in).forward(f);
  }

  void backward(BackwardStep& s) const override {
    const Layer& in = inner(s.layer);
    const std::array<const float*, 1> xs{s.x};
    BackwardStep b{{s.backend, in, s.state.inner[0], s.slots, s.index, s.m * steps(s.state), s.x,
                    s.y, s.workspace, xs, s.trainable && in.trainable},
                   s.g,
                   s.spare,
                   s.activation_done,
                   s.first,
                   s.after_relu,
                   nullptr,  // its parameters are updated after the pass (not fuses_weight_update)
                   s.opt};
    layer_kind(in).backward(b);
    s.g = b.g;
    s.spare = b.spare;
    s.activation_done = b.activation_done;
  }

 private:
  static const Layer& inner(const Layer& l) {
    if (l.inner.size() != 1) throw Error(l.name, "internal: TimeDistributed holds one layer");
    return l.inner.front();
  }
  // T: the time steps of a sample.
  static int64_t steps(const LayerState& li) { return li.in_shapes.front().front(); }
};

}  // namespace

const LayerKind& time_distributed_layer_kind() {
  static const TimeDistributedKind kind;
  return kind;
}

}  // namespace crossover
