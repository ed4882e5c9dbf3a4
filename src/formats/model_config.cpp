// Keras model JSON in and out (Keras 2 and Keras 3 `to_json()` formats): the model and its
// layers, Sequential and functional (the compile_config: model_config_compile.cpp).
#include "formats/model_config.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "formats/model_config_internal.h"
#include "nn/layers.h"
#include "nn/layers/keras_config.h"
#include "nn/layers/kind.h"

namespace crossover {

using model_config_detail::compile_config_json;
using model_config_detail::parse_json;

namespace {

using namespace keras_config;

constexpr std::size_t kMaxJsonBytes = 64u << 20;  // a model description is a few kB

}  // namespace

namespace model_config_detail {

json parse_json(std::string_view text, const std::string& where) {
  if (text.size() > kMaxJsonBytes)
    throw Error(where, fmt::format("{} bytes is too large for a model JSON (at most {})",
                                   text.size(), kMaxJsonBytes));
  struct TooDeep {};
  auto limit_depth = [](int depth, json::parse_event_t, json&) -> bool {
    if (depth > 64) throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit_depth);
  } catch (const TooDeep&) {
    throw Error(where, "the JSON is nested more than 64 levels deep: not a Keras model");
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    const auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw Error(where, fmt::format("malformed JSON at byte {}: {}", e.byte, printable(msg)));
  } catch (const json::exception& e) {  // e.g. a number too large for any C++ type
    std::string msg = e.what();
    const auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw Error(where, "malformed JSON: " + printable(msg));
  }
}

}  // namespace model_config_detail

