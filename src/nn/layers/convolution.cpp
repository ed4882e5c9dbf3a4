#include "nn/layers/convolution.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "nn/layers/window.h"

namespace crossover {

using namespace keras_config;

namespace {

bool dilated(const ConvArgs& a) { return a.dilation_rate != Size2(1); }

// Keras's rule (BaseConv and BaseConvTranspose refuse it in __init__), in Keras's words.
std::optional<std::string> strides_with_dilation(Size2 strides, Size2 dilation) {
  if (std::max(strides.h, strides.w) <= 1 || std::max(dilation.h, dilation.w) <= 1) return {};
  return fmt::format(
      "`strides > 1` not supported in conjunction with `dilation_rate > 1`. Received: "
      "strides=({}, {}) and dilation_rate=({}, {})",
      strides.h, strides.w, dilation.h, dilation.w);
}

}  // namespace

Layer convolution_layer(LayerType type, std::string_view cls, int64_t filters, Size2 kernel_size,
                        std::string_view activation, Size2 strides, std::string_view padding,
                        bool use_bias, Size2 dilation_rate) {
  const std::string name(cls);
  if (filters < 1) throw Error(name, "filters must be at least 1, got " + std::to_string(filters));
  require_positive(kernel_size, name.c_str(), "kernel_size");
  require_positive(strides, name.c_str(), "strides");
  require_positive(dilation_rate, name.c_str(), "dilation_rate");
  if (const std::optional<std::string> why = strides_with_dilation(strides, dilation_rate))
    throw Error(name, *why);
  Layer l;
  l.type = type;
  ConvArgs& a = l.args<ConvArgs>();
  a.filters = filters;
  a.kernel_size = kernel_size;
  a.strides = strides;
  a.dilation_rate = dilation_rate;
  a.padding = parse_padding(padding, name);
  a.activation = layer_activation(activation);
  a.use_bias = use_bias;
  return l;
}

std::vector<std::string> ConvolutionKind::weight_names(const Layer& l) const {
  if (!l.args<ConvArgs>().use_bias) return {l.name + "/kernel"};
  return {l.name + "/kernel", l.name + "/bias"};
}

// NAME:FILTERS:KERNEL[:ACTIVATION[:PADDING[:STRIDES[:DILATION]]]]
std::optional<Layer> ConvolutionKind::from_cli(const CliFields& f) const {
  if (f.size() < 3 || f.size() > 7) return std::nullopt;
  return convolution_layer(type(), class_name(), f.whole(1), f.size2(2), f.text_or(3, "linear"),
                           f.size() > 5 ? f.size2(5) : Size2(1), f.text_or(4, "valid"), true,
                           f.size() > 6 ? f.size2(6) : Size2(1));
}

namespace {
// A (height, width) argument as a config writes it: [h, w], or [w] for a 1-D layer's.
template <class J>
J sizes(Size2 s, bool one_d) {
  return one_d ? J::array({s.w}) : J::array({s.h, s.w});
}
}  // namespace

void ConvolutionKind::describe(const Layer& l, nlohmann::json& j) const {
  const ConvArgs& a = l.args<ConvArgs>();
  j["filters"] = a.filters;
  j["kernel_size"] = sizes<json>(a.kernel_size, one_d());
  j["strides"] = sizes<json>(a.strides, one_d());
  j["padding"] = padding_name(a.padding);
  j["dilation_rate"] = sizes<json>(a.dilation_rate, one_d());
  j["activation"] = activation_name(a.activation.kind);
  j["use_bias"] = a.use_bias;
}

void ConvolutionKind::from_keras(Reader& cfg, Layer& l) const {
  const std::string cls(class_name());
  ConvArgs& a = l.args<ConvArgs>();
  a.filters = cfg.count("filters", cls + " needs filters");
  // Conv1D's are one number each, held as one row: (1, n).
  const auto sizes_of = [&](const char* key) -> std::optional<Size2> {
    if (!one_d()) return cfg.pair(key);
    const std::optional<int64_t> n = cfg.single(key);
    return n ? std::optional<Size2>(Size2(1, *n)) : std::nullopt;
  };
  const std::optional<Size2> kernel = sizes_of("kernel_size");
  if (!kernel) cfg.fail("kernel_size", cls + " needs a kernel_size");
  a.kernel_size = *kernel;
  a.strides = sizes_of("strides").value_or(Size2(1));
  a.padding = cfg.padding();
  if (transposed())
    cfg.refuse_set("output_padding",
                   "output_padding is not supported: only None (Keras's default output size)");
  cfg.channels_last();
  a.dilation_rate = sizes_of("dilation_rate").value_or(Size2(1));
  if (const std::optional<std::string> why = strides_with_dilation(a.strides, a.dilation_rate))
    cfg.fail("dilation_rate", *why);
  if (const json* g = transposed() ? nullptr : cfg.find("groups"))
    if (!g->is_number_integer() || g->get<int64_t>() != 1)
      cfg.fail("groups", "groups " + brief(*g) + " is not supported: only 1");
  cfg.activation(a.activation);
  cfg.kernel_and_bias(a.use_bias, a.kernel_initializer, a.bias_initializer, a.kernel_regularizer,
                      a.bias_regularizer);
}

void ConvolutionKind::to_keras(const Layer& l, ojson& c) const {
  const ConvArgs& a = l.args<ConvArgs>();
  c["filters"] = a.filters;
  c["kernel_size"] = sizes<ojson>(a.kernel_size, one_d());
  c["strides"] = sizes<ojson>(a.strides, one_d());
  c["padding"] = std::string(padding_name(a.padding));
  if (transposed()) c["output_padding"] = nullptr;
  c["data_format"] = "channels_last";
  c["dilation_rate"] = sizes<ojson>(a.dilation_rate, one_d());
  if (!transposed()) c["groups"] = 1;
  c["activation"] = activation_json(a.activation);
  write_kernel_and_bias(c, a.use_bias, a.kernel_initializer, a.bias_initializer,
                        a.kernel_regularizer, a.bias_regularizer, true);
}

int64_t ConvolutionKind::check_size(const Layer& l, int64_t width, int64_t channels,
                                    const std::string& where) const {
  const ConvArgs& a = l.args<ConvArgs>();
  if (a.kernel_size.h * a.kernel_size.w > kMaxElements / a.filters / std::max<int64_t>(channels, 1))
    throw Error(where, fmt::format("layer '{}': a {}x{} kernel of {} filters is absurdly large",
                                   printable(l.name), a.kernel_size.h, a.kernel_size.w, a.filters));
  return width;
}

void ConvolutionKind::check_device(const Layer& l, const Backend& backend, int) const {
  require_conv2d(l, backend);
}

std::size_t ConvolutionKind::workspace_bytes(const Layer&, const LayerState& li, Backend&,
                                             int64_t batch) const {
  return pre_activation_bytes(li, batch);
}

Size2 ConvolutionKind::dilated_span(const Layer& l) const {
  const ConvArgs& a = l.args<ConvArgs>();
  // (kernel - 1) * dilation must not overflow; no real window comes near kMaxElements.
  if (a.kernel_size.h - 1 > kMaxElements / a.dilation_rate.h ||
      a.kernel_size.w - 1 > kMaxElements / a.dilation_rate.w)
    throw Error(l.name, fmt::format("a {}x{} kernel with dilation_rate ({}, {}) spans an absurdly "
                                    "large window",
                                    a.kernel_size.h, a.kernel_size.w, a.dilation_rate.h,
                                    a.dilation_rate.w));
  return {dilated_extent(a.kernel_size.h, a.dilation_rate.h),
          dilated_extent(a.kernel_size.w, a.dilation_rate.w)};
}

void ConvolutionKind::place_kernel(const Layer& l, const Shape& in, ConvShape& c) const {
  const ConvArgs& a = l.args<ConvArgs>();
  const Size2 span = dilated_span(l);
  if (dilated(a) && a.padding == Padding::valid && (span.h > in[0] || span.w > in[1]))
    throw Error(l.name, fmt::format("the {}x{} kernel with dilation_rate ({}, {}) spans {}x{}, "
                                    "which does not fit in the {}x{} input with padding 'valid': "
                                    "use padding 'same', a smaller kernel or a smaller dilation",
                                    a.kernel_size.h, a.kernel_size.w, a.dilation_rate.h,
                                    a.dilation_rate.w, span.h, span.w, in[0], in[1]));
  place_window(l, span, a.strides, a.padding, in, c);
  c.kernel_h = a.kernel_size.h, c.kernel_w = a.kernel_size.w;
  c.dilation_h = a.dilation_rate.h, c.dilation_w = a.dilation_rate.w;
}

LayerActivation ConvolutionKind::activation(const Layer& l) const {
  return l.args<ConvArgs>().activation;
}

}  // namespace crossover
