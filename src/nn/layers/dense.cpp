// Dense: y = activation(x . kernel + bias), Keras's fully connected layer.
#include <fmt/format.h>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer Dense(int64_t units, std::string_view activation, bool use_bias) {
  if (units < 1) throw Error("Dense", "units must be at least 1, got " + std::to_string(units));
  Layer l;
  l.type = LayerType::dense;
  l.units = units;
  l.activation = parse_activation(activation);
  l.use_bias = use_bias;
  return l;
}

namespace {

using namespace keras_config;

class DenseKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::dense; }
  std::string_view class_name() const override { return "Dense"; }
  std::string_view base_name() const override { return "dense"; }
  bool has_matrix_products() const override { return true; }
  std::vector<std::string> weight_names(const Layer& l) const override {
    if (!l.use_bias) return {l.name + "/kernel"};
    return {l.name + "/kernel", l.name + "/bias"};
  }

  // ---- command line: dense:UNITS[:ACTIVATION] ----
  std::string_view cli_name() const override { return "dense"; }
  std::string_view cli_syntax() const override { return "dense:UNITS[:ACTIVATION]"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() < 2 || f.size() > 3) return std::nullopt;
    return Dense(f.whole(1), f.text_or(2, "linear"));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["units"] = l.units;
    j["activation"] = activation_name(l.activation);
    j["use_bias"] = l.use_bias;
  }

  // ---- Keras config ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.units = cfg.count("units", "Dense needs units");
    l.activation = cfg.activation();
    l.use_bias = cfg.flag("use_bias", true);
    cfg.initializer("kernel_initializer", true);
    cfg.initializer("bias_initializer", false);
    for (const char* f : {"kernel_regularizer", "bias_regularizer", "activity_regularizer"})
      cfg.refuse_set(f, "regularizers are not supported");
    for (const char* f : {"kernel_constraint", "bias_constraint"})
      cfg.refuse_set(f, "constraints are not supported");
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["units"] = l.units;
    c["activation"] = std::string(activation_name(l.activation));
    c["use_bias"] = l.use_bias;
    c["kernel_initializer"] = initializer_json("GlorotUniform");
    c["bias_initializer"] = initializer_json("Zeros");
    c["kernel_regularizer"] = nullptr;
    c["bias_regularizer"] = nullptr;
    c["kernel_constraint"] = nullptr;
    c["bias_constraint"] = nullptr;
  }
  bool keras_build_config() const override { return true; }
  int64_t check_size(const Layer& l, int64_t width, int64_t,
                     const std::string& where) const override {
    if (width > kMaxElements / l.units)
      throw Error(where, fmt::format("layer '{}' field units: a {} x {} kernel is absurdly large",
                                     printable(l.name), width, l.units));
    return l.units;
  }
};

}  // namespace

const LayerKind& dense_layer_kind() {
  static const DenseKind kind;
  return kind;
}

}  // namespace crossover
