#include "nn/layers.h"

#include <fmt/format.h>

#include "core/error.h"

namespace crossover {

ActivationKind parse_activation(std::string_view name) {
  if (name.empty() || name == "linear" || name == "None" || name == "none")
    return ActivationKind::linear;
  if (name == "relu") return ActivationKind::relu;
  if (name == "sigmoid") return ActivationKind::sigmoid;
  if (name == "tanh") return ActivationKind::tanh;
  if (name == "softmax") return ActivationKind::softmax;
  throw Error("activation", "unknown activation '" + std::string(name) +
                                "': expected linear, relu, sigmoid, tanh or softmax");
}

std::string_view activation_name(ActivationKind a) {
  switch (a) {
    case ActivationKind::linear:
      return "linear";
    case ActivationKind::relu:
      return "relu";
    case ActivationKind::sigmoid:
      return "sigmoid";
    case ActivationKind::tanh:
      return "tanh";
    case ActivationKind::softmax:
      return "softmax";
  }
  return "linear";
}

std::string_view dtype_policy_name(DTypePolicy p) {
  return p == DTypePolicy::mixed_bfloat16 ? "mixed_bfloat16" : "float32";
}

std::string dtype_policy_problem(std::string_view name) {
  if (name == "float32" || name == "mixed_bfloat16") return "";
  std::string why;
  if (name == "mixed_float16" || name == "float16")
    why =
        "the engine has no float16 matrix products (nor the loss scaling that float16 training "
        "needs); 'mixed_bfloat16' is its reduced precision";
  else if (name == "bfloat16")
    why =
        "the engine keeps weights, gradients and optimizer state in float32; 'mixed_bfloat16' "
        "computes the matrix products in bfloat16 with float32 variables";
  else if (name == "float64")
    why = "the engine computes in float32 at most";
  else if (name.starts_with("int8") || name.starts_with("float8") || name.starts_with("int4") ||
           name.starts_with("gptq") || name.starts_with("awq"))
    why = "quantized policies (int8, float8, int4, gptq, awq) are not in the engine";
  else
    why = "the engine trains in floating point (float32 variables)";
  return why + ". Supported policies: 'float32' and 'mixed_bfloat16'";
}

DTypePolicy parse_dtype_policy(std::string_view name, const std::string& where) {
  if (name == "float32") return DTypePolicy::float32;
  if (name == "mixed_bfloat16") return DTypePolicy::mixed_bfloat16;
  std::string shown;
  for (char c : name.substr(0, 64)) shown += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  throw Error(where, "the dtype policy '" + shown +
                         "' is not supported by crossover: " + dtype_policy_problem(name));
}

Precision dtype_policy_precision(DTypePolicy p) {
  return p == DTypePolicy::mixed_bfloat16 ? Precision::bf16 : Precision::fp32;
}

DTypePolicy model_dtype_policy(const std::vector<Layer>& layers) {
  const Layer* first = nullptr;
  for (const Layer& l : layers) {
    if (l.type != LayerType::dense && l.type != LayerType::conv2d) continue;
    if (!first) {
      first = &l;
    } else if (l.dtype_policy != first->dtype_policy) {
      throw Error("dtype",
                  fmt::format("layers '{}' (dtype policy '{}') and '{}' ('{}') differ: crossover "
                              "runs the matrix products of all the Dense and Conv2D layers of a "
                              "model in one precision; give them the same policy (other layers, "
                              "such as Activation('softmax', dtype='float32'), may differ: they "
                              "compute in float32)",
                              first->name, dtype_policy_name(first->dtype_policy), l.name,
                              dtype_policy_name(l.dtype_policy)));
    }
  }
  return first ? first->dtype_policy : DTypePolicy::float32;
}

std::string_view layer_type_name(LayerType t) {
  switch (t) {
    case LayerType::input:
      return "InputLayer";
    case LayerType::flatten:
      return "Flatten";
    case LayerType::dense:
      return "Dense";
    case LayerType::dropout:
      return "Dropout";
    case LayerType::activation:
      return "Activation";
    case LayerType::conv2d:
      return "Conv2D";
    case LayerType::max_pooling2d:
      return "MaxPooling2D";
    case LayerType::average_pooling2d:
      return "AveragePooling2D";
    case LayerType::global_average_pooling2d:
      return "GlobalAveragePooling2D";
    case LayerType::reshape:
      return "Reshape";
    case LayerType::batch_normalization:
      return "BatchNormalization";
  }
  return "Layer";
}

Padding parse_padding(std::string_view name, const std::string& where) {
  if (name == "valid") return Padding::valid;
  if (name == "same") return Padding::same;
  throw Error(where, "padding must be 'valid' or 'same', got '" + std::string(name) + "'");
}

std::string_view padding_name(Padding p) { return p == Padding::same ? "same" : "valid"; }

bool is_image_layer(LayerType t) {
  return t == LayerType::conv2d || t == LayerType::max_pooling2d ||
         t == LayerType::average_pooling2d || t == LayerType::global_average_pooling2d;
}

namespace {

void require_positive(Size2 s, const char* layer, const char* argument) {
  if (s.h < 1 || s.w < 1)
    throw Error(layer, std::string(argument) + " must be at least 1, got (" + std::to_string(s.h) +
                           ", " + std::to_string(s.w) + ")");
}

Layer pooling(LayerType type, const char* name, Size2 pool_size, std::optional<Size2> strides,
              std::string_view padding) {
  require_positive(pool_size, name, "pool_size");
  if (strides) require_positive(*strides, name, "strides");
  Layer l;
  l.type = type;
  l.window = pool_size;
  l.strides = strides.value_or(pool_size);
  l.padding = parse_padding(padding, name);
  return l;
}

}  // namespace

Layer Input(Shape shape) {
  shape_size(shape, "Input");
  if (shape.empty()) throw Error("Input", "the input shape must have at least one dimension");
  Layer l;
  l.type = LayerType::input;
  l.input_shape = std::move(shape);
  return l;
}

Layer Flatten(Shape input_shape) {
  shape_size(input_shape, "Flatten");
  Layer l;
  l.type = LayerType::flatten;
  l.input_shape = std::move(input_shape);
  return l;
}

Layer Dense(int64_t units, std::string_view activation, bool use_bias) {
  if (units < 1) throw Error("Dense", "units must be at least 1, got " + std::to_string(units));
  Layer l;
  l.type = LayerType::dense;
  l.units = units;
  l.activation = parse_activation(activation);
  l.use_bias = use_bias;
  return l;
}

Layer Dropout(double rate) {
  if (!(rate >= 0.0 && rate < 1.0))
    throw Error("Dropout", "rate must be in [0, 1), got " + std::to_string(rate));
  Layer l;
  l.type = LayerType::dropout;
  l.rate = static_cast<float>(rate);
  return l;
}

Layer Activation(std::string_view activation) {
  Layer l;
  l.type = LayerType::activation;
  l.activation = parse_activation(activation);
  return l;
}

Layer Conv2D(int64_t filters, Size2 kernel_size, std::string_view activation, Size2 strides,
             std::string_view padding, bool use_bias) {
  if (filters < 1)
    throw Error("Conv2D", "filters must be at least 1, got " + std::to_string(filters));
  require_positive(kernel_size, "Conv2D", "kernel_size");
  require_positive(strides, "Conv2D", "strides");
  Layer l;
  l.type = LayerType::conv2d;
  l.units = filters;
  l.window = kernel_size;
  l.strides = strides;
  l.padding = parse_padding(padding, "Conv2D");
  l.activation = parse_activation(activation);
  l.use_bias = use_bias;
  return l;
}

Layer MaxPooling2D(Size2 pool_size, std::optional<Size2> strides, std::string_view padding) {
  return pooling(LayerType::max_pooling2d, "MaxPooling2D", pool_size, strides, padding);
}

Layer AveragePooling2D(Size2 pool_size, std::optional<Size2> strides, std::string_view padding) {
  return pooling(LayerType::average_pooling2d, "AveragePooling2D", pool_size, strides, padding);
}

Layer GlobalAveragePooling2D() {
  Layer l;
  l.type = LayerType::global_average_pooling2d;
  return l;
}

Layer Reshape(Shape target_shape) {
  if (target_shape.empty()) throw Error("Reshape", "target_shape needs at least one dimension");
  int inferred = 0;
  for (int64_t d : target_shape) {
    if (d == -1) {
      ++inferred;
    } else if (d < 1) {
      throw Error("Reshape", "target_shape " + shape_to_string(target_shape) +
                                 ": each dimension must be at least 1, or -1 (inferred)");
    }
  }
  if (inferred > 1)
    throw Error("Reshape",
                "target_shape " + shape_to_string(target_shape) + ": only one dimension can be -1");
  Layer l;
  l.type = LayerType::reshape;
  l.target_shape = std::move(target_shape);
  return l;
}

Layer BatchNormalization(double momentum, double epsilon, bool center, bool scale) {
  if (!(momentum >= 0.0 && momentum <= 1.0))
    throw Error("BatchNormalization",
                "momentum must be in [0, 1], got " + std::to_string(momentum));
  if (!(epsilon > 0.0 && epsilon < 1e30))
    throw Error("BatchNormalization", "epsilon must be positive, got " + std::to_string(epsilon));
  Layer l;
  l.type = LayerType::batch_normalization;
  l.momentum = momentum;
  l.epsilon = epsilon;
  l.center = center;
  l.scale = scale;
  return l;
}

}  // namespace crossover
