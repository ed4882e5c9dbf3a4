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
#include <cstddef>
#include <limits>

#include "backends/losses/list.h"
#include "core/error.h"
#include "nn/device_memory.h"
#include "nn/layers/kind.h"
#include "nn/metrics.h"
#include "nn/model/impl.h"

namespace crossover {

// ---------------------------------------------------------------------------------------------
Sequential::Sequential(std::vector<Layer> layers, std::string name)
    : impl_(std::make_unique<Impl>()) {
  if (layers.empty()) throw Error("Sequential", "a model needs at least one layer");
  LayerGraph chain;
  chain.inputs.resize(layers.size());
  for (std::size_t i = 1; i < layers.size(); ++i) chain.inputs[i] = {static_cast<int>(i) - 1};
  chain.layers = std::move(layers);
  impl_->init(std::move(chain), std::move(name), false);
}

Sequential::Sequential(LayerGraph graph, std::string name) : impl_(std::make_unique<Impl>()) {
  if (graph.layers.empty()) throw Error(name, "a model needs at least one layer");
  if (graph.inputs.size() != graph.layers.size())
    throw Error(name, fmt::format("the graph lists the inputs of {} layers, but has {} layers",
                                  graph.inputs.size(), graph.layers.size()));
  impl_->init(std::move(graph), std::move(name), true);
}

Sequential::~Sequential() = default;
Sequential::Sequential(Sequential&&) noexcept = default;
Sequential& Sequential::operator=(Sequential&&) noexcept = default;

Tensor Sequential::predict(const Tensor& x, int64_t batch_size) {
  return predict(x, batch_size, {});
}

Tensor Sequential::predict(const Tensor& x, int64_t batch_size, const Callbacks& callbacks) {
  Impl& m = *impl_;
  m.require_compiled("predict");
  if (batch_size < 1) throw Error("predict", "batch_size must be at least 1");
  m.build_for(x, "predict");
  const int64_t n = x.dim(0), cols = m.input_width();
  Shape out_shape = {n};  // (n, the output's sample shape): (n, H, W, C) for images
  out_shape.insert(out_shape.end(), m.layers_output_shape().begin(), m.layers_output_shape().end());
  // Several outputs: (n, their values side by side), each output's flattened.
  int64_t packed = 0;
  for (int o : m.graph.model_outputs) packed += m.info[static_cast<std::size_t>(o)].out_width;
  if (m.graph.several_outputs()) out_shape = {n, packed};
  const int64_t c = m.graph.several_outputs() ? packed : m.output_width();
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
    if (!m.graph.several_outputs()) {
      m.backend->download(out.data() + b * c, m.final_output(plan, false),
                          static_cast<std::size_t>(rows * c) * sizeof(float));
    } else {
      int64_t column = 0;
      for (int o : m.graph.model_outputs) {
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
  if (!m.arena.allocated()) m.allocate_parameters();
  Shape x_shape = {rows};
  x_shape.insert(x_shape.end(), m.input_shape.begin(), m.input_shape.end());
  const Tensor x(x_shape);
  const Tensor y(loss_rules(m.losses.loss.kind).class_index_targets
                     ? Shape{rows}
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
  m.build_for(x, "gradients");
  m.check_xy(x, y, "gradients");
  const int64_t n = x.dim(0);
  Impl::Plan& plan = m.plan_for(n);
  m.backend->upload(plan.input.as<void>(), x.data(), static_cast<std::size_t>(x.size()) * 4);
  m.backend->upload(plan.targets.as<void>(), y.data(), static_cast<std::size_t>(y.size()) * 4);
  for (std::size_t i = 0; i < m.graph.layers.size(); ++i)
    if (layer_kind(m.graph.layers[i]).random_in_training(m.graph.layers[i]))
      throw Error("gradients", "dropout layers must have rate 0 for a deterministic gradient");
  // A training pass (dropout at rate 0 keeps every unit), then its backward pass; the layers'
  // loss terms (activity regularizers, add_loss) join the loss's gradient, as in fit's step.
  m.forward(plan, n, true, false, 0, m.eval_counters(), 0, n);
  // A frozen layer's gradients are not computed: they read zero.
  m.backend->fill(m.arena.data() + m.arena.floats, 0.0f, m.arena.floats);
  m.backend->loss_forward_backward(m.losses.loss, m.losses.loss_activation(),
                                   m.final_output(plan, true), plan.targets.as<float>(), nullptr,
                                   nullptr, plan.grads[0].as<float>(), n, m.output_width(), nullptr,
                                   n);
  m.backward(&plan, n, nullptr, n);
  m.backend->synchronize();
  std::vector<NamedTensor> out;
  for (const Impl::Param& p : m.arena.params) {
    Tensor t(p.shape);
    m.backend->download(t.data(), m.arena.grad(p), static_cast<std::size_t>(p.n) * 4);
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
  m.build_for(x, "training_forward");
  if (x.dim(0) == 0) throw Error("training_forward", "x holds no samples");
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
  if (const ActivationKind act = m.losses.final_activation(); act != ActivationKind::linear) {
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
  if (!m.tape.ready || m.tape.pass != m.passes || !m.steps.find(m.tape.rows))
    throw Error(who,
                "no training pass to differentiate: the model ran or its weights changed since "
                "its last training_forward (or it had none), so its outputs then are not what "
                "the gradients would be of; call training_forward again");
  return m.tape.rows;
}

// The gradients of a backward pass just run: one per parameter a training step updates.
std::vector<NamedTensor> updated_gradients(Sequential::Impl& m) {
  std::vector<NamedTensor> out;
  for (const Sequential::Impl::Param& p : m.arena.params) {
    if (!m.updates(p)) continue;
    Tensor t(p.shape);
    m.backend->download(t.data(), m.arena.grad(p), static_cast<std::size_t>(p.n) * 4);
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
  Impl::Plan& plan = *m.steps.find(n);
  float* g = plan.grads[0].as<float>();
  m.backend->upload(g, output_gradient.data(), static_cast<std::size_t>(n * c) * sizeof(float));
  m.write_counters(m.eval_counters(), StepCounters{});
  m.backend->fill(m.arena.data() + m.arena.floats, 0.0f, m.arena.floats);
  m.backend->set_scope("outputs");
  if (const int f = m.losses.final_activation_layer(); f >= 0) {
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
  ActivationKind act = m.losses.final_activation();
  if (spec.from_logits) {
    const ActivationKind own = loss_rules(kind).logits;
    // A final softmax (sigmoid) under from_logits: its input is taken back as the logits, as
    // fit's step and Keras 3 on TensorFlow take it.
    if (act != ActivationKind::linear && act != own)
      throw Error(who, fmt::format("{} with from_logits=True needs logits, but the last layer "
                                   "({}) has activation '{}'",
                                   spec.name, m.graph.layers.back().name, activation_name(act)));
    act = own;
  }
  m.losses.check_output_for_loss(kind, name, {});
  m.check_targets(y, n, who, kind, name);
  m.tape.ready = false;  // the backward pass reuses the pass's buffers
  Impl::Plan& plan = *m.steps.find(n);
  m.backend->upload(plan.targets.as<void>(), y.data(), static_cast<std::size_t>(y.size()) * 4);
  m.write_counters(m.eval_counters(), StepCounters{});
  // A frozen layer's gradients are not computed: zero, as in gradients().
  m.backend->fill(m.arena.data() + m.arena.floats, 0.0f, m.arena.floats);
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
    for (const Impl::Param& p : m.arena.params)
      if (m.updates(p)) names.push_back(p.name);
  return names;
}

void Sequential::apply_gradients(const std::vector<NamedTensor>& gradients) {
  Impl& m = *impl_;
  const char* who = "apply_gradients";
  m.require_compiled(who);
  require_one_process(m.ranks(), who);
  if (m.fitting) throw Error(who, "called during fit (from a callback)");
  if (!m.built || !m.arena.allocated())
    throw Error(who, "the model has no weights yet: run it on data first");
  std::vector<const Impl::Param*> updated;
  for (const Impl::Param& p : m.arena.params)
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
    m.backend->upload(m.arena.grad(*updated[i]), gradients[i].value.data(),
                      static_cast<std::size_t>(updated[i]->n) * 4);
  m.backend->set_scope("optimizer");
  m.backend->optimizer_step(m.opt, m.arena.trainable_slots, m.train_counters());
  m.backend->set_scope("");
  m.backend->synchronize();
}

void Sequential::use_optimizer(OptimizerConfig optimizer) {
  Impl& m = *impl_;
  m.require_compiled("use_optimizer");
  if (m.fitting) throw Error("use_optimizer", "called during fit (from a callback)");
  m.opt = optimizer;
  m.graphs_dirty = true;             // a captured step holds the optimizer's settings
  if (!m.arena.allocated()) return;  // allocate_parameters starts the state for it
  m.backend->synchronize();
  if (optimizer_third_slot(m.opt) != m.arena.slot3) {
    // To or from Adam's amsgrad: a new arena with (or without) the third slot, the weights kept.
    std::vector<float> values(static_cast<std::size_t>(m.arena.floats));
    m.backend->download(values.data(), m.arena.data(), values.size() * sizeof(float));
    m.allocate_parameters();  // a fresh state (Adagrad's start included), new counters
    m.backend->upload(m.arena.data(), values.data(), values.size() * sizeof(float));
    return;
  }
  // Keras's accumulators of Adagrad start at its initial value, every other slot at zero.
  m.backend->fill(m.arena.data() + 2 * m.arena.floats, initial_slot_value(m.opt), m.arena.floats);
  m.backend->fill(m.arena.data() + 3 * m.arena.floats, 0.0f, m.arena.floats);
  if (m.arena.slot3) m.backend->fill(m.arena.data() + 4 * m.arena.floats, 0.0f, m.arena.floats);
  m.write_counters(m.train_counters(), StepCounters{});
}

// ---- introspection and weights --------------------------------------------------------------
std::string Sequential::summary() const {
  const Impl& m = *impl_;
  std::string s = fmt::format("Model: \"{}\"\n", m.graph.name);
  // A graph that is not a chain: Keras's "Connected to" column, the layers each reads.
  // A shared layer's row is its first call's: its last call's output shape, and what each of
  // its calls reads (Keras's name[node][tensor], node being the call's place among the layer's).
  bool chain = true;
  for (std::size_t i = 1; i < m.graph.inputs.size(); ++i)
    chain = chain && m.graph.inputs[i] == std::vector<int>{static_cast<int>(i) - 1} &&
            m.graph.shared_with[i] < 0;
  const std::vector<int64_t> node = call_numbers(m.graph.shared_with);
  std::vector<std::size_t> last(m.graph.layers.size());  // per first call, the layer's last
  for (std::size_t i = 0; i < m.graph.layers.size(); ++i) last[m.graph.first_call(i)] = i;
  std::size_t last_row = 0;  // the table's last row: the last first call
  for (std::size_t i = 0; i < m.graph.layers.size(); ++i)
    if (m.graph.shared_with[i] < 0) last_row = i;
  const std::size_t width = chain ? 65 : 98;
  const std::string rule(width, '_');
  const std::string thick(width, '=');
  s += rule + "\n";
  s += fmt::format("{:<29}{:<26}{:>10}", " Layer (type)", "Output Shape", "Param #");
  s += chain ? "\n" : "   Connected to\n";
  s += thick + "\n";
  for (std::size_t i = 0; i < m.graph.layers.size(); ++i) {
    if (m.graph.shared_with[i] >= 0) continue;
    const Layer& l = m.graph.layers[i];
    std::string shape = "?";
    int64_t count = 0;
    if (m.built) {
      Shape full = {-1};
      for (int64_t d : m.info[last[i]].out_shape) full.push_back(d);
      shape = shape_to_string(full);
      shape.replace(shape.find("-1"), 2, "None");
      for (const auto& p : m.arena.params)
        if (p.layer == static_cast<int>(i)) count += p.n;
    }
    // A long "name (Type)" ("batch_normalization_1 (BatchNormalization)") keeps a space before
    // the shape.
    const std::string cell = " " + l.name + " (" + std::string(layer_type_name(l.type)) + ")";
    s += fmt::format("{:<{}}{:<26}{:>10}", cell, std::max<std::size_t>(29, cell.size() + 1), shape,
                     count);
    if (!chain) {
      std::string from;
      for (std::size_t k = i; k < m.graph.layers.size(); ++k)
        if (m.graph.first_call(k) == i)
          for (int j : m.graph.inputs[k])
            from += fmt::format("{}{}[{}][0]", from.empty() ? "" : ", ",
                                m.graph.layers[static_cast<std::size_t>(j)].name,
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
const std::vector<Layer>& Sequential::layers() const { return impl_->graph.layers; }

void Sequential::set_trainable(std::size_t layer, bool trainable) {
  Impl& m = *impl_;
  if (layer >= m.graph.layers.size())
    throw Error("set_trainable", fmt::format("layer index {} is out of range: the model has {}",
                                             layer, m.graph.layers.size()));
  // Every call of a shared layer is the one layer.
  const std::size_t first = m.graph.first_call(layer);
  for (std::size_t i = 0; i < m.graph.layers.size(); ++i)
    if (m.graph.first_call(i) == first) m.graph.layers[i].trainable = trainable;
}
bool Sequential::functional() const { return impl_->graph.functional; }
const std::vector<std::vector<int>>& Sequential::layer_inputs() const {
  return impl_->graph.inputs;
}
const std::vector<int>& Sequential::layer_shared_with() const { return impl_->graph.shared_with; }
const std::string& Sequential::name() const { return impl_->graph.name; }
Shape Sequential::input_shape() const { return impl_->input_shape; }
LayerGraph Sequential::layer_graph() const {
  const Impl& m = *impl_;
  return LayerGraph{m.graph.layers, m.graph.inputs, m.graph.model_inputs,
                    m.graph.model_outputs.size() > 1 ? m.graph.model_outputs : std::vector<int>{},
                    m.graph.shared_with};
}
const std::vector<int>& Sequential::input_layers() const { return impl_->graph.model_inputs; }
const std::vector<int>& Sequential::output_layers() const { return impl_->graph.model_outputs; }
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
const std::string& Sequential::loss_name() const { return impl_->losses.loss_name; }
bool Sequential::from_logits() const { return impl_->losses.from_logits; }
double Sequential::loss_parameter() const {
  if (loss_rules(impl_->losses.loss.kind).parameter.empty())
    return std::numeric_limits<double>::quiet_NaN();
  return impl_->losses.loss.parameter;
}

std::vector<NamedTensor> Sequential::get_weights() const {
  const Impl& m = *impl_;
  std::vector<NamedTensor> out;
  if (!m.built || !m.arena.allocated()) return out;
  m.backend->synchronize();
  for (const auto& p : m.arena.params) {
    Tensor t(p.shape);
    m.backend->download(t.data(), m.arena.value(p), static_cast<std::size_t>(p.n) * 4);
    out.push_back({p.name, std::move(t)});
  }
  return out;
}

void Sequential::set_weights(const std::vector<NamedTensor>& weights) {
  Impl& m = *impl_;
  m.require_compiled("set_weights");
  if (!m.built) throw Error("set_weights", "the model's input shape is not known yet");
  if (!m.arena.allocated()) m.allocate_parameters();
  if (weights.size() != m.arena.params.size())
    throw Error("set_weights", fmt::format("the model has {} weight tensors, {} were given",
                                           m.arena.params.size(), weights.size()));
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const auto& p = m.arena.params[i];
    if (weights[i].name != p.name || weights[i].value.shape() != p.shape)
      throw Error("set_weights",
                  fmt::format("weight {} is '{}' of shape {}, expected '{}' of shape {}", i,
                              weights[i].name, shape_to_string(weights[i].value.shape()), p.name,
                              shape_to_string(p.shape)));
  }
  m.backend->synchronize();
  ++m.passes;  // a training pass before these weights is not differentiated with them
  for (std::size_t i = 0; i < weights.size(); ++i)
    m.backend->upload(m.arena.value(m.arena.params[i]), weights[i].value.data(),
                      static_cast<std::size_t>(m.arena.params[i].n) * 4);
}

std::vector<NamedTensor> Sequential::get_optimizer_state() const {
  const Impl& m = *impl_;
  std::vector<NamedTensor> out;
  if (!m.built || !m.arena.allocated()) return out;
  m.backend->synchronize();
  for (const auto& p : m.arena.params)
    for (int k = 1; k <= m.arena.state_slots(); ++k) {
      Tensor t(p.shape);
      m.backend->download(t.data(), m.arena.slot(p, k), static_cast<std::size_t>(p.n) * 4);
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
  if (!m.arena.allocated()) m.allocate_parameters();
  const auto slots = static_cast<std::size_t>(m.arena.state_slots());
  if (state.size() != m.arena.params.size() * slots + 1)
    throw Error("set_optimizer_state",
                fmt::format("the optimizer state does not match this model: {} tensors, expected "
                            "{} ({} slots per weight and the step)",
                            state.size(), m.arena.params.size() * slots + 1, slots));
  std::size_t i = 0;
  for (const auto& p : m.arena.params)
    for (int k = 1; k <= m.arena.state_slots(); ++k, ++i) {
      if (state[i].value.shape() != p.shape)
        throw Error("set_optimizer_state", "state '" + state[i].name + "' has shape " +
                                               shape_to_string(state[i].value.shape()) +
                                               ", expected " + shape_to_string(p.shape));
      m.backend->upload(m.arena.slot(p, k), state[i].value.data(),
                        static_cast<std::size_t>(p.n) * 4);
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
  if (!m.arena.allocated()) m.allocate_parameters();
  StepCounters c = m.read_counters(m.train_counters());
  c.step = steps;
  m.write_counters(m.train_counters(), c);
}

const std::vector<MetricSpec>& Sequential::metric_specs() const { return impl_->losses.metrics; }

std::vector<std::string> Sequential::metrics() const {
  std::vector<std::string> names;
  for (const MetricSpec& spec : impl_->losses.metrics) names.push_back(metric_identifier(spec));
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
