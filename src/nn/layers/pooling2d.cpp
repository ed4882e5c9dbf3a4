// MaxPooling2D and AveragePooling2D: the maximum or the mean over each pool_size window of each
// channel (padded positions not counted in the mean, as in Keras); strides default to pool_size.
#include "nn/layers/pooling2d.h"

#include "core/error.h"
#include "nn/layers/pooling_kind.h"

namespace crossover {
namespace {

Layer pooling(LayerType type, const char* name, Size2 pool_size, std::optional<Size2> strides,
              std::string_view padding) {
  require_positive(pool_size, name, "pool_size");
  if (strides) require_positive(*strides, name, "strides");
  Layer l;
  l.type = type;
  PoolingArgs& a = l.args<PoolingArgs>();
  a.pool_size = pool_size;
  a.strides = strides.value_or(pool_size);
  a.padding = parse_padding(padding, name);
  return l;
}

}  // namespace

Layer MaxPooling2D(Size2 pool_size, std::optional<Size2> strides, std::string_view padding) {
  return pooling(LayerType::max_pooling2d, "MaxPooling2D", pool_size, strides, padding);
}

Layer AveragePooling2D(Size2 pool_size, std::optional<Size2> strides, std::string_view padding) {
  return pooling(LayerType::average_pooling2d, "AveragePooling2D", pool_size, strides, padding);
}

namespace {

using namespace keras_config;

class Pooling2DKind final : public PoolingKind {
 public:
  explicit Pooling2DKind(bool max) : PoolingKind(max) {}
  LayerType type() const override {
    return max_ ? LayerType::max_pooling2d : LayerType::average_pooling2d;
  }
  std::string_view class_name() const override {
    return max_ ? "MaxPooling2D" : "AveragePooling2D";
  }
  // Keras 3.15: MaxPooling2D's pool_size defaults to (2, 2), AveragePooling2D's is required.
  std::optional<keras_config::Arguments> keras_arguments() const override {
    keras_config::Argument pool{"pool_size", {2, 2}, !max_};
    return keras_config::Arguments{
        pool, {"strides", nullptr}, {"padding", "valid"}, {"data_format", nullptr}};
  }
  std::vector<std::string_view> aliases() const override {
    return {max_ ? "MaxPool2D" : "AvgPool2D"};
  }
  std::string_view base_name() const override {
    return max_ ? "max_pooling2d" : "average_pooling2d";
  }

  // ---- command line: maxpool:POOL[:PADDING[:STRIDES]], avgpool:... ----
  std::string_view cli_name() const override { return max_ ? "maxpool" : "avgpool"; }
  std::string_view cli_syntax() const override {
    return max_ ? "maxpool:POOL[:PADDING[:STRIDES]]" : "avgpool:POOL[:PADDING[:STRIDES]]";
  }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() < 2 || f.size() > 4) return std::nullopt;
    const Size2 pool = f.size2(1);
    const std::optional<Size2> strides =
        f.size() > 3 ? std::optional<Size2>(f.size2(3)) : std::nullopt;
    return max_ ? MaxPooling2D(pool, strides, f.text_or(2, "valid"))
                : AveragePooling2D(pool, strides, f.text_or(2, "valid"));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const PoolingArgs& a = l.args<PoolingArgs>();
    j["pool_size"] = {a.pool_size.h, a.pool_size.w};
    j["strides"] = {a.strides.h, a.strides.w};
    j["padding"] = padding_name(a.padding);
  }

  // ---- Keras config: pool_size, strides (null: pool_size), padding, data_format ----
  void from_keras(Reader& cfg, Layer& l) const override {
    PoolingArgs& a = l.args<PoolingArgs>();
    a.pool_size = cfg.pair("pool_size").value_or(Size2(2));
    a.strides = cfg.pair("strides").value_or(a.pool_size);
    a.padding = cfg.padding();
    cfg.channels_last();
  }
  void to_keras(const Layer& l, ojson& c) const override {
    const PoolingArgs& a = l.args<PoolingArgs>();
    c["pool_size"] = ojson::array({a.pool_size.h, a.pool_size.w});
    c["padding"] = std::string(padding_name(a.padding));
    c["strides"] = ojson::array({a.strides.h, a.strides.w});
    c["data_format"] = "channels_last";
  }

  // ---- engine: the window; the calls are PoolingKind's ----
  void build(LayerBuilder& b) const override {
    const PoolingArgs& a = b.layer.args<PoolingArgs>();
    require_image(b.layer, b.shape);
    PoolShape& p = b.state.own<PoolShape>();
    p.kind = pool_kind();
    place_window(b.layer, a.pool_size, a.strides, a.padding, b.shape, p);
    p.channels = b.shape[2];
    p.window_h = a.pool_size.h, p.window_w = a.pool_size.w;
    b.shape = {p.out_h, p.out_w, p.channels};
  }
};

}  // namespace

const LayerKind& max_pooling2d_layer_kind() {
  static const Pooling2DKind kind(true);
  return kind;
}

const LayerKind& average_pooling2d_layer_kind() {
  static const Pooling2DKind kind(false);
  return kind;
}

}  // namespace crossover
