// The registry of layer kinds: nn/layers/kinds.h's list, in LayerType order.
#include <limits>
#include <stdexcept>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

// Each defined in its own unit, nn/layers/<kind>.cpp.
#define CROSSOVER_LAYER_KIND(id) const LayerKind& id##_layer_kind();
#include "nn/layers/kinds.h"

namespace {

// Every kind, in LayerType order (layer_kind checks the order).
std::span<const LayerKind* const> kinds() {
  static const LayerKind* const all[] = {
#define CROSSOVER_LAYER_KIND(id) &id##_layer_kind(),
#include "nn/layers/kinds.h"
  };
  return all;
}

}  // namespace

std::span<const LayerKind* const> layer_kinds() { return kinds(); }

void LayerState::wrong_own() const {
  throw Error("layer", "internal: a step read a layer's state before its build() made it");
}

const LayerKind& layer_kind(LayerType type) {
  const auto i = static_cast<std::size_t>(type);
  if (i >= kinds().size() || kinds()[i]->type() != type)
    throw Error("layer", "no layer kind for type " + std::to_string(i));
  return *kinds()[i];
}

const LayerKind* find_keras_layer_kind(std::string_view class_name) {
  for (const LayerKind* k : kinds()) {
    if (k->class_name() == class_name) return k;
    for (std::string_view alias : k->aliases())
      if (alias == class_name) return k;
  }
  return nullptr;
}

void build_layer_state(const Layer& layer, int index, LayerState& state,
                       std::vector<LayerParam>& params, int64_t& offset, int first_call) {
  Shape shape = state.in_shapes.front();
  state.in_width = shape_size(shape, layer.name);
  LayerBuilder builder(layer, index, shape, state, params, offset);
  if (first_call >= 0) {
    std::vector<int> own;
    for (std::size_t p = 0; p < params.size(); ++p)
      if (params[p].layer == first_call) own.push_back(static_cast<int>(p));
    builder.reuse(std::move(own));
  }
  layer_kind(layer).build(builder);
  if (!builder.reused_all())
    throw Error(layer.name,
                "internal: a second call of the layer made fewer weights than its "
                "first");
  state.activation = layer_kind(layer).activation(layer);
  state.out_width = shape_size(shape, layer.name);
  state.out_shape = std::move(shape);
}

BuiltLayer build_layer(const Layer& layer, const std::vector<Shape>& in_shapes) {
  if (in_shapes.empty()) throw Error(layer.name, "a layer is built on at least one input shape");
  LayerState state;
  state.in_shapes = in_shapes;
  // Called on a tensor, a layer ignores an input shape it declares, as Keras's does: only an
  // InputLayer's is its own.
  Layer called = layer;
  if (!layer_kind(layer).is_model_input()) called.input_shape.clear();
  BuiltLayer built;
  int64_t offset = 0;
  build_layer_state(called, 0, state, built.params, offset);
  built.out_shape = std::move(state.out_shape);
  return built;
}

const LayerKind* find_cli_layer_kind(std::string_view name) {
  for (const LayerKind* k : kinds())
    if (!k->cli_name().empty() && k->cli_name() == name) return k;
  return nullptr;
}

}  // namespace crossover

