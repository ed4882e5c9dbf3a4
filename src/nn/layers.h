// The layers of a Sequential model, as Keras names them.
//
//   Sequential model({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
//
// A layer here is a description (a value); compile() turns the list into a static plan of
// buffers and kernel calls on one device (nn/sequential.cpp).
//
// Images are channels last, as Keras's default: a sample is (height, width, channels), and a
// Conv2D's kernel is (kernel_h, kernel_w, in_channels, filters).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "core/tensor.h"
#include "nn/initializers.h"

namespace crossover {

enum class LayerType {
  input,
  flatten,
  dense,
  dropout,
  activation,
  conv2d,
  max_pooling2d,
  average_pooling2d,
  global_average_pooling2d,
  global_max_pooling2d,
  reshape,
  batch_normalization,
  layer_normalization,
  add,
  concatenate,
  leaky_relu,
  elu,
  up_sampling2d,
  conv2d_transpose,
  subtract,
  multiply,
  maximum,
  minimum,
  average,
  binary_op,
  unary_op,
  reduce,
};

// Keras's padding: 'valid' (none) or 'same' (the output is ceil(input / stride); an odd total
// padding puts the extra row and column at the bottom and right, as TensorFlow does).
enum class Padding { valid, same };

// A (height, width) pair; one number means both, as Keras's kernel_size=3 means (3, 3).
struct Size2 {
  int64_t h = 0, w = 0;
  Size2(int64_t both) : h(both), w(both) {}  // NOLINT: implicit, like Keras's int argument
  Size2(int64_t height, int64_t width) : h(height), w(width) {}
  bool operator==(const Size2&) const = default;
};

// Keras's dtype policy of a layer (keras.mixed_precision; a model file's "dtype"), as far as the
// engine has it. The engine runs the matrix products of all of a model's Dense and Conv2D layers
// in one precision (model_dtype_policy), so there alone it matters; the other layers compute in
// float32 whatever theirs says.
//   float32         Precision::fp32 (tf32 on a GPU where asked for: float32's arithmetic there)
//   mixed_bfloat16  Precision::bf16: bfloat16 products, float32 weights and optimizer state
enum class DTypePolicy { float32, mixed_bfloat16 };

struct Layer {
  LayerType type = LayerType::dense;
  std::string name;   // "dense", "dense_1", ... given by Sequential when empty
  Shape input_shape;  // input / flatten: the per-sample shape, when given
  int64_t units = 0;  // dense: units; conv2d: filters
  ActivationKind activation = ActivationKind::linear;  // dense, conv2d, activation
  // leaky_relu's negative_slope, elu's alpha (default_activation_alpha for a name)
  float activation_alpha = 0.0f;
  bool use_bias = true;              // dense, conv2d
  float rate = 0.0f;                 // dropout
  Size2 window = 0;                  // conv2d: kernel_size; pooling: pool_size
  Size2 strides = 1;                 // conv2d, pooling
  Padding padding = Padding::valid;  // conv2d, pooling
  Shape target_shape;                // reshape (one dimension may be -1: inferred)
  // batch_normalization, layer_normalization (over the last axis: -1, or tf.keras 2's positive
  // index of it, checked when the model builds; epsilon, center and scale are shared)
  // concatenate: the axis, counting the batch axis as Keras does (-1: the last; only the last is
  // supported)
  int64_t axis = -1;
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;  // beta
  bool scale = true;   // gamma
  // How the parameters start (Keras's kernel_initializer, ...; nn/initializers.h).
  Initializer kernel_initializer = GlorotUniform();  // dense, conv2d
  Initializer bias_initializer = Zeros();            // dense, conv2d
  Initializer gamma_initializer = Ones();            // batch_normalization, layer_normalization
  Initializer beta_initializer = Zeros();
  Initializer moving_mean_initializer = Zeros();
  Initializer moving_variance_initializer = Ones();
  DTypePolicy dtype_policy = DTypePolicy::float32;  // Keras's "dtype" (see DTypePolicy)
  // Keras's trainable: false freezes the layer (transfer learning). Its weights get no gradient
  // and no update in fit, and count as non-trainable; a BatchNormalization runs in inference mode
  // in fit (its moving statistics used, not updated). The order of the weights is unchanged.
  bool trainable = true;
  // subtract, multiply, maximum, minimum, average, binary_op, unary_op: the operation
  // (binary_op, unary_op: the ops a custom layer's call() applies, which Keras has no layer for).
  BinaryOp binary_op = BinaryOp::add;
  // unary_op: its other operand, a weight of weight_shape (its initializer kernel_initializer) or
  // else the constant `constant`; the operation's first operand when operand_first (2 - x).
  bool has_weight = false;
  Shape weight_shape;
  double constant = 0.0;
  bool operand_first = false;
  // unary_op's weight and dense's kernel: the variable's name, as a custom layer's add_weight
  // names it ("kernel" where empty), and whether it trains (add_weight's trainable).
  std::string weight_name;
  bool weight_trainable = true;
  bool reduce_mean = true;  // reduce: the mean over the last axis, else the sum (keepdims)
};

// Requires a name Keras knows: "linear" (or "" / "None"), "relu", "sigmoid", "tanh", "softmax",
// "elu", "selu", "leaky_relu", "gelu", "softplus", "swish" (or "silu"), "exponential". Throws
// Error("activation", ...) otherwise.
ActivationKind parse_activation(std::string_view name);
std::string_view activation_name(ActivationKind a);  // as Keras 3 writes it ("silu" for swish)
// The parameter Keras's function of that name takes by default: leaky_relu's negative_slope 0.2,
// elu's alpha 1; 0 for the others.
float default_activation_alpha(ActivationKind a);
std::string_view layer_type_name(LayerType t);  // "Dense", "Dropout", ... (Keras class names)
// "valid" or "same"; throws Error(where, ...) otherwise.
Padding parse_padding(std::string_view name, const std::string& where);
// Conv2D and the pooling layers: they take (height, width, channels) samples.
bool is_image_layer(LayerType t);
std::string_view padding_name(Padding p);

// "float32" or "mixed_bfloat16": Keras's name of the policy.
std::string_view dtype_policy_name(DTypePolicy p);
// Why the engine cannot train in the Keras dtype policy `name` ("mixed_float16": it has no
// float16 products; quantized ones; ...), ending with the policies it has; empty for "float32"
// and "mixed_bfloat16". One text for the model files and Python's keras.mixed_precision.
std::string dtype_policy_problem(std::string_view name);
// The policy named `name`; throws Error(where, "the dtype policy 'NAME' is not supported by
// crossover: " + dtype_policy_problem(name)) for any other.
DTypePolicy parse_dtype_policy(std::string_view name, const std::string& where);
// The engine's precision for a policy: fp32 for float32, bf16 for mixed_bfloat16.
Precision dtype_policy_precision(DTypePolicy p);
// The policy of the layers whose work is matrix products (Dense, Conv2D), which the engine runs
// in one precision per model; float32 when there are none. Throws Error("dtype", ...) naming the
// first two such layers whose policies differ (other layers may differ: they compute in float32).
// The layers are named as Sequential names them (Sequential::layers()).
DTypePolicy model_dtype_policy(const std::vector<Layer>& layers);
// The precision a model of `layers` trains in: Sequential::compile's rule, which the CLI shares.
// `asked` empty (CompileOptions::precision's default): their policy's (model_dtype_policy, then
// dtype_policy_precision). Given ("fp32", "tf32" or "bf16"), it must agree with that policy: tf32
// agrees with float32 (float32's arithmetic on a GPU, as TensorFlow's TF32 switch); otherwise
// Error("<asked_by> <asked>", ...) in one line naming both, `source` naming the layers' owner
// ("the model", "m.json"). An unknown name is Error(asked_by, ...) (parse_precision).
Precision model_precision(const std::vector<Layer>& layers, const std::string& asked,
                          const std::string& asked_by = "precision",
                          const std::string& source = "the model");

// Keras's InputLayer: the per-sample shape, e.g. Input({28, 28}).
Layer Input(Shape shape);
// Flattens each sample to a vector; with a shape it also declares the model's input.
Layer Flatten(Shape input_shape = {});
// y = activation(x . kernel + bias); kernel (inputs, units) glorot-uniform, bias zeros.
// Requires units >= 1.
Layer Dense(int64_t units, std::string_view activation = "linear", bool use_bias = true);
// Inverted dropout: in training, zeroes each unit with probability rate and scales the rest by
// 1 / (1 - rate); the identity in evaluate and predict. Requires 0 <= rate < 1.
Layer Dropout(double rate);
// Applies an activation on its own.
Layer Activation(std::string_view activation);
// Keras's LeakyReLU layer: x where x >= 0, else negative_slope * x. Requires negative_slope >= 0.
Layer LeakyReLU(double negative_slope = 0.3);
// Keras's ELU layer: x where x > 0, else alpha * (exp(x) - 1). Requires alpha >= 0.
Layer ELU(double alpha = 1.0);
// 2-D convolution over (height, width, channels) samples: y = activation(conv(x, kernel) + bias);
// kernel (kernel_h, kernel_w, in_channels, filters) glorot-uniform with Keras's receptive-field
// fans (fan_in = kernel_h * kernel_w * in_channels, fan_out = kernel_h * kernel_w * filters),
// bias (filters) zeros. Requires filters, kernel_size and strides >= 1; padding "valid" or
// "same". (Keras's dilation_rate and groups are 1; nothing else is supported.)
Layer Conv2D(int64_t filters, Size2 kernel_size, std::string_view activation = "linear",
             Size2 strides = 1, std::string_view padding = "valid", bool use_bias = true);
// Keras's Conv2DTranspose (channels_last): the transposed 2-D convolution, y = activation(
// conv_transpose(x, kernel) + bias), the input gradient of the Conv2D that would map y's shape to
// x's; kernel (kernel_h, kernel_w, filters, in_channels) as Keras keeps it, glorot-uniform with
// Keras's fans (fan_in = kernel_h * kernel_w * filters, fan_out = kernel_h * kernel_w *
// in_channels), bias (filters) zeros. Output size, Keras's with output_padding None: 'valid'
// (in - 1) * stride + max(kernel, stride), 'same' in * stride. Requires filters, kernel_size and
// strides >= 1. (Keras's output_padding is None and dilation_rate 1; nothing else is supported.)
Layer Conv2DTranspose(int64_t filters, Size2 kernel_size, std::string_view activation = "linear",
                      Size2 strides = 1, std::string_view padding = "valid", bool use_bias = true);
// The maximum over each pool_size window of each channel; strides default to pool_size.
Layer MaxPooling2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                   std::string_view padding = "valid");
// The mean over each window (padded positions not counted, as in Keras).
Layer AveragePooling2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                       std::string_view padding = "valid");
// (height, width, channels) -> (channels): the mean of each channel.
Layer GlobalAveragePooling2D();
// (height, width, channels) -> (channels): the maximum of each channel.
Layer GlobalMaxPooling2D();
// The same values in a new per-sample shape; one dimension may be -1 (inferred).
Layer Reshape(Shape target_shape);
// Keras's BatchNormalization over the last axis (the channels of an image, the features after
// Dense): y = gamma * (x - mean) / sqrt(variance + epsilon) + beta. In fit, mean and variance are
// the batch's (the biased variance, over every axis but the last), and the moving statistics
// become moving * momentum + batch * (1 - momentum); in evaluate and predict the moving statistics
// are used. Weights, in Keras's order: gamma (ones; when scale), beta (zeros; when center),
// moving_mean (zeros) and moving_variance (ones), each (channels,); the moving statistics are not
// trainable. Requires 0 <= momentum <= 1 and epsilon > 0.
Layer BatchNormalization(double momentum = 0.99, double epsilon = 1e-3, bool center = true,
                         bool scale = true);
