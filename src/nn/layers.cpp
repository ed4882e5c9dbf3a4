#include "nn/layers.h"

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
  }
  return "Layer";
}

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

}  // namespace crossover
