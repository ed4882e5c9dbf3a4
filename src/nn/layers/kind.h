// A layer kind: everything crossover knows about one kind of layer, in one unit
// (src/nn/layers/<kind>.cpp), found through the registry by its Keras class name, its CLI name
// or its LayerType. The model (nn/sequential.cpp), the Keras JSON reader and writer
// (nn/model_config.cpp), the .weights.h5 names (nn/keras_h5.cpp) and the command line go through
// it; none of them switches on a LayerType.
//
// Adding a kind: its LayerType and its constructor (Keras's arguments and defaults) in
// nn/layers.h, one unit implementing LayerKind, and one line in nn/layers/registry.cpp
// (docs/ARCHITECTURE.md, "Adding a layer").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nn/layers.h"
#include "nn/layers/keras_config.h"

namespace crossover {

// The fields of one item of the CLI's layer list ("conv:32:3:relu" -> conv, 32, 3, relu). Each
// reader throws Error("--model", bad) for a field that does not parse.
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
  // Validates, before the model multiplies anything, that the layer's parameters on samples of
  // `width` values with `channels` in the last axis are of a sane size; returns the width of its
  // output where it knows it without building (Dense), else `width`.
  virtual int64_t check_size(const Layer&, int64_t width, int64_t /*channels*/,
                             const std::string& /*where*/) const {
    return width;
  }

  // ---- properties the model asks ----
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
};

// The kind of a layer type (every LayerType has one).
const LayerKind& layer_kind(LayerType type);
inline const LayerKind& layer_kind(const Layer& l) { return layer_kind(l.type); }
// The kind Keras calls `class_name` (or an alias of it); null when crossover has none.
const LayerKind* find_keras_layer_kind(std::string_view class_name);
// The kind whose CLI name is `name`; null when none.
const LayerKind* find_cli_layer_kind(std::string_view name);
// Every kind, in LayerType order.
std::span<const LayerKind* const> layer_kinds();

}  // namespace crossover
