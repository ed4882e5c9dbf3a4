// The model's graph: its layers, what each reads, the layers called more than once, its inputs
// and outputs, checked once when the model is made (nn/model/graph.h).
#include "nn/model/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

void ModelGraph::name_layers() {
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

bool ModelGraph::has_loss_terms() const {
  for (const Layer& l : layers)
    if (l.activity.any() || layer_kind(l).adds_loss()) return true;
  return false;
}

Shape ModelGraph::packed_shape() const {
  int64_t total = 0;
  for (int i : model_inputs)
    total += shape_size(layers[static_cast<std::size_t>(i)].input_shape,
                        layers[static_cast<std::size_t>(i)].name);
  return {total};
}

ModelGraph::ModelGraph(LayerGraph graph, std::string model_name, bool is_functional)
    : layers(std::move(graph.layers)),
      inputs(std::move(graph.inputs)),
      functional(is_functional),
      name(std::move(model_name)) {
  take_shared(std::move(graph.shared_with));
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
  set_model_outputs(std::move(graph.output_layers));
  for (std::size_t i = 0; i + 1 < n; ++i)
    if (readers[i] == 0 && !layer_kind(layers[i]).adds_loss() &&
        std::find(model_outputs.begin(), model_outputs.end(), static_cast<int>(i)) ==
            model_outputs.end())
      throw Error(layers[i].name, several_outputs()
                                      ? "no layer reads its output, and it is not one of the "
                                        "model's outputs"
                                      : "no layer reads its output, and it is not the model's "
                                        "output (the last layer): a model has one output");
  set_model_inputs(std::move(graph.input_layers));
}

// LayerGraph::shared_with: checked, each second call made a copy of its first call's layer, the
// layers named, and which calls add their gradients into a later one's (accumulates).
void ModelGraph::take_shared(std::vector<int> shares) {
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

void ModelGraph::set_model_outputs(std::vector<int> order) {
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

void ModelGraph::set_model_inputs(std::vector<int> order) {
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
  // The layers the outputs and the add_loss terms depend on, kept in their order (a layer reads
  // only earlier ones).
  std::vector<char> used(g_.layers.size(), 0);
  for (int o : outputs) used[static_cast<std::size_t>(o)] = 1;
  for (std::size_t i = 0; i < g_.layers.size(); ++i) {
    if (!layer_kind(g_.layers[i]).adds_loss()) continue;
    if (i > static_cast<std::size_t>(last))
      throw Error("GraphBuilder", fmt::format("the add_loss term {} comes after the model's last "
                                              "output: add it before",
                                              i));
    used[i] = 1;
  }
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

}  // namespace crossover
