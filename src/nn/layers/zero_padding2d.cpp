// ZeroPadding2D and Cropping2D: a sample's (height, width, channels) values placed inside a larger
// zero-filled one, or a window of them taken out; each one the other's backward. Both are copies
// of each input row's (width * channels) values between the two samples (Backend::copy_columns,
// one call per row of the smaller sample), so every backend has them. No weights. ZeroPadding1D
// and Cropping1D are the same on a (steps, features) sample, taken as (steps, 1, features).
#include "nn/layers/zero_padding2d.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.h"
#include "nn/layers/kind.h"
#include "nn/layers/window.h"

namespace crossover {
namespace {

void require_margins(const Margins2& m, const char* layer, const char* argument) {
  if (m.top < 0 || m.bottom < 0 || m.left < 0 || m.right < 0)
    throw Error(layer, fmt::format("{} must be >= 0, got (({}, {}), ({}, {}))", argument, m.top,
                                   m.bottom, m.left, m.right));
  using keras_config::kMaxDim;
  if (m.top > kMaxDim || m.bottom > kMaxDim || m.left > kMaxDim || m.right > kMaxDim)
    throw Error(layer, fmt::format("{} is past 2^31 rows or columns", argument));
}

}  // namespace

Layer ZeroPadding2D(Margins2 padding) {
  require_margins(padding, "ZeroPadding2D", "padding");
  Layer l;
  l.type = LayerType::zero_padding2d;
  l.args<ZeroPaddingArgs>().padding = padding;
  return l;
}

Layer Cropping2D(Margins2 cropping) {
  require_margins(cropping, "Cropping2D", "cropping");
  Layer l;
  l.type = LayerType::cropping2d;
  l.args<CroppingArgs>().cropping = cropping;
  return l;
}

Layer ZeroPadding1D(int64_t left, int64_t right) {
  require_margins({left, right, 0, 0}, "ZeroPadding1D", "padding");
  Layer l;
  l.type = LayerType::zero_padding1d;
  l.args<ZeroPadding1DArgs>().padding = {left, right, 0, 0};
  return l;
}

Layer Cropping1D(int64_t left, int64_t right) {
  require_margins({left, right, 0, 0}, "Cropping1D", "cropping");
  Layer l;
  l.type = LayerType::cropping1d;
  l.args<Cropping1DArgs>().cropping = {left, right, 0, 0};
  return l;
}

namespace {

using namespace keras_config;

// Keras's padding / cropping argument: an int, (symmetric_height, symmetric_width), or ((top,
// bottom), (left, right)); each a whole number >= 0.
Margins2 read_margins(Reader& cfg, const char* key, Margins2 fallback) {
  const json* v = cfg.find(key);
  if (v == nullptr) return fallback;
  const std::string expected =
      "expected an int, [height, width] or [[top, bottom], [left, right]] of whole numbers >= 0, "
      "got " +
      brief(*v);
  auto whole = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > kMaxDim)
      cfg.fail(key, expected);
    return x.get<int64_t>();
  };
  auto side = [&](const json& x) -> std::pair<int64_t, int64_t> {
    if (x.is_array()) {
      if (x.size() != 2) cfg.fail(key, expected);
      return {whole(x[0]), whole(x[1])};
    }
    const int64_t both = whole(x);
    return {both, both};
  };
  if (v->is_number()) {
    const int64_t all = whole(*v);
    return {all, all, all, all};
  }
  if (!v->is_array() || v->size() != 2) cfg.fail(key, expected);
  const auto [top, bottom] = side((*v)[0]);
  const auto [left, right] = side((*v)[1]);
  return {top, bottom, left, right};
}

// The 1D layers' argument: an int, or (left, right); whole numbers >= 0 (Keras's
// standardize_tuple(value, 2, allow_zero=True)). As Margins2's (top, bottom).
Margins2 read_margins1d(Reader& cfg, const char* key, Margins2 fallback) {
  const json* v = cfg.find(key);
  if (v == nullptr) return fallback;
  auto whole = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > kMaxDim)
      cfg.fail(key, "expected an int or [left, right] of whole numbers >= 0, got " + brief(*v));
    return x.get<int64_t>();
  };
  if (v->is_array()) {
    if (v->size() != 2)
      cfg.fail(key, "expected an int or [left, right] of whole numbers >= 0, got " + brief(*v));
    return {whole((*v)[0]), whole((*v)[1]), 0, 0};
  }
  const int64_t both = whole(*v);
  return {both, both, 0, 0};
}

