// Sequential: from a list of layers to a static plan of buffers and kernel calls.
//
// compile() fixes the parameters and their optimizer state in one block of device memory; the
// first fit/evaluate/predict at a batch size fixes every activation and gradient buffer for that
// batch size. A step is then a fixed list of backend calls on fixed buffers (captured once as a
// CUDA graph on a GPU); nothing is allocated inside an epoch, and nothing is read back from the
// device inside an epoch except the progress counters, a few times a second.
#include "nn/sequential.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "backends/cuda_info.h"
#include "backends/devices.h"
#include "backends/fused_mlp.h"
#include "backends/losses/list.h"
#include "core/aligned.h"
#include "core/error.h"
#include "core/launcher.h"
#include "core/philox.h"
#include "nn/device_memory.h"
#include "nn/interrupt.h"
#include "nn/layers/kind.h"
#include "nn/metrics.h"
#include "nn/progress.h"

namespace crossover {

using Clock = std::chrono::steady_clock;

namespace {

// The loss compile's spec names (a unit's name or alias, losses/list.h), with its argument
// (Keras's default where the spec has none); from_logits only where the unit reads logits.
LossConfig parse_loss(const LossSpec& spec, const char* who) {
  const std::optional<LossKind> kind = find_loss(spec.name);
  if (!kind) throw Error(who, "unknown loss '" + spec.name + "': expected " + loss_names());
  const losses::LossRules& rules = loss_rules(*kind);
  if (spec.from_logits && rules.logits == ActivationKind::linear)
    throw Error(who, "from_logits applies to the cross-entropies, not " + spec.name);
  LossConfig c(*kind);
  if (!rules.parameter.empty()) {
    const double v = std::isnan(spec.parameter) ? rules.parameter_default : spec.parameter;
    if (!(v > 0.0) || !std::isfinite(v))
      throw Error(who,
                  fmt::format("{}: {} must be positive, got {}", rules.name, rules.parameter, v));
    c.parameter = static_cast<float>(v);
  } else if (!std::isnan(spec.parameter)) {
    throw Error(who, fmt::format("{} takes no argument", rules.name));
  }
  return c;
}

// compile()'s metrics (nn/metrics.h) for a model trained with `loss`: each name once, at most
// kMaxMetrics besides "accuracy"; the metrics that read class indices only with the sparse loss's
// targets, the categorical ones only with a target row per sample.
std::vector<MetricSpec> compile_metrics(std::vector<MetricSpec> given, LossKind loss) {
  std::vector<MetricSpec> specs;
  int extra = 0;
  const bool sparse = loss_rules(loss).class_index_targets;
  for (MetricSpec& spec : given) {
    const std::string name = spec.name;
    const std::string key = spec.loss_accuracy ? "accuracy" : spec.name;
    for (const MetricSpec& other : specs)
      if ((other.loss_accuracy ? "accuracy" : other.name) == key)
        throw Error("compile", "metric '" + name + "' is given twice (its History key '" + key +
                                   "' would be the same): give each metric once");
    if (!spec.loss_accuracy) {
      if (++extra > kMaxMetrics)
        throw Error("compile", "metric '" + name + "': at most " + std::to_string(kMaxMetrics) +
                                   " metrics besides 'accuracy' are computed");
      if (reads_class_indices(spec.kind) && !sparse)
        throw Error("compile", "metric '" + name +
                                   "' reads class indices, which only the loss "
                                   "sparse_categorical_crossentropy takes as targets");
      if (sparse && !reads_class_indices(spec.kind) &&
          spec.kind != MetricKind::categorical_accuracy &&
          spec.kind != MetricKind::top_k_categorical_accuracy)
        throw Error("compile", "metric '" + name +
                                   "' compares the output with the targets value by value, but "
                                   "sparse_categorical_crossentropy's targets are class indices "
                                   "(Keras fails on their shapes)");
      if (sparse && (spec.kind == MetricKind::categorical_accuracy ||
                     spec.kind == MetricKind::top_k_categorical_accuracy))
        throw Error("compile", "metric '" + name +
                                   "' reads one-hot targets, but sparse_categorical_crossentropy "
                                   "takes class indices: use sparse_" +
                                   (spec.kind == MetricKind::categorical_accuracy
                                        ? std::string("categorical_accuracy")
                                        : std::string("top_k_categorical_accuracy")));
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

// Fisher-Yates with Philox draws: the same permutation on every device and thread count.
void shuffled_indices(uint64_t seed, uint64_t epoch, std::vector<int32_t>& idx) {
  std::iota(idx.begin(), idx.end(), 0);
  for (int64_t i = static_cast<int64_t>(idx.size()) - 1; i > 0; --i) {
    const float u = philox_uniform(seed, RngStream::shuffle, 0, epoch, static_cast<uint64_t>(i));
    int64_t j = static_cast<int64_t>(u * static_cast<float>(i + 1));
    if (j > i) j = i;
    std::swap(idx[static_cast<std::size_t>(i)], idx[static_cast<std::size_t>(j)]);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
struct Sequential::Impl {
  using Param = LayerParam;
  using LayerInfo = LayerState;
  // The buffers of one batch size.
  struct Plan {
    int64_t batch = 0;
    DeviceBlock input, targets;
    // The batch's sample weights (batch floats): allocated by the first fit or evaluate with
    // sample weights (with_weights), empty otherwise.
    DeviceBlock weights;
    // The gradients of the backward pass, each (batch, the widest layer): as many as it ever has
    // in use at once (gradient_buffers), two for a stack of layers. The loss writes into the first.
    std::vector<DeviceBlock> grads;
    std::vector<DeviceBlock> outputs;  // per layer (empty block when the layer aliases)
    // Per dropout layer; per max-pooling layer, its workspace; per batch normalization, the
    // batch's mean and variance (channels each) that its backward pass reads.
    std::vector<DeviceBlock> masks;
    // The model's output (batch, outputs) that the compiled metrics read, written by the loss;
    // empty without metrics beyond "accuracy", or with from_logits (they read the logits).
    DeviceBlock predictions;
    // training_forward's outputs with the final activation applied (batch, outputs), when that
    // activation is not linear: allocated by its first call at this batch size.
    DeviceBlock activated;
    // Several outputs: each head's targets (batch, its target columns), copied from `targets`
    // (the packed row) before its loss; and its `predictions` as above (with metrics beyond
    // "accuracy").
    std::vector<DeviceBlock> head_targets, head_predictions;
  };
  // Data copied to the device once per fit/evaluate.
  // A data set as the steps read it: x_rows (n, x_cols) and y_rows (n, y_cols) are the caller's
  // own memory when the backend reads host memory (the CPU; the caller keeps it alive and
  // unchanged during the call), else the copies in x and y on the device.
  // w_rows: one sample weight per row (Keras's sample_weight), or null.
  struct DeviceData {
    DeviceBlock x, y, w, indices;
    const float* x_rows = nullptr;
    const float* y_rows = nullptr;
    const float* w_rows = nullptr;
    int64_t n = 0, x_cols = 0, y_cols = 0;
  };

  std::vector<Layer> layers;
  // The layers each layer reads (empty: the model's input); for a Sequential, the one before.
  std::vector<std::vector<int>> inputs;
  // Per entry: the earlier entry whose layer it calls again (a shared layer), or -1 (its own).
  std::vector<int> shared_with;
  // Per entry: a layer called again whose weight gradients this call adds into those of a later
  // call (backward runs the last call first, which writes them): its slots (call_slots, the
  // parameters' gradients pointing into call_grads), then an add per parameter.
  std::vector<char> accumulates;
  // Per entry: its layer is called more than once (take_shared).
  std::vector<char> shared_layer;
  bool functional = false;
  // How many layers read each layer's output (the loss reads the last one's, not counted here).
  std::vector<int> readers;
  // Whether a layer's output needs a gradient: it or a layer it reads has parameters that fit
  // updates (a frozen layer's, and those of the layers below the first trainable one, need none).
  std::vector<bool> needs_grad;
  // Each layer's Layer::trainable as the step uses it: taken when the model is made and at each
  // compile (Keras: a change of layer.trainable takes effect at the next compile()).
  std::vector<char> trains;
  std::string name;
  Shape input_shape;
  // The model's InputLayers (their indices) in the model's input order (LayerGraph); a Sequential
  // without an InputLayer: {0}. With several, each sample's row holds their values side by side
  // (packed: input_column[i] is where layer i's start, packed_width the row's width), and each
  // step copies every input's columns of the batch into its InputLayer's own buffer.
  std::vector<int> model_inputs;
  std::vector<int64_t> input_column;
  int64_t packed_width = 0;
  // The model's outputs (LayerGraph::output_layers): {the last layer} for one.
  std::vector<int> model_outputs;
  // With several outputs, one loss head per output in model_outputs' order (compile_outputs);
  // empty with one output, whose loss is the fields below (loss, from_logits, metrics, ...).
  // Each head's sums go to its own StepCounters after the model's (tallies()).
  struct Head {
    int layer = 0;
    LossConfig loss;
    std::string loss_name;
    bool from_logits = false;
    float weight = 1.0f;
    std::vector<MetricSpec> metrics;  // under the names they are reported by
    int extra_metrics = 0;
  };
  std::vector<Head> heads;
  bool built = false;
  std::vector<LayerInfo> info;
  std::vector<Param> params;
  int64_t arena_floats = 0;

  bool is_compiled = false;
  OptimizerConfig opt;
  std::string loss_name;
  LossConfig loss;
  bool from_logits = false;
  bool accuracy = false;
  // The compiled metrics in compile's order (nn/metrics.h); those other than the loss's accuracy
  // ("extra") sum into StepCounters::metric_sums in their order.
  std::vector<MetricSpec> metrics;
  int extra_metrics = 0;
  CompileOptions copts;
  std::unique_ptr<Backend> backend;
  // values | grads | slot1 | slot2 (| slot3: Adam's amsgrad, arena_slot3), each arena_floats
  DeviceBlock arena;
  bool arena_slot3 = false;
  DeviceBlock counters;          // StepCounters for training, then one for evaluation
  std::vector<ParamSlot> slots;  // every parameter, in params' order
  // What optimizer_step updates: the trainable parameters (not the moving statistics, nor a
  // frozen layer's: their weight decay and clipnorm see only these).
  std::vector<ParamSlot> trainable_slots;
  // The parameters a fused training step leaves to optimizer_step: those of layers other than
  // Dense (whose update is fused into its weight gradient, Backend::fuses_weight_update).
  std::vector<ParamSlot> unfused_slots;
  // A shared layer's calls that add their gradients into a later call's (accumulates): per
  // entry, the slots with its layer's gradients pointing into call_grads (allocate_parameters).
  std::vector<std::vector<ParamSlot>> call_slots;
  DeviceBlock call_grads;  // after `backend`: freed before it
  std::map<int64_t, Plan> plans;
  bool stop_requested = false;
  bool fitting = false;  // inside fit: callbacks may look at the model, not rebuild it
  bool graphs_dirty = false;
  std::vector<const float*> xs;  // forward's: the inputs of the layer it runs
  // Counts the forward passes and the parameter changes from outside a step (set_weights,
  // allocation, apply_gradients): training_backward differentiates the training_forward pass
  // only while nothing has run or changed since (`tape`).
  int64_t passes = 0;
  struct TapePass {
    bool ready = false;
    int64_t pass = 0, rows = 0;
  } tape;
  struct BackwardScratch {
    std::vector<float*> pending, input_grads, free;
    std::vector<char> done;
  } pass;  // backward's

  // ---- structure ----
  void init(std::vector<Layer> model_layers, std::vector<std::vector<int>> layer_inputs,
            std::string model_name, bool is_functional, std::vector<int> input_order = {},
            std::vector<int> output_order = {}, std::vector<int> shares = {});
  void take_shared(std::vector<int> shares);
  // The first call of entry i's layer (i itself unless it calls a shared layer again).
  std::size_t first_call(std::size_t i) const {
    return shared_with[i] < 0 ? i : static_cast<std::size_t>(shared_with[i]);
  }
  // Whether the layer of entry i is called more than once.
  bool called_again(std::size_t i) const { return shared_layer[i] != 0; }
  void set_model_outputs(std::vector<int> order);
  void set_model_inputs(std::vector<int> order);
  void name_layers() {
    std::map<std::string, int> counts;
    std::set<std::string> given;  // a name made here skips those given (Python's, a file's)
    const auto gather = [&](const auto& self, const Layer& l) -> void {
      given.insert(l.name);
      for (const Layer& inner : l.inner) self(self, inner);
    };
    for (const Layer& l : layers) gather(gather, l);
    // Inner layers first, as Keras names them (the Dense given to a TimeDistributed is made
    // before it).
    const auto name = [&](const auto& self, Layer& l) -> void {
      for (Layer& inner : l.inner) self(self, inner);
      if (!l.name.empty()) return;
      const std::string base(layer_kind(l).base_name());
      int& c = counts[base];
      do {
        l.name = c == 0 ? base : base + "_" + std::to_string(c);
        ++c;
      } while (given.count(l.name));
    };
    for (std::size_t i = 0; i < layers.size(); ++i)
      if (shared_with[i] < 0) name(name, layers[i]);  // a shared one: its first call's
  }

  // Keras's (N, 28, 28) images for a model declared with Input((28, 28, 1)): the same values, one
  // channel; the declared shape stands.
  static Shape with_channel(const Shape& sample_shape, const Shape& declared) {
    Shape one = sample_shape;
    one.push_back(1);
    return one == declared ? declared : sample_shape;
  }

  bool several_inputs() const { return model_inputs.size() > 1; }
  bool several_outputs() const { return model_outputs.size() > 1; }
  // The StepCounters of one phase (training, evaluation): the model's (its step, learning rate;
  // with one output its loss and metrics), then one per loss head.
  int tallies() const { return 1 + static_cast<int>(heads.size()); }
  // The floats of one sample's input row (the packed row with several inputs).
  int64_t input_width() const { return several_inputs() ? packed_width : info.front().in_width; }

  // Several inputs: the packed row's shape, (the inputs' values,), each InputLayer's shape
  // declared (init checked).
  Shape packed_shape() const {
    int64_t total = 0;
    for (int i : model_inputs)
      total += shape_size(layers[static_cast<std::size_t>(i)].input_shape,
                          layers[static_cast<std::size_t>(i)].name);
    return {total};
  }

  void build(const Shape& given_shape) {
    const Layer& first = layers.front();
    const Shape& declared =
        built ? input_shape : (several_inputs() ? packed_shape() : first.input_shape);
    const Shape sample_shape = declared.empty() ? given_shape : with_channel(given_shape, declared);
    if (several_inputs() && sample_shape != declared)
      throw Error("input", "the model's " + std::to_string(model_inputs.size()) +
                               " inputs take packed rows of shape " + shape_to_string(declared) +
                               " (their values side by side), got " +
                               shape_to_string(sample_shape));
    if (built) {
      if (sample_shape != input_shape)
        throw Error("input", "the model expects samples of shape " + shape_to_string(input_shape) +
                                 ", got " + shape_to_string(sample_shape));
      return;
    }
    if (sample_shape.empty()) throw Error("input", "samples must have at least one dimension");
    input_shape = sample_shape;
    info.assign(layers.size(), {});
    params.clear();
    int64_t offset = 0;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = layers[i];
      LayerInfo& li = info[i];
      const bool own_input = inputs[i].empty() && several_inputs();
      if (inputs[i].empty()) li.in_shapes = {own_input ? l.input_shape : sample_shape};
      for (int j : inputs[i]) li.in_shapes.push_back(info[static_cast<std::size_t>(j)].out_shape);
      build_layer_state(l, static_cast<int>(i), li, params, offset, shared_with[i]);
      if (own_input) li.aliases_input = false;  // its columns of the packed batch, copied
    }
    mark_gradients();
    if (is_compiled) check_losses();
    arena_floats = offset;
    built = true;
  }

  // A non-flat output (samples of shape (H, W, C)) for this loss and these metrics: Keras
  // computes mean_squared_error, binary_crossentropy and the element-wise metrics element by
  // element and averages them all, which is the flat computation on (N, H*W*C); the losses and
  // metrics that read the last axis as classes would need it per position, which crossover
  // does not do (yet).
  void check_output_for_loss(LossKind kind, const std::string& what,
                             const std::vector<MetricSpec>& specs) const {
    check_output_for_loss(kind, what, specs, layers_output_shape());
  }
  // Each output's loss and metrics on its shape.
  void check_losses() const {
    if (heads.empty()) return check_output_for_loss(loss.kind, loss_name, metrics);
    for (const Head& h : heads)
      check_output_for_loss(h.loss.kind, h.loss_name, h.metrics,
                            info[static_cast<std::size_t>(h.layer)].out_shape);
  }
  void check_output_for_loss(LossKind kind, const std::string& what,
                             const std::vector<MetricSpec>& specs, const Shape& out) const {
    if (out.size() == 1) return;
    const auto refuse = [&](const std::string& thing) {
      throw Error(name, fmt::format("{} on an output of shape {} reads the last axis as classes "
                                    "at each position, which crossover does not compute (yet): "
                                    "Flatten the output to (C,), or use mean_squared_error or "
                                    "binary_crossentropy",
                                    thing, shape_to_string(out)));
    };
    if (loss_rules(kind).classes_on_last_axis) refuse("the loss " + what);
    // "accuracy" is the loss kernel's count: element by element (Keras's binary accuracy) only
    // for binary_crossentropy; mean_squared_error's compares each sample's argmax.
    for (const MetricSpec& spec : specs)
      if (spec.loss_accuracy && !loss_rules(kind).elementwise)
        refuse("the metric " + spec.name + " with the loss " + what);
    for (const MetricSpec& spec : specs)
      if (!spec.loss_accuracy && spec.kind != MetricKind::mean_absolute_error &&
          spec.kind != MetricKind::mean_squared_error && spec.kind != MetricKind::binary_accuracy)
        refuse("the metric " + spec.name);
  }

  // needs_grad from the parameters and trains.
  void mark_gradients() {
    std::vector<char> own(layers.size(), 0);  // updated parameters (a second call: the first's)
    for (const Param& p : params)
      if (updates(p)) own[static_cast<std::size_t>(p.layer)] = 1;
    needs_grad.assign(layers.size(), false);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      needs_grad[i] = own[first_call(i)] != 0;
      for (int j : inputs[i])
        needs_grad[i] = needs_grad[i] || needs_grad[static_cast<std::size_t>(j)];
    }
  }
  // Takes each layer's Layer::trainable for the step (the constructor's and compile's).
  void take_trainable() {
    trains.clear();
    for (const Layer& l : layers) trains.push_back(l.trainable ? 1 : 0);
    if (built) mark_gradients();
  }
  // Whether a training step updates the parameter: a trainable variable of a layer the model was
  // compiled with trainable.
  bool updates(const Param& p) const {
    return p.trainable && trains[static_cast<std::size_t>(p.layer)] != 0;
  }

  const Shape& layers_output_shape() const { return info.back().out_shape; }
  int64_t output_width() const { return info.back().out_width; }

  // The activation applied by the loss op: that of the last layer if it is Dense or Activation.
  // With from_logits the loss reads the model's output as logits, so the layer applies its own
  // activation, except sigmoid and softmax: Keras takes their input back as the logits (and
  // warns), which is the deferred output.
  int final_activation_layer() const {
    return deferred_layer(static_cast<int>(layers.size()) - 1, from_logits, loss.kind);
  }
  // The same for the output layer `out` under a loss with or without from_logits: `out`, or -1.
  int deferred_layer(int out, bool logits, LossKind kind) const {
    const Layer& l = layers[static_cast<std::size_t>(out)];
    if (!layer_kind(l).defers_activation()) return -1;
    const ActivationKind a = layer_kind(l).activation(l).kind;
    // A softmax over the last axis of samples of several axes is the layer's own: the loss ops
    // apply theirs over the whole sample. (Binary cross-entropy reads its input as sigmoid
    // logits, element by element, as Keras 3 does.)
    if (a == ActivationKind::softmax && !loss_rules(kind).elementwise && built &&
        info[static_cast<std::size_t>(out)].out_shape.size() > 1)
      return -1;
    if (logits && a != ActivationKind::linear && a != ActivationKind::sigmoid &&
        a != ActivationKind::softmax)
      return -1;
    return out;
  }
  // Whether a training pass leaves layer i's activation to a loss op.
  bool defers(std::size_t i) const {
    if (heads.empty()) return static_cast<int>(i) == final_activation_layer();
    for (const Head& h : heads)
      if (static_cast<std::size_t>(h.layer) == i)
        return deferred_layer(h.layer, h.from_logits, h.loss.kind) >= 0;
    return false;
  }
  // A head's loss_activation and metrics_activate.
  ActivationKind head_loss_activation(const Head& h) const {
    if (h.from_logits) return loss_rules(h.loss.kind).logits;
    if (deferred_layer(h.layer, false, h.loss.kind) < 0) return ActivationKind::linear;
    const Layer& l = layers[static_cast<std::size_t>(h.layer)];
    return layer_kind(l).activation(l).kind;
  }
  bool head_metrics_activate(const Head& h) const {
    if (!h.from_logits || deferred_layer(h.layer, true, h.loss.kind) < 0) return false;
    const Layer& l = layers[static_cast<std::size_t>(h.layer)];
    return layer_kind(l).activation(l).kind != ActivationKind::linear;
  }
  int64_t head_width(const Head& h) const {
    return info[static_cast<std::size_t>(h.layer)].out_width;
  }
  // Its columns of the packed targets: one (a class index) for the sparse loss, else the output's.
  int64_t head_target_width(const Head& h) const {
    return loss_rules(h.loss.kind).class_index_targets ? 1 : head_width(h);
  }
  int64_t head_target_column(std::size_t j) const {
    int64_t c = 0;
    for (std::size_t k = 0; k < j; ++k) c += head_target_width(heads[k]);
    return c;
  }
  ActivationKind final_activation() const {
    const int f = final_activation_layer();
    if (f < 0) return ActivationKind::linear;
    const Layer& l = layers[static_cast<std::size_t>(f)];
    return layer_kind(l).activation(l).kind;
  }
  // The activation the loss op applies to the final output: with from_logits the loss's own
  // softmax or sigmoid of the logits (final_activation_layer).
  ActivationKind loss_activation() const {
    if (!from_logits) return final_activation();
    return loss_rules(loss.kind).logits;
  }

  // Whether the metrics read the final sigmoid or softmax of the deferred output: with
  // from_logits, the loss read that output as logits and the model's output is its activation.
  bool metrics_activate() const {
    return from_logits && final_activation() != ActivationKind::linear;
  }

  // ---- parameters ----
  float* value(const Param& p) const { return arena.as<float>() + p.offset; }
  float* grad(const Param& p) const { return arena.as<float>() + arena_floats + p.offset; }
  // Slot k (1, 2, or 3 where the arena has it: null otherwise) of p.
  float* slot(const Param& p, int k) const {
    if (k == 3 && !arena_slot3) return nullptr;
    return arena.as<float>() + arena_floats * (1 + k) + p.offset;
  }
  // Whether optimizer `o` keeps a third slot per parameter (Adam's amsgrad: velocity_hat).
  static bool uses_slot3(const OptimizerConfig& o) { return optimizer_third_slot(o); }
  // The optimizer's state slots per parameter the arena holds: 2, or 3 with arena_slot3.
  int state_slots() const { return arena_slot3 ? 3 : 2; }

  // trainable_only: Keras's "Trainable params", which follow layer.trainable at once.
  int64_t param_count(bool trainable_only = false) const {
    int64_t n = 0;
    for (const Param& p : params)
      if ((p.trainable && layers[static_cast<std::size_t>(p.layer)].trainable) || !trainable_only)
        n += p.n;
    return n;
  }

  // ---- memory ----
  // Refuses, before anything is allocated, memory the device does not have: a model or a batch
  // too large for the machine is the user's input, to be told in bytes, not an internal error.
  // Sizes are doubles so that an absurd request is reported rather than overflowed.
  void check_fits(double bytes, const std::string& what, const std::string& advice) const {
    const MemoryAvailable a = backend->available_memory();
    if (bytes <= static_cast<double>(a.bytes)) return;
    throw Error(name, what + " need " + bytes_to_string(bytes) + " of " + backend->device_name() +
                          " memory, but " + bytes_to_string(static_cast<double>(a.bytes)) +
                          " are available (" + a.source + ")" + advice);
  }
  static double float_bytes(int64_t n) {
    return static_cast<double>(std::max<int64_t>(n, 16)) * sizeof(float);
  }

  void allocate_parameters() {
    ++passes;
    plans.clear();
    arena.reset();
    arena_slot3 = uses_slot3(opt);
    const int blocks = 2 + state_slots();
    const double arena_bytes = blocks * float_bytes(arena_floats);
    check_fits(arena_bytes,
               "the parameters, their gradients and the optimizer's state (" +
                   std::to_string(param_count()) + " parameters, " + std::to_string(blocks) +
                   " floats each)",
               ": use fewer or smaller layers");
    arena = DeviceBlock(*backend, static_cast<std::size_t>(arena_bytes));
    const std::vector<StepCounters> zero(2 * static_cast<std::size_t>(tallies()));
    counters = DeviceBlock(*backend, zero.size() * sizeof(StepCounters));
    backend->upload(counters.as<void>(), zero.data(), zero.size() * sizeof(StepCounters));
    if (const float first = initial_slot_value(opt); first != 0.0f)  // Adagrad's accumulators
      backend->fill(arena.as<float>() + 2 * arena_floats, first, arena_floats);
    slots.clear();
    trainable_slots.clear();
    unfused_slots.clear();
    for (const Param& p : params) {
      slots.push_back(
          {value(p), grad(p), slot(p, 1), slot(p, 2), p.n, p.shape.size() > 1, slot(p, 3)});
      if (!updates(p)) continue;  // moving statistics, frozen layers
      trainable_slots.push_back(slots.back());
      // A shared layer's gradient is the sum over its calls: updated once, after them all.
      const auto l = static_cast<std::size_t>(p.layer);
      if (!layer_kind(layers[l]).fuses_weight_update() || called_again(l))
        unfused_slots.push_back(slots.back());
    }
    allocate_call_gradients();
    if (copts.initialize_weights) initialize_weights(copts.seed);
  }

  // The gradients of a shared layer's calls other than its last, each made there and added into
  // the parameters' (accumulates): one block, as large as the largest such layer's parameters.
  void allocate_call_gradients() {
    call_slots.assign(layers.size(), {});
    call_grads.reset();
    int64_t floats = 0;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (!accumulates[i]) continue;
      int64_t span = 0;
      for (const Param& p : params)
        if (static_cast<std::size_t>(p.layer) == first_call(i)) span += (p.n + 15) / 16 * 16;
      floats = std::max(floats, span);
    }
    if (floats > 0) {  // none where the shared layers have no parameters (Dropout, Activation)
      check_fits(float_bytes(floats), "the gradients of a shared layer's calls",
                 ": use fewer or smaller layers");
      call_grads = DeviceBlock(*backend, static_cast<std::size_t>(float_bytes(floats)));
    }
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (!accumulates[i]) continue;
      call_slots[i] = slots;
      int64_t at = 0;
      for (std::size_t k = 0; k < params.size(); ++k) {
        if (static_cast<std::size_t>(params[k].layer) != first_call(i)) continue;
        call_slots[i][k].grad = call_grads.as<float>() + at;
        at += (params[k].n + 15) / 16 * 16;
      }
    }
  }

  // After the backward call of entry i: its weight gradients (in call_grads) added into the
  // parameters' (a later call of the same layer wrote those).
  void add_call_gradients(std::size_t i) {
    for (std::size_t k = 0; k < params.size(); ++k) {
      const Param& p = params[k];
      if (static_cast<std::size_t>(p.layer) != first_call(i) || !updates(p)) continue;
      backend->add(grad(p), call_slots[i][k].grad, grad(p), p.n);
    }
  }

  // Each parameter's initializer (the layer's: Keras's defaults are glorot-uniform kernels and
  // zero biases), drawn on the host (nn/initializers.h).
  void initialize_weights(uint64_t seed) {
    for (const Param& p : params) {
      std::vector<float> host(static_cast<std::size_t>(p.n));
      initial_values(p.initializer, p.shape, {seed, static_cast<uint32_t>(p.layer), p.draw}, host);
      backend->upload(value(p), host.data(), host.size() * sizeof(float));
    }
  }

  StepCounters* train_counters() const { return counters.as<StepCounters>(); }
  StepCounters* eval_counters() const { return counters.as<StepCounters>() + tallies(); }
  // Head j's counters after the model's own `c` (train_counters() or eval_counters()).
  static StepCounters* head_counters(StepCounters* c, std::size_t j) { return c + 1 + j; }
  // The phase's counters, the model's then each head's (read now: a synchronisation).
  std::vector<StepCounters> read_tally(const StepCounters* c) const {
    std::vector<StepCounters> t(static_cast<std::size_t>(tallies()));
    backend->synchronize();
    backend->download(t.data(), c, t.size() * sizeof(StepCounters));
    return t;
  }

  StepCounters read_counters(const StepCounters* c) const {
    StepCounters h;
    backend->synchronize();
    backend->download(&h, c, sizeof h);
    return h;
  }
  void write_counters(StepCounters* c, const StepCounters& h) {
    backend->synchronize();
    backend->upload(c, &h, sizeof h);
  }
  void write_tally(StepCounters* c, const std::vector<StepCounters>& t) {
    backend->synchronize();
    backend->upload(c, t.data(), t.size() * sizeof(StepCounters));
  }

  // ---- plans ----
  Plan& plan_for(int64_t batch) {
    auto it = plans.find(batch);
    if (it != plans.end()) return it->second;
    int64_t max_width = input_width();
    for (const LayerInfo& li : info) max_width = std::max({max_width, li.in_width, li.out_width});
    const int gradients = gradient_buffers();
    // What the blocks below add up to, checked before the first of them is allocated.
    const auto rows = static_cast<double>(batch);
    const bool predictions = extra_metrics > 0 && (!from_logits || metrics_activate());
    double plan_bytes =
        float_bytes(batch * input_width()) +
        (predictions ? 2 : 1) *
            float_bytes(batch * (heads.empty() ? output_width() : target_columns())) +
        gradients * rows * max_width * sizeof(float);
    for (const Head& h : heads)
      plan_bytes += float_bytes(batch * head_target_width(h)) +
                    (h.extra_metrics > 0 ? float_bytes(batch * head_width(h)) : 0.0);
    // Each layer's workspace (dropout's mask, max pooling's, batch normalization's statistics),
    // as its kind sizes it (with the backend, which also prepares that shape).
    std::vector<std::size_t> workspace(layers.size(), 0);
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (!info[i].aliases_input) plan_bytes += rows * info[i].out_width * sizeof(float);
      workspace[i] = layer_kind(layers[i]).workspace_bytes(layers[i], info[i], *backend, batch);
      plan_bytes += static_cast<double>(workspace[i]);
    }
    check_fits(plan_bytes,
               "a batch of " + std::to_string(batch) + " samples: its activations and gradients",
               ": use a smaller batch size");
    Plan& p = plans[batch];
    p.batch = batch;
    auto floats = [&](int64_t n) {
      return DeviceBlock(*backend,
                         static_cast<std::size_t>(std::max<int64_t>(n, 16)) * sizeof(float));
    };
    p.input = floats(batch * input_width());
    p.targets = floats(batch * (heads.empty() ? output_width() : target_columns()));
    if (predictions) p.predictions = floats(batch * output_width());
    for (const Head& h : heads) {
      p.head_targets.push_back(floats(batch * head_target_width(h)));
      p.head_predictions.push_back(h.extra_metrics > 0 ? floats(batch * head_width(h))
                                                       : DeviceBlock());
    }
    for (int k = 0; k < gradients; ++k) p.grads.push_back(floats(batch * max_width));
    p.outputs.resize(layers.size());
    p.masks.resize(layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (!info[i].aliases_input) p.outputs[i] = floats(batch * info[i].out_width);
      if (workspace[i] > 0) p.masks[i] = DeviceBlock(*backend, workspace[i]);
    }
    return p;
  }

  // The output of layer i in `plan` during a pass (dropout aliases its input outside training).
  float* layer_output(const Plan& plan, std::size_t i, bool training) const {
    for (;;) {
      const bool alias = info[i].aliases_input ||
                         (layer_kind(layers[i]).identity_outside_training(layers[i]) && !training);
      if (!alias) return plan.outputs[i].as<float>();
      if (inputs[i].empty()) return plan.input.as<float>();
      i = static_cast<std::size_t>(inputs[i].front());
    }
  }
  // Layer i's k-th input.
  const float* layer_input(const Plan& plan, std::size_t i, bool training,
                           std::size_t k = 0) const {
    return inputs[i].empty() ? plan.input.as<float>()
                             : layer_output(plan, static_cast<std::size_t>(inputs[i][k]), training);
  }

  // Forward over m rows of plan.input. In training the final activation is left to the loss op;
  // with `final_activation` (predict) it is applied.
  // first_row: the global batch row of plan.input's row 0 (dropout draws by the global row).
  void forward(Plan& plan, int64_t m, bool training, bool final_activation, uint64_t seed,
               StepCounters* ctr, int64_t first_row = 0) {
    ++passes;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = layers[i];
      const float* x = layer_input(plan, i, training);
      float* y = plan.outputs[i].as<float>();
      backend->set_scope(l.name);
      if (inputs[i].empty() && several_inputs()) {  // its columns of the packed batch
        backend->copy_columns(x, packed_width, input_column[i], y, info[i].out_width, 0, m,
                              info[i].out_width);
        continue;
      }
      xs.clear();
      for (std::size_t k = 0; k < std::max<std::size_t>(inputs[i].size(), 1); ++k)
        xs.push_back(layer_input(plan, i, training, k));
      ForwardStep step{{*backend, l, info[i], slots, static_cast<uint32_t>(i), m, x, y,
                        plan.masks[i].as<void>(), xs},
                       training,
                       !final_activation && defers(i),
                       seed,
                       ctr,
                       first_row};
      step.trainable = trains[i] != 0;
      layer_kind(l).forward(step);
    }
  }