// Keras's LayerNormalization over the last axis (axis=-1 only; rms_scaling=False only): each
// sample's last-axis vector x (n features) becomes y = (x - mean) / sqrt(variance + epsilon) *
// gamma + beta, mean and (biased) variance over those n values, the same in fit, evaluate and
// predict. Weights, in Keras's order: gamma (ones; when scale), beta (zeros; when center), each
// (n,). Requires epsilon > 0.
Layer LayerNormalization(double epsilon = 1e-3, bool center = true, bool scale = true);
// Keras's UpSampling2D (channels_last, interpolation 'nearest' only): each value of a (height,
// width, channels) sample repeated over a size.h x size.w block, giving (height * size.h, width *
// size.w, channels); no weights. Requires size (Layer::window) >= 1; any other interpolation is
// refused.
Layer UpSampling2D(Size2 size = 2, std::string_view interpolation = "nearest");

// ---- merging layers: two or more inputs, in a functional model (LayerGraph) ----
// The element-wise sum of inputs of one shape.
Layer Add();
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
// The mean (or sum) over the last axis, keeping it as 1 (keepdims=True).
Layer ReduceLastAxis(bool mean);

// The inputs joined along the last axis (axis=-1 or the rank counting the batch axis); the other
// axes must agree.
Layer Concatenate(int64_t axis = -1);

}  // namespace crossover
