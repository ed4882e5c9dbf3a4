// Element-wise arithmetic of two operands, with numpy's broadcasting where one input's last axis is
// 1 (backend binary_forward / binary_backward): Keras's merging layers Subtract, Multiply, Maximum,
// Minimum and Average, and the two ops a custom layer's call() is traced into (Python's keras.ops
// and tf ops on symbolic tensors), which Keras has no layer class for: binary_op (two tensors,
// x - mean) and unary_op (a tensor and a weight, x * w + b's bias, or a constant, -x as x * -1).
#include "nn/layers/elementwise.h"

#include <string>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

namespace {

Layer merge_layer(LayerType type, BinaryOp op) {
  Layer l;
  l.type = type;
  l.args<ElementwiseArgs>().op = op;
  return l;
}

int64_t rows_of(const Shape& s) {
  int64_t rows = 1;
  for (std::size_t k = 0; k + 1 < s.size(); ++k) rows *= s[k];
  return rows;
}

// Two inputs of per-sample shapes a and b: of one shape, or one whose last axis is 1 where the
// other's is not and the rest agree (numpy's broadcasting of that axis). Fills the state's shape
// (rows per sample) and returns the output's.
Shape broadcast_two(const Shape& a, const Shape& b, LayerState& st, const std::string& where,
                    std::string_view what) {
  BinaryShape& s = st.own<BinaryShape>();
  s = {};
  const bool same_rest =
      a.size() == b.size() && !a.empty() && std::equal(a.begin(), a.end() - 1, b.begin());
  if (a == b && !a.empty()) {
    s.a = s.b = Broadcast::full;
  } else if (same_rest && b.back() == 1) {
    s.a = Broadcast::full, s.b = Broadcast::column;
  } else if (same_rest && a.back() == 1) {
    s.a = Broadcast::column, s.b = Broadcast::full;
  } else {
    throw Error(where, std::string(what) + " of inputs of shapes " + shape_to_string(a) + " and " +
                           shape_to_string(b) +
                           " is not supported (yet): crossover broadcasts inputs of one shape, or "
                           "one whose last axis is 1 where the rest agree");
  }
  const Shape& out = s.a == Broadcast::full ? a : b;
  s.rows = rows_of(out);
  s.cols = out.back();
  return out;
}

// The step's shape: rows of every sample.
BinaryShape step_shape(const LayerStep& s) {
  BinaryShape shape = s.state.own<BinaryShape>();
  shape.rows *= s.m;
  return shape;
}

// What the merging layers and binary_op share: two inputs, broadcast.
class TwoInputKind : public LayerKind {
 public:
  bool merges() const override { return true; }
  bool keeps_shape() const override { return true; }

  void build(LayerBuilder& b) const override {
    const std::vector<Shape>& in = b.state.in_shapes;
    if (in.size() != 2)
      throw Error(b.layer.name, std::string(class_name()) + " with " + std::to_string(in.size()) +
                                    " inputs is not supported (yet): it takes two");
    b.shape = broadcast_two(in[0], in[1], b.state, b.layer.name, class_name());
  }
  void forward(const ForwardStep& s) const override {
    s.backend.binary_forward(s.layer.args<ElementwiseArgs>().op, step_shape(s), s.xs[0], s.xs[1],
                             s.y);
  }
  void backward(BackwardStep& s) const override {
    s.backend.binary_backward(s.layer.args<ElementwiseArgs>().op, step_shape(s), s.xs[0], s.xs[1],
                              s.g, s.input_grads[0], s.input_grads[1]);
    s.activation_done = false;
  }
};

// Keras's Subtract, Multiply, Maximum, Minimum, Average: no config of their own.
class MergeKind final : public TwoInputKind {
 public:
  MergeKind(LayerType type, std::string_view class_name, std::string_view base_name, BinaryOp op)
      : type_(type), class_(class_name), base_(base_name), op_(op) {}
  LayerType type() const override { return type_; }
  std::string_view class_name() const override { return class_; }
  std::string_view base_name() const override { return base_; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{};
  }
  void from_keras(keras_config::Reader&, Layer& l) const override {
    l.args<ElementwiseArgs>().op = op_;
  }
  void to_keras(const Layer&, keras_config::ojson&) const override {}
  bool keras_build_config() const override { return true; }