  // After a training forward pass: each batch normalization's moving statistics take in the
  // batch's (Keras updates them in the layer's call in training).
  void update_moving_statistics(Plan& plan) {
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const LayerKind& kind = layer_kind(layers[i]);
      if (!kind.has_moving_statistics()) continue;
      if (!trains[i]) continue;  // frozen: in inference mode, its statistics kept
      backend->set_scope(layers[i].name);
      kind.update_moving_statistics({*backend, layers[i], info[i], slots, static_cast<uint32_t>(i),
                                     plan.batch, nullptr, nullptr, plan.masks[i].as<void>()});
    }
  }

  // CompileOptions::fused_step: fit's steps as one kernel each, when the model and the device
  // take it (fused_mlp); fused_note says why not.
  std::optional<FusedMlpStep> fused_mlp;
  std::string fused_note;
  void plan_fused_step(const Plan& plan, const DeviceData& d, uint64_t seed) {
    fused_mlp.reset();
    fused_note.clear();
    if (!copts.fused_step) return;
    if (several_outputs()) {
      fused_note = "fused step not used: the model has several outputs";
      return;
    }
    FusedModelView v;
    v.loss = loss.kind;
    v.from_logits = from_logits;
    v.optimizer = opt;
    v.ranks = ranks();
    v.sample_weights = d.w_rows != nullptr;
    v.extra_metrics = extra_metrics;
    v.fp32 = copts.precision == "fp32";
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = layers[i];
      const LayerInfo& li = info[i];
      v.chain =
          v.chain && (i == 0 ? inputs[i].empty()
                             : inputs[i].size() == 1 && inputs[i][0] + 1 == static_cast<int>(i));
      FusedLayerView lv;
      layer_kind(l).describe_fused(l, lv);
      // The fused step's Dense takes flat samples: one on several axes is another kind to it.
      if (lv.kind == FusedLayerView::Kind::dense && li.in_shapes.front().size() > 1)
        lv.kind = FusedLayerView::Kind::other;
      lv.name = l.name;
      lv.activation = li.activation.kind;
      lv.trainable = trains[i] != 0;
      lv.shared = called_again(i);
      lv.in_width = li.in_width;
      lv.out_width = li.out_width;
      // A Dense's kernel is its first parameter, whatever its name (a traced custom layer's).
      if (lv.kind == FusedLayerView::Kind::dense && !li.params.empty())
        lv.kernel = &slots[static_cast<std::size_t>(li.params.front().index)];
      if (const int b = li.param("bias"); b >= 0) lv.bias = &slots[static_cast<std::size_t>(b)];
      v.layers.push_back(lv);
    }
    FusedMlpStep step;
    std::string why = fused_mlp_chain(v, step);
    if (why.empty()) why = backend->fused_mlp_problem(step);
    if (!why.empty()) {
      fused_note = "fused step not used: " + why;
      return;
    }
    step.x_rows = d.x_rows;
    step.y_rows = d.y_rows;
    step.x_cols = d.x_cols;
    step.y_cols = d.y_cols;
    step.indices = d.indices.as<int32_t>();
    step.batch = plan.batch;
    step.seed = seed;
    fused_mlp = std::move(step);
  }

  // Whether a training step updates each Dense layer with its weight gradient, in one backend call
  // (the backend gains from it, and nothing needs the global gradient norm first).
  bool fused_update() const {
    return backend->fuses_weight_update() && opt.clipnorm == 0.0f && opt.tensor_clipnorm == 0.0f;
  }

  // Backward from d_out (the gradient with respect to the deferred final pre-activation output,
  // already in plan.grads[0]) down to the first layers with parameters, in reverse layer order.
  // Each layer's output gradient is one of plan.grads while it is pending: a layer's backward
  // leaves its input's gradient in a buffer that becomes the input's (in a stack, the two buffers
  // alternate as before graphs); where a layer's output has several readers, their gradients are
  // added into the first one's. With `update` (a training step's counters, when fused_update()),
  // each layer's parameters are updated with their gradient as it is made; without, the gradients
  // are left for optimizer_step or for reading. With `count_only` no call is made: it returns how
  // many of the buffers the pass has in use at once (gradient_buffers).
  int backward(Plan* plan, int64_t m, const StepCounters* update = nullptr,
               bool count_only = false) {
    GradientPool pool{plan, count_only, pass.free};
    const std::size_t n = layers.size();
    // Each layer's output gradient, once it has one, and whether its activation's gradient is
    // applied in it. Kept between passes: a step allocates nothing.
    std::vector<float*>& pending = pass.pending;
    std::vector<char>& done = pass.done;
    pending.assign(n, nullptr);
    done.assign(n, 0);
    // The loss op handled the final layer's activation when that layer defers it (Dense,
    // Activation); another final layer (a Conv2D making an image) applied its own. With several
    // outputs, head j's loss gradient is in plan.grads[j] (the pool's j-th take).
    if (heads.empty()) {
      pending[n - 1] = pool.take();
      done[n - 1] = final_activation_layer() >= 0 ? 1 : 0;
    }
    for (const Head& h : heads) {
      pending[static_cast<std::size_t>(h.layer)] = pool.take();
      done[static_cast<std::size_t>(h.layer)] =
          deferred_layer(h.layer, h.from_logits, h.loss.kind) >= 0;
    }
    std::vector<float*>& input_grads = pass.input_grads;
    for (std::size_t i = n; i-- > 0;) {
      if (!needs_grad[i] || !pending[i]) continue;
      const Layer& l = layers[i];
      const LayerKind& kind = layer_kind(l);
      bool wants_input_grad = false;
      for (int j : inputs[i]) wants_input_grad = wants_input_grad || needs_grad[j];
      // A dropout directly above a relu layer applies the relu's gradient too, when it is the
      // relu's only reader.
      const int below = inputs[i].size() == 1 ? inputs[i][0] : -1;
      const bool after_relu =
          below >= 0 && readers[below] == 1 && layer_kind(layers[below]).applies_activation() &&
          info[static_cast<std::size_t>(below)].activation.kind == ActivationKind::relu;
      float* spare = pool.take();
      input_grads.clear();
      xs.clear();
      if (kind.merges()) {
        for (int j : inputs[i]) input_grads.push_back(needs_grad[j] ? pool.take() : nullptr);
        for (std::size_t k = 0; plan && k < inputs[i].size(); ++k)
          xs.push_back(layer_input(*plan, i, true, k));  // what Multiply's gradient reads
      }
      // A shared layer's call: its gradients summed over the calls (accumulates), its update
      // left to optimizer_step.
      const bool summed = accumulates[i] && !count_only && trains[i];
      BackwardStep step{{*backend, l, info[i], summed ? call_slots[i] : slots,
                         static_cast<uint32_t>(i), m, plan ? layer_input(*plan, i, true) : nullptr,
                         plan ? layer_output(*plan, i, true) : nullptr,
                         plan ? plan->masks[i].as<void>() : nullptr, xs},
                        pending[i],
                        spare,
                        static_cast<bool>(done[i]),
                        !wants_input_grad,
                        after_relu,
                        called_again(i) ? nullptr : update,
                        &opt,
                        input_grads};
      step.trainable = trains[i] != 0;
      if (!count_only) {
        backend->set_scope(l.name);
        kind.backward(step);
        if (summed) add_call_gradients(i);
      }
      pool.give_back(step.spare);
      if (kind.merges()) {
        pool.give_back(step.g);
        for (std::size_t k = 0; k < inputs[i].size(); ++k)
          if (input_grads[k]) deliver(pool, pending, done, inputs[i][k], input_grads[k], false, m);
      } else if (wants_input_grad) {
        deliver(pool, pending, done, inputs[i][0], step.g, step.activation_done, m);
      } else {
        pool.give_back(step.g);
      }
    }
    for (float* g : pending)
      if (g) pool.give_back(g);  // gradients of layers below the first with parameters
    return pool.most;
  }

  // The gradients of a backward pass: plan's buffers, each taken and given back (LIFO, so that a
  // stack of layers alternates between two); counting only, stand-ins that count how many are
  // in use at once.
  struct GradientPool {
    Plan* plan;
    bool count_only;
    std::vector<float*>& free;
    int used = 0, most = 0;
    GradientPool(Plan* p, bool counting, std::vector<float*>& free_list)
        : plan(p), count_only(counting), free(free_list) {
      free.clear();
      const std::size_t k = count_only ? 0 : p->grads.size();
      for (std::size_t b = k; b-- > 0;) free.push_back(p->grads[b].as<float>());
    }
    float* take() {
      ++used;
      most = std::max(most, used);
      if (count_only) return reinterpret_cast<float*>(static_cast<std::uintptr_t>(used) * 64);
      if (free.empty()) throw Error("backward", "internal: the plan has too few gradient buffers");
      float* g = free.back();
      free.pop_back();
      return g;
    }
    void give_back(float* g) {
      --used;
      if (!count_only) free.push_back(g);
    }
  };

  // Layer j's output gradient g from one reader: j's pending gradient if it has none yet, else
  // added into it over the step's m rows. `done`: the reader applied j's activation gradient
  // (only a sole reader may).
  void deliver(GradientPool& pool, std::vector<float*>& pending, std::vector<char>& done, int j,
               float* g, bool activation_done, int64_t m) {
    const auto u = static_cast<std::size_t>(j);
    if (!pending[u]) {
      pending[u] = g;
      done[u] = activation_done;
      return;
    }
    // (Counting, no layer ran: activation_done is the reader's input flag, not its result.)
    if ((activation_done || done[u]) && !pool.count_only)
      throw Error("backward", "internal: an activation gradient applied by one of several readers");
    if (!pool.count_only) {
      backend->set_scope(layers[u].name);
      backend->add(pending[u], g, pending[u], m * info[u].out_width);
    }
    pool.give_back(g);
  }

  // How many gradient buffers a backward pass has in use at once (two for a stack of layers).
  int gradient_buffers() { return std::max(2, backward(nullptr, 0, nullptr, true)); }

  const float* final_output(const Plan& plan, bool training) const {
    return layer_output(plan, layers.size() - 1, training);
  }

  void gather_batch(Plan& plan, const DeviceData& d, int64_t m, const StepCounters* ctr) {
    backend->set_scope("batch x");
    backend->gather_rows(d.x_rows, d.x_cols, d.indices.as<int32_t>(), plan.batch, ctr, m,
                         plan.input.as<float>());
    backend->set_scope("batch y");
    backend->gather_rows(d.y_rows, d.y_cols, d.indices.as<int32_t>(), plan.batch, ctr, m,
                         plan.targets.as<float>());
    if (d.w_rows) {
      backend->set_scope("batch weights");
      backend->gather_rows(d.w_rows, 1, d.indices.as<int32_t>(), plan.batch, ctr, m,
                           plan.weights.as<float>());
    }
  }

  // The batch's sample weights for the loss: null without them (the unweighted loss).
  static const float* batch_weights(const Plan& plan, const DeviceData& d) {
    return d.w_rows ? plan.weights.as<float>() : nullptr;
  }

  // plan's weights block, before a step that gathers sample weights is captured.
  void with_weights(Plan& plan, const DeviceData& d) {
    if (d.w_rows && plan.weights.bytes() == 0)
      plan.weights = DeviceBlock(
          *backend, static_cast<std::size_t>(std::max<int64_t>(plan.batch, 16)) * sizeof(float));
  }

  int ranks() const { return copts.collective ? copts.collective->size() : 1; }
  int rank() const { return copts.collective ? copts.collective->rank() : 0; }
  // Whether the parameter arena is host memory that the collective sums itself (the CPU's);
  // otherwise the backend sums it through the collective's on_device() (NCCL).
  bool host_memory() const { return backend->device_name() == "cpu"; }

  // One rank's part of a training step: `rows` rows of the global batch of `global_rows`, from
  // global row `first_row` (all of it, from 0, in one process).
  struct Shard {
    int64_t rows = 0, first_row = 0, global_rows = 0;
  };

  void train_step(Plan& plan, const DeviceData& d, const Shard& s, uint64_t seed) {
    StepCounters* ctr = train_counters();
    const bool parallel = ranks() > 1;
    // With ranks, the update must see the summed gradient: no layer is updated in backward.
    const bool fused = fused_update() && !parallel;
    if (fused_mlp && s.rows > 0) {  // one kernel (plan_fused_step)
      fused_mlp->optimizer = opt;   // as a callback may have left it
      fused_mlp->rows = s.rows;
      fused_mlp->mean_rows = s.global_rows;
      backend->set_scope("fused step");
      backend->fused_mlp_step(*fused_mlp, ctr);
      backend->set_scope("");
      return;
    }
    float* grads = arena.as<float>() + arena_floats;
    if (s.rows > 0) {
      gather_batch(plan, d, s.rows, ctr);
      forward(plan, s.rows, true, false, seed, ctr, s.first_row);
      update_moving_statistics(plan);
      backend->set_scope("loss");
      // The gradient of the loss summed over these rows over the global batch's rows: the ranks'
      // gradients add up to the global batch's mean gradient.
      if (heads.empty()) {
        backend->loss_forward_backward(loss, loss_activation(), final_output(plan, true),
                                       plan.targets.as<float>(), batch_weights(plan, d),
                                       plan.predictions.as<float>(), plan.grads[0].as<float>(),
                                       s.rows, output_width(), ctr, s.global_rows);
        metric_sums(plan, s.rows, true, ctr);
      } else {
        head_losses(plan, d, s.rows, s.global_rows, true, ctr);
      }
      backward(&plan, s.rows, fused ? ctr : nullptr);
    } else {
      // A rank with no rows in this batch (fewer rows than ranks) adds nothing to the sum.
      backend->set_scope("allreduce");
      backend->fill(grads, 0.0f, arena_floats);
    }
    if (parallel) {
      backend->set_scope("allreduce");
      // The CPU's memory is the host's: MPI sums it. A GPU's is summed by NCCL on the step's
      // stream, inside the step's graph (compile made sure there is a device collective).
      if (host_memory())
        copts.collective->allreduce_sum(grads, arena_floats);
      else
        backend->allreduce_sum(grads, arena_floats, *copts.collective->on_device());
    }
    backend->set_scope("optimizer");
    // Fused: every Dense layer was updated in backward; the other layers' parameters (none in an
    // MLP) and the step's bookkeeping remain. Never the moving statistics.
    backend->optimizer_step(opt, fused ? std::span(unfused_slots) : std::span(trainable_slots),
                            ctr);
    backend->set_scope("");
  }

  void eval_step(Plan& plan, const DeviceData& d, int64_t m) {
    StepCounters* ctr = eval_counters();
    gather_batch(plan, d, m, ctr);
    forward(plan, m, false, false, 0, ctr);
    backend->set_scope("loss");
    if (heads.empty()) {
      backend->loss_forward_backward(
          loss, loss_activation(), final_output(plan, false), plan.targets.as<float>(),
          batch_weights(plan, d), plan.predictions.as<float>(), nullptr, m, output_width(), ctr, m);
      metric_sums(plan, m, false, ctr);
    } else {
      head_losses(plan, d, m, m, false, ctr);
    }
    backend->set_scope("");
    backend->advance_batch(ctr);
  }

  // Each compiled metric beyond the loss's accuracy: its per-sample values over these m rows of
  // the model's output, added to its sum in ctr (device memory; no call without such metrics).
  void metric_sums(const Plan& plan, int64_t m, bool training, StepCounters* ctr) {
    if (extra_metrics == 0) return;
    backend->set_scope("metrics");
    const float* predictions =
        from_logits ? final_output(plan, training) : plan.predictions.as<float>();
    if (metrics_activate()) {  // the model's output, from the logits the loss read
      const LayerActivation& a = info.back().activation;
      backend->activation_forward(a.kind, a.alpha, predictions, plan.predictions.as<float>(), m,
                                  output_width());
      predictions = plan.predictions.as<float>();
    }
    auto* sums = reinterpret_cast<double*>(reinterpret_cast<char*>(ctr) +
                                           offsetof(StepCounters, metric_sums));
    int slot = 0;
    for (const MetricSpec& spec : metrics)
      if (!spec.loss_accuracy)
        backend->metric_sum(spec.kind, predictions, plan.targets.as<float>(), m, output_width(),
                            target_columns(), spec.parameter, sums + slot++);
  }

  // Each output's loss over these m rows (its targets' columns of the packed batch first), into
  // its head's counters after ctr, and in training its gradient, times its weight, into
  // plan.grads[j] (backward's pending gradient of that output); then its metrics.
  void head_losses(Plan& plan, const DeviceData& d, int64_t m, int64_t mean_rows, bool training,
                   StepCounters* ctr) {
    const int64_t packed = target_columns();
    for (std::size_t j = 0; j < heads.size(); ++j) {
      const Head& h = heads[j];
      const int64_t c = head_width(h), tc = head_target_width(h);
      float* targets = plan.head_targets[j].as<float>();
      float* predictions = plan.head_predictions[j].as<float>();
      float* d_out = training ? plan.grads[j].as<float>() : nullptr;
      StepCounters* hc = head_counters(ctr, j);
      const float* out = layer_output(plan, static_cast<std::size_t>(h.layer), training);
      backend->copy_columns(plan.targets.as<float>(), packed, head_target_column(j), targets, tc, 0,
                            m, tc);
      backend->loss_forward_backward(h.loss, head_loss_activation(h), out, targets,
                                     batch_weights(plan, d), h.from_logits ? nullptr : predictions,
                                     d_out, m, c, hc, mean_rows);
      if (d_out && h.weight != 1.0f) {
        BinaryShape s;
        s.rows = m;
        s.cols = c;
        s.b = Broadcast::scalar;
        s.b_value = h.weight;
        backend->binary_forward(BinaryOp::multiply, s, d_out, nullptr, d_out);
      }
      if (h.extra_metrics == 0) continue;
      const float* pred = h.from_logits ? out : predictions;
      if (head_metrics_activate(h)) {
        const LayerActivation& a = info[static_cast<std::size_t>(h.layer)].activation;
        backend->activation_forward(a.kind, a.alpha, out, predictions, m, c);
        pred = predictions;
      }
      auto* sums = reinterpret_cast<double*>(reinterpret_cast<char*>(hc) +
                                             offsetof(StepCounters, metric_sums));
      int slot = 0;
      for (const MetricSpec& spec : h.metrics)
        if (!spec.loss_accuracy)
          backend->metric_sum(spec.kind, pred, targets, m, c, tc, spec.parameter, sums + slot++);
    }
  }

  // ---- data ----
  // The columns of a sample's targets: the packed row's with several outputs.
  int64_t target_columns() const {
    if (!heads.empty()) return head_target_column(heads.size());
    return loss_rules(loss.kind).class_index_targets ? 1 : output_width();
  }

  void check_xy(const Tensor& x, const Tensor& y, const char* who) const {
    if (x.rank() < 2)
      throw Error(who,
                  "x must have shape (samples, features...), got " + shape_to_string(x.shape()));
    if (!heads.empty()) return check_packed_targets(y, x.dim(0), who);
    check_targets(y, x.dim(0), who, loss.kind, loss_name);
  }

  // Several outputs: y holds each sample's targets as one packed row (LayerGraph::output_layers);
  // a sparse loss's column holds class indices of its output.
  void check_packed_targets(const Tensor& y, int64_t n, const char* who) const {
    const int64_t cols = target_columns();
    if (!(y.rank() == 2 && y.dim(0) == n && y.dim(1) == cols))
      throw Error(who, fmt::format("y must hold the targets of the model's {} outputs side by "
                                   "side, shape ({}, {}), got {}",
                                   heads.size(), n, cols, shape_to_string(y.shape())));
    for (std::size_t j = 0; j < heads.size(); ++j) {
      const Head& h = heads[j];
      if (!loss_rules(h.loss.kind).class_index_targets) continue;
      const int64_t c = head_width(h), col = head_target_column(j);
      for (int64_t i = 0; i < n; ++i) {
        const float v = y[i * cols + col];
        if (!(v >= 0.0f && v < static_cast<float>(c)) || v != std::floor(v))
          throw Error(who,
                      fmt::format("label {} at index {} of output '{}' is not a class index "
                                  "in 0..{}",
                                  v, i, layers[static_cast<std::size_t>(h.layer)].name, c - 1));
      }
    }
  }

  // Targets y of n samples for the loss `kind` (named `kind_name`) on the model's output.
  void check_targets(const Tensor& y, int64_t n, const char* who, LossKind kind,
                     const std::string& kind_name) const {
    const int64_t c = output_width();
    if (loss_rules(kind).class_index_targets) {
      if (!(y.rank() == 1 || (y.rank() == 2 && y.dim(1) == 1)) || y.dim(0) != n)
        throw Error(who, "y must hold one class index per sample, shape (" + std::to_string(n) +
                             ",), got " + shape_to_string(y.shape()));
      for (int64_t i = 0; i < n; ++i) {
        const float v = y[i];
        if (!(v >= 0.0f && v < static_cast<float>(c)) || v != std::floor(v))
          throw Error(
              who, fmt::format("label {} at index {} is not a class index in 0..{}", v, i, c - 1));
      }
    } else if (!targets_fit_output(y, n)) {
      Shape want = {n};
      want.insert(want.end(), layers_output_shape().begin(), layers_output_shape().end());
      throw Error(who, "y must have shape " + shape_to_string(want) + " for " + kind_name +
                           " (the model's output), got " + shape_to_string(y.shape()));
    }
  }

  // Targets of n samples for a loss computed value by value: the output's shape, or (as Keras
  // squeezes or expands a last axis of 1 before the loss) that shape with a last axis of 1
  // dropped or added; the same values in the same order as the output's.
  bool targets_fit_output(const Tensor& y, int64_t n) const {
    if (y.rank() < 1 || y.dim(0) != n) return false;
    const Shape sample(y.shape().begin() + 1, y.shape().end());
    Shape out = layers_output_shape();
    if (sample == out) return true;
    if (sample.size() + 1 == out.size() && out.back() == 1)
      return std::equal(sample.begin(), sample.end(), out.begin());
    out.push_back(1);
    return sample == out;
  }

  // Rows [begin, end) of (x, y) and of the sample weights w (null: none).
  DeviceData upload_data(const Tensor& x, const Tensor& y, int64_t begin, int64_t end,
                         const Tensor* w = nullptr) {
    DeviceData d;
    d.n = end - begin;
    d.x_cols = input_width();
    d.y_cols = target_columns();
    const float* x_src = x.data() + begin * d.x_cols;
    const float* y_src = y.data() + begin * d.y_cols;
    // The CPU reads the caller's rows where they are: no copy of the data set per call.
    const bool in_place = backend->reads_host_memory();
    check_fits((in_place ? 0.0 : float_bytes(d.n * d.x_cols) + float_bytes(d.n * d.y_cols)) +
                   float_bytes(d.n),
               "the data (" + std::to_string(d.n) + " samples, copied to the device once)", "");
    if (in_place) {
      d.x_rows = x_src;
      d.y_rows = y_src;
    } else {
      d.x = DeviceBlock(*backend,
                        static_cast<std::size_t>(std::max<int64_t>(d.n * d.x_cols, 16)) * 4);
      d.y = DeviceBlock(*backend,
                        static_cast<std::size_t>(std::max<int64_t>(d.n * d.y_cols, 16)) * 4);
      backend->upload(d.x.as<void>(), x_src,
                      static_cast<std::size_t>(d.n * d.x_cols) * sizeof(float));
      backend->upload(d.y.as<void>(), y_src,
                      static_cast<std::size_t>(d.n * d.y_cols) * sizeof(float));
      d.x_rows = d.x.as<float>();
      d.y_rows = d.y.as<float>();
    }
    if (w) upload_weights(d, *w, begin, in_place);
    d.indices = DeviceBlock(*backend, static_cast<std::size_t>(std::max<int64_t>(d.n, 16)) * 4);
    std::vector<int32_t> iota(static_cast<std::size_t>(d.n));
    std::iota(iota.begin(), iota.end(), 0);
    backend->upload(d.indices.as<void>(), iota.data(), iota.size() * sizeof(int32_t));
    return d;
  }

  void upload_weights(DeviceData& d, const Tensor& w, int64_t begin, bool in_place) {
    if (in_place) {
      d.w_rows = w.data() + begin;
      return;
    }
    d.w = DeviceBlock(*backend, static_cast<std::size_t>(std::max<int64_t>(d.n, 16)) * 4);
    backend->upload(d.w.as<void>(), w.data() + begin, static_cast<std::size_t>(d.n) * 4);
    d.w_rows = d.w.as<float>();
  }

  // Keras's sample weights: one per sample of x, shape (n,) or (n, 1), finite (Keras takes any
  // number; infinity or NaN would only turn the loss into NaN).
  static void check_weights(const Tensor& w, int64_t n, const char* who, const char* what) {
    if (!((w.rank() == 1 || (w.rank() == 2 && w.dim(1) == 1)) && w.dim(0) == n))
      throw Error(who, fmt::format("{} must hold one weight per sample, shape ({},), got {}", what,
                                   n, shape_to_string(w.shape())));
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(w[i]))
        throw Error(who, fmt::format("{} {} at index {} is not a finite number", what, w[i], i));
  }

  // Keras's class_weight_to_sample_weights: each sample weighted by its class's weight (1 for a
  // class the map does not name); the class is the label rounded to an integer, or the argmax of
  // a target row of several columns.
  Tensor class_weight_samples(const Tensor& y, const std::map<int64_t, double>& class_weight,
                              int64_t n) const {
    Tensor w({n});
    const int64_t cols = y.rank() == 2 ? y.dim(1) : 1;
    for (int64_t i = 0; i < n; ++i) {
      const float* row = y.data() + i * cols;
      // np.argmax's first largest; np.round's ties to even (nearbyint's default mode).
      const int64_t cls = cols > 1
                              ? std::max_element(row, row + cols) - row
                              : static_cast<int64_t>(std::nearbyint(static_cast<double>(row[0])));
      const auto it = class_weight.find(cls);
      w[i] = it == class_weight.end() ? 1.0f : static_cast<float>(it->second);
    }
    return w;
  }

  void require_compiled(const char* who) const {
    if (!is_compiled) throw Error(who, "the model must be compiled first: call compile()");
  }
  void require_one_output(const char* who) const {
    if (several_outputs())
      throw Error(who, fmt::format("takes a model of one output; this one has {} (not "
                                   "supported (yet))",
                                   model_outputs.size()));
  }

  Shape sample_shape_of(const Tensor& x) const {
    return Shape(x.shape().begin() + 1, x.shape().end());
  }

  // The loss and the compiled metrics of the sums in c, as logs name them, in compile's order.
  std::vector<std::pair<std::string, double>> metric_values(const StepCounters& c,
                                                            const std::string& prefix) const {
    const double n = std::max(c.sample_count, 1.0);
    return named_values(c.loss_sum / n, c.correct_sum / n, extra_results(c), prefix);
  }
  // The metrics beyond "accuracy", by name, from the sums in c.
  std::vector<std::pair<std::string, double>> extra_results(const StepCounters& c) const {
    std::vector<std::pair<std::string, double>> v;
    int slot = 0;
    for (const MetricSpec& spec : metrics)
      if (!spec.loss_accuracy)
        v.emplace_back(spec.name, metric_result(spec, c.metric_sums[slot++], c.sample_count));
    return v;
  }
  // The result of a phase's counters (the model's, then each head's: read_tally): with several
  // outputs the loss is the sum of weight x each output's mean loss, and `metrics` each output's
  // loss then each output's metrics (EvaluateResult).
  EvaluateResult result_of(std::span<const StepCounters> t) const {
    const StepCounters& c = t[0];
    EvaluateResult r;
    const double n = std::max(c.sample_count, 1.0);
    if (heads.empty()) {
      r.samples = static_cast<int64_t>(c.sample_count);
      r.loss = c.loss_sum / n;
      r.accuracy = c.correct_sum / n;
      r.metrics = extra_results(c);
      return r;
    }
    r.samples = static_cast<int64_t>(t[1].sample_count);
    for (std::size_t j = 0; j < heads.size(); ++j) {
      const StepCounters& hc = t[1 + j];
      const double loss_j = hc.loss_sum / std::max(hc.sample_count, 1.0);
      r.loss += heads[j].weight * loss_j;
      r.metrics.emplace_back(layers[static_cast<std::size_t>(heads[j].layer)].name + "_loss",
                             loss_j);
    }
    for (std::size_t j = 0; j < heads.size(); ++j) {
      const StepCounters& hc = t[1 + j];
      int slot = 0;
      for (const MetricSpec& spec : heads[j].metrics)
        r.metrics.emplace_back(spec.name,
                               spec.loss_accuracy
                                   ? hc.correct_sum / std::max(hc.sample_count, 1.0)
                                   : metric_result(spec, hc.metric_sums[slot++], hc.sample_count));
    }
    return r;
  }
  std::vector<std::pair<std::string, double>> values_of(std::span<const StepCounters> t,
                                                        const std::string& prefix) const {
    if (heads.empty()) return metric_values(t[0], prefix);
    const EvaluateResult r = result_of(t);
    return named_values(r.loss, r.accuracy, r.metrics, prefix);
  }

  std::vector<std::pair<std::string, double>> named_values(
      double loss_value, double accuracy_value,
      const std::vector<std::pair<std::string, double>>& extra, const std::string& prefix) const {
    std::vector<std::pair<std::string, double>> v;
    v.emplace_back(prefix + "loss", loss_value);
    if (!heads.empty()) {  // several outputs: every value is in `extra` (result_of)
      for (const auto& [key, value] : extra) v.emplace_back(prefix + key, value);
      return v;
    }
    std::size_t next = 0;
    for (const MetricSpec& spec : metrics) {
      if (spec.loss_accuracy) {
        v.emplace_back(prefix + "accuracy", accuracy_value);
      } else {
        v.emplace_back(prefix + extra[next].first, extra[next].second);
        ++next;
      }
    }
    return v;
  }

  // The running loss and accuracy of `c` (read now: a synchronisation), as a batch hook's logs.
  Logs logs_of(const StepCounters* c) const {
    Logs logs;
    for (const auto& [key, value] : values_of(read_tally(c), "")) logs[key] = value;
    return logs;
  }

  // The loss and accuracy over d's rows, in batches of at most `batch`. With ranks, d holds this
  // rank's share of the rows (split_data; none: nullptr) and the sums are added over the ranks, so
  // every rank returns the result over all rows.
  // `hooks`: the test phase's (on_test_begin/end around it, and its batch hooks).
  EvaluateResult run_evaluation(const DeviceData* d, int64_t batch, bool use_graphs,
                                BatchHooks& hooks) {
    hooks.begin_loop();
    std::vector<StepCounters> c(static_cast<std::size_t>(tallies()));
    const auto t0 = Clock::now();
    if (d && d->n > 0) {
      batch = std::min(batch, d->n);
      Plan& plan = plan_for(batch);
      with_weights(plan, *d);
      write_tally(eval_counters(), c);
      const int64_t full = d->n / batch, rest = d->n % batch;
      if (full > 0) {
        auto g = backend->capture([&] { eval_step(plan, *d, batch); }, use_graphs);
        for (int64_t s = 0; s < full; ++s)
          hooks.run(
              s, [&] { g->replay(); }, [&] { return logs_of(eval_counters()); });
      }
      if (rest > 0)
        hooks.run(
            full, [&] { eval_step(plan, *d, rest); }, [&] { return logs_of(eval_counters()); });
      c = read_tally(eval_counters());
    }
    sum_over_ranks(c[0]);
    EvaluateResult r = result_of(c);
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    Logs logs;
    for (const auto& [key, value] : values_of(c, "")) logs[key] = value;
    hooks.end_loop(logs);
    return r;
  }

  // With ranks: the loss, accuracy and metric sums and the sample count added over every rank.
  void sum_over_ranks(StepCounters& c) const {
    if (ranks() < 2) return;
    double sums[3 + kMaxMetrics] = {c.loss_sum, c.correct_sum, c.sample_count};
    std::copy_n(c.metric_sums, extra_metrics, sums + 3);
    copts.collective->allreduce_sum(sums, 3 + extra_metrics);
    c.loss_sum = sums[0], c.correct_sum = sums[1], c.sample_count = sums[2];
    std::copy_n(sums + 3, extra_metrics, c.metric_sums);
  }

  // Rows [begin, end) of (x, y) for evaluation: all of them in one process; with ranks, this
  // rank's share (rank_rows), or nothing when it has none.
  std::optional<DeviceData> split_data(const Tensor& x, const Tensor& y, int64_t begin, int64_t end,
                                       const Tensor* w = nullptr) {
    const RowRange share = rank_rows(end - begin, rank(), ranks());
    if (share.count() == 0) return std::nullopt;
    return upload_data(x, y, begin + share.begin, begin + share.end, w);
  }

  // With ranks, every rank starts from rank 0's parameters, optimizer state and step: identical
  // by the seed already, unless the ranks loaded different files.
  void share_parameters() {
    if (ranks() < 2) return;
    backend->synchronize();
    if (host_memory()) {
      copts.collective->broadcast(arena.as<void>(), arena.bytes(), 0);
      backend->host_wrote(arena.as<void>(), arena.bytes());
    } else {
      backend->broadcast(arena.as<void>(), arena.bytes(), 0, *copts.collective->on_device());
      backend->synchronize();
    }
    StepCounters c = read_counters(train_counters());
    copts.collective->broadcast(&c.step, sizeof c.step, 0);
    write_counters(train_counters(), c);
  }

  // ---- fit, in steps ----
  static void check_fit_options(const FitOptions& o) {
    if (o.epochs < 0) throw Error("fit", "epochs must not be negative");
    if (o.batch_size < 1) throw Error("fit", "batch_size must be at least 1");
    if (!(o.validation_split >= 0.0 && o.validation_split < 1.0))
      throw Error("fit", "validation_split must be in [0, 1)");
    if ((o.validation_x == nullptr) != (o.validation_y == nullptr))
      throw Error("fit", "validation_data needs both x and y");
    if (o.validation_freq < 1) throw Error("fit", "validation_freq must be at least 1");
  }

  // fit's sample weights checked; class_weight's, one per sample of y (empty without it).
  Tensor fit_weights(const Tensor& x, const Tensor& y, const FitOptions& o) const {
    if (o.sample_weight && !o.class_weight.empty())
      throw Error("fit", "you cannot give class_weight and sample_weight at the same time");
    if (o.sample_weight) check_weights(*o.sample_weight, x.dim(0), "fit", "sample_weight");
    if (o.validation_sample_weight && !o.validation_x)
      throw Error("fit", "validation_data's sample_weight needs validation_data's x and y");
    for (const auto& [cls, weight] : o.class_weight)
      if (!std::isfinite(weight))
        throw Error("fit",
                    fmt::format("class_weight {} of class {} is not a finite number", weight, cls));
    if (o.class_weight.empty()) return Tensor();
    return class_weight_samples(y, o.class_weight, x.dim(0));
  }

  // One fit's rows on the device: the training rows, and the validation rows (with ranks, each
  // rank evaluates its share of them: run_evaluation adds them up).
  struct FitData {
    DeviceData train;
    std::optional<DeviceData> val;
    bool validate = false;
    int64_t n_train = 0;
    int64_t batch = 0;  // the global batch
  };

  // train_weights: the training rows' sample weights (o.sample_weight, or class_weight's), or
  // null; the validation rows are weighted by o.validation_sample_weight (validation_data) or by
  // their rows of o.sample_weight (validation_split), as Keras splits (x, y, sample_weight).
  FitData fit_data(const Tensor& x, const Tensor& y, const FitOptions& o,
                   const Tensor* train_weights) {
    FitData f;
    const int64_t n_all = x.dim(0);
    f.n_train = n_all;
    if (o.validation_split > 0.0)
      f.n_train =
          static_cast<int64_t>(std::ceil(static_cast<double>(n_all) * (1.0 - o.validation_split)));
    if (f.n_train < 1)
      throw Error("fit", "no training samples (x has " + std::to_string(n_all) + ")");
    f.train = upload_data(x, y, 0, f.n_train, train_weights);
    f.batch = std::min<int64_t>(o.batch_size, f.n_train);
    // The validation rows: validation_data, or the last rows of (x, y) (validation_split); with
    // validation_steps, the rows its first batches hold.
    const Tensor& vx = o.validation_x ? *o.validation_x : x;
    const Tensor& vy = o.validation_x ? *o.validation_y : y;
    const int64_t begin = o.validation_x ? 0 : f.n_train;
    const Tensor* vw = o.validation_x ? o.validation_sample_weight : o.sample_weight;
    if (o.validation_x) {
      build(sample_shape_of(vx));
      check_xy(vx, vy, "fit (validation_data)");
      if (vw) check_weights(*vw, vx.dim(0), "fit", "validation_data's sample_weight");
    }
    f.validate = o.validation_x || f.n_train < n_all;
    if (!f.validate) return f;
    if (o.validation_steps && *o.validation_steps < 1)
      throw Error("fit", "validation_steps must be at least 1");
    int64_t end = vx.dim(0);
    if (o.validation_steps) end = std::min(end, begin + *o.validation_steps * f.batch);
    f.val = split_data(vx, vy, begin, end, vw);
    return f;
  }

  // How an epoch's steps split the training rows: `full` batches of `batch` rows and a last one
  // of `rest`; with ranks, this rank's rows of each (its plan sized for the largest share,
  // ceil(batch / ranks)).
  struct BatchLayout {
    int64_t batch = 0, full = 0, rest = 0, steps = 0, local_batch = 0;
    RowRange full_rows, rest_rows;
    Shard full_shard, rest_shard;
  };

  BatchLayout batch_layout(int64_t batch, int64_t n_train) const {
    BatchLayout b;
    b.batch = batch;
    b.full = n_train / batch;
    b.rest = n_train % batch;
    b.steps = b.full + (b.rest ? 1 : 0);
    b.full_rows = rank_rows(batch, rank(), ranks());
    b.rest_rows = rank_rows(b.rest, rank(), ranks());
    b.full_shard = {b.full_rows.count(), b.full_rows.begin, batch};
    b.rest_shard = {b.rest_rows.count(), b.rest_rows.begin, b.rest};
    b.local_batch = (batch + ranks() - 1) / ranks();
    return b;
  }

  // The training steps of the full batches and of the last, partial one, captured once (again
  // after a callback changed what a step does: graphs_dirty).
  struct TrainGraphs {
    std::unique_ptr<Backend::StepGraph> full, rest;
  };

  void capture_training(TrainGraphs& g, Plan& plan, const DeviceData& train, const BatchLayout& b,
                        uint64_t seed) {
    const Shard full_shard = b.full_shard, rest_shard = b.rest_shard;
    g.full = b.full > 0 ? backend->capture([this, &plan, &train, full_shard,
                                            seed] { train_step(plan, train, full_shard, seed); },
                                           copts.graphs && !fused_mlp)
                        : nullptr;
    g.rest = b.rest > 0 ? backend->capture([this, &plan, &train, rest_shard,
                                            seed] { train_step(plan, train, rest_shard, seed); },
                                           copts.graphs && !fused_mlp)
                        : nullptr;
    graphs_dirty = false;
  }

  // The epoch's order of the training rows onto the device, and the training counters reset for
  // an epoch that starts at batch `first`. With ranks, the order as this rank gathers it: batch
  // s's rows at s * local_batch (`local_order`, sized for it).
  void start_epoch(const BatchLayout& b, int64_t first, const std::vector<int32_t>& order,
                   std::vector<int32_t>& local_order, DeviceData& train) {
    std::vector<StepCounters> t = read_tally(train_counters());
    t[0].batch_index = first;
    for (StepCounters& c : t) {
      c.loss_sum = c.correct_sum = c.sample_count = 0;
      std::fill_n(c.metric_sums, kMaxMetrics, 0.0);
    }
    write_tally(train_counters(), t);
    if (ranks() > 1) {
      for (int64_t s = 0; s < b.steps; ++s) {
        const RowRange rows = s < b.full ? b.full_rows : b.rest_rows;
        for (int64_t i = 0; i < rows.count(); ++i)
          local_order[static_cast<std::size_t>(s * b.local_batch + i)] =
              order[static_cast<std::size_t>(s * b.batch + rows.begin + i)];
      }
      backend->upload(train.indices.as<void>(), local_order.data(),
                      local_order.size() * sizeof(int32_t));
    } else {
      backend->upload(train.indices.as<void>(), order.data(), order.size() * sizeof(int32_t));
    }
    backend->synchronize();
  }

  // The epoch's steps, with the batch hooks and the progress bar; how many ran (fewer when a
  // hook stopped training or Ctrl-C was pressed: the epoch then ends after that step).
  int64_t run_epoch_steps(const EpochSteps::Epoch& part, const BatchLayout& b, const TrainGraphs& g,
                          BatchHooks& hooks, ProgressBar& bar, bool interactive,
                          bool stop_on_interrupt) {
    int64_t done = 0;
    for (; done < part.steps; ++done) {
      hooks.run(
          done, [&] { (part.first + done < b.full ? g.full : g.rest)->replay(); },
          [&] { return logs_of(train_counters()); });
      if ((stop_on_interrupt && InterruptGuard::requested()) || stop_requested) return done + 1;
      if (interactive) {
        const auto now = Clock::now();
        if (bar.due(now)) {
          std::vector<StepCounters> snap(static_cast<std::size_t>(tallies()));
          backend->download_async(snap.data(), train_counters(),
                                  snap.size() * sizeof(StepCounters));
          bar.update(done + 1, values_of(snap, ""), now);
        }
      }
    }
    return done;
  }

  // The epoch's record and its logs' values (loss and metrics over every rank's rows), with the
  // validation's when it is due after this epoch.
  EpochRecord finish_epoch(int epoch, int64_t done, double seconds, const FitOptions& o,
                           const FitData& f, BatchHooks& test_hooks,
                           std::vector<std::pair<std::string, double>>& values) {
    std::vector<StepCounters> end = read_tally(train_counters());
    sum_over_ranks(end[0]);
    const EvaluateResult r = result_of(end);
    EpochRecord rec;
    rec.epoch = epoch + 1;
    rec.steps = done;
    rec.seconds = seconds;
    rec.loss = r.loss;
    rec.accuracy = r.accuracy;
    rec.metrics = r.metrics;
    rec.learning_rate = end[0].learning_rate;
    values = values_of(end, "");
    if (f.validate && (epoch + 1) % o.validation_freq == 0) {
      EvaluateResult v =
          run_evaluation(f.val ? &*f.val : nullptr, f.batch, copts.graphs, test_hooks);
      rec.val_loss = v.loss;
      rec.val_accuracy = v.accuracy;
      rec.val_seconds = v.seconds;
      rec.val_metrics = v.metrics;
      for (auto& value : named_values(v.loss, v.accuracy, v.metrics, "val_"))
        values.push_back(std::move(value));
    }
    return rec;
  }
};