namespace {

// ---- reading ---------------------------------------------------------------------------------

// A model config's "trainable" (true when absent). Keras's model.trainable = False freezes every
// layer of the model (its setter sets each layer's, and its trainable_weights are none).
bool model_trainable_field(const json& cfg, const std::string& where) {
  auto t = cfg.find("trainable");
  if (t == cfg.end() || t->is_null()) return true;
  if (!t->is_boolean())
    throw Error(where, "model field trainable: expected true or false, got " + brief(*t));
  return t->get<bool>();
}
void freeze_unless(bool model_trainable, std::vector<Layer>& layers) {
  if (model_trainable) return;
  for (Layer& l : layers) l.trainable = false;
}

// Validates shapes as the model would build them, before Sequential multiplies anything.
void check_sizes(const std::vector<Layer>& layers, const Shape& input, const std::string& where) {
  int64_t width = 1;
  for (int64_t d : input) width *= d;  // bounded by parse_shape
  for (const Layer& l : layers) width = layer_kind(l).check_size(l, width, input.back(), where);
}

Sequential functional_from_doc(const json& doc, const std::string& where);

Sequential sequential_from_doc(const json& doc, const std::string& where) {
  if (!doc.is_object())
    throw Error(where,
                "a Keras model JSON is an object with class_name and config, got " + brief(doc));
  auto cn = doc.find("class_name");
  if (cn == doc.end() || !cn->is_string())
    throw Error(where, "no class_name: this is not what Keras's model.to_json() writes");
  const std::string cls = cn->get<std::string>();
  if (cls == "Functional" || cls == "Model") return functional_from_doc(doc, where);
  if (cls != "Sequential")
    throw Error(where, "class_name " + printable(cls) +
                           " is not supported: only Sequential and functional models");
  auto cfg_it = doc.find("config");
  if (cfg_it == doc.end()) throw Error(where, "the model has no config");
  const json* layers_json = nullptr;
  std::string model_name = "sequential";
  Shape build_shape;
  bool model_trainable = true;
  const LayerRef model_ref{where, 0, "", "Sequential"};
  if (cfg_it->is_array()) {  // Keras 1 / early Keras 2: config is the layer list
    layers_json = &*cfg_it;
  } else if (cfg_it->is_object()) {
    const json& cfg = *cfg_it;
    auto l = cfg.find("layers");
    if (l == cfg.end() || !l->is_array())
      throw Error(where, "the model's config has no layers list");
    layers_json = &*l;
    if (auto n = cfg.find("name");
        n != cfg.end() && n->is_string() && !n->get<std::string>().empty())
      model_name = n->get<std::string>();
    model_trainable = model_trainable_field(cfg, where);
    // The model's own "dtype" (the global policy when Keras made it) is not read: Keras's
    // Sequential.from_config ignores it too; the layers' policies decide.
    if (auto b = cfg.find("build_input_shape"); b != cfg.end() && !b->is_null())
      build_shape = parse_shape(*b, true, model_ref, "build_input_shape");
  } else {
    throw Error(where, "the model's config is neither an object nor a layer list");
  }
  if (build_shape.empty()) {
    auto bc = doc.find("build_config");
    if (bc != doc.end() && bc->is_object()) {
      auto s = bc->find("input_shape");
      if (s != bc->end() && !s->is_null())
        build_shape = parse_shape(*s, true, model_ref, "build_config");
    }
  }
  if (layers_json->empty()) throw Error(where, "the model has no layers");
  if (layers_json->size() > 10000) throw Error(where, "the model has too many layers");

  std::vector<Layer> layers;
  std::set<std::string> names;
  Shape input;  // the model's declared per-sample input shape
  for (std::size_t i = 0; i < layers_json->size(); ++i) {
    ParsedLayer p = parse_layer((*layers_json)[i], i + 1, where, names);
    if (p.is_input) {
      if (i != 0)
        throw Error(where, fmt::format("layer {} '{}' (InputLayer): an InputLayer can only be the "
                                       "first layer",
                                       i + 1, printable(p.layer.name)));
      input = p.declared_input;
      p.layer.input_shape = input;
      layers.push_back(std::move(p.layer));
      continue;
    }
    const bool first_real =
        layers.empty() || (layers.size() == 1 && layer_kind(layers[0]).is_model_input());
    if (first_real && !p.declared_input.empty()) {
      if (!input.empty() && input != p.declared_input)
        throw Error(where, fmt::format("layer '{}' field batch_input_shape: {} disagrees with the "
                                       "InputLayer's {}",
                                       printable(p.layer.name), shape_to_string(p.declared_input),
                                       shape_to_string(input)));
      if (input.empty()) {
        input = p.declared_input;
        if (!layer_kind(p.layer).declares_input()) {
          Layer in = Input(input);
          in.name = p.layer.name.empty() ? "input_layer" : p.layer.name + "_input";
          if (names.count(in.name)) in.name += "_0";
          names.insert(in.name);
          layers.push_back(std::move(in));
        }
      }
    }
    layers.push_back(std::move(p.layer));
  }
  if (input.empty() && !build_shape.empty()) {
    input = build_shape;
    if (!layer_kind(layers[0]).declares_input()) {
      Layer in = Input(input);
      in.name = names.count("input_layer") ? "input_layer_0" : "input_layer";
      layers.insert(layers.begin(), std::move(in));
    }
  }
  // InputLayer then Flatten: one Flatten that declares the input, as Keras's summary shows it.
  if (layers.size() >= 2 && layer_kind(layers[0]).is_model_input() &&
      layer_kind(layers[1]).declares_input()) {
    layers.erase(layers.begin());
  }
  if (!input.empty() && layer_kind(layers[0]).declares_input()) layers[0].input_shape = input;
  if (!input.empty()) check_sizes(layers, input, where);
  freeze_unless(model_trainable, layers);
  try {
    return Sequential(std::move(layers), model_name);
  } catch (const Error& e) {
    throw Error(where, e.what());
  }
}

// ---- functional models ----------------------------------------------------------------------

// One call of a layer in a functional model's config: the layer (its place in the config's
// list) and the call's place among the layer's inbound nodes (Keras's node_index).
struct CallRef {
  std::string layer;
  int64_t node = 0;
  bool operator<(const CallRef& o) const {
    return layer != o.layer ? layer < o.layer : node < o.node;
  }
};

// [layer, node, tensor] (Keras's keras_history, and an input_layers/output_layers entry): the
// call it names; a tensor other than 0 (a layer of several outputs) is refused.
CallRef call_ref(const json& h, const std::string& who) {
  if (!h.is_array() || h.size() < 3 || !h[0].is_string() || !h[1].is_number_integer() ||
      !h[2].is_number_integer() || h[1].get<int64_t>() < 0)
    throw Error(who, "an inbound tensor's keras_history is not [layer, node, index]: " + brief(h));
  if (h[2].get<int64_t>() != 0)
    throw Error(who, "reads " + brief(h) + ": a layer with several outputs is not supported");
  return {h[0].get<std::string>(), h[1].get<int64_t>()};
}

// The calls one inbound node reads, from Keras 3's {"args": [tensor or [tensors...]],
// "kwargs": {}} (a tensor {"class_name": "__keras_tensor__", "config": {"keras_history":
// [name, node, index]}}) or tf.keras 2's [[name, node, index, kwargs], ...].
// The keyword arguments Keras 3 records for a call of a layer in a functional model. Keras 3.15
// writes {"training": false} for every plain call of a layer that takes a training argument
// (Dropout(0.1)(x)) and {"mask": null} for one that takes a mask (BatchNormalization): when the
// model runs, fit's, evaluate's and predict's own training flag replaces the recorded one
// (Functional's operation_fn), so false and null read as the call without them. A recorded
// training=True applies only to a model(x) with no training flag (Monte Carlo dropout), and a
// mask or any other argument changes the computation: each refused, naming it.
void check_call_kwargs(const json& kwargs, const std::string& who) {
  for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
    const json& v = it.value();
    if (it.key() == "training" && (v.is_null() || (v.is_boolean() && !v.get<bool>()))) continue;
    if (it.key() == "mask" && v.is_null()) continue;
    if (it.key() == "training")
      throw Error(who, "a layer called with training=" + brief(v) +
                           " (a layer kept in training mode in inference, as Monte Carlo "
                           "dropout does) is not supported (yet)");
    throw Error(who, "a layer called with the keyword argument " + printable(it.key()) + "=" +
                         brief(v) + " is not supported (yet)");
  }
}

