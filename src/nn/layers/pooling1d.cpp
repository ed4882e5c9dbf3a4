// MaxPooling1D, AveragePooling1D, GlobalAveragePooling1D and GlobalMaxPooling1D: the 2-D poolings
// (pooling_kind.h's calls) over one row, (steps, channels) samples taken as (1, steps, channels).
#include "nn/layers/pooling1d.h"

#include "core/error.h"
#include "nn/layers/pooling2d.h"
#include "nn/layers/pooling_kind.h"

namespace crossover {

namespace {

Layer pooling1d(LayerType type, const char* name, int64_t pool_size, std::optional<int64_t> strides,
                std::string_view padding) {
  require_positive(Size2(1, pool_size), name, "pool_size");
  if (strides) require_positive(Size2(1, *strides), name, "strides");
  Layer l;
  l.type = type;
  PoolingArgs& a = l.args<PoolingArgs>();
  a.pool_size = Size2(1, pool_size);
  a.strides = Size2(1, strides.value_or(pool_size));
  a.padding = parse_padding(padding, name);
  return l;
}

Layer global(LayerType type) {
  Layer l;
  l.type = type;
  return l;
}

void require_steps(const Layer& l, const Shape& shape) {
  if (shape.size() != 2)
    throw Error(l.name, std::string(layer_type_name(l.type)) +
                            " needs (steps, channels) samples, but receives samples of shape " +
                            shape_to_string(shape));
}

}  // namespace

Layer MaxPooling1D(int64_t pool_size, std::optional<int64_t> strides, std::string_view padding) {
  return pooling1d(LayerType::max_pooling1d, "MaxPooling1D", pool_size, strides, padding);
}
Layer AveragePooling1D(int64_t pool_size, std::optional<int64_t> strides,
                       std::string_view padding) {
  return pooling1d(LayerType::average_pooling1d, "AveragePooling1D", pool_size, strides, padding);
}
Layer GlobalAveragePooling1D() { return global(LayerType::global_average_pooling1d); }
Layer GlobalMaxPooling1D() { return global(LayerType::global_max_pooling1d); }

namespace {

using namespace keras_config;

class Pooling1DKind final : public PoolingKind {
 public:
  explicit Pooling1DKind(bool max) : PoolingKind(max) {}
  LayerType type() const override {
    return max_ ? LayerType::max_pooling1d : LayerType::average_pooling1d;
  }
  std::string_view class_name() const override {
    return max_ ? "MaxPooling1D" : "AveragePooling1D";
  }
  // Keras 3.15: MaxPooling1D's pool_size defaults to 2, AveragePooling1D's is required.
  std::optional<keras_config::Arguments> keras_arguments() const override {
    keras_config::Argument pool{"pool_size", 2, !max_};
    return keras_config::Arguments{
        pool, {"strides", nullptr}, {"padding", "valid"}, {"data_format", nullptr}};
  }
  std::vector<std::string_view> aliases() const override {
    return {max_ ? "MaxPool1D" : "AvgPool1D"};
  }
  std::string_view base_name() const override {
    return max_ ? "max_pooling1d" : "average_pooling1d";
  }
  bool takes_images() const override { return false; }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const PoolingArgs& a = l.args<PoolingArgs>();
    j["pool_size"] = {a.pool_size.w};
    j["strides"] = {a.strides.w};
    j["padding"] = padding_name(a.padding);
  }

  // ---- Keras config: pool_size [n], strides (null: pool_size), padding, data_format ----
  void from_keras(Reader& cfg, Layer& l) const override {
    PoolingArgs& a = l.args<PoolingArgs>();
    const int64_t pool = cfg.single("pool_size").value_or(2);
    a.pool_size = Size2(1, pool);
    a.strides = Size2(1, cfg.single("strides").value_or(pool));
    a.padding = cfg.padding();
    cfg.channels_last();
  }
  void to_keras(const Layer& l, ojson& c) const override {
    const PoolingArgs& a = l.args<PoolingArgs>();
    c["pool_size"] = ojson::array({a.pool_size.w});
    c["padding"] = std::string(padding_name(a.padding));
    c["strides"] = ojson::array({a.strides.w});
    c["data_format"] = "channels_last";
  }

  // The window along the steps of one row; the calls are PoolingKind's.
  void build(LayerBuilder& b) const override {
    const PoolingArgs& a = b.layer.args<PoolingArgs>();
    require_steps(b.layer, b.shape);
    PoolShape& p = b.state.own<PoolShape>();
    p.kind = pool_kind();
    place_window(b.layer, a.pool_size, a.strides, a.padding, {1, b.shape[0], b.shape[1]}, p);
    p.channels = b.shape[1];
    p.window_h = 1, p.window_w = a.pool_size.w;
    b.shape = {p.out_w, p.channels};
  }
};

class GlobalPooling1DKind final : public PoolingKind {
 public:
  explicit GlobalPooling1DKind(bool max) : PoolingKind(max) {}
  LayerType type() const override {
    return max_ ? LayerType::global_max_pooling1d : LayerType::global_average_pooling1d;
  }
  std::string_view class_name() const override {
    return max_ ? "GlobalMaxPooling1D" : "GlobalAveragePooling1D";
  }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"data_format", nullptr}, {"keepdims", false}};
  }
  std::vector<std::string_view> aliases() const override {
    return {max_ ? "GlobalMaxPool1D" : "GlobalAvgPool1D"};
  }
  std::string_view base_name() const override {
    return max_ ? "global_max_pooling1d" : "global_average_pooling1d";
  }
  bool takes_images() const override { return false; }

  void from_keras(Reader& cfg, Layer&) const override {
    cfg.channels_last();
    cfg.refuse_true("keepdims", "keepdims true is not supported: the output is (channels)");
  }
  void to_keras(const Layer&, ojson& c) const override {
    c["data_format"] = "channels_last";
    c["keepdims"] = false;
  }

  // A window of all the steps of one row.
  void build(LayerBuilder& b) const override {
    require_steps(b.layer, b.shape);
    const int64_t steps = b.shape[0], channels = b.shape[1];
    b.state.own<PoolShape>() = whole_sample(1, steps, channels);
    b.shape = {channels};
  }
};

}  // namespace

const LayerKind& max_pooling1d_layer_kind() {
  static const Pooling1DKind kind(true);
  return kind;
}
const LayerKind& average_pooling1d_layer_kind() {
  static const Pooling1DKind kind(false);
  return kind;
}
const LayerKind& global_average_pooling1d_layer_kind() {
  static const GlobalPooling1DKind kind(false);
  return kind;
}
const LayerKind& global_max_pooling1d_layer_kind() {
  static const GlobalPooling1DKind kind(true);
  return kind;
}

}  // namespace crossover
