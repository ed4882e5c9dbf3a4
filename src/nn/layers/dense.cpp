// Dense: y = activation(x . kernel + bias), Keras's fully connected layer.
#include "nn/layers/dense.h"

#include <fmt/format.h>

#include "backends/fused_mlp.h"
#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer Dense(int64_t units, std::string_view activation, bool use_bias) {
  if (units < 1) throw Error("Dense", "units must be at least 1, got " + std::to_string(units));
  Layer l;
  l.type = LayerType::dense;
  DenseArgs& a = l.args<DenseArgs>();
  a.units = units;
  a.activation = layer_activation(activation);
  a.use_bias = use_bias;
  return l;
}

namespace {

using namespace keras_config;

class DenseKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::dense; }
  std::string_view class_name() const override { return "Dense"; }
  std::string_view base_name() const override { return "dense"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{required("units", 4), {"activation", nullptr}} +
           keras_config::kernel_and_bias_arguments() +
           keras_config::Arguments{
               {"lora_rank", nullptr}, {"lora_alpha", nullptr}, {"quantization_config", nullptr}};
  }
  bool has_matrix_products() const override { return true; }
  std::vector<std::string> weight_names(const Layer& l) const override {
    const DenseArgs& a = l.args<DenseArgs>();
    // A custom layer's matmul (Python's tracing) names its kernel as add_weight did.
    const std::string kernel = l.name + "/" + (a.weight_name.empty() ? "kernel" : a.weight_name);
    if (!a.use_bias) return {kernel};
    return {kernel, l.name + "/bias"};
  }

  // ---- command line: dense:UNITS[:ACTIVATION] ----
  std::string_view cli_name() const override { return "dense"; }
  std::string_view cli_syntax() const override { return "dense:UNITS[:ACTIVATION]"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() < 2 || f.size() > 3) return std::nullopt;
    return Dense(f.whole(1), f.text_or(2, "linear"));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const DenseArgs& a = l.args<DenseArgs>();
    j["units"] = a.units;
    j["activation"] = activation_name(a.activation.kind);
    j["use_bias"] = a.use_bias;
  }

  // ---- Keras config ----
  void from_keras(Reader& cfg, Layer& l) const override {
    DenseArgs& a = l.args<DenseArgs>();
    a.units = cfg.count("units", "Dense needs units");
    cfg.activation(a.activation);
    cfg.kernel_and_bias(a.use_bias, a.kernel_initializer, a.bias_initializer, a.kernel_regularizer,
                        a.bias_regularizer);
  }
  void to_keras(const Layer& l, ojson& c) const override {
    const DenseArgs& a = l.args<DenseArgs>();
    c["units"] = a.units;
    c["activation"] = activation_json(a.activation);
    write_kernel_and_bias(c, a.use_bias, a.kernel_initializer, a.bias_initializer,
                          a.kernel_regularizer, a.bias_regularizer, false);
  }
  bool keras_build_config() const override { return true; }
  int64_t check_size(const Layer& l, int64_t width, int64_t,
                     const std::string& where) const override {
    const int64_t units = l.args<DenseArgs>().units;
    if (width > kMaxElements / units)
      throw Error(where, fmt::format("layer '{}' field units: a {} x {} kernel is absurdly large",
                                     printable(l.name), width, units));
    return units;
  }

  // ---- engine ----
  bool defers_activation() const override { return true; }
  bool applies_activation() const override { return true; }
  bool fuses_weight_update() const override { return true; }
  void describe_fused(const Layer&, FusedLayerView& v) const override {
    v.kind = FusedLayerView::Kind::dense;
  }
  LayerActivation activation(const Layer& l) const override {
    return l.args<DenseArgs>().activation;
  }

  // kernel (inputs, units), bias (units). On samples of several axes, as Keras's Dense: on the
  // last one, (..., inputs) -> (..., units), each position a row of the product.
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const DenseArgs& a = l.args<DenseArgs>();
    if (b.shape.empty()) throw Error(l.name, "Dense needs samples of at least one axis");
    b.regularize(b.add_param(a.weight_name.empty() ? "kernel" : a.weight_name,
                             {b.shape.back(), a.units}, a.kernel_initializer, a.weight_trainable),
                 a.kernel_regularizer);
    if (a.use_bias)
      b.regularize(b.add_param("bias", {a.units}, a.bias_initializer), a.bias_regularizer);
    b.shape.back() = a.units;
  }
  // The rows of the products for a batch of m samples (m times the positions of a sample's last
  // axis), and the kernel's inputs.
  static int64_t rows(const LayerState& li, int64_t m) { return m * (li.in_width / inputs(li)); }
  static int64_t inputs(const LayerState& li) { return li.in_shapes.front().back(); }
  static int64_t units(const LayerState& li) { return li.out_shape.back(); }

  // gelu's and swish's pre-activation output (m, units), which their gradient needs.
  std::size_t workspace_bytes(const Layer&, const LayerState& li, Backend&,
                              int64_t batch) const override {
    return pre_activation_bytes(li, batch);
  }

  // The kernel's variable name: "kernel", or a custom layer's add_weight name (Python's tracing).
  static int kernel(const LayerStep& s) {
    const std::string& custom = s.layer.args<DenseArgs>().weight_name;
    return s.state.param(custom.empty() ? "kernel" : custom);
  }

  // y(m, units) = act(x(m, in) . kernel(in, units) + bias): bias and relu fused into the GEMM,
  // other activations as a call of their own (in place, or from the workspace's z).
  void forward(const ForwardStep& s) const override {
    const LayerState& li = s.state;
    const int kernel_index = kernel(s), bias_index = li.param("bias");
    const ActivationKind act = forward_activation(s);
    const bool fused = act == ActivationKind::linear || act == ActivationKind::relu;
    float* z = activation_needs_input(act) ? static_cast<float*>(s.workspace) : s.y;
    s.backend.dense_forward(s.x, s.value(kernel_index), s.value(bias_index), z, rows(li, s.m),
                            inputs(li), units(li), fused ? act : ActivationKind::linear);
    if (!fused)
      s.backend.activation_forward(act, li.activation.alpha, z, s.y, activation_rows(s.state, s.m),
                                   activation_cols(s.state));
  }

  // dx(m, in) = g(m, units) . kernel^T (not for the first layer with parameters); dkernel(in,
  // units) = x^T . g, dbias = the column sums of g (or, fused, the update with them); frozen
  // (not trainable), dx only.
  void backward(BackwardStep& s) const override {
    const LayerState& li = s.state;
    const int kernel_index = kernel(s), bias_index = li.param("bias");
    if (backward_applies_activation(s))
      s.backend.activation_backward(li.activation.kind, li.activation.alpha,
                                    static_cast<const float*>(s.workspace), s.y, s.g, s.g,
                                    activation_rows(s.state, s.m), activation_cols(s.state));
    // The input gradient first: it needs the kernel before this step's update.
    if (!s.first)
      s.backend.dense_backward_input(s.g, s.value(kernel_index), s.spare, rows(li, s.m), inputs(li),
                                     units(li));
    if (!s.trainable) {
      // no weight gradient, no update
    } else if (s.update) {
      const ParamSlot* bias =
          bias_index >= 0 ? &s.slots[static_cast<std::size_t>(bias_index)] : nullptr;
      s.backend.dense_backward_weights_update(
          s.x, s.g, s.slots[static_cast<std::size_t>(kernel_index)], bias, rows(li, s.m),
          inputs(li), units(li), *s.opt, s.update);
    } else {
      s.backend.dense_backward_weights(s.x, s.g, s.grad(kernel_index), s.grad(bias_index),
                                       rows(li, s.m), inputs(li), units(li));
    }
    if (!s.first) s.swap();
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& dense_layer_kind() {
  static const DenseKind kind;
  return kind;
}

}  // namespace crossover
