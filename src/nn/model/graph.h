// The model's graph (one part of the model; docs/ARCHITECTURE.md "The model as parts"): its
// layers in order, what each reads, which entries call a layer again (Keras's shared layers), its
// inputs and its outputs. Made once from a LayerGraph and checked then; the layers' shapes and
// parameters are the model's (built for an input shape), not the graph's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/sequential.h"

namespace crossover {

struct ModelGraph {
  ModelGraph() = default;
  // `graph` checked: each layer reads layers before it, one input (two or more for a merging
  // layer), InputLayers only as the model's inputs, every output listed, names unique; shared
  // layers copied into their later calls; unnamed layers named as Keras names them.
  ModelGraph(LayerGraph graph, std::string model_name, bool is_functional);

  std::vector<Layer> layers;
  // The layers each layer reads (empty: the model's input); for a Sequential, the one before.
  std::vector<std::vector<int>> inputs;
  // Per entry: the earlier entry whose layer it calls again (a shared layer), or -1 (its own).
  std::vector<int> shared_with;
  // Per entry: a layer called again whose weight gradients this call adds into those of a later
  // call (backward runs the last call first, which writes them).
  std::vector<char> accumulates;
  // Per entry: its layer is called more than once (take_shared).
  std::vector<char> shared_layer;
  bool functional = false;
  // How many layers read each layer's output (the loss reads the last one's, not counted here).
  std::vector<int> readers;
  std::string name;
  // The model's InputLayers (their indices) in the model's input order (LayerGraph); a Sequential
  // without an InputLayer: {0}. With several, each sample's row holds their values side by side
  // (packed: input_column[i] is where layer i's start, packed_width the row's width).
  std::vector<int> model_inputs;
  std::vector<int64_t> input_column;
  int64_t packed_width = 0;
  // The model's outputs (LayerGraph::output_layers): {the last layer} for one.
  std::vector<int> model_outputs;

  std::size_t size() const { return layers.size(); }
  // Whether a pass adds terms to the loss besides the compiled one: an activity regularizer
  // (Layer::activity) or an add_loss term (LayerKind::adds_loss).
  bool has_loss_terms() const;
  // The first call of entry i's layer (i itself unless it calls a shared layer again).
  std::size_t first_call(std::size_t i) const {
    return shared_with[i] < 0 ? i : static_cast<std::size_t>(shared_with[i]);
  }
  // Whether the layer of entry i is called more than once.
  bool called_again(std::size_t i) const { return shared_layer[i] != 0; }
  bool several_inputs() const { return model_inputs.size() > 1; }
  bool several_outputs() const { return model_outputs.size() > 1; }
  // Several inputs: the packed row's shape, (the inputs' values,), each InputLayer's shape
  // declared (checked when made).
  Shape packed_shape() const;

 private:
  void take_shared(std::vector<int> shares);
  void set_model_outputs(std::vector<int> order);
  void set_model_inputs(std::vector<int> order);
  void name_layers();
};

}  // namespace crossover
