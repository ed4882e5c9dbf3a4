// Concatenate: two or more inputs joined along their last axis (Keras's keras.layers.Concatenate
// with axis=-1, its default: the features of two Dense layers, the channels of two images).
#include "nn/layers/concatenate.h"

#include <string>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

Layer Concatenate(int64_t axis) {
  Layer l;
  l.type = LayerType::concatenate;
  l.args<ConcatenateArgs>().axis = axis;
  return l;
}

namespace {

using namespace keras_config;

// The last axis's size of input k, and the rows (samples times the other axes) it spans.
int64_t columns(const LayerState& st, std::size_t k) { return st.in_shapes[k].back(); }

class ConcatenateKind final : public LayerKind {
 public:
  LayerType type() const override { return LayerType::concatenate; }
  std::string_view class_name() const override { return "Concatenate"; }
  std::string_view base_name() const override { return "concatenate"; }
  std::optional<keras_config::Arguments> keras_arguments() const override {
    return keras_config::Arguments{{"axis", -1}};
  }
  bool merges() const override { return true; }

  // ---- Keras config ----
  void from_keras(Reader& cfg, Layer& l) const override {
    if (const json* a = cfg.find("axis")) {
      if (!a->is_number_integer()) cfg.fail("axis", "axis must be an integer, got " + brief(*a));
      l.args<ConcatenateArgs>().axis = a->get<int64_t>();
    }
  }
  void to_keras(const Layer& l, ojson& c) const override {
    c["axis"] = l.args<ConcatenateArgs>().axis;
  }
  bool keras_build_config() const override { return true; }

  // ---- engine ----
  void build(LayerBuilder& b) const override {
    const std::vector<Shape>& in = b.state.in_shapes;
    const auto rank = static_cast<int64_t>(in[0].size());
    // Keras's axis counts the batch axis: -1 and rank (of a sample, plus the batch) are the last.
    const int64_t axis = b.layer.args<ConcatenateArgs>().axis;
    if (axis != -1 && axis != rank)
      throw Error(b.layer.name,
                  "Concatenate is supported along the last axis only (axis=-1), got axis=" +
                      std::to_string(axis));
    Shape out = in[0];
    for (std::size_t k = 1; k < in.size(); ++k) {
      const bool same_rest =
          in[k].size() == in[0].size() && std::equal(in[k].begin(), in[k].end() - 1, in[0].begin());
      if (!same_rest)
        throw Error(b.layer.name,
                    "Concatenate needs inputs that differ only in the last axis, but input 0 is " +
                        shape_to_string(in[0]) + " and input " + std::to_string(k) + " is " +
                        shape_to_string(in[k]));
      out.back() += in[k].back();
    }
    b.shape = out;
  }

  // Each input into its columns of y.
  void forward(const ForwardStep& s) const override {
    const int64_t cols = s.state.out_shape.back();
    const int64_t rows = s.m * (s.state.out_width / cols);
    int64_t at = 0;
    for (std::size_t k = 0; k < s.xs.size(); ++k) {
      const int64_t c = columns(s.state, k);
      s.backend.copy_columns(s.xs[k], c, 0, s.y, cols, at, rows, c);
      at += c;
    }
  }
  // Each input's gradient is its columns of the output's.
  void backward(BackwardStep& s) const override {
    const int64_t cols = s.state.out_shape.back();
    const int64_t rows = s.m * (s.state.out_width / cols);
    int64_t at = 0;
    for (std::size_t k = 0; k < s.input_grads.size(); ++k) {
      const int64_t c = columns(s.state, k);
      if (float* dx = s.input_grads[k]) s.backend.copy_columns(s.g, cols, at, dx, c, 0, rows, c);
      at += c;
    }
    s.activation_done = false;
  }
};

}  // namespace

const LayerKind& concatenate_layer_kind() {
  static const ConcatenateKind kind;
  return kind;
}

}  // namespace crossover
