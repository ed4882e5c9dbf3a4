// A layer kind: everything crossover knows about one kind of layer, in one unit
// (src/nn/layers/<kind>.cpp), found through the registry by its Keras class name, its CLI name
// or its LayerType. The model (nn/model/), the Keras JSON reader and writer
// (formats/model_config*.cpp), the .weights.h5 names (formats/keras_h5_model.cpp) and the command
// line go through it; none of them switches on a LayerType.
//
// Adding a kind: one line in nn/layers/kinds.h (its LayerType and its place in the registry), its
// arguments (with Keras's defaults) and constructor in nn/layers/<kind>.h (one include in
// nn/layers.h), and one unit implementing LayerKind (docs/ARCHITECTURE.md, "Adding a layer").
#pragma once

#include <any>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "nn/layer.h"
#include "nn/layers/keras_config.h"

namespace crossover {

struct FusedLayerView;  // backends/fused_mlp.h

// The fields of one item of the CLI's layer list ("conv:32:3:relu" -> conv, 32, 3, relu). Each
// reader throws std::invalid_argument(bad) for a field that does not parse (the CLI then says
// "--model: <bad>"); a layer's constructor throws Error for a value it refuses.
class CliFields {
 public:
  CliFields(std::vector<std::string> fields, std::string bad)
      : f_(std::move(fields)), bad_(std::move(bad)) {}
  std::size_t size() const { return f_.size(); }
  const std::string& text(std::size_t i) const { return f_[i]; }
  // The field, or `fallback` past the end.
  std::string text_or(std::size_t i, const std::string& fallback) const {
    return i < f_.size() ? f_[i] : fallback;
  }
  int64_t whole(std::size_t i) const;                   // "128"
  double number(std::size_t i, double fallback) const;  // "0.2"; fallback past the end
  Size2 size2(std::size_t i) const;                     // "3" -> (3, 3); "3x5" -> (3, 5)
  Shape dims(std::size_t i) const;                      // "7x7x16"
  [[noreturn]] void bad() const;

 private:
  std::vector<std::string> f_;
  std::string bad_;
};

// One parameter of a model, as its layer's build() adds it; the model keeps them in one list and
// one block of device memory (values | grads | slot1 | slot2).
struct LayerParam {
  std::string name;  // "dense/kernel", as Keras stores it
  Shape shape;
  int64_t n = 0;
  int64_t offset = 0;  // in floats, within each of the four sections of the model's block
  int layer = 0;
  // The variable's own (Keras's variable.trainable): false for batch normalization's moving
  // statistics. Whether fit updates it also takes its layer's Layer::trainable.
  bool trainable = true;
  Initializer initializer;  // how its initial values are drawn
  uint32_t draw = 0;        // its place among its layer's parameters (its initializer's draws)
  // Where Keras's weights files keep it below its layer's group: "" its layer's own variables
  // (layers/<layer>/vars), else the path of the inner layer that holds it ("layer":
  // layers/time_distributed/layer/vars; "forward_layer/cell").
  std::string group;
  // Keras's regularizer of the weight (a Dense's kernel_regularizer): its penalty joins the loss
  // and its gradient the weight's (Backend::regularize), in each step.
  Regularizer regularizer;
};

// What a layer's build() derives from its input shape; the model keeps one per layer.
struct LayerState {
  int64_t in_width = 0, out_width = 0;  // values per sample
  Shape out_shape;                      // per sample
  bool aliases_input = false;           // the output is the input's buffer (Flatten, Reshape)
  std::vector<Shape> in_shapes;         // per sample, one per input (several for Add, Concatenate)
  // The activation the layer applies (LayerKind::activation), set by the model after build():
  // what a step reads, so that no step looks into the layer's arguments for it.
  LayerActivation activation;

  // One of the layer's parameters: its Keras variable name ("kernel", "gamma", "moving_mean")
  // and its index into the model's parameters.
  struct Param {
    std::string variable;
    int index = -1;
  };
  // The layer's own parameters, in the order its build() added them (LayerBuilder::add_param);
  // those of the layers it holds are in `inner`.
  std::vector<Param> params;
  // The index of the parameter named `variable`; -1 when the layer has none (Dense without a
  // bias).
  int param(std::string_view variable) const {
    for (const Param& p : params)
      if (p.variable == variable) return p.index;
    return -1;
  }

