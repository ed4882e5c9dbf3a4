// reduce: the mean or the sum over the last axis, keeping it as 1 (keepdims=True), as a custom
// layer's call() computes it (tf.reduce_mean(x, axis=-1, keepdims=True), keras.ops.mean); Keras has
// no layer class for it.
#include "nn/layers/reduce.h"

#include <string>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer ReduceLastAxis(bool mean) {
  Layer l;
  l.type = LayerType::reduce;
  l.args<ReduceArgs>().mean = mean;
  return l;
}

namespace {

class ReduceKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::reduce; }
  std::string_view class_name() const override { return "Reduce"; }
  std::string_view base_name() const override { return "reduce"; }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["op"] = l.args<ReduceArgs>().mean ? "mean" : "sum";
  }
  [[noreturn]] static void no_keras_class(const Layer& l) {
    throw Error(l.name, std::string("an op of a custom layer's call() (reduce_") +
                            (l.args<ReduceArgs>().mean ? "mean" : "sum") +
                            ") has no Keras layer class: writing or reading it in a Keras model "
                            "file is not supported (yet); save the weights instead");
  }
  void from_keras(keras_config::Reader&, Layer& l) const override { no_keras_class(l); }
  void to_keras(const Layer& l, keras_config::ojson&) const override { no_keras_class(l); }

  void build(LayerBuilder& b) const override {
    if (b.shape.empty()) throw Error(b.layer.name, "a reduction needs samples of rank 1 or more");
    b.state.own<BinaryShape>() = {};
    b.state.own<BinaryShape>().cols = b.shape.back();
    b.state.own<BinaryShape>().rows =
        b.shape.back() == 0 ? 0 : shape_size(b.shape, b.layer.name) / b.shape.back();
    b.shape.back() = 1;
  }
  float scale(const LayerStep& s) const {
    return s.layer.args<ReduceArgs>().mean
               ? 1.0f / static_cast<float>(s.state.own<BinaryShape>().cols)
               : 1.0f;
  }
  // y (rows) = scale * the row sums of x (rows, cols).
  void forward(const ForwardStep& s) const override {
    s.backend.row_sum(s.x, s.y, s.m * s.state.own<BinaryShape>().rows,
                      s.state.own<BinaryShape>().cols, scale(s));
  }
  // dx (rows, cols) = scale * dy (rows, 1), each row's value over its columns.
  void backward(BackwardStep& s) const override {
    if (!s.first) {
      BinaryShape shape;
      shape.rows = s.m * s.state.own<BinaryShape>().rows;
      shape.cols = s.state.own<BinaryShape>().cols;
      shape.a = Broadcast::column;
      shape.b = Broadcast::scalar;
      shape.b_value = scale(s);
      s.backend.binary_forward(BinaryOp::multiply, shape, s.g, nullptr, s.spare);
      s.swap();
    }
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& reduce_layer_kind() {
  static const ReduceKind kind;
  return kind;
}

}  // namespace crossover