ojson margins1d_json(const Margins2& m) { return ojson::array({m.top, m.bottom}); }

ojson margins_json(const Margins2& m) {
  return ojson::array({ojson::array({m.top, m.bottom}), ojson::array({m.left, m.right})});
}

nlohmann::json margins_record(const Margins2& m) {
  return nlohmann::json::array(
      {nlohmann::json::array({m.top, m.bottom}), nlohmann::json::array({m.left, m.right})});
}

// The CLI's H or HxW: symmetric margins (Keras's (symmetric_height, symmetric_width)).
Margins2 cli_margins(const CliFields& f, Margins2 fallback) {
  if (f.size() < 2) return fallback;
  const Size2 s = f.size2(1);
  return {s.h, s.h, s.w, s.w};
}

// What the four kinds share: the sample's placement in PoolShape (in_h, in_w, channels; the
// larger sample's out_h, out_w, and the smaller one's offset in it as pad_top, pad_left), and the
// step: padding's forward is cropping's backward and the other way round.
class MarginsKind : public LayerKind {
 public:
  bool takes_images() const override { return !one_d(); }
  // Keras 3.15 writes one (its InputSpec checks the input's rank when it builds).
  bool keras_build_config() const override { return true; }

  // ---- engine ----
  void build(LayerBuilder& b) const override {
    if (one_d())
      place1d(b, margins(b.layer), grows());
    else
      place(b, margins(b.layer), grows());
  }
  // Padding: x (m, h, w, c) -> y (m, top + h + bottom, left + w + right, c), zeros around x.
  // Cropping: y is the window of x.
  void forward(const ForwardStep& s) const override {
    if (grows())
      pad(s.backend, s.state.own<PoolShape>(), s.x, s.y, s.m);
    else
      crop(s.backend, s.state.own<PoolShape>(), s.x, s.y, s.m);
  }
  // dx (into the spare buffer): padding's, the gradient's window where x sits; cropping's, the
  // gradient in the window with zeros around it.
  void backward(BackwardStep& s) const override {
    if (grows())
      crop(s.backend, s.state.own<PoolShape>(), s.g, s.spare, s.m);
    else
      pad(s.backend, s.state.own<PoolShape>(), s.g, s.spare, s.m);
    s.swap();
    s.activation_done = false;
  }

 protected:
  virtual bool grows() const = 0;  // ZeroPadding, not Cropping
  virtual bool one_d() const = 0;  // (steps, features) samples, not (height, width, channels)
  virtual const Margins2& margins(const Layer& l) const = 0;

