// A layer as the model holds it: what every kind has, and its kind's arguments (nn/layers/<kind>.h;
// nn/layers.h gathers every kind's constructor). A layer here is a description (a value);
// compile() turns a model's layers into a static plan of buffers and kernel calls on one device
// (nn/sequential.cpp).
//
// Images are channels last, as Keras's default: a sample is (height, width, channels), and a
// Conv2D's kernel is (kernel_h, kernel_w, in_channels, filters).
#pragma once

#include <any>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "core/tensor.h"
#include "nn/initializers.h"
#include "nn/regularizers.h"

namespace crossover {

// One value per layer kind, in the order of nn/layers/kinds.h.
enum class LayerType {
#define CROSSOVER_LAYER_KIND(id) id,
#include "nn/layers/kinds.h"
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

// An activation as a layer applies it: the function and its parameter (leaky_relu's
// negative_slope, elu's alpha; default_activation_alpha for a name). Dense, Conv2D,
// Conv2DTranspose, Activation, LeakyReLU and ELU keep one in their arguments.
struct LayerActivation {
  ActivationKind kind = ActivationKind::linear;
  float alpha = 0.0f;
};

// A layer: what every kind has (its type, name, declared input shape, dtype policy, trainable),
// and its kind's own Keras arguments (DenseArgs, ConvArgs, ...: nn/layers/<kind>.h, each with
// Keras's defaults), held by value and reached by their type:
//
//   Layer d = Dense(64, "relu");
//   d.args<DenseArgs>().kernel_initializer = HeNormal();
//
// The kinds read the arguments when the model builds and plans; a step reads them through one
// pointer comparison (std::any_cast), never a lookup by name.
struct Layer {
  LayerType type = LayerType::dense;
  std::string name;   // "dense", "dense_1", ... given by Sequential when empty
  Shape input_shape;  // input / flatten: the per-sample shape, when given
  DTypePolicy dtype_policy = DTypePolicy::float32;  // Keras's "dtype" (see DTypePolicy)
  // Keras's trainable: false freezes the layer (transfer learning). Its weights get no gradient
  // and no update in fit, and count as non-trainable; a BatchNormalization runs in inference mode
  // in fit (its moving statistics used, not updated). The order of the weights is unchanged.
  bool trainable = true;
  // Keras's activity_regularizer (every layer takes one): its penalty on the layer's output,
  // divided by the batch's size as Keras 3 divides it, joins the loss of fit's and evaluate's
  // steps, and its gradient the output's (StepPlan's passes). ActivityRegularization's l1 and l2.
  Regularizer activity;
  // The layers this one is built from, each of its own kind (LayerBuilder::build_inner): a
  // wrapper's layer (TimeDistributed), a recurrent layer's cell. Their parameters count as this
  // layer's, each named "<layer>/<inner>/<variable>" and kept in Keras's weights files under the
  // attribute Keras holds it in (LayerKind::inner_attribute).
  std::vector<Layer> inner;

  // The arguments, of type A: the kind's defaults (A{}) while the layer holds none. Throws
  // Error(name, ...) when it holds another kind's.
  template <class A>
  const A& args() const {
    if (const A* a = std::any_cast<A>(&args_)) return *a;
    if (!args_.has_value()) {
      static const A defaults{};
      return defaults;
    }
    wrong_args();
  }
  // Mutable: made (A{}) when the layer holds none yet (the Keras reader fills a fresh layer);
  // on a non-const layer even a read makes them (std::as_const to read the defaults only).
  template <class A>
  A& args() {
    if (!args_.has_value()) return args_.emplace<A>();
    if (A* a = std::any_cast<A>(&args_)) return *a;
    wrong_args();
  }
  // The arguments when they are of type A, else null.
  template <class A>
  const A* find_args() const {
    return std::any_cast<A>(&args_);
  }
  template <class A>
  A* find_args() {
    return std::any_cast<A>(&args_);
  }

 private:
  [[noreturn]] void wrong_args() const;
  std::any args_;
};

// Requires a name Keras knows: "linear" (or "" / "None"), "relu", "sigmoid", "tanh", "softmax",
// "elu", "selu", "leaky_relu", "gelu", "softplus", "swish" (or "silu"), "exponential". Throws
// Error("activation", ...) otherwise.
ActivationKind parse_activation(std::string_view name);
std::string_view activation_name(ActivationKind a);  // as Keras 3 writes it ("silu" for swish)
// The parameter Keras's function of that name takes by default: leaky_relu's negative_slope 0.2,
// elu's alpha 1; 0 for the others.
float default_activation_alpha(ActivationKind a);
// The activation `name` (parse_activation) with its default parameter (default_activation_alpha).
LayerActivation layer_activation(std::string_view name);
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

}  // namespace crossover
