// The element-wise layers: Keras's Subtract, Multiply, Maximum, Minimum and Average, and the
// ops of a custom layer's call() traced (binary_op, unary_op): their arguments and constructors.
#pragma once

#include <string>
#include <string_view>

#include "nn/initializers.h"
#include "nn/layer.h"
#include "nn/regularizers.h"

namespace crossover {

// subtract, multiply, maximum, minimum, average, binary_op: the operation.
struct ElementwiseArgs {
  BinaryOp op = BinaryOp::add;
};

// unary_op: op(x, other), or op(other, x) when operand_first (2 - x); the other operand a weight
// of weight_shape (has_weight; drawn by initializer, named weight_name, "kernel" where empty,
// training when weight_trainable) or else the constant.
struct UnaryOpArgs {
  BinaryOp op = BinaryOp::add;
  bool has_weight = false;
  Shape weight_shape;
  Initializer initializer = GlorotUniform();
  std::string weight_name;
  bool weight_trainable = true;
  Regularizer regularizer;  // add_weight's regularizer (L1, L2, L1L2)
  double constant = 0.0;
  bool operand_first = false;
};

// Keras's Subtract (two inputs), Multiply, Maximum, Minimum and Average (two inputs; more are
// not supported yet): element-wise, broadcasting where one input's last axis is 1.
Layer Subtract();
Layer Multiply();
Layer Maximum();
Layer Minimum();
Layer Average();

// Python's name of the op ("subtract"); parse_binary_op reads it (Error for another).
std::string_view binary_op_name(BinaryOp op);
BinaryOp parse_binary_op(std::string_view name);

// ---- the ops of a custom layer's call(), traced (Python's keras.ops on symbolic tensors) ----
// op(a, b) of two inputs, broadcasting where one's last axis is 1 (x - mean(x, keepdims)).
Layer BinaryOpLayer(BinaryOp op);
// op(x, constant), or op(constant, x) when constant_first: -x is x * -1.
Layer ConstantOp(BinaryOp op, double constant, bool constant_first = false);
// op(x, w) (op(w, x) when weight_first) with a weight w of `shape`: () a scalar, (last axis) a
// row such as a bias. Its variable is `<layer>/<name>`.
Layer WeightOp(BinaryOp op, Shape shape, Initializer initializer, std::string name,
               bool trainable = true, bool weight_first = false);

}  // namespace crossover
