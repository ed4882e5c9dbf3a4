// Dropout: inverted dropout in training (kept units scaled by 1 / (1 - rate)); the identity in
// evaluate and predict.
#include "nn/layers/dropout.h"

#include <fmt/format.h>

#include <cstdio>

#include "backends/fused_mlp.h"
#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer Dropout(double rate) {
  if (!(rate >= 0.0 && rate < 1.0))
    throw Error("Dropout", "rate must be in [0, 1), got " + std::to_string(rate));
  Layer l;
  l.type = LayerType::dropout;
  l.args<DropoutArgs>().rate = static_cast<float>(rate);
  return l;
}

namespace {

using namespace keras_config;

class DropoutKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::dropout; }
  std::string_view class_name() const override { return "Dropout"; }
  std::string_view base_name() const override { return "dropout"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    using keras_config::required;
    return keras_config::Arguments{
        required("rate", 0.5), {"noise_shape", nullptr}, {"seed", nullptr}};
  }
  bool keeps_shape() const override { return true; }

  // ---- command line: dropout:RATE ----
  std::string_view cli_name() const override { return "dropout"; }
  std::string_view cli_syntax() const override { return "dropout:RATE"; }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (f.size() != 2) return std::nullopt;
    return Dropout(f.number(1, 0.0));
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["rate"] = l.args<DropoutArgs>().rate;
  }

  // ---- Keras config ----
  void from_keras(Reader& cfg, Layer& l) const override {
    const json* r = cfg.find("rate");
    if (!r) cfg.fail("rate", "Dropout needs a rate");
    if (!r->is_number() || !(r->get<double>() >= 0.0 && r->get<double>() < 1.0))
      cfg.fail("rate", "rate must be a number in [0, 1), got " + brief(*r));
    l.args<DropoutArgs>().rate = static_cast<float>(r->get<double>());
    cfg.refuse_set("noise_shape", "a dropout noise_shape is not supported");
    // "seed": crossover's dropout masks come from its own seed (--seed / CompileOptions.seed).
    cfg.accept({"seed"});
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["rate"] = decimal(l.args<DropoutArgs>().rate);
    c["seed"] = nullptr;
    c["noise_shape"] = nullptr;
  }

  // ---- engine ----
  bool identity_outside_training(const Layer&) const override { return true; }
  void describe_fused(const Layer& l, FusedLayerView& v) const override {
    v.kind = FusedLayerView::Kind::dropout;
    v.rate = l.args<DropoutArgs>().rate;
  }
  bool random_in_training(const Layer& l) const override {
    return l.args<DropoutArgs>().rate > 0.0f;
  }
  // The mask: one byte per value of the batch.
  std::size_t workspace_bytes(const Layer&, const LayerState& li, Backend&,
                              int64_t batch) const override {
    return static_cast<std::size_t>(batch * li.out_width);
  }

  // In training: mask = Philox(seed, layer, step, element) >= rate; y = x * mask / (1 - rate).
  void forward(const ForwardStep& s) const override {
    if (s.training)
      s.backend.dropout_forward(s.x, s.y, static_cast<uint8_t*>(s.workspace), s.m,
                                s.state.out_width, s.layer.args<DropoutArgs>().rate, s.seed,
                                s.index, s.counters, s.first_row);
  }

  // dx = g * mask / (1 - rate); after a relu, the relu's gradient in the same call.
  void backward(BackwardStep& s) const override {
    const auto* mask = static_cast<const uint8_t*>(s.workspace);
    if (s.after_relu) {
      s.backend.relu_dropout_backward(s.y, mask, s.g, s.spare, s.m, s.state.out_width,
                                      s.layer.args<DropoutArgs>().rate);
      s.activation_done = true;
    } else {
      s.backend.dropout_backward(s.g, mask, s.spare, s.m, s.state.out_width,
                                 s.layer.args<DropoutArgs>().rate);
      s.activation_done = false;
    }
    s.swap();
  }
};

}  // namespace

const LayerKind& dropout_layer_kind() {
  static const DropoutKind kind;
  return kind;
}

}  // namespace crossover