std::vector<CallRef> inbound_calls(const json& node, const std::string& who) {
  std::vector<CallRef> names;
  auto history = [&](const json& h) { names.push_back(call_ref(h, who)); };
  auto tensor = [&](const json& t) {
    if (t.is_object() && t.value("class_name", "") == "__keras_tensor__") {
      auto c = t.find("config");
      if (c == t.end() || !c->is_object() || !c->contains("keras_history"))
        throw Error(who, "an inbound tensor without keras_history: " + brief(t));
      history((*c)["keras_history"]);
    } else if (t.is_array() && !t.empty() && t[0].is_string()) {
      history(t);  // tf.keras 2
    } else {
      throw Error(who,
                  "an inbound argument that is not a layer's output (a constant or another "
                  "value is not supported): " +
                      brief(t));
    }
  };
  if (node.is_object()) {  // Keras 3
    if (auto kw = node.find("kwargs"); kw != node.end() && kw->is_object())
      check_call_kwargs(*kw, who);
    auto args = node.find("args");
    if (args == node.end() || !args->is_array() || args->size() != 1)
      throw Error(who, "an inbound node's args is not one tensor or one list of tensors: " +
                           (args == node.end() ? std::string("none") : brief(*args)));
    const json& a = (*args)[0];
    if (a.is_array())
      for (const json& t : a) tensor(t);
    else
      tensor(a);
  } else if (node.is_array()) {  // tf.keras 2: [[name, node, index, kwargs], ...]
    for (const json& t : node) tensor(t);
  } else {
    throw Error(
        who, "an inbound node is neither Keras 3's object nor tf.keras 2's list: " + brief(node));
  }
  return names;
}

// ["name", 0, 0] or [["name", 0, 0], ...]: the calls a model's input_layers or output_layers
// names, in order (a dict of them, Keras's inputs={"a": ...}: its values, in order).
std::vector<CallRef> endpoints(const json& cfg, const char* key, const std::string& where) {
  auto it = cfg.find(key);
  if (it == cfg.end()) throw Error(where, std::string("the functional model has no ") + key);
  std::vector<json> list;
  if (it->is_array() && !it->empty() && it->front().is_array()) {
    list.assign(it->begin(), it->end());
  } else if (it->is_object() && !it->empty()) {
    for (const auto& [k, v] : it->items()) list.push_back(v);
  } else {
    list.push_back(*it);
  }
  if (list.size() > 10000) throw Error(where, std::string("too many ") + key);
  std::vector<CallRef> names;
  for (const json& e : list) {
    if (!e.is_array() || e.size() < 3 || !e[0].is_string())
      throw Error(where, std::string(key) + " is not [layer, node, index]: " + brief(*it));
    names.push_back(call_ref(e, where + ": " + key));
  }
  return names;
}