  // What the kind's build() derives for its steps, of the kind's own type (ConvShape for Conv2D,
  // PoolShape for pooling, BatchNormShape, ...), held by value and reached by type as Layer's
  // arguments are. Mutable: made (S{}) when the state holds none yet.
  template <class S>
  S& own() {
    if (!own_.has_value()) return own_.emplace<S>();
    if (S* s = std::any_cast<S>(&own_)) return *s;
    wrong_own();
  }
  // Throws Error when the state holds none of type S (a step before build(): internal).
  template <class S>
  const S& own() const {
    if (const S* s = std::any_cast<S>(&own_)) return *s;
    wrong_own();
  }

  // The states of the layers this one holds (Layer::inner), in order: each built by its own
  // kind (LayerBuilder::build_inner).
  std::vector<LayerState> inner;

 private:
  [[noreturn]] void wrong_own() const;
  std::any own_;
};

// Passed to build(): the layer, its input shape (which build() turns into its output shape), and
// a way to add parameters.
class LayerBuilder {
 public:
  LayerBuilder(const Layer& layer, int index, Shape& shape, LayerState& state,
               std::vector<LayerParam>& params, int64_t& offset)
      : layer(layer),
        index(index),
        shape(shape),
        state(state),
        params_(params),
        offset_(offset),
        path_(layer.name) {}
  const Layer& layer;
  const int index;  // in the model
  // Per sample: the (first) input's on entry, the output's on return. A merging layer's inputs
  // are all in state.in_shapes.
  Shape& shape;
  LayerState& state;
  // Adds "<layer>/<variable>" of `shape`, listed in state.params under `variable`; returns its
  // index. Throws Error for a count past any machine.
  int add_param(const std::string& variable, const Shape& shape, const Initializer& initializer,
                bool trainable = true);
  // Builds the layer's inner layer i (Layer::inner) on per-sample input `in`, by its own kind,
  // into state.inner[i]: its parameters are added as this layer's, named
  // "<layer>/<inner>/<variable>" and kept under inner_attribute(i) in the weights files. Returns
  // its output shape. A kind with inner layers builds each once, in order.
  Shape build_inner(std::size_t i, const Shape& in);
  // Gives parameter p (add_param's index) the layer's regularizer of it (kernel_regularizer);
  // none leaves it unregularized. A shared layer's later call gives its first call's again.
  void regularize(int p, const Regularizer& regularizer);
  // A layer called again (a shared layer): add_param hands back these parameters of its first
  // call, in order, instead of adding new ones, each of the shape it asks for or Error.
  void reuse(std::vector<int> first_call_params) { reuse_ = std::move(first_call_params); }
  // Whether every reused parameter was asked for.
  bool reused_all() const { return next_reuse_ == reuse_.size(); }

 private:
  // An inner layer's builder: its parameters go through `outer`.
  LayerBuilder(LayerBuilder& outer, const Layer& inner, std::string group, Shape& shape,
               LayerState& state);
  // Adds (or, called again, reuses) the parameter named `name`, kept under `group`.
  int add(const std::string& name, const std::string& group, const Shape& shape,
          const Initializer& initializer, bool trainable);