  // Each of the smaller sample's rows (small_h of small_w * c values) to or from its place in the
  // larger (large_h, large_w, c) sample, at (pad_top, pad_left).
  static void copy_rows(Backend& backend, const PoolShape& p, const float* src, float* dst,
                        int64_t m, bool into_larger) {
    const int64_t small_h = std::min(p.in_h, p.out_h), small_w = std::min(p.in_w, p.out_w);
    const int64_t large_w = std::max(p.in_w, p.out_w);
    const int64_t large_h = std::max(p.in_h, p.out_h);
    const int64_t c = p.channels;
    const int64_t small_cols = small_h * small_w * c, large_cols = large_h * large_w * c;
    for (int64_t r = 0; r < small_h; ++r) {
      const int64_t small_col = r * small_w * c;
      const int64_t large_col = ((r + p.pad_top) * large_w + p.pad_left) * c;
      if (into_larger)
        backend.copy_columns(src, small_cols, small_col, dst, large_cols, large_col, m,
                             small_w * c);
      else
        backend.copy_columns(src, large_cols, large_col, dst, small_cols, small_col, m,
                             small_w * c);
    }
  }
  static void pad(Backend& backend, const PoolShape& p, const float* small, float* large,
                  int64_t m) {
    const int64_t large_values = std::max(p.in_h, p.out_h) * std::max(p.in_w, p.out_w) * p.channels;
    backend.fill(large, 0.0f, m * large_values);
    copy_rows(backend, p, small, large, m, true);
  }
  static void crop(Backend& backend, const PoolShape& p, const float* large, float* small,
                   int64_t m) {
    copy_rows(backend, p, large, small, m, false);
  }
  static void place(LayerBuilder& b, const Margins2& mg, bool grows) {
    require_image(b.layer, b.shape);
    PoolShape& p = b.state.own<PoolShape>();
    p.in_h = b.shape[0], p.in_w = b.shape[1], p.channels = b.shape[2];
    place_window(b, mg, grows);
  }
  // A (steps, features) sample as (steps, 1, features), its steps padded or cropped.
  static void place1d(LayerBuilder& b, const Margins2& mg, bool grows) {
    if (b.shape.size() != 2)
      throw Error(b.layer.name,
                  fmt::format("{} needs (steps, features) samples (a 3D input with the batch), but "
                              "receives samples of shape {}",
                              grows ? "ZeroPadding1D" : "Cropping1D", shape_to_string(b.shape)));
    PoolShape& p = b.state.own<PoolShape>();
    p.in_h = b.shape[0], p.in_w = 1, p.channels = b.shape[1];
    if (!grows && mg.top + mg.bottom >= p.in_h)
      throw Error(
          b.layer.name,
          fmt::format("`cropping` parameter of `Cropping1D` layer must be smaller than the "
                      "input length. Received: input_shape=(None, {}, {}), cropping=({}, {})",
                      p.in_h, p.channels, mg.top, mg.bottom));
    place_window(b, mg, grows);
    b.shape = {p.out_h, p.channels};
  }

 private:
  static void place_window(LayerBuilder& b, const Margins2& mg, bool grows) {
    PoolShape& p = b.state.own<PoolShape>();
    const int64_t dh = mg.top + mg.bottom, dw = mg.left + mg.right;
    if (grows) {
      if (p.in_h > kMaxDim - dh || p.in_w > kMaxDim - dw)
        throw Error(b.layer.name, "ZeroPadding2D's output is past 2^31 rows or columns");
      p.out_h = p.in_h + dh, p.out_w = p.in_w + dw;
    } else {
      if (dh >= p.in_h || dw >= p.in_w)
        throw Error(b.layer.name,
                    fmt::format("cropping (({}, {}), ({}, {})) leaves nothing of the {}x{} input: "
                                "it must be smaller than the height and the width",
                                mg.top, mg.bottom, mg.left, mg.right, p.in_h, p.in_w));
      p.out_h = p.in_h - dh, p.out_w = p.in_w - dw;
    }
    p.pad_top = mg.top, p.pad_bottom = mg.bottom, p.pad_left = mg.left, p.pad_right = mg.right;
    b.shape = {p.out_h, p.out_w, p.channels};
  }
};

class ZeroPadding2DKind final : public MarginsKind {
 public:
  bool grows() const override { return true; }
  bool one_d() const override { return false; }
  LayerType type() const override { return LayerType::zero_padding2d; }
  std::string_view class_name() const override { return "ZeroPadding2D"; }
  std::string_view base_name() const override { return "zero_padding2d"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"padding", {1, 1}}, {"data_format", nullptr}};
  }

  // ---- command line: zeropad[:H[xW]] ----
  std::string_view cli_name() const override { return "zeropad"; }
  std::string_view cli_syntax() const override { return "zeropad[:H[xW]]"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() > 2) return std::nullopt;
    return ZeroPadding2D(cli_margins(f, {1, 1, 1, 1}));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["padding"] = margins_record(l.args<ZeroPaddingArgs>().padding);
  }

  // ---- Keras config: padding, data_format ----
  void from_keras(Reader& cfg, Layer& l) const override {
    const Margins2 m = read_margins(cfg, "padding", {1, 1, 1, 1});
    l.args<ZeroPaddingArgs>().padding = m;
    cfg.channels_last();
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["padding"] = margins_json(l.args<ZeroPaddingArgs>().padding);
    c["data_format"] = "channels_last";
  }

  const Margins2& margins(const Layer& l) const override {
    return l.args<ZeroPaddingArgs>().padding;
  }
};