// A functional model's layers and their calls as the config lists them.
struct ConfigLayers {
  std::vector<Layer> layers;                             // in the config's order
  std::vector<std::vector<std::vector<CallRef>>> calls;  // per layer, per call: what it reads
  std::map<std::string, std::size_t> index;              // name -> place in `layers`
};

// The graph of the calls (LayerGraph: one entry per call; a layer's later calls share its
// first's weights), in an order where each reads only earlier ones. A model without shared layers
// listed so (as Keras and crossover write them): the config's order, as before shared layers.
// Otherwise one order that depends on the graph and the names only (so that a file crossover
// writes reads back into the same order, and a step's dropout draws with it): Kahn's, the ready
// call of the smallest (name, call) first, a layer's calls in their order. `last` (one output):
// that call last.
LayerGraph call_graph(const ConfigLayers& c, const std::optional<CallRef>& last,
                      const std::string& where) {
  struct Call {
    std::size_t layer;
    int64_t node;
  };
  std::vector<Call> calls;
  std::map<CallRef, std::size_t> id;  // call -> its place in `calls`
  bool shared = false;
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    shared = shared || c.calls[l].size() > 1;
    for (std::size_t k = 0; k < c.calls[l].size(); ++k) {
      id[{c.layers[l].name, static_cast<int64_t>(k)}] = calls.size();
      calls.push_back({l, static_cast<int64_t>(k)});
    }
  }
  const auto reads = [&](std::size_t i) -> const std::vector<CallRef>& {
    return c.calls[calls[i].layer][static_cast<std::size_t>(calls[i].node)];
  };
  // What each call waits for: the calls it reads, and its layer's call before it.
  std::vector<std::size_t> waits(calls.size(), 0);
  std::vector<std::vector<std::size_t>> wakes(calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    for (const CallRef& r : reads(i)) {
      auto at = id.find(r);
      if (at == id.end())
        throw Error(where,
                    fmt::format("layer '{}' (call {}) reads call {} of layer '{}', which {}",
                                printable(c.layers[calls[i].layer].name), calls[i].node, r.node,
                                printable(r.layer),
                                c.index.count(r.layer) ? "the model does not have"
                                                       : "is not one of the model's layers"));
      ++waits[i];
      wakes[at->second].push_back(i);
    }
    if (calls[i].node > 0) {
      ++waits[i];
      wakes[i - 1].push_back(i);
    }
  }
  // Without shared layers, the config's order (a topological listing reads in that order).
  const auto key = [&](std::size_t i) {
    return shared ? std::make_pair(c.layers[calls[i].layer].name, calls[i].node)
                  : std::make_pair(std::string(), static_cast<int64_t>(i));
  };
  std::set<std::pair<std::pair<std::string, int64_t>, std::size_t>> ready;
  for (std::size_t i = 0; i < calls.size(); ++i)
    if (waits[i] == 0) ready.insert({key(i), i});
  std::vector<int> entry(calls.size(), -1);
  LayerGraph g;
  const auto emit = [&](std::size_t i) {
    std::vector<int> in;
    for (const CallRef& r : reads(i)) in.push_back(entry[id.at(r)]);
    const auto first = i - static_cast<std::size_t>(calls[i].node);  // its layer's first call
    g.shared_with.push_back(calls[i].node == 0 ? -1 : entry[first]);
    entry[i] = static_cast<int>(g.layers.size());
    g.layers.push_back(c.layers[calls[i].layer]);
    g.inputs.push_back(std::move(in));
    for (std::size_t w : wakes[i])
      if (--waits[w] == 0) ready.insert({key(w), w});
  };
  std::optional<std::size_t> held;  // the output call, kept for last
  while (!ready.empty()) {
    const std::size_t i = ready.begin()->second;
    ready.erase(ready.begin());
    const bool is_last =
        last && c.layers[calls[i].layer].name == last->layer && calls[i].node == last->node;
    if (is_last && g.layers.size() + 1 < calls.size()) {
      held = i;
      continue;
    }
    emit(i);
  }
  if (held && g.layers.size() + 1 == calls.size()) emit(*held);
  if (g.layers.size() == calls.size()) return g;
  if (held && !wakes[*held].empty())
    throw Error(where, fmt::format("the model's output, call {} of layer '{}', is not its last "
                                   "call: crossover's models of one output end with it",
                                   last->node, printable(last->layer)));
  for (std::size_t i = 0; i < calls.size(); ++i)
    if (entry[i] < 0 && held != i)
      throw Error(where, fmt::format("layer '{}' (call {}) waits for a call the model never "
                                     "makes (its inputs form a cycle)",
                                     printable(c.layers[calls[i].layer].name), calls[i].node));
  throw Error(where, "internal: the calls of the functional model cannot be ordered");
}

