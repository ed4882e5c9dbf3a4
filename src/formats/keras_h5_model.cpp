// A Sequential's weights to and from Keras 3's .weights.h5 layout: one group per layer, keyed
// by its class as Keras names them (keras_weights_of, load_keras_weights, save/load_*_h5).
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "formats/files.h"
#include "formats/keras_h5.h"
#include "formats/keras_h5_internal.h"
#include "nn/layers.h"
#include "nn/layers/kind.h"

namespace crossover {

using keras_h5_detail::has;

namespace {

// Keras's naming.to_snake_case for the class names crossover has ("Dense" -> "dense",
// "MaxPooling2D" -> "max_pooling2d", "Conv2DTranspose" -> "conv2d_transpose"): a '_' before a
// capital after a lower-case letter, or before a capital that starts a word (one followed by a
// lower-case letter) anywhere but first.
std::string snake_case(std::string_view class_name) {
  const auto lower = [&](std::size_t i) {
    return i < class_name.size() && class_name[i] >= 'a' && class_name[i] <= 'z';
  };
  std::string out;
  for (std::size_t i = 0; i < class_name.size(); ++i) {
    const char c = class_name[i];
    if (c >= 'A' && c <= 'Z') {
      if (i > 0 && (lower(i - 1) || lower(i + 1))) out += '_';
      out += static_cast<char>(c - 'A' + 'a');
    } else {
      out += c;
    }
  }
  return out;
}

// The model's layers as Keras 3 saves them (InputLayer excluded), each with its group's key and
// the crossover names of its variables in Keras's order.
struct LayerSlot {
  const Layer* layer;
  int number;        // 1-based, among model.layers as Keras counts them
  std::string key;   // "dense"; an inner layer's group below its layer's: "time_distributed/layer"
  std::string name;  // the layer whose variables they are (its vars' name)
  std::vector<std::string> variables;  // "dense/kernel", "dense/bias"
};

std::vector<LayerSlot> layer_slots(const Sequential& model) {
  std::vector<LayerSlot> slots;
  std::map<std::string, int> used;
  int number = 0;
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = model.layers()[i];
    // A shared layer's weights are its first call's.
    if (layer_kind(layer).is_model_input() || model.layer_shared_with()[i] >= 0) continue;
    const std::string base = snake_case(layer_type_name(layer.type));
    auto [it, fresh] = used.try_emplace(base, 0);
    const std::string key = fresh ? base : fmt::format("{}_{}", base, ++it->second);
    ++number;
    // Its own variables, then each inner layer's in a group of its own below it (Keras saves a
    // layer's trainable variables, then its non-trainable ones).
    for (KerasWeightGroup& g : keras_weight_groups(layer))
      slots.push_back({&layer, number, g.group.empty() ? key : key + "/" + g.group,
                       std::move(g.layer_name), std::move(g.names)});
  }
  return slots;
}

std::string keys_of(const KerasH5Weights& w) {
  std::string s;
  for (const KerasH5Layer& l : w.layers)
    s += (s.empty() ? "" : ", ") + l.key + fmt::format(" ({} variables)", l.vars.size());
  return s.empty() ? "none" : s;
}

}  // namespace

KerasH5Weights keras_weights_of(const Sequential& model) {
  const std::vector<NamedTensor> all = model.get_weights();
  auto find = [&](const std::string& name) -> const Tensor& {
    for (const NamedTensor& t : all)
      if (t.name == name) return t.value;
    throw Error("save_weights", "the model has no weight " + name);
  };
  KerasH5Weights w;
  w.model_name = model.name();
  for (const LayerSlot& s : layer_slots(model)) {
    KerasH5Layer l{s.key, s.name, {}};
    for (const std::string& v : s.variables) l.vars.push_back(find(v));
    w.layers.push_back(std::move(l));
  }
  return w;
}

void load_keras_weights(Sequential& model, const KerasH5Weights& weights, const std::string& path) {
  const std::vector<NamedTensor> expected = weights_to_load(model, path);
  auto shape_in_model = [&](const std::string& name) {
    for (const NamedTensor& t : expected)
      if (t.name == name) return t.value.shape();
    return Shape{};
  };
  const std::vector<LayerSlot> slots = layer_slots(model);
  std::vector<NamedTensor> values;  // the weights under crossover's names, for the load's checks
  std::vector<std::string> model_keys;
  for (const LayerSlot& s : slots) {
    model_keys.push_back(s.key);
    const std::string who = fmt::format("layer {} '{}' ({}, group layers/{})", s.number,
                                        s.layer->name, layer_type_name(s.layer->type), s.key);
    auto it = std::find_if(weights.layers.begin(), weights.layers.end(),
                           [&](const KerasH5Layer& l) { return l.key == s.key; });
    if (it == weights.layers.end()) {
      if (s.variables.empty()) continue;  // Keras does not need a group for Flatten, Dropout...
      throw Error(path, who + " is not in the file (it holds " + keys_of(weights) +
                            "): it was saved from a different architecture");
    }
    if (it->vars.size() != s.variables.size())
      throw Error(path, fmt::format("{}: {} variables in the file but {} in the model: it was "
                                    "saved from a different architecture",
                                    who, it->vars.size(), s.variables.size()));
    for (std::size_t i = 0; i < s.variables.size(); ++i) {
      const Shape want = shape_in_model(s.variables[i]);
      const std::string role = s.variables[i].substr(s.variables[i].rfind('/') + 1);
      if (it->vars[i].shape() != want)
        throw Error(path, fmt::format("{}: variable {} ({}) has shape {} in the file but {} in "
                                      "the model: it was saved from a different architecture",
                                      who, i, role, shape_to_string(it->vars[i].shape()),
                                      shape_to_string(want)));
      values.push_back({s.variables[i], it->vars[i]});
    }
  }
  for (const KerasH5Layer& l : weights.layers)
    if (!l.vars.empty() && !has(model_keys, l.key))
      throw Error(path, fmt::format("the file holds {} variables for group layers/{}, which the "
                                    "model does not have (the file holds {}): it was saved from "
                                    "a model with more layers",
                                    l.vars.size(), l.key, keys_of(weights)));
  load_named_weights(model, values, path);
}

void save_keras_weights_h5(const Sequential& model, const std::string& path) {
  if (model.get_weights().empty())
    throw Error(
        path,
        "the model has no weights to save yet: compile it with a known input shape, or fit it");
  write_keras_weights_h5(path, keras_weights_of(model));
}

void load_keras_weights_h5(Sequential& model, const std::string& path) {
  load_keras_weights(model, read_keras_weights_h5(path), path);
}

}  // namespace crossover
