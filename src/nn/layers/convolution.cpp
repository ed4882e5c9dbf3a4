#include "nn/layers/convolution.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "nn/layers/window.h"

namespace crossover {

using namespace keras_config;

Layer convolution_layer(LayerType type, std::string_view cls, int64_t filters, Size2 kernel_size,
                        std::string_view activation, Size2 strides, std::string_view padding,
                        bool use_bias) {
  const std::string name(cls);
  if (filters < 1) throw Error(name, "filters must be at least 1, got " + std::to_string(filters));
  require_positive(kernel_size, name.c_str(), "kernel_size");
  require_positive(strides, name.c_str(), "strides");
  Layer l;
  l.type = type;
  ConvArgs& a = l.args<ConvArgs>();
  a.filters = filters;
  a.kernel_size = kernel_size;
  a.strides = strides;
  a.padding = parse_padding(padding, name);
  a.activation = layer_activation(activation);
  a.use_bias = use_bias;
  return l;
}

std::vector<std::string> ConvolutionKind::weight_names(const Layer& l) const {
  if (!l.args<ConvArgs>().use_bias) return {l.name + "/kernel"};
  return {l.name + "/kernel", l.name + "/bias"};
}

// NAME:FILTERS:KERNEL[:ACTIVATION[:PADDING[:STRIDES]]]
std::optional<Layer> ConvolutionKind::from_cli(const CliFields& f) const {
  if (f.size() < 3 || f.size() > 6) return std::nullopt;
  return convolution_layer(type(), class_name(), f.whole(1), f.size2(2), f.text_or(3, "linear"),
                           f.size() > 5 ? f.size2(5) : Size2(1), f.text_or(4, "valid"), true);
}

void ConvolutionKind::describe(const Layer& l, nlohmann::json& j) const {
  const ConvArgs& a = l.args<ConvArgs>();
  j["filters"] = a.filters;
  j["kernel_size"] = {a.kernel_size.h, a.kernel_size.w};
  j["strides"] = {a.strides.h, a.strides.w};
  j["padding"] = padding_name(a.padding);
  j["activation"] = activation_name(a.activation.kind);
  j["use_bias"] = a.use_bias;
}

void ConvolutionKind::from_keras(Reader& cfg, Layer& l) const {
  const std::string cls(class_name());
  ConvArgs& a = l.args<ConvArgs>();
  a.filters = cfg.count("filters", cls + " needs filters");
  const std::optional<Size2> kernel = cfg.pair("kernel_size");
  if (!kernel) cfg.fail("kernel_size", cls + " needs a kernel_size");
  a.kernel_size = *kernel;
  a.strides = cfg.pair("strides").value_or(Size2(1));
  a.padding = cfg.padding();
  if (transposed())
    cfg.refuse_set("output_padding",
                   "output_padding is not supported: only None (Keras's default output size)");
  cfg.channels_last();
  if (const std::optional<Size2> d = cfg.pair("dilation_rate"); d && *d != Size2(1))
    cfg.fail("dilation_rate",
             "dilation_rate " + brief(*cfg.find("dilation_rate")) + " is not supported: only 1");
  if (const json* g = transposed() ? nullptr : cfg.find("groups"))
    if (!g->is_number_integer() || g->get<int64_t>() != 1)
      cfg.fail("groups", "groups " + brief(*g) + " is not supported: only 1");
  cfg.activation(a.activation);
  cfg.kernel_and_bias(a.use_bias, a.kernel_initializer, a.bias_initializer);
}

void ConvolutionKind::to_keras(const Layer& l, ojson& c) const {
  const ConvArgs& a = l.args<ConvArgs>();
  c["filters"] = a.filters;
  c["kernel_size"] = ojson::array({a.kernel_size.h, a.kernel_size.w});
  c["strides"] = ojson::array({a.strides.h, a.strides.w});
  c["padding"] = std::string(padding_name(a.padding));
  if (transposed()) c["output_padding"] = nullptr;
  c["data_format"] = "channels_last";
  c["dilation_rate"] = ojson::array({1, 1});
  if (!transposed()) c["groups"] = 1;
  c["activation"] = activation_json(a.activation);
  write_kernel_and_bias(c, a.use_bias, a.kernel_initializer, a.bias_initializer, true);
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

LayerActivation ConvolutionKind::activation(const Layer& l) const {
  return l.args<ConvArgs>().activation;
}

}  // namespace crossover