Sequential functional_from_doc(const json& doc, const std::string& where) {
  auto cfg_it = doc.find("config");
  if (cfg_it == doc.end() || !cfg_it->is_object())
    throw Error(where, "the functional model has no config object");
  const json& cfg = *cfg_it;
  auto l = cfg.find("layers");
  if (l == cfg.end() || !l->is_array() || l->empty())
    throw Error(where, "the functional model's config has no layers");
  if (l->size() > 10000) throw Error(where, "the model has too many layers");
  const bool model_trainable = model_trainable_field(cfg, where);
  std::string model_name = "functional";
  if (auto n = cfg.find("name"); n != cfg.end() && n->is_string() && !n->get<std::string>().empty())
    model_name = n->get<std::string>();
  const std::vector<CallRef> input_refs = endpoints(cfg, "input_layers", where);
  const std::vector<CallRef> output_refs = endpoints(cfg, "output_layers", where);

  ConfigLayers c;
  std::set<std::string> names;
  for (std::size_t i = 0; i < l->size(); ++i) {
    const json& entry = (*l)[i];
    ParsedLayer p = parse_layer(entry, i + 1, where, names);
    if (p.layer.name.empty())
      throw Error(where, fmt::format("layer {} of the functional model has no name", i + 1));
    const std::string who = fmt::format("{}: layer {} '{}'", where, i + 1, printable(p.layer.name));
    auto nodes = entry.find("inbound_nodes");
    std::vector<std::vector<CallRef>> calls;
    if (p.is_input) {
      p.layer.input_shape = p.declared_input;
      if (nodes != entry.end() && nodes->is_array() && !nodes->empty())
        throw Error(who, "an InputLayer with inbound nodes");
      calls.emplace_back();  // the model's input: one call that reads nothing
    } else {
      if (nodes == entry.end() || !nodes->is_array() || nodes->empty())
        throw Error(who, "no inbound_nodes: a functional model's layer reads another's output");
      if (nodes->size() > 10000) throw Error(who, "too many inbound nodes");
      // Several: the layer called more than once (a shared layer, one set of weights).
      for (const json& node : *nodes) calls.push_back(inbound_calls(node, who));
    }
    c.index[p.layer.name] = c.layers.size();
    c.layers.push_back(std::move(p.layer));
    c.calls.push_back(std::move(calls));
  }
  const auto known = [&](const CallRef& r, const char* key) {
    auto at = c.index.find(r.layer);
    if (at == c.index.end() || static_cast<std::size_t>(r.node) >= c.calls[at->second].size())
      throw Error(where, fmt::format("{} names call {} of layer '{}', which the model does not "
                                     "have",
                                     key, r.node, printable(r.layer)));
    return at->second;
  };
  for (const CallRef& r : input_refs)
    if (!layer_kind(c.layers[known(r, "input_layers")]).is_model_input())
      throw Error(where, "input_layers names '" + printable(r.layer) +
                             "', which is not one of the model's InputLayers");
  for (const CallRef& r : output_refs) known(r, "output_layers");
  freeze_unless(model_trainable, c.layers);
  LayerGraph g = call_graph(
      c, output_refs.size() == 1 ? std::optional<CallRef>(output_refs.front()) : std::nullopt,
      where);
  // The entries the endpoints name: each call's place in g (the order it was made in).
  std::map<CallRef, int> entry;
  std::map<std::string, int64_t> calls_made;
  for (std::size_t i = 0; i < g.layers.size(); ++i)
    entry[{g.layers[i].name, calls_made[g.layers[i].name]++}] = static_cast<int>(i);
  for (const CallRef& r : input_refs) g.input_layers.push_back(entry.at(r));
  if (output_refs.size() > 1)
    for (const CallRef& r : output_refs) g.output_layers.push_back(entry.at(r));
  try {
    return Sequential(std::move(g), model_name);
  } catch (const Error& e) {
    throw Error(where, e.what());
  }
}

}  // namespace

