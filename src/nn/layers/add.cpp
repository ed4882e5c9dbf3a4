// Add: the element-wise sum of two or more inputs of one shape (Keras's keras.layers.Add), the
// join of a skip connection.
#include "nn/layers/add.h"

#include <string>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer Add() {
  Layer l;
  l.type = LayerType::add;
  return l;
}

namespace {

using namespace keras_config;

class AddKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::add; }
  std::string_view class_name() const override { return "Add"; }
  std::string_view base_name() const override { return "add"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{};
  }
  bool merges() const override { return true; }
  bool keeps_shape() const override { return true; }

  // ---- Keras config: nothing of its own ----
  void from_keras(Reader&, Layer&) const override {}
  void to_keras(const Layer&, ojson&) const override {}
  bool keras_build_config() const override { return true; }

  // ---- engine ----
  void build(LayerBuilder& b) const override {
    const std::vector<Shape>& in = b.state.in_shapes;
    for (std::size_t k = 1; k < in.size(); ++k)
      if (in[k] != in[0])
        throw Error(b.layer.name, "Add needs inputs of one shape, but input 0 is " +
                                      shape_to_string(in[0]) + " and input " + std::to_string(k) +
                                      " is " + shape_to_string(in[k]));
  }

  // y = x0 + x1 (+ x2 ...).
  void forward(const ForwardStep& s) const override {
    const int64_t n = s.m * s.state.out_width;
    s.backend.add(s.xs[0], s.xs[1], s.y, n);
    for (std::size_t k = 2; k < s.xs.size(); ++k) s.backend.add(s.y, s.xs[k], s.y, n);
  }
  // Each input's gradient is the output's.
  void backward(BackwardStep& s) const override {
    const int64_t w = s.state.out_width;
    for (float* dx : s.input_grads)
      if (dx) s.backend.copy_columns(s.g, w, 0, dx, w, 0, s.m, w);
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& add_layer_kind() {
  static const AddKind kind;
  return kind;
}

}  // namespace crossover
