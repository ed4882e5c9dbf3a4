// Reshape: the same values in a new per-sample shape; one dimension may be -1 (inferred).
#include "nn/layers/reshape.h"

#include <algorithm>

#include "backends/fused_mlp.h"
#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

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
  l.args<ReshapeArgs>().target_shape = std::move(target_shape);
  return l;
}

namespace {

using namespace keras_config;

class ReshapeKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::reshape; }
  std::string_view class_name() const override { return "Reshape"; }
  std::string_view base_name() const override { return "reshape"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{required("target_shape", {4})};
  }
  void describe_fused(const Layer&, FusedLayerView& v) const override {
    v.kind = FusedLayerView::Kind::reshape;
  }

  // ---- command line: reshape:DIMS ----
  std::string_view cli_name() const override { return "reshape"; }
  std::string_view cli_syntax() const override { return "reshape:DIMS"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 2) return std::nullopt;
    return Reshape(f.dims(1));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["target_shape"] = l.args<ReshapeArgs>().target_shape;
  }

  // ---- Keras config ----
  void from_keras(Reader& cfg, Layer& l) const override {
    const json* t = cfg.find("target_shape");
    if (!t || !t->is_array() || t->empty())
      cfg.fail("target_shape", "Reshape needs a target_shape list");
    for (const json& d : *t) {
      if (!d.is_number_integer() || d.get<int64_t>() == 0 || d.get<int64_t>() < -1 ||
          d.get<int64_t>() > kMaxDim)
        cfg.fail("target_shape", "expected dimensions from 1 to 2^31 or -1, got " + brief(*t));
      l.args<ReshapeArgs>().target_shape.push_back(d.get<int64_t>());
    }
    const Shape& target = l.args<ReshapeArgs>().target_shape;
    if (std::count(target.begin(), target.end(), -1) > 1)
      cfg.fail("target_shape", shape_to_string(target) + ": only one dimension can be -1");
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["target_shape"] = l.args<ReshapeArgs>().target_shape;
  }

  // ---- engine: the same buffer, a new shape ----
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const Shape& target_shape = l.args<ReshapeArgs>().target_shape;
    const int64_t n = b.state.in_width;
    Shape target = target_shape;
    int64_t known = 1;
    for (int64_t d : target)
      if (d != -1) known *= d;
    for (int64_t& d : target)
      if (d == -1 && known > 0 && n % known == 0) d = n / known;
    if (std::find(target.begin(), target.end(), -1) != target.end() ||
        shape_size(target, l.name) != n)
      throw Error(l.name, "cannot reshape samples of shape " + shape_to_string(b.shape) + " (" +
                              std::to_string(n) + " values) to " + shape_to_string(target_shape));
    b.shape = target;
    b.state.aliases_input = true;
  }
};

}  // namespace

const LayerKind& reshape_layer_kind() {
  static const ReshapeKind kind;
  return kind;
}

}  // namespace crossover