namespace {
// Keras 3's input_layers and output_layers: ["name", node, 0] for one call, [["a", 0, 0], ["b",
// 0, 0]] for several.
ojson layer_refs_json(const Sequential& model, const std::vector<int>& order,
                      const std::vector<int64_t>& node) {
  auto one = [&](int i) {
    const auto u = static_cast<std::size_t>(i);
    return ojson::array({model.layers()[u].name, node[u], 0});
  };
  if (order.size() == 1) return one(order.front());
  ojson list = ojson::array();
  for (int i : order) list.push_back(one(i));
  return list;
}

// Keras 3's to_json() of a functional model: every layer once, with its "name" and
// "inbound_nodes" (per call, the outputs it reads, as {"args": [tensor or [tensors]], "kwargs":
// {}}; a shared layer has one per call), the inputs and outputs.
std::string functional_to_json(const Sequential& model) {
  const std::vector<Layer>& layers = model.layers();
  const std::vector<std::vector<int>>& inputs = model.layer_inputs();
  const std::vector<int>& shared = model.layer_shared_with();
  const std::vector<Shape> shapes = model.layer_output_shapes();
  const std::vector<int64_t> node = call_numbers(model.layer_shared_with());
  auto tensor = [&](int j) {
    const auto u = static_cast<std::size_t>(j);
    return ojson{{"class_name", "__keras_tensor__"},
                 {"config",
                  {{"shape", batch_shape(shapes[u])},
                   {"dtype", "float32"},
                   {"keras_history", ojson::array({layers[u].name, node[u], 0})}}}};
  };
  auto inbound_node = [&](std::size_t i) {
    ojson args;
    if (layer_kind(layers[i]).merges()) {
      args = ojson::array();
      for (int j : inputs[i]) args.push_back(tensor(j));
    } else {
      args = tensor(inputs[i][0]);
    }
    return ojson{{"args", ojson::array({args})}, {"kwargs", ojson::object()}};
  };
  ojson out_layers = ojson::array();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (shared[i] >= 0) continue;  // a call of a layer listed at its first
    const Layer& l = layers[i];
    const LayerKind& kind = layer_kind(l);
    ojson e{{"module", "keras.layers"},
            {"class_name", std::string(kind.class_name())},
            {"config", layer_config(l)},
            {"registered_name", nullptr}};
    if (!kind.is_model_input() && kind.keras_build_config()) {
      ojson in = ojson::array();
      for (int j : inputs[i]) in.push_back(batch_shape(shapes[static_cast<std::size_t>(j)]));
      e["build_config"] = ojson{{"input_shape", kind.merges() ? in : in[0]}};
    }
    e["name"] = l.name;
    ojson nodes = ojson::array();
    for (std::size_t k = i; k < layers.size() && !inputs[i].empty(); ++k)
      if (k == i || shared[k] == static_cast<int>(i)) nodes.push_back(inbound_node(k));
    e["inbound_nodes"] = nodes;
    out_layers.push_back(e);
  }
  ojson cfg{{"name", model.name()},
            {"trainable", true},
            {"layers", out_layers},
            {"input_layers", layer_refs_json(model, model.input_layers(), node)},
            {"output_layers", layer_refs_json(model, model.output_layers(), node)}};
  ojson doc{{"module", "keras.src.models.functional"},
            {"class_name", "Functional"},
            {"config", cfg},
            {"registered_name", "Functional"},
            {"build_config", {{"input_shape", nullptr}}}};
  if (model.compiled()) doc["compile_config"] = compile_config_json(model);
  return doc.dump();
}
}  // namespace