 private:
  LayerType type_;
  std::string_view class_, base_;
  BinaryOp op_;
};

// The traced ops have no Keras class: a model holding one cannot be a Keras model file.
[[noreturn]] void no_keras_class(const Layer& l) {
  const auto* u = l.find_args<UnaryOpArgs>();
  const BinaryOp op = u ? u->op : l.args<ElementwiseArgs>().op;
  throw Error(l.name,
              "an op of a custom layer's call() (" + std::string(binary_op_name(op)) +
                  ") has no Keras layer class: writing or reading it in a Keras model file is "
                  "not supported (yet); save the weights instead");
}

class BinaryOpKind final : public TwoInputKind {
 public:
  LayerType type() const override { return LayerType::binary_op; }
  std::string_view class_name() const override { return "BinaryOp"; }
  std::string_view base_name() const override { return "binary_op"; }
  void from_keras(keras_config::Reader&, Layer& l) const override { no_keras_class(l); }
  void to_keras(const Layer& l, keras_config::ojson&) const override { no_keras_class(l); }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["op"] = binary_op_name(l.args<ElementwiseArgs>().op);
  }
};

// op(x, w) or op(x, c) (the other way round with operand_first).
class UnaryOpKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::unary_op; }
  std::string_view class_name() const override { return "UnaryOp"; }
  std::string_view base_name() const override { return "unary_op"; }
  bool keeps_shape() const override { return true; }
  void from_keras(keras_config::Reader&, Layer& l) const override { no_keras_class(l); }
  void to_keras(const Layer& l, keras_config::ojson&) const override { no_keras_class(l); }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const UnaryOpArgs& a = l.args<UnaryOpArgs>();
    j["op"] = binary_op_name(a.op);
    if (!a.has_weight) j["constant"] = a.constant;
  }
  std::vector<std::string> weight_names(const Layer& l) const override {
    if (!l.args<UnaryOpArgs>().has_weight) return {};
    return {l.name + "/" + variable(l)};
  }

  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const UnaryOpArgs& a = l.args<UnaryOpArgs>();
    if (b.shape.empty()) throw Error(l.name, "an element-wise op needs samples of rank 1 or more");
    BinaryShape& s = b.state.own<BinaryShape>();
    s = {};
    s.rows = rows_of(b.shape);
    s.cols = b.shape.back();
    Broadcast other = Broadcast::scalar;
    if (a.has_weight) {
      int64_t n = 1;
      for (int64_t d : a.weight_shape) n *= d;
      if (a.weight_shape.size() == 1 && a.weight_shape[0] == s.cols && s.cols != 1)
        other = Broadcast::row;
      else if (n != 1)
        throw Error(l.name, "a weight of shape " + shape_to_string(a.weight_shape) +
                                " with samples of " + "shape " + shape_to_string(b.shape) +
                                " is not supported (yet): crossover broadcasts a scalar weight "
                                "or one of the last axis's size (a bias)");
      b.regularize(b.add_param(variable(l), a.weight_shape, a.initializer, a.weight_trainable),
                   a.regularizer);
    }
    (a.operand_first ? s.a : s.b) = other;
    (a.operand_first ? s.b : s.a) = Broadcast::full;
    (a.operand_first ? s.a_value : s.b_value) = static_cast<float>(a.constant);
  }
  void forward(const ForwardStep& s) const override {
    const float* w = s.value(s.state.param(variable(s.layer)));  // null: the constant
    const UnaryOpArgs& a = s.layer.args<UnaryOpArgs>();
    const bool first = a.operand_first;
    s.backend.binary_forward(a.op, step_shape(s), first ? w : s.x, first ? s.x : w, s.y);
  }
  void backward(BackwardStep& s) const override {
    const UnaryOpArgs& a = s.layer.args<UnaryOpArgs>();
    const bool first = a.operand_first;
    const float* w = s.value(s.state.param(variable(s.layer)));
    float* dw = s.trainable ? s.grad(s.state.param(variable(s.layer))) : nullptr;
    float* dx = s.first ? nullptr : s.spare;
    if (dw || dx)
      s.backend.binary_backward(a.op, step_shape(s), first ? w : s.x, first ? s.x : w, s.g,
                                first ? dw : dx, first ? dx : dw);
    if (dx) s.swap();
    s.activation_done = false;
  }

 private:
  static std::string variable(const Layer& l) {
    const std::string& name = l.args<UnaryOpArgs>().weight_name;
    return name.empty() ? "kernel" : name;
  }
};

}  // namespace