// ---------------------------------------------------------------------------------------------
Sequential::Sequential(std::vector<Layer> layers, std::string name)
    : impl_(std::make_unique<Impl>()) {
  if (layers.empty()) throw Error("Sequential", "a model needs at least one layer");
  std::vector<std::vector<int>> inputs(layers.size());
  for (std::size_t i = 1; i < layers.size(); ++i) inputs[i] = {static_cast<int>(i) - 1};
  impl_->init(std::move(layers), std::move(inputs), std::move(name), false);
}

Sequential::Sequential(LayerGraph graph, std::string name) : impl_(std::make_unique<Impl>()) {
  if (graph.layers.empty()) throw Error(name, "a model needs at least one layer");
  if (graph.inputs.size() != graph.layers.size())
    throw Error(name, fmt::format("the graph lists the inputs of {} layers, but has {} layers",
                                  graph.inputs.size(), graph.layers.size()));
  impl_->init(std::move(graph.layers), std::move(graph.inputs), std::move(name), true,
              std::move(graph.input_layers), std::move(graph.output_layers),
              std::move(graph.shared_with));
}

void Sequential::Impl::init(std::vector<Layer> model_layers,
                            std::vector<std::vector<int>> layer_inputs, std::string model_name,
                            bool is_functional, std::vector<int> input_order,
                            std::vector<int> output_order, std::vector<int> shares) {
  layers = std::move(model_layers);
  inputs = std::move(layer_inputs);
  name = std::move(model_name);
  functional = is_functional;
  take_shared(std::move(shares));
  take_trainable();
  const std::size_t n = layers.size();
  readers.assign(n, 0);
  std::set<std::string> names;
  for (std::size_t i = 0; i < n; ++i) {
    const Layer& l = layers[i];
    const LayerKind& kind = layer_kind(l);
    if (kind.is_model_input() && i != 0 && !functional)
      throw Error(l.name, "an InputLayer can only be the first layer");
    if (shared_with[i] < 0 && !names.insert(l.name).second)
      throw Error(l.name, "two layers of the model have this name: each needs its own");
    if (kind.is_model_input() && !inputs[i].empty())
      throw Error(l.name, "an InputLayer reads no layer: it is one of the model's inputs");
    if (i == 0) {
      if (!inputs[0].empty()) throw Error(l.name, "the first layer reads the model's input only");
      if (functional && !kind.is_model_input())
        throw Error(l.name, "a functional model's first layer is its InputLayer (keras.Input)");
      continue;
    }
    if (kind.is_model_input()) continue;
    for (int j : inputs[i])
      if (j < 0 || static_cast<std::size_t>(j) >= i)
        throw Error(l.name, fmt::format("reads layer {}, which is not one of the layers before it "
                                        "(a graph lists each layer after those it reads)",
                                        j));
    if (kind.merges() && inputs[i].size() < 2)
      throw Error(l.name, fmt::format("{} needs two or more inputs, got {}", kind.class_name(),
                                      inputs[i].size()));
    if (!kind.merges() && inputs[i].size() != 1)
      throw Error(l.name,
                  fmt::format("{} takes one input, got {}", kind.class_name(), inputs[i].size()));
    for (int j : inputs[i]) ++readers[static_cast<std::size_t>(j)];
  }
  set_model_outputs(std::move(output_order));
  for (std::size_t i = 0; i + 1 < n; ++i)
    if (readers[i] == 0 && std::find(model_outputs.begin(), model_outputs.end(),
                                     static_cast<int>(i)) == model_outputs.end())
      throw Error(layers[i].name, several_outputs()
                                      ? "no layer reads its output, and it is not one of the "
                                        "model's outputs"
                                      : "no layer reads its output, and it is not the model's "
                                        "output (the last layer): a model has one output");
  set_model_inputs(std::move(input_order));
  const Layer& first = layers.front();
  if (several_inputs())
    build(packed_shape());
  else if (layer_kind(first).declares_input() && !first.input_shape.empty())
    build(first.input_shape);
}

