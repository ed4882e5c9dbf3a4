// The model's state: the layers' states built for an input shape, the parameters allocated, the
// step counters read and written, the ranks' parameters shared.

#include <cstddef>

#include "core/error.h"
#include "nn/device_memory.h"
#include "nn/layers/kind.h"
#include "nn/model/impl.h"

namespace crossover {

Shape Sequential::Impl::with_channel(const Shape& sample_shape, const Shape& declared) {
  Shape one = sample_shape;
  one.push_back(1);
  return one == declared ? declared : sample_shape;
}

void Sequential::Impl::build(const Shape& given_shape) {
  const Layer& first = graph.layers.front();
  const Shape& declared =
      built ? input_shape : (graph.several_inputs() ? graph.packed_shape() : first.input_shape);
  const Shape sample_shape = declared.empty() ? given_shape : with_channel(given_shape, declared);
  if (graph.several_inputs() && sample_shape != declared)
    throw Error("input", "the model's " + std::to_string(graph.model_inputs.size()) +
                             " inputs take packed rows of shape " + shape_to_string(declared) +
                             " (their values side by side), got " + shape_to_string(sample_shape));
  if (built) {
    if (sample_shape != input_shape)
      throw Error("input", "the model expects samples of shape " + shape_to_string(input_shape) +
                               ", got " + shape_to_string(sample_shape));
    return;
  }
  if (sample_shape.empty()) throw Error("input", "samples must have at least one dimension");
  input_shape = sample_shape;
  info.assign(graph.layers.size(), {});
  arena.params.clear();
  int64_t offset = 0;
  for (std::size_t i = 0; i < graph.layers.size(); ++i) {
    const Layer& l = graph.layers[i];
    LayerInfo& li = info[i];
    const bool own_input = graph.inputs[i].empty() && graph.several_inputs();
    if (graph.inputs[i].empty()) li.in_shapes = {own_input ? l.input_shape : sample_shape};
    for (int j : graph.inputs[i])
      li.in_shapes.push_back(info[static_cast<std::size_t>(j)].out_shape);
    build_layer_state(l, static_cast<int>(i), li, arena.params, offset, graph.shared_with[i]);
    if (own_input) li.aliases_input = false;  // its columns of the packed batch, copied
  }
  mark_gradients();
  if (is_compiled) losses.check_losses();
  arena.floats = offset;
  built = true;
}

void Sequential::Impl::mark_gradients() {
  std::vector<char> own(graph.layers.size(), 0);  // updated parameters (a second call: the first's)
  for (const Param& p : arena.params)
    if (updates(p)) own[static_cast<std::size_t>(p.layer)] = 1;
  needs_grad.assign(graph.layers.size(), false);
  for (std::size_t i = 0; i < graph.layers.size(); ++i) {
    needs_grad[i] = own[graph.first_call(i)] != 0;
    for (int j : graph.inputs[i])
      needs_grad[i] = needs_grad[i] || needs_grad[static_cast<std::size_t>(j)];
  }
}

void Sequential::Impl::take_trainable() {
  trains.clear();
  for (const Layer& l : graph.layers) trains.push_back(l.trainable ? 1 : 0);
  if (built) mark_gradients();
}

void Sequential::Impl::init(LayerGraph g, std::string model_name, bool is_functional) {
  graph = ModelGraph(std::move(g), std::move(model_name), is_functional);
  take_trainable();
  const Layer& first = graph.layers.front();
  if (graph.several_inputs())
    build(graph.packed_shape());
  else if (layer_kind(first).declares_input() && !first.input_shape.empty())
    build(first.input_shape);
}

void Sequential::Impl::build_for(const Tensor& x, const char* who) {
  if (x.rank() < 2)
    throw Error(who, "x must have shape (samples, features...), got " + shape_to_string(x.shape()));
  const bool was_built = built;
  build(sample_shape_of(x));
  if (!was_built || !arena.allocated()) allocate_parameters();
}

void Sequential::Impl::allocate_parameters() {
  ++passes;
  steps.clear();
  arena.allocate(*backend, graph, trains, opt);
  const std::vector<StepCounters> zero(2 * static_cast<std::size_t>(losses.tallies()));
  counters = DeviceBlock(*backend, zero.size() * sizeof(StepCounters));
  backend->upload(counters.as<void>(), zero.data(), zero.size() * sizeof(StepCounters));
  if (copts.initialize_weights) arena.initialize(*backend, copts.seed);
}

std::vector<StepCounters> Sequential::Impl::read_tally(const StepCounters* c) const {
  std::vector<StepCounters> t(static_cast<std::size_t>(losses.tallies()));
  backend->synchronize();
  backend->download(t.data(), c, t.size() * sizeof(StepCounters));
  return t;
}

StepCounters Sequential::Impl::read_counters(const StepCounters* c) const {
  StepCounters h;
  backend->synchronize();
  backend->download(&h, c, sizeof h);
  return h;
}

void Sequential::Impl::write_counters(StepCounters* c, const StepCounters& h) {
  backend->synchronize();
  backend->upload(c, &h, sizeof h);
}

void Sequential::Impl::write_tally(StepCounters* c, const std::vector<StepCounters>& t) {
  backend->synchronize();
  backend->upload(c, t.data(), t.size() * sizeof(StepCounters));
}

void Sequential::Impl::share_parameters() {
  if (ranks() < 2) return;
  StepCounters c = read_counters(train_counters());
  exchange->share_parameters(*backend, arena.block.as<void>(), arena.block.bytes(), c.step);
  write_counters(train_counters(), c);
}

Logs Sequential::Impl::logs_of(const StepCounters* c) const {
  Logs logs;
  for (const auto& [key, value] : losses.values_of(read_tally(c), "")) logs[key] = value;
  return logs;
}

}  // namespace crossover