std::string_view binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add:
      return "add";
    case BinaryOp::subtract:
      return "subtract";
    case BinaryOp::multiply:
      return "multiply";
    case BinaryOp::divide:
      return "divide";
    case BinaryOp::maximum:
      return "maximum";
    case BinaryOp::minimum:
      return "minimum";
    case BinaryOp::average:
      return "average";
  }
  return "?";
}

BinaryOp parse_binary_op(std::string_view name) {
  for (BinaryOp op : {BinaryOp::add, BinaryOp::subtract, BinaryOp::multiply, BinaryOp::divide,
                      BinaryOp::maximum, BinaryOp::minimum, BinaryOp::average})
    if (binary_op_name(op) == name) return op;
  throw Error("op", "unknown element-wise op '" + std::string(name) +
                        "' (add, subtract, multiply, divide, maximum, minimum, average)");
}

Layer Subtract() { return merge_layer(LayerType::subtract, BinaryOp::subtract); }
Layer Multiply() { return merge_layer(LayerType::multiply, BinaryOp::multiply); }
Layer Maximum() { return merge_layer(LayerType::maximum, BinaryOp::maximum); }
Layer Minimum() { return merge_layer(LayerType::minimum, BinaryOp::minimum); }
Layer Average() { return merge_layer(LayerType::average, BinaryOp::average); }
Layer BinaryOpLayer(BinaryOp op) { return merge_layer(LayerType::binary_op, op); }

Layer ConstantOp(BinaryOp op, double constant, bool constant_first) {
  Layer l;
  l.type = LayerType::unary_op;
  UnaryOpArgs& a = l.args<UnaryOpArgs>();
  a.op = op;
  a.constant = constant;
  a.operand_first = constant_first;
  return l;
}

Layer WeightOp(BinaryOp op, Shape shape, Initializer initializer, std::string name, bool trainable,
               bool weight_first) {
  Layer l;
  l.type = LayerType::unary_op;
  UnaryOpArgs& a = l.args<UnaryOpArgs>();
  a.op = op;
  a.has_weight = true;
  a.weight_shape = std::move(shape);
  a.initializer = std::move(initializer);
  a.weight_name = std::move(name);
  a.weight_trainable = trainable;
  a.operand_first = weight_first;
  return l;
}

const LayerKind& subtract_layer_kind() {
  static const MergeKind kind(LayerType::subtract, "Subtract", "subtract", BinaryOp::subtract);
  return kind;
}
const LayerKind& multiply_layer_kind() {
  static const MergeKind kind(LayerType::multiply, "Multiply", "multiply", BinaryOp::multiply);
  return kind;
}
const LayerKind& maximum_layer_kind() {
  static const MergeKind kind(LayerType::maximum, "Maximum", "maximum", BinaryOp::maximum);
  return kind;
}
const LayerKind& minimum_layer_kind() {
  static const MergeKind kind(LayerType::minimum, "Minimum", "minimum", BinaryOp::minimum);
  return kind;
}
const LayerKind& average_layer_kind() {
  static const MergeKind kind(LayerType::average, "Average", "average", BinaryOp::average);
  return kind;
}
const LayerKind& binary_op_layer_kind() {
  static const BinaryOpKind kind;
  return kind;
}
const LayerKind& unary_op_layer_kind() {
  static const UnaryOpKind kind;
  return kind;
}

}  // namespace crossover
