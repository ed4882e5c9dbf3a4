#include "nn/layers.h"

#include <fmt/format.h>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

ActivationKind parse_activation(std::string_view name) {
  if (name.empty() || name == "linear" || name == "None" || name == "none")
    return ActivationKind::linear;
  if (name == "relu") return ActivationKind::relu;
  if (name == "sigmoid") return ActivationKind::sigmoid;
  if (name == "tanh") return ActivationKind::tanh;
  if (name == "softmax") return ActivationKind::softmax;
  if (name == "elu") return ActivationKind::elu;
  if (name == "selu") return ActivationKind::selu;
  if (name == "leaky_relu") return ActivationKind::leaky_relu;
  if (name == "gelu") return ActivationKind::gelu;
  if (name == "softplus") return ActivationKind::softplus;
  if (name == "swish" || name == "silu") return ActivationKind::swish;
  if (name == "exponential") return ActivationKind::exponential;
  throw Error("activation", "unknown activation '" + std::string(name) +
                                "': expected linear, relu, sigmoid, tanh, softmax, elu, selu, "
                                "leaky_relu, gelu, softplus, swish (silu) or exponential");
}

LayerActivation layer_activation(std::string_view name) {
  const ActivationKind a = parse_activation(name);
  return {a, default_activation_alpha(a)};
}

void Layer::wrong_args() const {
  throw Error(name.empty() ? std::string(layer_type_name(type)) : name,
              "the layer holds another kind's arguments");
}

float default_activation_alpha(ActivationKind a) {
  return a == ActivationKind::leaky_relu ? 0.2f : a == ActivationKind::elu ? 1.0f : 0.0f;
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
    case ActivationKind::elu:
      return "elu";
    case ActivationKind::selu:
      return "selu";
    case ActivationKind::leaky_relu:
      return "leaky_relu";
    case ActivationKind::gelu:
      return "gelu";
    case ActivationKind::softplus:
      return "softplus";
    case ActivationKind::swish:
      return "silu";
    case ActivationKind::exponential:
      return "exponential";
    case ActivationKind::sqrt:
      return "sqrt";
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
    if (!layer_kind(l).has_matrix_products()) continue;
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

Precision model_precision(const std::vector<Layer>& layers, const std::string& asked,
                          const std::string& asked_by, const std::string& source) {
  const DTypePolicy policy = model_dtype_policy(layers);
  const Precision of_layers = dtype_policy_precision(policy);
  if (asked.empty()) return of_layers;
  const Precision p = parse_precision(asked, asked_by);
  if (p == of_layers || (p == Precision::tf32 && policy == DTypePolicy::float32)) return p;
  throw Error(asked_by + " " + asked,
              fmt::format("{}'s Dense and Conv2D layers have the dtype policy '{}', which trains "
                          "in {}: leave {} out, or give those layers the policy \"{}\" (their "
                          "\"dtype\" in a model file; in Keras, set_global_policy before making "
                          "the model)",
                          source, dtype_policy_name(policy), precision_name(of_layers), asked_by,
                          p == Precision::bf16 ? "mixed_bfloat16" : "float32"));
}

std::string_view layer_type_name(LayerType t) { return layer_kind(t).class_name(); }

Padding parse_padding(std::string_view name, const std::string& where) {
  if (name == "valid") return Padding::valid;
  if (name == "same") return Padding::same;
  throw Error(where, "padding must be 'valid' or 'same', got '" + std::string(name) + "'");
}

std::string_view padding_name(Padding p) { return p == Padding::same ? "same" : "valid"; }

bool is_image_layer(LayerType t) { return layer_kind(t).takes_images(); }

// Each layer's constructor (Dense(...), ...) is in its kind's unit, nn/layers/<kind>.cpp.

}  // namespace crossover