class Cropping2DKind final : public MarginsKind {
 public:
  bool grows() const override { return false; }
  bool one_d() const override { return false; }
  LayerType type() const override { return LayerType::cropping2d; }
  std::string_view class_name() const override { return "Cropping2D"; }
  std::string_view base_name() const override { return "cropping2d"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"cropping", {{0, 0}, {0, 0}}}, {"data_format", nullptr}};
  }

  // ---- command line: crop[:H[xW]] ----
  std::string_view cli_name() const override { return "crop"; }
  std::string_view cli_syntax() const override { return "crop[:H[xW]]"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() > 2) return std::nullopt;
    return Cropping2D(cli_margins(f, {0, 0, 0, 0}));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["cropping"] = margins_record(l.args<CroppingArgs>().cropping);
  }

  // ---- Keras config: cropping, data_format ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.args<CroppingArgs>().cropping = read_margins(cfg, "cropping", {0, 0, 0, 0});
    cfg.channels_last();
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["cropping"] = margins_json(l.args<CroppingArgs>().cropping);
    c["data_format"] = "channels_last";
  }

  const Margins2& margins(const Layer& l) const override { return l.args<CroppingArgs>().cropping; }
};

// The 1D siblings: the same copies, with no columns to pad or crop.
class ZeroPadding1DKind final : public MarginsKind {
 public:
  bool grows() const override { return true; }
  bool one_d() const override { return true; }
  LayerType type() const override { return LayerType::zero_padding1d; }
  std::string_view class_name() const override { return "ZeroPadding1D"; }
  std::string_view base_name() const override { return "zero_padding1d"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"padding", 1}, {"data_format", nullptr}};
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const Margins2& m = l.args<ZeroPadding1DArgs>().padding;
    j["padding"] = nlohmann::json::array({m.top, m.bottom});
  }

  // ---- Keras config: padding, data_format ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.args<ZeroPadding1DArgs>().padding = read_margins1d(cfg, "padding", {1, 1, 0, 0});
    cfg.channels_last();
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["padding"] = margins1d_json(l.args<ZeroPadding1DArgs>().padding);
    c["data_format"] = "channels_last";
  }

  const Margins2& margins(const Layer& l) const override {
    return l.args<ZeroPadding1DArgs>().padding;
  }
};

class Cropping1DKind final : public MarginsKind {
 public:
  bool grows() const override { return false; }
  bool one_d() const override { return true; }
  LayerType type() const override { return LayerType::cropping1d; }
  std::string_view class_name() const override { return "Cropping1D"; }
  std::string_view base_name() const override { return "cropping1d"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"cropping", {1, 1}}};
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const Margins2& m = l.args<Cropping1DArgs>().cropping;
    j["cropping"] = nlohmann::json::array({m.top, m.bottom});
  }

  // ---- Keras config: cropping (Keras's Cropping1D has no data_format) ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.args<Cropping1DArgs>().cropping = read_margins1d(cfg, "cropping", {1, 1, 0, 0});
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["cropping"] = margins1d_json(l.args<Cropping1DArgs>().cropping);
  }

  const Margins2& margins(const Layer& l) const override {
    return l.args<Cropping1DArgs>().cropping;
  }
};

}  // namespace

const LayerKind& zero_padding1d_layer_kind() {
  static const ZeroPadding1DKind kind;
  return kind;
}

const LayerKind& cropping1d_layer_kind() {
  static const Cropping1DKind kind;
  return kind;
}

const LayerKind& zero_padding2d_layer_kind() {
  static const ZeroPadding2DKind kind;
  return kind;
}

const LayerKind& cropping2d_layer_kind() {
  static const Cropping2DKind kind;
  return kind;
}

}  // namespace crossover