// LayerGraph::shared_with: checked, each second call made a copy of its first call's layer, the
// layers named, and which calls add their gradients into a later one's (accumulates).
void Sequential::Impl::take_shared(std::vector<int> shares) {
  const std::size_t n = layers.size();
  if (shares.empty()) shares.assign(n, -1);
  if (shares.size() != n)
    throw Error(name, fmt::format("the graph's shared_with has {} entries, but the graph has {} "
                                  "layers",
                                  shares.size(), n));
  for (std::size_t i = 0; i < n; ++i) {
    const int j = shares[i];
    if (j == -1) continue;
    const std::string who = layers[i].name.empty() ? fmt::format("layer {}", i) : layers[i].name;
    if (j < 0 || static_cast<std::size_t>(j) >= i)
      throw Error(who, fmt::format("calls again layer {}, which is not one of the layers before "
                                   "it",
                                   j));
    if (shares[static_cast<std::size_t>(j)] != -1)
      throw Error(who, fmt::format("calls again layer {}, which is itself a second call: name "
                                   "the layer's first call",
                                   j));
    if (layer_kind(layers[static_cast<std::size_t>(j)]).is_model_input())
      throw Error(who, "an InputLayer is the model's input, not a layer to call again");
  }
  shared_with = std::move(shares);
  name_layers();
  for (std::size_t i = 0; i < n; ++i)
    if (shared_with[i] >= 0) layers[i] = layers[first_call(i)];
  std::vector<std::size_t> last(n);  // per first call: the layer's last call
  for (std::size_t i = 0; i < n; ++i) last[first_call(i)] = i;
  accumulates.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) accumulates[i] = last[first_call(i)] != i ? 1 : 0;
  shared_layer = called_more_than_once(shared_with);
}