  std::vector<LayerParam>& params_;
  int64_t& offset_;
  std::vector<int> reuse_;
  std::size_t next_reuse_ = 0;
  LayerBuilder* outer_ = nullptr;  // an inner layer's: the model layer's builder
  std::string path_;               // its name path: "time_distributed/dense"
  std::string group_;              // its weights group below the model layer's: "layer"
};

// What one layer's calls in a step get from the model: the backend, the layer's buffers in the
// step's plan, and its parameters.
struct LayerStep {
  Backend& backend;
  const Layer& layer;
  const LayerState& state;
  const std::vector<ParamSlot>& slots;  // every parameter of the model, in build order
  uint32_t index;                       // the layer's place in the model
  int64_t m;                            // rows of the batch
  const float* x;                       // input (m, in_width); a merging layer's first
  float* y;                             // output (m, out_width)
  void* workspace;                      // the plan's block for the layer (workspace_bytes)
  // Every input, in order (x is the first): several for a merging layer (Add, Concatenate).
  std::span<const float* const> xs = {};
  // Layer::trainable as the model was compiled with it (a change takes effect at the next
  // compile, as in Keras): false, the layer's weights get no gradient and no update, and a
  // BatchNormalization normalizes by its moving statistics in training too.
  bool trainable = true;
  float* value(int p) const { return p < 0 ? nullptr : slots[static_cast<std::size_t>(p)].value; }
  float* grad(int p) const { return p < 0 ? nullptr : slots[static_cast<std::size_t>(p)].grad; }
  // The layer's parameter named `variable` (LayerState::param); null when it has none.
  float* value(std::string_view variable) const { return value(state.param(variable)); }
  float* grad(std::string_view variable) const { return grad(state.param(variable)); }
};

struct ForwardStep : LayerStep {
  bool training;          // fit (dropout, the batch's statistics) or evaluate/predict
  bool defer_activation;  // the final layer in training: the loss op applies its activation
  uint64_t seed;          // dropout's
  StepCounters* counters;
  int64_t first_row;  // the global batch row of row 0 (dropout draws by the global row)
  // A pass whose loss is asked for (fit's and evaluate's steps): the global batch's rows, by
  // which Keras's add_loss terms and activity regularizers are divided; 0 in the other passes
  // (predict, a custom loop's), which add no such term.
  int64_t loss_rows = 0;
};

// Backward from g, the gradient with respect to the layer's output (with respect to its
// pre-activation output when activation_done), to its input gradient, left in g: a layer that
// writes it into `spare` swaps the two.
struct BackwardStep : LayerStep {
  float* g;
  float* spare;
  bool activation_done;        // in: the activation's gradient is applied; out: for the layer below
  bool first;                  // the first layer with parameters: no input gradient is needed
  bool after_relu;             // the layer below applied a relu (dropout fuses its gradient)
  const StepCounters* update;  // non-null: update the weights in the same call (fused update)
  const OptimizerConfig* opt;  // with update
  // A merging layer's input gradients, one per input, to be written (not added to); null where an
  // input needs none. Single-input layers leave theirs in g as above.
  std::span<float* const> input_grads = {};
  // ForwardStep::loss_rows: the add_loss terms' gradients join where it is above 0.
  int64_t loss_rows = 0;
  void swap() { std::swap(g, spare); }
};

// The activation a layer's forward pass applies: its own, unless the loss op applies it (the
// final layer in training, for the kinds the loss op has: loss_applies_activation).
inline ActivationKind forward_activation(const ForwardStep& s) {
  const ActivationKind a = s.state.activation.kind;
  return s.defer_activation && loss_applies_activation(a) ? ActivationKind::linear : a;
}
// Whether the backward pass applies the activation's gradient: unless the loss op (or a fused
// dropout, for relu) did.
inline bool backward_applies_activation(const BackwardStep& s) {
  return !s.activation_done || !loss_applies_activation(s.state.activation.kind);
}
// The columns and rows an activation of the layer runs over in a batch of m samples: the last axis
// of its output samples, which Keras's softmax normalizes over (a Conv2D's channels at each pixel,
// an Activation's last axis), as columns; the element-wise activations are the same over any
// split.
inline int64_t activation_cols(const LayerState& state) {
  return state.out_shape.empty() ? state.out_width : state.out_shape.back();
}
inline int64_t activation_rows(const LayerState& state, int64_t m) {
  return m * (state.out_width / activation_cols(state));
}

// Where a Dense or Conv2D layer keeps its pre-activation output for an activation whose
// gradient needs it (activation_needs_input: gelu, swish): its workspace, of
// pre_activation_bytes; else null (the activation is applied in place on y).
std::size_t pre_activation_bytes(const LayerState& state, int64_t batch);

class LayerKind {
 public:
  virtual ~LayerKind() = default;

