// UpSampling2D: each value of a (height, width, channels) sample repeated over a size.h x size.w
// block (Keras's interpolation 'nearest', channels_last); the backward sums the gradient over each
// block. No weights.
#include "nn/layers/up_sampling2d.h"

#include <fmt/format.h>

#include <cctype>
#include <string>

#include "core/error.h"
#include "nn/layers/kind.h"
#include "nn/layers/window.h"

namespace crossover {
namespace {

// Keras 3.15 lowercases the name; its other interpolations ('bilinear', 'bicubic', ...) resize
// through ops.image.resize, a different computation that crossover does not have.
std::string interpolation_problem(std::string_view interpolation) {
  std::string lower(interpolation);
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "nearest") return {};
  return fmt::format(
      "interpolation '{}' is not supported: only 'nearest' (each value repeated "
      "over its block)",
      interpolation);
}

}  // namespace

Layer UpSampling2D(Size2 size, std::string_view interpolation) {
  require_positive(size, "UpSampling2D", "size");
  if (const std::string why = interpolation_problem(interpolation); !why.empty())
    throw Error("UpSampling2D", why);
  Layer l;
  l.type = LayerType::up_sampling2d;
  l.args<UpSamplingArgs>().size = size;
  return l;
}

namespace {

using namespace keras_config;

class UpSampling2DKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::up_sampling2d; }
  std::string_view class_name() const override { return "UpSampling2D"; }
  std::string_view base_name() const override { return "up_sampling2d"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{
        {"size", {2, 2}}, {"data_format", nullptr}, {"interpolation", "nearest"}};
  }
  bool takes_images() const override { return true; }

  // ---- command line: upsample[:SIZE] ----
  std::string_view cli_name() const override { return "upsample"; }
  std::string_view cli_syntax() const override { return "upsample[:SIZE]"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() > 2) return std::nullopt;
    return UpSampling2D(f.size() > 1 ? f.size2(1) : Size2(2));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    const Size2 size = l.args<UpSamplingArgs>().size;
    j["size"] = {size.h, size.w};
    j["interpolation"] = "nearest";
  }

  // ---- Keras config: size, data_format, interpolation ----
  void from_keras(Reader& cfg, Layer& l) const override {
    l.args<UpSamplingArgs>().size = cfg.pair("size").value_or(Size2(2));
    cfg.channels_last();
    if (const json* i = cfg.find("interpolation")) {
      if (!i->is_string()) cfg.fail("interpolation", "expected a string, got " + brief(*i));
      if (const std::string why = interpolation_problem(i->get<std::string>()); !why.empty())
        cfg.fail("interpolation", why);
    }
  }
  void to_keras(const Layer& l, ojson& c) const override {
    const Size2 size = l.args<UpSamplingArgs>().size;
    c["size"] = ojson::array({size.h, size.w});
    c["data_format"] = "channels_last";
    c["interpolation"] = "nearest";
  }
  // Keras 3.15 writes one (its InputSpec checks the input's rank when it builds).
  bool keras_build_config() const override { return true; }

  // ---- engine ----
  // Plain copies and sums: every backend has them, convolutions or not.
  void build(LayerBuilder& b) const override {
    require_image(b.layer, b.shape);
    PoolShape& p = b.state.own<PoolShape>();
    p.in_h = b.shape[0], p.in_w = b.shape[1], p.channels = b.shape[2];
    const Size2 size = b.layer.args<UpSamplingArgs>().size;
    p.window_h = p.stride_h = size.h;
    p.window_w = p.stride_w = size.w;
    if (p.in_h > kMaxDim / p.window_h || p.in_w > kMaxDim / p.window_w)
      throw Error(b.layer.name, fmt::format("UpSampling2D size ({}, {}) on a {}x{} input is past "
                                            "2^31 rows or columns",
                                            p.window_h, p.window_w, p.in_h, p.in_w));
    p.out_h = p.in_h * p.window_h, p.out_w = p.in_w * p.window_w;
    b.shape = {p.out_h, p.out_w, p.channels};
  }
  // x (m, in_h, in_w, c) -> y (m, in_h * size_h, in_w * size_w, c).
  void forward(const ForwardStep& s) const override {
    s.backend.upsample2d_forward(s.state.own<PoolShape>(), s.x, s.y, s.m);
  }
  // dx (into the spare buffer): each input value's gradient is the sum of its block's.
  void backward(BackwardStep& s) const override {
    s.backend.upsample2d_backward(s.state.own<PoolShape>(), s.g, s.spare, s.m);
    s.swap();
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& up_sampling2d_layer_kind() {
  static const UpSampling2DKind kind;
  return kind;
}

}  // namespace crossover