void Sequential::Impl::set_model_outputs(std::vector<int> order) {
  const int last = static_cast<int>(layers.size()) - 1;
  if (order.empty()) order = {last};
  std::set<int> seen;
  for (int i : order) {
    if (i < 0 || i > last)
      throw Error(name, fmt::format("output layer {} is not one of the model's {} layers", i,
                                    layers.size()));
    const Layer& l = layers[static_cast<std::size_t>(i)];
    if (!seen.insert(i).second) throw Error(l.name, "is given twice among the model's outputs");
    if (order.size() > 1 && readers[static_cast<std::size_t>(i)] > 0)
      throw Error(l.name,
                  "is one of the model's outputs and read by another layer: crossover's "
                  "models of several outputs take outputs that no layer reads (yet)");
    if (order.size() > 1 && layer_kind(l).is_model_input())
      throw Error(l.name, "an InputLayer as one of the model's outputs is not supported (yet)");
  }
  if (!seen.count(last))
    throw Error(layers.back().name,
                "no layer reads its output, and it is not one of the model's outputs");
  model_outputs = std::move(order);
}

void Sequential::Impl::set_model_inputs(std::vector<int> order) {
  std::vector<int> found;
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (inputs[i].empty()) found.push_back(static_cast<int>(i));
  if (order.empty()) order = found;
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != found) {
    std::string names;
    for (int i : found)
      names += (names.empty() ? "'" : ", '") + layers[static_cast<std::size_t>(i)].name + "'";
    throw Error(name, fmt::format("the model's inputs must list each of its InputLayers ({}) "
                                  "once, got {} indices",
                                  names, order.size()));
  }
  model_inputs = std::move(order);
  input_column.assign(layers.size(), -1);
  packed_width = 0;
  if (!several_inputs()) return;
  for (int i : model_inputs) {
    const Layer& l = layers[static_cast<std::size_t>(i)];
    if (l.input_shape.empty())
      throw Error(l.name, "an input of a model of several inputs needs its shape (keras.Input)");
    input_column[static_cast<std::size_t>(i)] = packed_width;
    packed_width += shape_size(l.input_shape, l.name);
  }
}