std::string layer_config_to_json(const Layer& layer) { return layer_config(layer).dump(); }

Layer layer_from_config(std::string_view class_name, std::string_view config_json) {
  const std::string where(class_name);
  const LayerKind* kind = find_keras_layer_kind(class_name);
  if (!kind) throw Error(where, "no layer kind of crossover has this Keras class name");
  const json cfg = parse_json(config_json, where);
  if (!cfg.is_object()) throw Error(where, "the config is not a JSON object: " + brief(cfg));
  const LayerRef ref{where, 1, "", where, true};
  ParsedLayer out;
  read_layer_config(*kind, cfg, ref, out);
  // The shape a Flatten declares is its own (it checks it when built); another kind's is the
  // model's input shape, which the model takes from its first layer.
  if (kind->declares_input() && !out.declared_input.empty())
    out.layer.input_shape = out.declared_input;
  return std::move(out.layer);
}

std::string model_to_json(const Sequential& model) {
  if (model.functional()) return functional_to_json(model);
  const std::vector<Layer>& layers = model.layers();
  const std::vector<Shape> output_shapes = model.layer_output_shapes();
  const Shape input = model.input_shape();
  const bool built = !input.empty();
  ojson out_layers = ojson::array();
  std::set<std::string> names;
  for (const Layer& l : layers) names.insert(l.name);

  // Keras 3 always lists the InputLayer first once the input shape is known.
  Shape shape = input;  // per sample, as it flows
  auto entry = [](const Layer& l, ojson config) {
    return ojson{{"module", "keras.layers"},
                 {"class_name", std::string(layer_kind(l).class_name())},
                 {"config", std::move(config)},
                 {"registered_name", nullptr}};
  };
  if (built && !layer_kind(layers.front()).is_model_input()) {
    Layer in = Input(input);
    in.name = "input_layer";
    for (int k = 1; names.count(in.name); ++k) in.name = "input_layer_" + std::to_string(k);
    out_layers.push_back(entry(in, layer_config(in)));
  }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const LayerKind& kind = layer_kind(l);
    if (kind.is_model_input()) {
      out_layers.push_back(entry(l, layer_config(l)));
      continue;
    }
    ojson e = entry(l, layer_config(l));
    if (!shape.empty() && kind.keras_build_config())
      e["build_config"] = ojson{{"input_shape", batch_shape(shape)}};
    out_layers.push_back(e);
    if (built) shape = output_shapes[i];
  }
  // The model's own policy: Keras writes the global one of when the model was made; crossover,
  // which has no global policy, its matrix layers' (float32 if they differ, which Keras allows).
  DTypePolicy model_policy = DTypePolicy::float32;
  try {
    model_policy = model_dtype_policy(layers);
  } catch (const Error&) {
  }
  ojson cfg{{"name", model.name()},
            {"trainable", true},
            {"dtype", dtype_policy_json(model_policy)},
            {"layers", out_layers}};
  if (built) cfg["build_input_shape"] = batch_shape(input);
  ojson doc{{"module", "keras"},
            {"class_name", "Sequential"},
            {"config", cfg},
            {"registered_name", nullptr}};
  if (built) doc["build_config"] = ojson{{"input_shape", batch_shape(input)}};
  if (model.compiled()) doc["compile_config"] = compile_config_json(model);
  return doc.dump();
}

Sequential model_from_json(std::string_view text, std::string_view where_sv) {
  const std::string where(where_sv);
  const json doc = parse_json(text, where);
  try {
    return sequential_from_doc(doc, where);
  } catch (const json::exception& e) {
    throw Error(where, std::string("unexpected JSON: ") + printable(e.what()));
  }
}

}  // namespace crossover
