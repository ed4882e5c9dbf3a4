// InputLayer: declares the per-sample input shape; computes nothing.
#include "nn/layers/input.h"

#include <fmt/format.h>

#include "backends/fused_mlp.h"
#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer Input(Shape shape) {
  shape_size(shape, "Input");
  if (shape.empty()) throw Error("Input", "the input shape must have at least one dimension");
  Layer l;
  l.type = LayerType::input;
  l.input_shape = std::move(shape);
  return l;
}

namespace {

using namespace keras_config;

class InputKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::input; }
  std::string_view class_name() const override { return "InputLayer"; }
  std::string_view base_name() const override { return "input_layer"; }
  void describe_fused(const Layer&, FusedLayerView& v) const override {
    v.kind = FusedLayerView::Kind::reshape;
  }
  bool declares_input() const override { return true; }
  bool is_model_input() const override { return true; }

  // batch_shape (Keras 3) or shape, else batch_input_shape (tf.keras 2) or another of the
  // fields every layer may carry.
  void from_keras(Reader& cfg, Layer& l) const override {
    if (const json* b = cfg.find("batch_shape"))
      l.input_shape = parse_shape(*b, true, cfg.ref(), "batch_shape");
    else if (const json* s = cfg.find("shape"))
      l.input_shape = parse_shape(*s, false, cfg.ref(), "shape");
    else
      l.input_shape = cfg.declared_input;
    for (const char* f : {"sparse", "ragged", "optional"})
      cfg.refuse_true(f, std::string(f) + " inputs are not supported");
    cfg.refuse_set("input_tensor", "an input tensor is not supported");
    if (l.input_shape.empty())
      cfg.fail("batch_shape", "an InputLayer needs its shape (batch_shape or batch_input_shape)");
    // Its "dtype" is its input's (Keras writes "float32" whatever the policy), not a policy.
    if (l.dtype_policy != DTypePolicy::float32)
      cfg.fail("dtype", "an InputLayer's dtype is its input's: crossover takes float32 inputs");
  }
  void to_keras(const Layer& l, ojson& c) const override {
    ojson batch = ojson::array({nullptr});
    for (int64_t d : l.input_shape) batch.push_back(d);
    c = ojson{{"batch_shape", batch},
              {"dtype", "float32"},
              {"sparse", false},
              {"ragged", false},
              {"name", l.name}};
  }

  // ---- engine: the declared shape is checked; the output is the input ----
  void build(LayerBuilder& b) const override { check_declared_input(b); }
};

}  // namespace

const LayerKind& input_layer_kind() {
  static const InputKind kind;
  return kind;
}

}  // namespace crossover