int GraphBuilder::input(Shape shape, std::string name) {
  if (!g_.layers.empty() && !layer_kind(g_.layers.front()).is_model_input())
    throw Error("GraphBuilder", "input() comes first");
  Layer l = Input(std::move(shape));
  l.name = std::move(name);
  g_.layers.push_back(std::move(l));
  g_.inputs.emplace_back();
  g_.shared_with.push_back(-1);
  g_.input_layers.push_back(static_cast<int>(g_.layers.size()) - 1);
  return g_.input_layers.back();
}

int GraphBuilder::add(Layer layer, std::vector<int> layer_inputs) {
  if (g_.layers.empty()) throw Error("GraphBuilder", "call input() first");
  for (int j : layer_inputs)
    if (j < 0 || static_cast<std::size_t>(j) >= g_.layers.size())
      throw Error("GraphBuilder", fmt::format("no layer {} to read", j));
  g_.layers.push_back(std::move(layer));
  g_.inputs.push_back(std::move(layer_inputs));
  g_.shared_with.push_back(-1);
  return static_cast<int>(g_.layers.size()) - 1;
}

int GraphBuilder::again(int call, std::vector<int> layer_inputs) {
  if (call < 0 || static_cast<std::size_t>(call) >= g_.layers.size())
    throw Error("GraphBuilder", fmt::format("no layer {} to call again", call));
  const auto c = static_cast<std::size_t>(call);
  const int first = g_.shared_with[c] >= 0 ? g_.shared_with[c] : call;
  if (layer_kind(g_.layers[c]).is_model_input())
    throw Error("GraphBuilder", "an input() is not a layer to call again");
  const int i = add(g_.layers[c], std::move(layer_inputs));
  g_.shared_with.back() = first;
  return i;
}

LayerGraph GraphBuilder::graph(std::vector<int> outputs, std::vector<int> model_inputs) const {
  if (outputs.empty()) throw Error("GraphBuilder", "a model needs at least one output");
  for (int o : outputs)
    if (o < 0 || static_cast<std::size_t>(o) >= g_.layers.size())
      throw Error("GraphBuilder", fmt::format("no layer {} to be an output", o));
  if (model_inputs.empty()) model_inputs = g_.input_layers;
  const int last = *std::max_element(outputs.begin(), outputs.end());
  for (int i : model_inputs) {
    if (std::find(g_.input_layers.begin(), g_.input_layers.end(), i) == g_.input_layers.end())
      throw Error("GraphBuilder", fmt::format("layer {} is not an input()", i));
    if (i > last)
      throw Error("GraphBuilder", fmt::format("the output does not depend on input {}", i));
  }
  // The layers the outputs depend on, kept in their order (a layer reads only earlier ones).
  std::vector<char> used(g_.layers.size(), 0);
  for (int o : outputs) used[static_cast<std::size_t>(o)] = 1;
  for (int i : model_inputs) used[static_cast<std::size_t>(i)] = 1;
  for (std::size_t i = static_cast<std::size_t>(last) + 1; i-- > 0;)
    if (used[i])
      for (int j : g_.inputs[i]) used[static_cast<std::size_t>(j)] = 1;
  std::vector<int> index(g_.layers.size(), -1), first_kept(g_.layers.size(), -1);
  LayerGraph out;
  for (std::size_t i = 0; i <= static_cast<std::size_t>(last); ++i) {
    if (!used[i]) continue;
    index[i] = static_cast<int>(out.layers.size());
    out.layers.push_back(g_.layers[i]);
    std::vector<int> in;
    for (int j : g_.inputs[i]) in.push_back(index[static_cast<std::size_t>(j)]);
    out.inputs.push_back(std::move(in));
    // A shared layer's first call in the model: the first of its calls that the outputs use.
    const auto first = static_cast<std::size_t>(g_.shared_with[i] < 0 ? i : g_.shared_with[i]);
    int& kept = first_kept[first];
    out.shared_with.push_back(kept < 0 ? -1 : kept);
    if (kept < 0) kept = index[i];
  }
  for (int i : model_inputs) out.input_layers.push_back(index[static_cast<std::size_t>(i)]);
  for (int o : outputs) out.output_layers.push_back(index[static_cast<std::size_t>(o)]);
  return out;
}

// One output: the graph's last layer, which needs no output list.
LayerGraph GraphBuilder::graph(int output, std::vector<int> model_inputs) const {
  LayerGraph out = graph(std::vector<int>{output}, std::move(model_inputs));
  out.output_layers.clear();
  return out;
}

std::vector<int64_t> call_numbers(const std::vector<int>& shared_with) {
  std::vector<int64_t> number(shared_with.size(), 0), made(shared_with.size(), 0);
  for (std::size_t i = 0; i < shared_with.size(); ++i)
    number[i] = made[shared_with[i] < 0 ? i : static_cast<std::size_t>(shared_with[i])]++;
  return number;
}

std::vector<char> called_more_than_once(const std::vector<int>& shared_with) {
  std::vector<char> shared(shared_with.size(), 0);
  for (std::size_t i = 0; i < shared_with.size(); ++i)
    if (shared_with[i] >= 0) shared[i] = shared[static_cast<std::size_t>(shared_with[i])] = 1;
  return shared;
}

Sequential::~Sequential() = default;
Sequential::Sequential(Sequential&&) noexcept = default;
Sequential& Sequential::operator=(Sequential&&) noexcept = default;

void Sequential::compile(OptimizerConfig optimizer, std::string_view loss,
                         std::vector<std::string> metrics, CompileOptions options) {
  compile(optimizer, LossSpec{std::string(loss), false}, std::move(metrics), std::move(options));
}

void Sequential::compile(OptimizerConfig optimizer, const LossSpec& spec,
                         std::vector<std::string> metrics, CompileOptions options) {
  std::vector<MetricSpec> specs;
  for (const std::string& name : metrics) specs.push_back(metric_spec(name));
  compile_with(optimizer, spec, std::move(specs), std::move(options));
}

namespace {

void refuse_during_fit(const Sequential::Impl& m) {
  if (m.fitting)
    throw Error("compile", "called during fit (from a callback): the model is being trained");
}

// compile's loss, metrics and device; with several outputs the heads are set already (spec is
// the first output's loss, metrics empty).
void compile_model(Sequential::Impl& m, OptimizerConfig optimizer, const LossSpec& spec,
                   std::vector<MetricSpec> metrics, CompileOptions options) {
  refuse_during_fit(m);
  // from_logits with a final activation is Keras's too (final_activation_layer).
  const LossConfig loss = parse_loss(spec, "compile");
  const std::string loss_name(loss_rules(loss.kind).name);
  std::vector<MetricSpec> compiled_metrics = compile_metrics(std::move(metrics), loss.kind);
  if (m.built && m.heads.empty()) m.check_output_for_loss(loss.kind, loss_name, compiled_metrics);
  m.loss = loss;
  m.from_logits = spec.from_logits;
  m.loss_name = loss_name;
  m.metrics = std::move(compiled_metrics);
  m.accuracy = std::any_of(m.metrics.begin(), m.metrics.end(),
                           [](const MetricSpec& s) { return s.loss_accuracy; });
  m.extra_metrics = static_cast<int>(std::count_if(
      m.metrics.begin(), m.metrics.end(), [](const MetricSpec& s) { return !s.loss_accuracy; }));
  if (options.threads < 0) throw Error("compile", "threads must be 0 (all cores) or positive");
  // The layers' dtype policies decide; an explicit precision must agree (model_precision).
  options.precision = precision_name(model_precision(m.layers, options.precision));
  const int ranks = options.collective ? options.collective->size() : 1;
  if (ranks > 1 && !m.heads.empty())
    throw Error("compile", fmt::format("a model of several outputs trains in one process (yet), "
                                       "not over {} ranks",
                                       ranks));
  if (const LaunchedRanks l = launched_ranks(); l.size > 1 && !options.collective)
    throw Error("compile",
                fmt::format("this process is rank {} of {} started by a parallel launcher ({}), "
                            "but crossover trains in one process here: the {} processes would each "
                            "train their own copy of the model; run a single process (or give "
                            "compile a Collective of the {} ranks: CompileOptions::collective)",
                            l.rank, l.size, l.source, l.size, l.size));
  auto backend = options.make_backend
                     ? options.make_backend()
                     : make_backend(options.device, options.threads,
                                    parse_precision(options.precision, "precision"));
  if (!backend) throw Error("compile", "make_backend returned no backend");
  if (options.wrap_backend) backend = options.wrap_backend(std::move(backend));
  if (ranks > 1 && backend->device_name() != "cpu" && !options.collective->on_device())
    throw Error("compile",
                fmt::format("training over {} ranks on {} needs a collective that sums GPU "
                            "memory (NCCL); {} has none: train on the CPU, or use a crossover "
                            "built with NCCL (CROSSOVER_NCCL)",
                            ranks, backend->device_name(), options.collective->description()));
  for (const Layer& l : m.layers) {
    layer_kind(l).check_device(l, *backend, ranks);
  }
  m.plans.clear();
  m.arena.reset();
  m.counters.reset();
  m.call_grads.reset();
  m.backend = std::move(backend);
  m.opt = optimizer;
  m.copts = options;
  m.is_compiled = true;
  m.take_trainable();
  if (m.built) m.allocate_parameters();
}

}  // namespace

void Sequential::compile_with(OptimizerConfig optimizer, const LossSpec& spec,
                              std::vector<MetricSpec> metrics, CompileOptions options) {
  Impl& m = *impl_;
  if (m.several_outputs()) {  // Keras's one loss for every output, each its metrics
    std::vector<OutputLoss> outputs;
    for (int o : m.model_outputs) {
      OutputLoss out{spec, 1.0, metrics};
      for (MetricSpec& s : out.metrics)
        s.name = m.layers[static_cast<std::size_t>(o)].name + "_" + s.name;
      outputs.push_back(std::move(out));
    }
    return compile_outputs(optimizer, std::move(outputs), std::move(options));
  }
  refuse_during_fit(m);
  m.heads.clear();
  compile_model(m, optimizer, spec, std::move(metrics), std::move(options));
}

void Sequential::compile_outputs(OptimizerConfig optimizer, std::vector<OutputLoss> outputs,
                                 CompileOptions options) {
  Impl& m = *impl_;
  refuse_during_fit(m);
  if (outputs.size() != m.model_outputs.size())
    throw Error("compile", fmt::format("the model has {} outputs, but {} losses were given: give "
                                       "one per output",
                                       m.model_outputs.size(), outputs.size()));
  if (!m.several_outputs()) {
    if (outputs[0].weight != 1.0)
      throw Error("compile", "a loss weight on a model of one output is not supported (yet)");
    m.heads.clear();
    return compile_model(m, optimizer, outputs[0].loss, std::move(outputs[0].metrics),
                         std::move(options));
  }
  std::vector<Impl::Head> heads;
  std::set<std::string> keys;
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    OutputLoss& o = outputs[j];
    Impl::Head h;
    h.layer = m.model_outputs[j];
    const std::string& out_name = m.layers[static_cast<std::size_t>(h.layer)].name;
    h.loss = parse_loss(o.loss, "compile");
    h.loss_name = loss_rules(h.loss.kind).name;
    h.from_logits = o.loss.from_logits;
    if (!std::isfinite(o.weight))
      throw Error("compile", fmt::format("loss weight {} of output '{}' is not a finite number",
                                         o.weight, out_name));
    h.weight = static_cast<float>(o.weight);
    h.metrics = compile_metrics(std::move(o.metrics), h.loss.kind);
    h.extra_metrics = static_cast<int>(std::count_if(
        h.metrics.begin(), h.metrics.end(), [](const MetricSpec& s) { return !s.loss_accuracy; }));
    for (const std::string& key : {out_name + "_loss"})
      if (!keys.insert(key).second)
        throw Error("compile", "two outputs would report '" + key + "': name them apart");
    for (const MetricSpec& s : h.metrics)
      if (!keys.insert(s.name).second)
        throw Error("compile", "metric '" + s.name + "' is reported twice: name each apart");
    if (m.built)
      m.check_output_for_loss(h.loss.kind, h.loss_name, h.metrics,
                              m.info[static_cast<std::size_t>(h.layer)].out_shape);
    heads.push_back(std::move(h));
  }
  m.heads = std::move(heads);
  compile_model(m, optimizer, outputs[0].loss, {}, std::move(options));
}

History Sequential::fit(std::span<const float> x, Shape x_shape, std::span<const float> y,
                        Shape y_shape, FitOptions options) {
  return fit(Tensor::view(std::move(x_shape), x), Tensor::view(std::move(y_shape), y),
             std::move(options));
}