  // ---- identity ----
  virtual LayerType type() const = 0;
  // Keras's class name ("Dense"): Keras JSON, summary(), messages.
  virtual std::string_view class_name() const = 0;
  // Other Keras names of the same class ("MaxPool2D"), read but never written.
  virtual std::vector<std::string_view> aliases() const { return {}; }
  // Keras's automatic layer name: "dense", then "dense_1", ... (also the .weights.h5 group).
  virtual std::string_view base_name() const = 0;
  // The attribute Keras keeps inner layer i (Layer::inner) in, the name of its weights group
  // below the layer's: TimeDistributed's "layer"; a recurrent layer's "cell". Only for kinds with
  // inner layers.
  virtual std::string_view inner_attribute(const Layer&, std::size_t /*i*/) const { return {}; }

  // ---- the command line's layer list ----
  // The item's first field ("dense"); empty: not in the layer list.
  virtual std::string_view cli_name() const { return {}; }
  // Its syntax for the help and error text ("dense:UNITS[:ACTIVATION]").
  virtual std::string_view cli_syntax() const { return {}; }
  // The layer an item names; nullopt when the item has the wrong number of fields.
  virtual std::optional<Layer> from_cli(const CliFields&) const { return std::nullopt; }
  // The layer's arguments in the commands' JSON record (docs/JSON.md), beside "name" and "type".
  virtual void describe(const Layer&, nlohmann::json&) const {}

  // ---- Keras JSON: the kind's own config fields (the reader handles name, trainable, dtype and
  // the input shape fields every layer may carry) ----
  virtual void from_keras(keras_config::Reader& cfg, Layer& l) const = 0;
  virtual void to_keras(const Layer& l, keras_config::ojson& cfg) const = 0;
  // Whether Keras 3 writes a "build_config" for the layer (its build() makes weights or checks
  // the input); none for InputLayer, Dropout, Activation, pooling and Reshape.
  virtual bool keras_build_config() const { return false; }
  // The Keras class's own arguments, in its __init__'s order with Keras 3.15's defaults
  // (keras_config::Argument): Python's keras.layers makes the class's signature from them, and
  // passes them to from_keras. nullopt for the kinds Python does not make so (InputLayer, which
  // keras.Input makes; the traced ops, which have no Keras class).
  virtual std::optional<keras_config::Arguments> keras_arguments() const { return std::nullopt; }
  // Validates, before the model multiplies anything, that the layer's parameters on samples of
  // `width` values with `channels` in the last axis are of a sane size; returns the width of its
  // output where it knows it without building (Dense), else `width`.
  virtual int64_t check_size(const Layer&, int64_t width, int64_t /*channels*/,
                             const std::string& /*where*/) const {
    return width;
  }

  // ---- properties the model asks ----
  // Add, Concatenate: the layer takes two or more inputs (LayerStep::xs,
  // BackwardStep::input_grads); every other kind takes one.
  virtual bool merges() const { return false; }
  // AddLoss (an add_loss term of a traced call()): the layer adds to the loss, so the model's
  // graph may leave its output unread; the backward pass starts at it too.
  virtual bool adds_loss() const { return false; }
  // InputLayer and Flatten: the layer may declare the model's input shape.
  virtual bool declares_input() const { return false; }
  // InputLayer: not a computation but the model's input (only ever its first layer).
  virtual bool is_model_input() const { return false; }
  // Conv2D and the pooling layers: samples are (height, width, channels).
  virtual bool takes_images() const { return false; }
  // Dropout, Activation, BatchNormalization: the output has the input's shape, so a layer list
  // that starts with them takes images when the first layer after them does.
  virtual bool keeps_shape() const { return false; }
  // Dense and Conv2D: its work is matrix products, in the model's one precision (dtype policy).
  virtual bool has_matrix_products() const { return false; }
  // The weights Keras stores for the layer, in Keras's order (trainable ones first), named
  // "<layer>/<variable>".
  virtual std::vector<std::string> weight_names(const Layer&) const { return {}; }
  // Dense, Activation: the final layer's activation is left to the loss op in training (softmax
  // and cross-entropy from the logits).
  virtual bool defers_activation() const { return false; }
  // Dense, Activation, Conv2D: the layer applies an activation, activation(l).
  virtual bool applies_activation() const { return false; }
  // The activation the layer applies (its arguments'); linear for the kinds that apply none. The
  // model keeps it in LayerState::activation.
  virtual LayerActivation activation(const Layer&) const { return {}; }
  // Dense: its weight gradient and update are one backend call where the backend fuses them.
  virtual bool fuses_weight_update() const { return false; }
  // What the fused GPU step (backends/fused_mlp.h) sees of the layer: Dense, Dropout (and its
  // rate), and the kinds that only reshape (Input, Flatten, Reshape); every other kind stays
  // FusedLayerView::Kind::other, which that step refuses.
  virtual void describe_fused(const Layer&, FusedLayerView&) const {}
  // Dropout: the identity outside training (its output is then its input's buffer).
  virtual bool identity_outside_training(const Layer&) const { return false; }
  // Dropout at a rate above 0: a training pass draws random numbers.
  virtual bool random_in_training(const Layer&) const { return false; }
  // Refuses a backend (or a number of ranks) the layer cannot run on, naming the layer.
  virtual void check_device(const Layer&, const Backend&, int /*ranks*/) const {}