// ---- the CLI's layer-list fields ----
namespace crossover {

int LayerBuilder::add_param(const std::string& variable, const Shape& param_shape,
                            const Initializer& initializer, bool trainable) {
  const int p = outer_ ? outer_->add(path_ + "/" + variable, group_, param_shape, initializer,
                                     trainable && layer.trainable)
                       : add(path_ + "/" + variable, "", param_shape, initializer, trainable);
  state.params.push_back({variable, p});
  return p;
}

void LayerBuilder::regularize(int p, const Regularizer& regularizer) {
  if (outer_) return outer_->regularize(p, regularizer);
  params_[static_cast<std::size_t>(p)].regularizer = regularizer;
}

int LayerBuilder::add(const std::string& name, const std::string& group, const Shape& param_shape,
                      const Initializer& initializer, bool trainable) {
  if (outer_) return outer_->add(name, group, param_shape, initializer, trainable);
  const int64_t n = shape_size(param_shape, layer.name);
  if (!reuse_.empty()) {  // a second call of a shared layer: its first call's weights
    if (next_reuse_ >= reuse_.size())
      throw Error(layer.name,
                  "internal: a second call of the layer made more weights than its "
                  "first");
    const int p = reuse_[next_reuse_++];
    const LayerParam& first = params_[static_cast<std::size_t>(p)];
    if (first.shape != param_shape)
      throw Error(layer.name, "is called again on an input of shape " +
                                  shape_to_string(state.in_shapes.front()) +
                                  ", but its weights were made for its first call: " + first.name +
                                  " is " + shape_to_string(first.shape) + ", this input needs " +
                                  shape_to_string(param_shape));
    return p;
  }
  // offset + n rounded up to whole 64-byte lines, or Error for a count no machine could hold.
  if (n > std::numeric_limits<int64_t>::max() - 16 - offset_)
    throw Error(layer.name, "too many parameters: " + std::to_string(n) + " after " +
                                std::to_string(offset_) + " overflow a 64-bit count");
  uint32_t draw = 0;
  for (const LayerParam& p : params_) draw += p.layer == index ? 1 : 0;
  params_.push_back({name, param_shape, n, offset_, index, trainable, initializer, draw, group});
  offset_ += (n + 15) / 16 * 16;
  return static_cast<int>(params_.size()) - 1;
}

LayerBuilder::LayerBuilder(LayerBuilder& outer, const Layer& inner, std::string group, Shape& shape,
                           LayerState& state)
    : layer(inner),
      index(outer.index),
      shape(shape),
      state(state),
      params_(outer.params_),
      offset_(outer.offset_),
      outer_(&outer),
      path_(outer.path_ + "/" +
            (inner.name.empty() ? std::string(layer_kind(inner).base_name()) : inner.name)),
      group_(std::move(group)) {}

Shape LayerBuilder::build_inner(std::size_t i, const Shape& in) {
  if (i >= layer.inner.size())
    throw Error(layer.name, "internal: the layer holds no inner layer " + std::to_string(i));
  if (state.inner.size() < layer.inner.size()) state.inner.resize(layer.inner.size());
  const Layer& inner = layer.inner[i];
  const std::string attribute(layer_kind(layer).inner_attribute(layer, i));
  LayerState& st = state.inner[i];
  st = LayerState{};
  st.in_shapes = {in};
  st.in_width = shape_size(in, inner.name);
  Shape out = in;
  LayerBuilder b(*this, inner, group_.empty() ? attribute : group_ + "/" + attribute, out, st);
  layer_kind(inner).build(b);
  st.activation = layer_kind(inner).activation(inner);
  st.out_width = shape_size(out, inner.name);
  st.out_shape = out;
  return out;
}

std::vector<KerasWeightGroup> keras_weight_groups(const Layer& l) {
  std::vector<KerasWeightGroup> groups{{"", l.name, layer_kind(l).weight_names(l)}};
  for (std::size_t i = 0; i < l.inner.size(); ++i) {
    const std::string attribute(layer_kind(l).inner_attribute(l, i));
    for (KerasWeightGroup g : keras_weight_groups(l.inner[i])) {
      g.group = g.group.empty() ? attribute : attribute + "/" + g.group;
      for (std::string& n : g.names) n = l.name + "/" + n;
      groups.push_back(std::move(g));
    }
  }
  return groups;
}

std::size_t pre_activation_bytes(const LayerState& state, int64_t batch) {
  if (!activation_needs_input(state.activation.kind)) return 0;
  return static_cast<std::size_t>(batch * state.out_width) * sizeof(float);
}

void check_declared_input(LayerBuilder& b) {
  if (!b.layer.input_shape.empty() && b.layer.input_shape != b.shape)
    throw Error(b.layer.name, "declared input shape " + shape_to_string(b.layer.input_shape) +
                                  " but receives " + shape_to_string(b.shape));
  b.state.aliases_input = true;
}

// Not an Error: the layer list reports it once, as "--model: <bad>".
void CliFields::bad() const { throw std::invalid_argument(bad_); }

int64_t CliFields::whole(std::size_t i) const {
  const std::string& text = f_.at(i);
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
    bad();
  }
  if (used != text.size() || text.empty()) bad();
  return v;
}

double CliFields::number(std::size_t i, double fallback) const {
  if (i >= f_.size()) return fallback;
  std::size_t used = 0;
  const double v = std::stod(f_[i], &used);  // std::invalid_argument: not a number at all
  if (used != f_[i].size()) bad();
  return v;
}

namespace {
std::vector<std::string> split_x(const std::string& s) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t x = s.find('x', begin);
    parts.push_back(s.substr(begin, x == std::string::npos ? std::string::npos : x - begin));
    if (x == std::string::npos) break;
    begin = x + 1;
  }
  return parts;
}
}  // namespace

Size2 CliFields::size2(std::size_t i) const {
  const CliFields hw(split_x(f_.at(i)), bad_);
  if (hw.size() == 1) return hw.whole(0);
  if (hw.size() == 2) return {hw.whole(0), hw.whole(1)};
  bad();
}

Shape CliFields::dims(std::size_t i) const {
  const CliFields d(split_x(f_.at(i)), bad_);
  Shape out;
  for (std::size_t k = 0; k < d.size(); ++k) out.push_back(d.whole(k));
  return out;
}

}  // namespace crossover