History Sequential::fit(const Tensor& x, const Tensor& y, FitOptions o) {
  Impl& m = *impl_;
  m.require_compiled("fit");
  if (m.fitting) throw Error("fit", "called during fit (from a callback)");
  Impl::check_fit_options(o);
  if (x.rank() < 2)
    throw Error("fit",
                "x must have shape (samples, features...), got " + shape_to_string(x.shape()));
  const bool was_built = m.built;
  m.build(m.sample_shape_of(x));
  if (!was_built || m.arena.bytes() == 0) m.allocate_parameters();
  m.check_xy(x, y, "fit");
  const Tensor class_weights = m.fit_weights(x, y, o);
  Impl::FitData data =
      m.fit_data(x, y, o, class_weights.size() > 0 ? &class_weights : o.sample_weight);

  const uint64_t seed = o.seed.value_or(m.copts.seed);
  const Impl::BatchLayout layout = m.batch_layout(data.batch, data.n_train);
  EpochSteps epoch_steps(layout.steps, o.steps_per_epoch);
  const int ranks = m.ranks();
  Impl::Plan& plan = m.plan_for(layout.local_batch);
  m.with_weights(plan, data.train);
  std::vector<int32_t> order(static_cast<std::size_t>(data.n_train));
  std::vector<int32_t> local_order;
  if (ranks > 1) {
    local_order.assign(static_cast<std::size_t>(layout.steps * layout.local_batch), 0);
    data.train.indices = DeviceBlock(
        *m.backend,
        static_cast<std::size_t>(std::max<int64_t>(local_order.size(), 16)) * sizeof(int32_t));
  }
  m.share_parameters();

  History h;
  m.stop_requested = false;
  struct Fitting {
    bool& flag;
    explicit Fitting(bool& f) : flag(f) { flag = true; }
    ~Fitting() { flag = false; }
  } fitting(m.fitting);
  // With ranks, Ctrl-C is the launcher's (mpirun ends every rank): a rank that stopped alone would
  // leave the others waiting in the next allreduce.
  std::optional<InterruptGuard> guard;
  if (ranks == 1) guard.emplace(o.second_interrupt_ends_process, !o.stop_on_interrupt);
  const bool stop_on_interrupt = o.stop_on_interrupt && ranks == 1;
  const bool show = o.verbose > 0;
  const TextSink out = o.output ? o.output : stdout_sink();
  const bool interactive =
      show && o.verbose == 1 && o.redraw.value_or(!o.output && is_terminal(stdout));
  for (auto& cb : o.callbacks) cb->on_train_begin(*this);
  BatchHooks train_hooks(*this, o.callbacks, BatchPhase::train);
  BatchHooks test_hooks(*this, o.callbacks, BatchPhase::test);
  m.plan_fused_step(plan, data.train, seed);
  if (show && !m.fused_note.empty()) out(m.fused_note + "\n");
  Impl::TrainGraphs graphs;
  m.capture_training(graphs, plan, data.train, layout, seed);

  for (int epoch = o.initial_epoch; epoch < o.epochs; ++epoch) {
    for (auto& cb : o.callbacks) cb->on_epoch_begin(*this, epoch);
    if (m.graphs_dirty) m.capture_training(graphs, plan, data.train, layout, seed);
    const EpochSteps::Epoch part = epoch_steps.next();
    if (part.new_pass && o.shuffle) shuffled_indices(seed, static_cast<uint64_t>(epoch), order);
    if (part.new_pass && !o.shuffle) std::iota(order.begin(), order.end(), 0);
    m.start_epoch(layout, part.first, order, local_order, data.train);

    if (show) out(fmt::format("Epoch {}/{}\n", epoch + 1, o.epochs));
    ProgressBar bar(out, epoch_steps.target(), interactive, o.metric_name);
    const auto t0 = Clock::now();
    const int64_t done =
        m.run_epoch_steps(part, layout, graphs, train_hooks, bar, interactive, stop_on_interrupt);
    m.backend->synchronize();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<std::pair<std::string, double>> values;
    const EpochRecord rec = m.finish_epoch(epoch, done, seconds, o, data, test_hooks, values);
    if (show) bar.finish(done, seconds, values);

    Logs logs;
    for (const auto& [k, v] : values) logs[k] = v;
    logs["lr"] = rec.learning_rate;
    h.epochs.push_back(rec);
    for (const auto& [k, v] : logs) h.history[k].push_back(v);
    if (stop_on_interrupt && InterruptGuard::requested()) {
      h.interrupted = true;
      if (show)
        out(fmt::format(
            "Interrupted: training stopped after step {} of epoch {}; the model keeps its "
            "weights.\n",
            done, epoch + 1));
      break;
    }
    for (auto& cb : o.callbacks) cb->on_epoch_end(*this, epoch, logs);
    if (m.stop_requested) {
      h.stopped_early = true;
      break;
    }
  }
  for (auto& cb : o.callbacks) cb->on_train_end(*this);
  return h;
}

EvaluateResult Sequential::evaluate(const Tensor& x, const Tensor& y, EvaluateOptions o) {
  Impl& m = *impl_;
  m.require_compiled("evaluate");
  if (o.batch_size < 1) throw Error("evaluate", "batch_size must be at least 1");
  if (x.rank() < 2)
    throw Error("evaluate",
                "x must have shape (samples, features...), got " + shape_to_string(x.shape()));
  const bool was_built = m.built;
  m.build(m.sample_shape_of(x));
  if (!was_built || m.arena.bytes() == 0) m.allocate_parameters();
  m.check_xy(x, y, "evaluate");
  if (x.dim(0) == 0) throw Error("evaluate", "x holds no samples");
  // With ranks, each evaluates its share of the rows and the sums are added.
  if (o.sample_weight) Impl::check_weights(*o.sample_weight, x.dim(0), "evaluate", "sample_weight");
  const std::optional<Impl::DeviceData> d = m.split_data(x, y, 0, x.dim(0), o.sample_weight);
  const int64_t batch = std::min<int64_t>(o.batch_size, x.dim(0));
  BatchHooks hooks(*this, o.callbacks, BatchPhase::test);
  EvaluateResult r = m.run_evaluation(d ? &*d : nullptr, batch, m.copts.graphs, hooks);
  if (o.verbose > 0) {
    const int64_t steps = (x.dim(0) + batch - 1) / batch;
    ProgressBar bar(o.output ? o.output : stdout_sink(), steps, false, o.metric_name);
    bar.finish(steps, r.seconds, m.named_values(r.loss, r.accuracy, r.metrics, ""));
  }
  return r;
}

Tensor Sequential::predict(const Tensor& x, int64_t batch_size) {
  return predict(x, batch_size, {});
}

Tensor Sequential::predict(const Tensor& x, int64_t batch_size, const Callbacks& callbacks) {
  Impl& m = *impl_;
  m.require_compiled("predict");
  if (batch_size < 1) throw Error("predict", "batch_size must be at least 1");
  if (x.rank() < 2)
    throw Error("predict",
                "x must have shape (samples, features...), got " + shape_to_string(x.shape()));
  const bool was_built = m.built;
  m.build(m.sample_shape_of(x));
  if (!was_built || m.arena.bytes() == 0) m.allocate_parameters();
  const int64_t n = x.dim(0), cols = m.input_width();
  Shape out_shape = {n};  // (n, the output's sample shape): (n, H, W, C) for images
  out_shape.insert(out_shape.end(), m.layers_output_shape().begin(), m.layers_output_shape().end());
  // Several outputs: (n, their values side by side), each output's flattened.
  int64_t packed = 0;
  for (int o : m.model_outputs) packed += m.info[static_cast<std::size_t>(o)].out_width;
  if (m.several_outputs()) out_shape = {n, packed};
  const int64_t c = m.several_outputs() ? packed : m.output_width();
  Tensor out(out_shape);
  std::vector<float> rows_of_one;  // one output's rows of a batch, before they are packed
  if (n == 0) return out;
  const int64_t batch = std::min(batch_size, n);
  Impl::Plan& plan = m.plan_for(batch);
  BatchHooks hooks(*this, callbacks, BatchPhase::predict);
  hooks.begin_loop();
  for (int64_t b = 0; b < n; b += batch) {
    const int64_t rows = std::min(batch, n - b);
    if (hooks.active()) hooks.begin(b / batch);
    m.backend->upload(plan.input.as<void>(), x.data() + b * cols,
                      static_cast<std::size_t>(rows * cols) * sizeof(float));
    m.forward(plan, rows, false, true, 0, m.eval_counters());
    if (!m.several_outputs()) {
      m.backend->download(out.data() + b * c, m.final_output(plan, false),
                          static_cast<std::size_t>(rows * c) * sizeof(float));
    } else {
      int64_t column = 0;
      for (int o : m.model_outputs) {
        const int64_t w = m.info[static_cast<std::size_t>(o)].out_width;
        rows_of_one.resize(static_cast<std::size_t>(rows * w));
        m.backend->download(rows_of_one.data(),
                            m.layer_output(plan, static_cast<std::size_t>(o), false),
                            rows_of_one.size() * sizeof(float));
        for (int64_t r = 0; r < rows; ++r)
          std::copy_n(rows_of_one.data() + r * w, w, out.data() + (b + r) * c + column);
        column += w;
      }
    }
    if (hooks.active()) {
      Shape batch_shape = out_shape;
      batch_shape[0] = rows;
      hooks.end(b / batch, Tensor::view(batch_shape, {out.data() + b * c, std::size_t(rows * c)}));
    }
  }
  hooks.end_loop({});
  return out;
}

void Sequential::trace_training_step(int64_t rows, const Shape& sample_shape) {
  Impl& m = *impl_;
  m.require_compiled("trace_training_step");
  if (rows < 1) throw Error("trace_training_step", "a step needs at least one row");
  m.require_one_output("trace_training_step");
  if (!m.built && sample_shape.empty())
    throw Error("trace_training_step", "the model's input shape is not known: give a sample shape");
  m.build(m.built && sample_shape.empty() ? m.input_shape : sample_shape);
  if (m.arena.bytes() == 0) m.allocate_parameters();
  Shape x_shape = {rows};
  x_shape.insert(x_shape.end(), m.input_shape.begin(), m.input_shape.end());
  const Tensor x(x_shape);
  const Tensor y(loss_rules(m.loss.kind).class_index_targets ? Shape{rows}
                                                             : Shape{rows, m.output_width()});
  const Impl::DeviceData d = m.upload_data(x, y, 0, rows);
  Impl::Plan& plan = m.plan_for(rows);
  StepCounters c = m.read_counters(m.train_counters());  // as an epoch starts: batch 0
  c.batch_index = 0;
  c.loss_sum = c.correct_sum = c.sample_count = 0;
  m.write_counters(m.train_counters(), c);
  const uint64_t seed = m.copts.seed;
  const Impl::Shard shard{rows, 0, rows};
  auto step = m.backend->capture(
      [&m, &plan, &d, shard, seed] { m.train_step(plan, d, shard, seed); }, m.copts.graphs);
  step->replay();
  m.backend->synchronize();
}

std::vector<NamedTensor> Sequential::gradients(const Tensor& x, const Tensor& y) {
  Impl& m = *impl_;
  m.require_compiled("gradients");
  m.require_one_output("gradients");
  const bool was_built = m.built;
  m.build(m.sample_shape_of(x));
  if (!was_built || m.arena.bytes() == 0) m.allocate_parameters();
  m.check_xy(x, y, "gradients");
  const int64_t n = x.dim(0);
  Impl::Plan& plan = m.plan_for(n);
  m.backend->upload(plan.input.as<void>(), x.data(), static_cast<std::size_t>(x.size()) * 4);
  m.backend->upload(plan.targets.as<void>(), y.data(), static_cast<std::size_t>(y.size()) * 4);
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (layer_kind(m.layers[i]).random_in_training(m.layers[i]))
      throw Error("gradients", "dropout layers must have rate 0 for a deterministic gradient");
  // A training pass (dropout at rate 0 keeps every unit), then its backward pass.
  m.forward(plan, n, true, false, 0, m.eval_counters());
  // A frozen layer's gradients are not computed: they read zero.
  m.backend->fill(m.arena.as<float>() + m.arena_floats, 0.0f, m.arena_floats);
  m.backend->loss_forward_backward(m.loss, m.loss_activation(), m.final_output(plan, true),
                                   plan.targets.as<float>(), nullptr, nullptr,
                                   plan.grads[0].as<float>(), n, m.output_width(), nullptr, n);
  m.backward(&plan, n);
  m.backend->synchronize();
  std::vector<NamedTensor> out;
  for (const Impl::Param& p : m.params) {
    Tensor t(p.shape);
    m.backend->download(t.data(), m.grad(p), static_cast<std::size_t>(p.n) * 4);
    out.push_back({p.name, std::move(t)});
  }
  return out;
}

// ---- a custom training loop's step, in three calls -------------------------------------------
namespace {

// With ranks, a step's gradients are summed over them inside fit's step; the split step has no
// such point.
void require_one_process(int ranks, const char* who) {
  if (ranks > 1)
    throw Error(who, "a custom training loop's step runs in one process, not over " +
                         std::to_string(ranks) + " ranks: use fit");
}

}  // namespace

Tensor Sequential::training_forward(const Tensor& x) {
  Impl& m = *impl_;
  m.require_compiled("training_forward");
  require_one_process(m.ranks(), "training_forward");
  m.require_one_output("training_forward");
  if (x.rank() < 2)
    throw Error("training_forward",
                "x must have shape (samples, features...), got " + shape_to_string(x.shape()));
  if (x.dim(0) == 0) throw Error("training_forward", "x holds no samples");
  const bool was_built = m.built;
  m.build(m.sample_shape_of(x));
  if (!was_built || m.arena.bytes() == 0) m.allocate_parameters();
  const int64_t n = x.dim(0), c = m.output_width();
  Impl::Plan& plan = m.plan_for(n);
  m.backend->upload(plan.input.as<void>(), x.data(), static_cast<std::size_t>(x.size()) * 4);
  // Dropout draws by the optimizer step, as fit's step does (train_counters' step).
  m.forward(plan, n, true, false, m.copts.seed, m.train_counters());
  m.update_moving_statistics(plan);
  Shape out_shape = {n};
  out_shape.insert(out_shape.end(), m.layers_output_shape().begin(), m.layers_output_shape().end());
  Tensor out(out_shape);
  const float* shown = m.final_output(plan, true);
  if (const ActivationKind act = m.final_activation(); act != ActivationKind::linear) {
    // The final layer left its activation to the loss: the loss op applies it, as it does in
    // fit's step (its loss and gradient are not asked for here).
    if (plan.activated.bytes() == 0)
      plan.activated = DeviceBlock(
          *m.backend, static_cast<std::size_t>(std::max<int64_t>(n * c, 16)) * sizeof(float));
    m.backend->set_scope("outputs");
    m.backend->loss_forward_backward(LossKind::mean_squared_error, act, shown,
                                     plan.targets.as<float>(), nullptr, plan.activated.as<float>(),
                                     nullptr, n, c, nullptr, n);
    m.backend->set_scope("");
    shown = plan.activated.as<float>();
  }
  m.backend->synchronize();
  m.backend->download(out.data(), shown, static_cast<std::size_t>(n * c) * sizeof(float));
  m.tape = {true, m.passes, n};
  return out;
}

namespace {

// The rows of the last training_forward's pass, which one backward pass may differentiate (it
// reuses the pass's buffers: the caller sets tape.ready to false before it runs). Throws Error
// when there is none.
int64_t training_pass_rows(Sequential::Impl& m, const char* who) {
  m.require_compiled(who);
  require_one_process(m.ranks(), who);
  if (!m.tape.ready || m.tape.pass != m.passes || !m.plans.count(m.tape.rows))
    throw Error(who,
                "no training pass to differentiate: the model ran or its weights changed since "
                "its last training_forward (or it had none), so its outputs then are not what "
                "the gradients would be of; call training_forward again");
  return m.tape.rows;
}

// The gradients of a backward pass just run: one per parameter a training step updates.
std::vector<NamedTensor> updated_gradients(Sequential::Impl& m) {
  std::vector<NamedTensor> out;
  for (const Sequential::Impl::Param& p : m.params) {
    if (!m.updates(p)) continue;
    Tensor t(p.shape);
    m.backend->download(t.data(), m.grad(p), static_cast<std::size_t>(p.n) * 4);
    out.push_back({p.name, std::move(t)});
  }
  return out;
}

}  // namespace

std::vector<NamedTensor> Sequential::training_backward_outputs(const Tensor& output_gradient) {
  Impl& m = *impl_;
  const char* who = "training_backward_outputs";
  const int64_t n = training_pass_rows(m, who), c = m.output_width();
  Shape want = {n};
  want.insert(want.end(), m.layers_output_shape().begin(), m.layers_output_shape().end());
  if (output_gradient.shape() != want)
    throw Error(who, "the gradient has shape " + shape_to_string(output_gradient.shape()) +
                         ", but the outputs it is the gradient of have shape " +
                         shape_to_string(want));
  m.tape.ready = false;
  Impl::Plan& plan = m.plans.at(n);
  float* g = plan.grads[0].as<float>();
  m.backend->upload(g, output_gradient.data(), static_cast<std::size_t>(n * c) * sizeof(float));
  m.write_counters(m.eval_counters(), StepCounters{});
  m.backend->fill(m.arena.as<float>() + m.arena_floats, 0.0f, m.arena_floats);
  m.backend->set_scope("outputs");
  if (const int f = m.final_activation_layer(); f >= 0) {
    // The final layer left its activation to the loss, which training_forward applied into
    // plan.activated: its gradient here, from the pre-activation and the activated outputs.
    const LayerActivation& a = m.info[static_cast<std::size_t>(f)].activation;
    if (a.kind != ActivationKind::linear)
      m.backend->activation_backward(a.kind, a.alpha, m.final_output(plan, true),
                                     plan.activated.as<float>(), g, g, n, c);
  }
  m.backward(&plan, n);
  m.backend->set_scope("");
  return updated_gradients(m);
}