  // ---- the engine ----
  // Shape inference and parameters (Keras's names, shapes, initial values; kernels are
  // glorot-uniform with Keras's fans, the model draws them).
  virtual void build(LayerBuilder&) const {}
  // Device memory the layer needs in a plan of `batch` rows (dropout's mask, max pooling's
  // workspace, batch normalization's batch statistics): planned once, passed as
  // LayerStep::workspace.
  virtual std::size_t workspace_bytes(const Layer&, const LayerState&, Backend&,
                                      int64_t /*batch*/) const {
    return 0;
  }
  virtual void forward(const ForwardStep&) const {}
  // After a training forward pass (batch normalization's moving statistics); only for kinds
  // with has_moving_statistics().
  virtual bool has_moving_statistics() const { return false; }
  virtual void update_moving_statistics(const LayerStep&) const {}
  virtual void backward(BackwardStep& s) const { s.activation_done = false; }
};

// InputLayer and Flatten: the shape the layer declares (if any) must be the one it receives; its
// output is its input's buffer.
void check_declared_input(LayerBuilder& b);

// The kind of a layer type (every LayerType has one).
const LayerKind& layer_kind(LayerType type);
inline const LayerKind& layer_kind(const Layer& l) { return layer_kind(l.type); }
// The kind Keras calls `class_name` (or an alias of it); null when crossover has none.
const LayerKind* find_keras_layer_kind(std::string_view class_name);
// The kind whose CLI name is `name`; null when none.
const LayerKind* find_cli_layer_kind(std::string_view name);
// Every kind, in LayerType order.
std::span<const LayerKind* const> layer_kinds();

// Builds layer `index` of a model on state.in_shapes (its inputs' per-sample shapes, filled by
// the caller), adding its parameters to `params` from `offset` on: fills the state (widths,
// output shape, the activation it applies) as the kind's build() derives it. The model's build()
// calls it for each layer in turn; build_layer() for one layer alone. `first_call` >= 0: the
// layer is that earlier entry's layer called again, and takes that entry's parameters (already
// in `params`) instead of adding its own; Error, naming the parameter, where this call's input
// needs other shapes.
void build_layer_state(const Layer& layer, int index, LayerState& state,
                       std::vector<LayerParam>& params, int64_t& offset, int first_call = -1);

// The variables Keras's weights files keep for a layer, one group after another: its own
// (group "": layers/<layer>/vars), then each inner layer's, under its attribute ("layer":
// layers/<layer>/layer/vars), recursively. Each group lists its variables in Keras's order
// (LayerKind::weight_names), named as the model's parameters are ("time_distributed/dense/kernel").
struct KerasWeightGroup {
  std::string group;
  std::string layer_name;  // the layer whose variables they are
  std::vector<std::string> names;
};
std::vector<KerasWeightGroup> keras_weight_groups(const Layer& l);

// One layer built alone, as a model's build() builds it: its output shape and its parameters for
// these per-sample input shapes (one per input; several for a merging layer). What Python's
// symbolic calls and summary() ask of a layer. A shape the layer declares is ignored (Keras's
// call on a tensor), but an InputLayer's. Throws Error where the model's build() would.
struct BuiltLayer {
  Shape out_shape;
  std::vector<LayerParam> params;
};
BuiltLayer build_layer(const Layer& layer, const std::vector<Shape>& in_shapes);

}  // namespace crossover