Sequential::TrainingGradients Sequential::training_backward(const Tensor& y, const LossSpec& spec) {
  Impl& m = *impl_;
  const char* who = "training_backward";
  const int64_t n = training_pass_rows(m, who);
  const LossConfig loss = parse_loss(spec, who);
  const LossKind kind = loss.kind;
  const std::string name(loss_rules(kind).name);
  ActivationKind act = m.final_activation();
  if (spec.from_logits) {
    const ActivationKind own = loss_rules(kind).logits;
    // A final softmax (sigmoid) under from_logits: its input is taken back as the logits, as
    // fit's step and Keras 3 on TensorFlow take it.
    if (act != ActivationKind::linear && act != own)
      throw Error(who, fmt::format("{} with from_logits=True needs logits, but the last layer "
                                   "({}) has activation '{}'",
                                   spec.name, m.layers.back().name, activation_name(act)));
    act = own;
  }
  m.check_output_for_loss(kind, name, {});
  m.check_targets(y, n, who, kind, name);
  m.tape.ready = false;  // the backward pass reuses the pass's buffers
  Impl::Plan& plan = m.plans.at(n);
  m.backend->upload(plan.targets.as<void>(), y.data(), static_cast<std::size_t>(y.size()) * 4);
  m.write_counters(m.eval_counters(), StepCounters{});
  // A frozen layer's gradients are not computed: zero, as in gradients().
  m.backend->fill(m.arena.as<float>() + m.arena_floats, 0.0f, m.arena_floats);
  m.backend->set_scope("loss");
  m.backend->loss_forward_backward(loss, act, m.final_output(plan, true), plan.targets.as<float>(),
                                   nullptr, nullptr, plan.grads[0].as<float>(), n, m.output_width(),
                                   m.eval_counters(), n);
  m.backward(&plan, n);
  m.backend->set_scope("");
  const StepCounters c = m.read_counters(m.eval_counters());
  TrainingGradients out;
  out.loss = c.loss_sum / static_cast<double>(n);
  out.gradients = updated_gradients(m);
  return out;
}

std::vector<std::string> Sequential::trainable_gradient_names() const {
  const Impl& m = *impl_;
  std::vector<std::string> names;
  if (m.built && !m.trains.empty())
    for (const Impl::Param& p : m.params)
      if (m.updates(p)) names.push_back(p.name);
  return names;
}

void Sequential::apply_gradients(const std::vector<NamedTensor>& gradients) {
  Impl& m = *impl_;
  const char* who = "apply_gradients";
  m.require_compiled(who);
  require_one_process(m.ranks(), who);
  if (m.fitting) throw Error(who, "called during fit (from a callback)");
  if (!m.built || m.arena.bytes() == 0)
    throw Error(who, "the model has no weights yet: run it on data first");
  std::vector<const Impl::Param*> updated;
  for (const Impl::Param& p : m.params)
    if (m.updates(p)) updated.push_back(&p);
  if (gradients.size() != updated.size())
    throw Error(who, fmt::format("the model has {} trainable weight tensors, {} gradients were "
                                 "given: give one for each",
                                 updated.size(), gradients.size()));
  for (std::size_t i = 0; i < updated.size(); ++i) {
    const Impl::Param& p = *updated[i];
    if (gradients[i].name != p.name || gradients[i].value.shape() != p.shape)
      throw Error(who, fmt::format("gradient {} is '{}' of shape {}, expected '{}' of shape {}", i,
                                   gradients[i].name, shape_to_string(gradients[i].value.shape()),
                                   p.name, shape_to_string(p.shape)));
  }
  m.backend->synchronize();
  ++m.passes;
  for (std::size_t i = 0; i < updated.size(); ++i)
    m.backend->upload(m.grad(*updated[i]), gradients[i].value.data(),
                      static_cast<std::size_t>(updated[i]->n) * 4);
  m.backend->set_scope("optimizer");
  m.backend->optimizer_step(m.opt, m.trainable_slots, m.train_counters());
  m.backend->set_scope("");
  m.backend->synchronize();
}

void Sequential::use_optimizer(OptimizerConfig optimizer) {
  Impl& m = *impl_;
  m.require_compiled("use_optimizer");
  if (m.fitting) throw Error("use_optimizer", "called during fit (from a callback)");
  m.opt = optimizer;
  m.graphs_dirty = true;             // a captured step holds the optimizer's settings
  if (m.arena.bytes() == 0) return;  // allocate_parameters starts the state for it
  m.backend->synchronize();
  if (Impl::uses_slot3(m.opt) != m.arena_slot3) {
    // To or from Adam's amsgrad: a new arena with (or without) the third slot, the weights kept.
    std::vector<float> values(static_cast<std::size_t>(m.arena_floats));
    m.backend->download(values.data(), m.arena.as<float>(), values.size() * sizeof(float));
    m.allocate_parameters();  // a fresh state (Adagrad's start included), new counters
    m.backend->upload(m.arena.as<float>(), values.data(), values.size() * sizeof(float));
    return;
  }
  // Keras's accumulators of Adagrad start at its initial value, every other slot at zero.
  m.backend->fill(m.arena.as<float>() + 2 * m.arena_floats, initial_slot_value(m.opt),
                  m.arena_floats);
  m.backend->fill(m.arena.as<float>() + 3 * m.arena_floats, 0.0f, m.arena_floats);
  if (m.arena_slot3)
    m.backend->fill(m.arena.as<float>() + 4 * m.arena_floats, 0.0f, m.arena_floats);
  m.write_counters(m.train_counters(), StepCounters{});
}

// ---- introspection and weights --------------------------------------------------------------
std::string Sequential::summary() const {
  const Impl& m = *impl_;
  std::string s = fmt::format("Model: \"{}\"\n", m.name);
  // A graph that is not a chain: Keras's "Connected to" column, the layers each reads.
  // A shared layer's row is its first call's: its last call's output shape, and what each of
  // its calls reads (Keras's name[node][tensor], node being the call's place among the layer's).
  bool chain = true;
  for (std::size_t i = 1; i < m.inputs.size(); ++i)
    chain =
        chain && m.inputs[i] == std::vector<int>{static_cast<int>(i) - 1} && m.shared_with[i] < 0;
  const std::vector<int64_t> node = call_numbers(m.shared_with);
  std::vector<std::size_t> last(m.layers.size());  // per first call, the layer's last
  for (std::size_t i = 0; i < m.layers.size(); ++i) last[m.first_call(i)] = i;
  std::size_t last_row = 0;  // the table's last row: the last first call
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (m.shared_with[i] < 0) last_row = i;
  const std::size_t width = chain ? 65 : 98;
  const std::string rule(width, '_');
  const std::string thick(width, '=');
  s += rule + "\n";
  s += fmt::format("{:<29}{:<26}{:>10}", " Layer (type)", "Output Shape", "Param #");
  s += chain ? "\n" : "   Connected to\n";
  s += thick + "\n";
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (m.shared_with[i] >= 0) continue;
    const Layer& l = m.layers[i];
    std::string shape = "?";
    int64_t count = 0;
    if (m.built) {
      Shape full = {-1};
      for (int64_t d : m.info[last[i]].out_shape) full.push_back(d);
      shape = shape_to_string(full);
      shape.replace(shape.find("-1"), 2, "None");
      for (const auto& p : m.params)
        if (p.layer == static_cast<int>(i)) count += p.n;
    }
    // A long "name (Type)" ("batch_normalization_1 (BatchNormalization)") keeps a space before
    // the shape.
    const std::string cell = " " + l.name + " (" + std::string(layer_type_name(l.type)) + ")";
    s += fmt::format("{:<{}}{:<26}{:>10}", cell, std::max<std::size_t>(29, cell.size() + 1), shape,
                     count);
    if (!chain) {
      std::string from;
      for (std::size_t k = i; k < m.layers.size(); ++k)
        if (m.first_call(k) == i)
          for (int j : m.inputs[k])
            from += fmt::format("{}{}[{}][0]", from.empty() ? "" : ", ",
                                m.layers[static_cast<std::size_t>(j)].name,
                                node[static_cast<std::size_t>(j)]);
      s += "   " + (from.empty() ? std::string("-") : from);
    }
    s += "\n" + (i != last_row ? std::string(width, ' ') : thick) + "\n";
  }
  const int64_t total = count_params(), trainable = trainable_params();
  // Keras's byte counts (float32): B, KB, MB, ... whichever keeps the number below 1024.
  auto bytes = [](int64_t n) {
    double b = static_cast<double>(n) * 4;
    const char* units[] = {"B", "KB", "MB", "GB", "TB"};
    std::size_t u = 0;
    for (; b >= 1024 && u + 1 < std::size(units); ++u) b /= 1024;
    return fmt::format("{:.2f} {}", b, units[u]);
  };
  s += fmt::format("Total params: {} ({})\n", total, bytes(total));
  s += fmt::format("Trainable params: {} ({})\n", trainable, bytes(trainable));
  s += fmt::format("Non-trainable params: {} ({})\n", total - trainable, bytes(total - trainable));
  s += rule + "\n";
  return s;
}

int64_t Sequential::count_params() const { return impl_->param_count(); }
int64_t Sequential::trainable_params() const { return impl_->param_count(true); }
const std::vector<Layer>& Sequential::layers() const { return impl_->layers; }

void Sequential::set_trainable(std::size_t layer, bool trainable) {
  Impl& m = *impl_;
  if (layer >= m.layers.size())
    throw Error("set_trainable", fmt::format("layer index {} is out of range: the model has {}",
                                             layer, m.layers.size()));
  // Every call of a shared layer is the one layer.
  const std::size_t first = m.first_call(layer);
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (m.first_call(i) == first) m.layers[i].trainable = trainable;
}
bool Sequential::functional() const { return impl_->functional; }
const std::vector<std::vector<int>>& Sequential::layer_inputs() const { return impl_->inputs; }
const std::vector<int>& Sequential::layer_shared_with() const { return impl_->shared_with; }
const std::string& Sequential::name() const { return impl_->name; }
Shape Sequential::input_shape() const { return impl_->input_shape; }
LayerGraph Sequential::layer_graph() const {
  const Impl& m = *impl_;
  return LayerGraph{m.layers, m.inputs, m.model_inputs,
                    m.model_outputs.size() > 1 ? m.model_outputs : std::vector<int>{},
                    m.shared_with};
}
const std::vector<int>& Sequential::input_layers() const { return impl_->model_inputs; }
const std::vector<int>& Sequential::output_layers() const { return impl_->model_outputs; }
std::vector<Shape> Sequential::layer_output_shapes() const {
  std::vector<Shape> shapes;
  if (impl_->built)
    for (const auto& li : impl_->info) shapes.push_back(li.out_shape);
  return shapes;
}
bool Sequential::compiled() const { return impl_->is_compiled; }
std::string Sequential::device_name() const {
  return impl_->backend ? impl_->backend->device_name() : "none";
}
const std::string& Sequential::precision() const { return impl_->copts.precision; }
const std::string& Sequential::fused_step_note() const { return impl_->fused_note; }
const OptimizerConfig& Sequential::optimizer() const { return impl_->opt; }
const std::string& Sequential::loss_name() const { return impl_->loss_name; }
bool Sequential::from_logits() const { return impl_->from_logits; }
double Sequential::loss_parameter() const {
  if (loss_rules(impl_->loss.kind).parameter.empty())
    return std::numeric_limits<double>::quiet_NaN();
  return impl_->loss.parameter;
}

std::vector<NamedTensor> Sequential::get_weights() const {
  const Impl& m = *impl_;
  std::vector<NamedTensor> out;
  if (!m.built || m.arena.bytes() == 0) return out;
  m.backend->synchronize();
  for (const auto& p : m.params) {
    Tensor t(p.shape);
    m.backend->download(t.data(), m.value(p), static_cast<std::size_t>(p.n) * 4);
    out.push_back({p.name, std::move(t)});
  }
  return out;
}

void Sequential::set_weights(const std::vector<NamedTensor>& weights) {
  Impl& m = *impl_;
  m.require_compiled("set_weights");
  if (!m.built) throw Error("set_weights", "the model's input shape is not known yet");
  if (m.arena.bytes() == 0) m.allocate_parameters();
  if (weights.size() != m.params.size())
    throw Error("set_weights", fmt::format("the model has {} weight tensors, {} were given",
                                           m.params.size(), weights.size()));
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const auto& p = m.params[i];
    if (weights[i].name != p.name || weights[i].value.shape() != p.shape)
      throw Error("set_weights",
                  fmt::format("weight {} is '{}' of shape {}, expected '{}' of shape {}", i,
                              weights[i].name, shape_to_string(weights[i].value.shape()), p.name,
                              shape_to_string(p.shape)));
  }
  m.backend->synchronize();
  ++m.passes;  // a training pass before these weights is not differentiated with them
  for (std::size_t i = 0; i < weights.size(); ++i)
    m.backend->upload(m.value(m.params[i]), weights[i].value.data(),
                      static_cast<std::size_t>(m.params[i].n) * 4);
}

std::vector<NamedTensor> Sequential::get_optimizer_state() const {
  const Impl& m = *impl_;
  std::vector<NamedTensor> out;
  if (!m.built || m.arena.bytes() == 0) return out;
  m.backend->synchronize();
  for (const auto& p : m.params)
    for (int k = 1; k <= m.state_slots(); ++k) {
      Tensor t(p.shape);
      m.backend->download(t.data(), m.slot(p, k), static_cast<std::size_t>(p.n) * 4);
      out.push_back({p.name + "/slot" + std::to_string(k), std::move(t)});
    }
  StepCounters c = m.read_counters(m.train_counters());
  out.push_back({"optimizer/step", Tensor({1}, {static_cast<float>(c.step)})});
  return out;
}

void Sequential::set_optimizer_state(const std::vector<NamedTensor>& state) {
  Impl& m = *impl_;
  m.require_compiled("set_optimizer_state");
  if (!m.built) throw Error("set_optimizer_state", "the model's input shape is not known yet");
  if (m.arena.bytes() == 0) m.allocate_parameters();
  const auto slots = static_cast<std::size_t>(m.state_slots());
  if (state.size() != m.params.size() * slots + 1)
    throw Error("set_optimizer_state",
                fmt::format("the optimizer state does not match this model: {} tensors, expected "
                            "{} ({} slots per weight and the step)",
                            state.size(), m.params.size() * slots + 1, slots));
  std::size_t i = 0;
  for (const auto& p : m.params)
    for (int k = 1; k <= m.state_slots(); ++k, ++i) {
      if (state[i].value.shape() != p.shape)
        throw Error("set_optimizer_state", "state '" + state[i].name + "' has shape " +
                                               shape_to_string(state[i].value.shape()) +
                                               ", expected " + shape_to_string(p.shape));
      m.backend->upload(m.slot(p, k), state[i].value.data(), static_cast<std::size_t>(p.n) * 4);
    }
  StepCounters c = m.read_counters(m.train_counters());
  c.step = static_cast<int64_t>(state.back().value[0]);
  m.write_counters(m.train_counters(), c);
}

int64_t Sequential::optimizer_steps() const {
  if (!impl_->is_compiled || impl_->counters.bytes() == 0) return 0;
  return impl_->read_counters(impl_->train_counters()).step;
}

void Sequential::set_optimizer_steps(int64_t steps) {
  Impl& m = *impl_;
  m.require_compiled("set_optimizer_steps");
  if (steps < 0) throw Error("set_optimizer_steps", "the step count must not be negative");
  if (!m.built) throw Error("set_optimizer_steps", "the model's input shape is not known yet");
  if (m.arena.bytes() == 0) m.allocate_parameters();
  StepCounters c = m.read_counters(m.train_counters());
  c.step = steps;
  m.write_counters(m.train_counters(), c);
}

const std::vector<MetricSpec>& Sequential::metric_specs() const { return impl_->metrics; }

std::vector<std::string> Sequential::metrics() const {
  std::vector<std::string> names;
  for (const MetricSpec& spec : impl_->metrics) names.push_back(metric_identifier(spec));
  return names;
}

void Sequential::stop_training() { impl_->stop_requested = true; }
double Sequential::learning_rate() const { return impl_->opt.schedule.base; }
void Sequential::set_learning_rate(double lr) {
  if (!(lr > 0)) throw Error("set_learning_rate", "the learning rate must be positive");
  // Keras refuses it too (TypeError): replacing the schedule's base would silently change it.
  if (impl_->opt.schedule.decay_steps > 0)
    throw Error("set_learning_rate",
                "the optimizer's learning rate is a schedule (ExponentialDecay), so it is not "
                "settable; compile with a number as the learning rate to change it in training");
  impl_->opt.schedule.base = static_cast<float>(lr);
  impl_->graphs_dirty = true;  // a captured step holds the optimizer's settings
}

}  // namespace crossover
