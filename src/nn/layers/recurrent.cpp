// SimpleRNN, LSTM, GRU and RNN(cell): a sequence (steps, features) through a cell, its state
// starting at zeros, in one backend call per pass (oneDNN's RNN primitives on the CPU). The cells
// (SimpleRNNCell, LSTMCell, GRUCell) are kinds of their own, held by the layer as Layer::inner[0]:
// they add the weights; the layer runs them.
#include "nn/layers/recurrent.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "nn/layers/kind.h"

namespace crossover {

namespace {

using namespace keras_config;

RnnCell cell_of(LayerType t) {
  switch (t) {
    case LayerType::lstm_cell:
      return RnnCell::lstm;
    case LayerType::gru_cell:
      return RnnCell::gru;
    default:
      return RnnCell::simple;
  }
}
bool is_cell(LayerType t) {
  return t == LayerType::simple_rnn_cell || t == LayerType::lstm_cell || t == LayerType::gru_cell;
}

// Why the engine cannot run a cell of these arguments, and the argument at fault; empty when it
// can.
struct CellProblem {
  const char* field = "";
  std::string why;
};
CellProblem cell_problem(RnnCell cell, const RecurrentCellArgs& a) {
  if (a.units < 1) return {"units", fmt::format("units must be at least 1, got {}", a.units)};
  if (!(a.dropout >= 0.0 && a.dropout < 1.0))
    return {"dropout",
            fmt::format("a rate of {} drops every input: it must be below 1", a.dropout)};
  if (a.recurrent_dropout != 0.0)
    return {"recurrent_dropout", "recurrent_dropout is not supported (yet): it must be 0"};
  if (cell == RnnCell::simple) {
    const ActivationKind k = a.activation.kind;
    if (k != ActivationKind::tanh && k != ActivationKind::relu && k != ActivationKind::sigmoid)
      return {"activation",
              fmt::format("a SimpleRNN's activation must be tanh, relu or sigmoid, not '{}'",
                          activation_name(k))};
    return {};
  }
  if (a.activation.kind != ActivationKind::tanh)
    return {"activation",
            fmt::format("activation '{}' is not supported: the engine runs oneDNN's and cuDNN's "
                        "cells, whose activation is tanh",
                        activation_name(a.activation.kind))};
  if (a.recurrent_activation.kind != ActivationKind::sigmoid)
    return {"recurrent_activation",
            fmt::format("recurrent_activation '{}' is not supported: the engine runs oneDNN's "
                        "and cuDNN's cells, whose recurrent activation is sigmoid",
                        activation_name(a.recurrent_activation.kind))};
  return {};
}

// ---- a cell's Keras fields (the cell's own config, and the layer's, which holds them flat) ----
void read_cell(Reader& cfg, RnnCell cell, RecurrentCellArgs& a) {
  a.units = cfg.count("units", "a recurrent layer needs units");
  LayerActivation act{ActivationKind::tanh, 0.0f};
  if (cfg.find("activation")) cfg.activation(act);
  a.activation = act;
  if (cell != RnnCell::simple) {
    LayerActivation rec{ActivationKind::sigmoid, 0.0f};
    if (cfg.find("recurrent_activation")) cfg.activation(rec, "recurrent_activation");
    a.recurrent_activation = rec;
  }
  a.use_bias = cfg.flag("use_bias", true);
  a.kernel_initializer = cfg.initializer("kernel_initializer", a.kernel_initializer);
  a.recurrent_initializer = cfg.initializer("recurrent_initializer", a.recurrent_initializer);
  a.bias_initializer = cfg.initializer("bias_initializer", a.bias_initializer);
  if (cell == RnnCell::lstm) a.unit_forget_bias = cfg.flag("unit_forget_bias", true);
  if (cell == RnnCell::gru) a.reset_after = cfg.flag("reset_after", true);
  cfg.weight_regularizers({{"kernel", &a.kernel_regularizer},
                           {"recurrent", &a.recurrent_regularizer},
                           {"bias", &a.bias_regularizer}});
  // Keras's cells clamp both rates to [0, 1] (and write the clamped ones).
  a.dropout = std::clamp(cfg.number("dropout", 0.0), 0.0, 1.0);
  a.recurrent_dropout = std::clamp(cfg.number("recurrent_dropout", 0.0), 0.0, 1.0);
  // seed: the draws are the engine's; implementation: tf.keras 2's choice of kernels.
  cfg.accept({"seed", "implementation"});
  if (const CellProblem p = cell_problem(cell, a); !p.why.empty()) cfg.fail(p.field, p.why);
}

void write_cell(const RecurrentCellArgs& a, RnnCell cell, ojson& c) {
  c["units"] = a.units;
  c["activation"] = activation_json(a.activation);
  if (cell != RnnCell::simple) c["recurrent_activation"] = activation_json(a.recurrent_activation);
  c["use_bias"] = a.use_bias;
  c["kernel_initializer"] = initializer_json(a.kernel_initializer);
  c["recurrent_initializer"] = initializer_json(a.recurrent_initializer);
  c["bias_initializer"] = initializer_json(a.bias_initializer);
  if (cell == RnnCell::lstm) c["unit_forget_bias"] = a.unit_forget_bias;
  write_weight_regularizers(c, {{"kernel", &a.kernel_regularizer},
                                {"recurrent", &a.recurrent_regularizer},
                                {"bias", &a.bias_regularizer}});
  c["dropout"] = a.dropout;
  c["recurrent_dropout"] = a.recurrent_dropout;
  if (cell == RnnCell::gru) c["reset_after"] = a.reset_after;
  c["seed"] = nullptr;
}

// The cell's arguments in Keras's order; a layer's (`layer`) take activity_regularizer after the
// weights' regularizers.
Arguments cell_arguments(RnnCell cell, bool layer) {
  Arguments a{required("units", 4), {"activation", "tanh"}};
  if (cell != RnnCell::simple) a.push_back({"recurrent_activation", "sigmoid"});
  a = a + Arguments{{"use_bias", true},
                    {"kernel_initializer", "glorot_uniform"},
                    {"recurrent_initializer", "orthogonal"},
                    {"bias_initializer", "zeros"}};
  if (cell == RnnCell::lstm) a.push_back({"unit_forget_bias", true});
  a = a + Arguments{{"kernel_regularizer", nullptr},
                    {"recurrent_regularizer", nullptr},
                    {"bias_regularizer", nullptr}};
  if (layer) a.push_back({"activity_regularizer", nullptr});
  return a + Arguments{{"kernel_constraint", nullptr},
                       {"recurrent_constraint", nullptr},
                       {"bias_constraint", nullptr},
                       {"dropout", 0.0},
                       {"recurrent_dropout", 0.0}};
}

// A fresh cell of `type`, named as Keras names the cell a SimpleRNN, LSTM or GRU makes.
Layer make_cell(LayerType type) {
  Layer cell;
  cell.type = type;
  cell.name = std::string(layer_kind(type).base_name());
  return cell;
}

// ---- the cells ----
class CellKind final : public LayerKind {
 public:
  CellKind(LayerType type, std::string_view cls, std::string_view base)
      : type_(type), class_(cls), base_(base) {}
  LayerType type() const override { return type_; }
  std::string_view class_name() const override { return class_; }
  std::string_view base_name() const override { return base_; }
  std::optional<Arguments> keras_arguments() const override {
    const RnnCell cell = cell_of(type_);
    Arguments a = cell_arguments(cell, false);
    if (cell == RnnCell::gru) a.push_back({"reset_after", true});
    a.push_back({"seed", nullptr});
    return a;
  }
  std::vector<std::string> weight_names(const Layer& l) const override {
    std::vector<std::string> names{l.name + "/kernel", l.name + "/recurrent_kernel"};
    if (l.args<RecurrentCellArgs>().use_bias) names.push_back(l.name + "/bias");
    return names;
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["units"] = l.args<RecurrentCellArgs>().units;
  }
  void from_keras(Reader& cfg, Layer& l) const override {
    read_cell(cfg, cell_of(type_), l.args<RecurrentCellArgs>());
  }
  void to_keras(const Layer& l, ojson& c) const override {
    write_cell(l.args<RecurrentCellArgs>(), cell_of(type_), c);
  }
  // A cell computes one step of a recurrent layer, which runs it: alone it is not a layer.
  void check_device(const Layer& l, const Backend&, int) const override {
    throw Error(l.name, fmt::format("{} is the cell of a recurrent layer: use it inside "
                                    "keras.layers.RNN(cell), or use the layer ({})",
                                    class_, class_.substr(0, class_.size() - 4)));
  }

  // (features) -> (units): kernel (features, gates * units), recurrent_kernel (units, gates *
  // units), bias (gates * units; a reset_after GRU's (2, 3 units)).
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    const RnnCell cell = cell_of(type_);
    const RecurrentCellArgs& a = l.args<RecurrentCellArgs>();
    if (const CellProblem p = cell_problem(cell, a); !p.why.empty())
      throw Error(l.name, "argument " + std::string(p.field) + ": " + p.why);
    if (b.shape.size() != 1)
      throw Error(l.name, "internal: a cell is built on one step's features");
    const int64_t g = rnn_gates(cell) * a.units;
    b.regularize(b.add_param("kernel", {b.shape[0], g}, a.kernel_initializer),
                 a.kernel_regularizer);
    b.regularize(b.add_param("recurrent_kernel", {a.units, g}, a.recurrent_initializer),
                 a.recurrent_regularizer);
    if (a.use_bias) {
      Initializer bias = a.bias_initializer;
      // Keras's unit_forget_bias: the forget gate's block of the bias (the second) is ones.
      if (cell == RnnCell::lstm && a.unit_forget_bias) bias.ones_block = {a.units, a.units};
      const Shape shape = cell == RnnCell::gru && a.reset_after ? Shape{2, g} : Shape{g};
      b.regularize(b.add_param("bias", shape, bias), a.bias_regularizer);
    }
    b.shape = {a.units};
  }

 private:
  LayerType type_;
  std::string_view class_, base_;
};

// ---- the layers ----
class RecurrentKind final : public LayerKind {
 public:
  // `cell_type`: the cell SimpleRNN, LSTM and GRU make; RNN's (none) is its "cell" field's.
  RecurrentKind(LayerType type, std::string_view cls, std::string_view base,
                std::optional<LayerType> cell_type, std::string_view cli)
      : type_(type), class_(cls), base_(base), cell_type_(cell_type), cli_(cli) {}
  LayerType type() const override { return type_; }
  std::string_view class_name() const override { return class_; }
  std::string_view base_name() const override { return base_; }
  std::string_view inner_attribute(const Layer&, std::size_t) const override { return "cell"; }
  std::optional<Arguments> keras_arguments() const override {
    const Arguments base{{"return_sequences", false},
                         {"return_state", false},
                         {"go_backwards", false},
                         {"stateful", false},
                         {"unroll", false}};
    if (!cell_type_)
      return Arguments{required("cell", {{"class_name", "LSTMCell"}, {"config", {{"units", 2}}}})} +
             base + Arguments{{"zero_output_for_mask", false}};
    const RnnCell cell = cell_of(*cell_type_);
    Arguments a = cell_arguments(cell, true);
    if (cell != RnnCell::simple) a.push_back({"seed", nullptr});
    a = a + base;
    if (cell == RnnCell::gru) a.push_back({"reset_after", true});
    if (cell == RnnCell::simple)
      a.push_back({"seed", nullptr});
    else
      a.push_back({"use_cudnn", "auto"});
    // Keras's RNN base takes it through **kwargs (its get_config writes it).
    a.push_back(keyword("zero_output_for_mask", false));
    return a;
  }

  // ---- command line: lstm:UNITS[:seq], gru:UNITS[:seq], simple_rnn:UNITS[:seq] ----
  std::string_view cli_name() const override { return cli_; }
  std::string_view cli_syntax() const override {
    if (cli_.empty()) return {};  // RNN(cell): not in the layer list
    return type_ == LayerType::lstm  ? "lstm:UNITS[:seq]"
           : type_ == LayerType::gru ? "gru:UNITS[:seq]"
                                     : "simple_rnn:UNITS[:seq]";
  }
  std::optional<Layer> from_cli(const CliFields& f) const override {
    if (cli_.empty() || f.size() < 2 || f.size() > 3) return std::nullopt;
    if (f.size() == 3 && f.text(2) != "seq") f.bad();
    const bool seq = f.size() == 3;
    if (type_ == LayerType::lstm) return LSTM(f.whole(1), seq);
    if (type_ == LayerType::gru) return GRU(f.whole(1), seq);
    return SimpleRNN(f.whole(1), "tanh", seq);
  }
  void describe(const Layer& l, nlohmann::json& j) const override {
    j["units"] = cell_args(l).units;
    j["return_sequences"] = l.args<RecurrentArgs>().return_sequences;
  }

  // ---- Keras config: the RNN base's fields, then the cell's (flat; RNN's: its "cell") ----
  void from_keras(Reader& cfg, Layer& l) const override {
    RecurrentArgs& a = l.args<RecurrentArgs>();
    a.return_sequences = cfg.flag("return_sequences", false);
    a.go_backwards = cfg.flag("go_backwards", false);
    cfg.refuse_true("return_state",
                    "return_state is not supported (yet): a layer gives one output here");
    cfg.refuse_true("stateful", "stateful recurrent layers are not supported");
    cfg.refuse_true("time_major", "time_major is not supported");
    // unroll: the same arithmetic; use_cudnn: the engine's kernels are chosen by the device;
    // zero_output_for_mask: masks are not carried yet, so it changes nothing.
    cfg.accept({"unroll", "use_cudnn", "zero_output_for_mask"});
    if (cell_type_) {
      Layer cell = make_cell(*cell_type_);
      read_cell(cfg, cell_of(*cell_type_), cell.args<RecurrentCellArgs>());
      l.inner = {std::move(cell)};
    } else {
      Layer cell = cfg.layer("cell", "RNN needs its cell");
      if (!is_cell(cell.type))
        cfg.fail("cell", fmt::format("the cell must be a SimpleRNNCell, LSTMCell or GRUCell, "
                                     "not {} (a custom cell is not supported (yet))",
                                     layer_kind(cell).class_name()));
      l.inner = {std::move(cell)};
    }
  }
  void to_keras(const Layer& l, ojson& c) const override {
    const RecurrentArgs& a = l.args<RecurrentArgs>();
    c["return_sequences"] = a.return_sequences;
    c["return_state"] = false;
    c["go_backwards"] = a.go_backwards;
    c["stateful"] = false;
    c["unroll"] = false;
    c["zero_output_for_mask"] = false;
    if (cell_type_)
      write_cell(cell_args(l), cell_of(*cell_type_), c);
    else
      c["cell"] = layer_json(cell(l));
  }
  bool keras_build_config() const override { return true; }
  void check_device(const Layer& l, const Backend& backend, int) const override {
    if (!backend.has_rnn())
      throw Error(l.name, fmt::format("{} needs recurrent kernels, which {} has not (yet)", class_,
                                      backend.device_name()));
  }

  // (steps, features) -> (steps, units) with return_sequences, else (units).
  void build(LayerBuilder& b) const override {
    const Layer& l = b.layer;
    if (l.inner.size() != 1 || !is_cell(l.inner[0].type))
      throw Error(l.name, "internal: a recurrent layer holds its cell");
    if (b.shape.size() != 2)
      throw Error(l.name, fmt::format("{} needs (steps, features) samples, but receives samples "
                                      "of shape {}",
                                      class_, shape_to_string(b.shape)));
    const int64_t steps = b.shape[0];
    const Shape out = b.build_inner(0, {b.shape[1]});
    b.shape = l.args<RecurrentArgs>().return_sequences ? Shape{steps, out[0]} : out;
  }

  // Keras's dropout on the layer's input: in training, one mask per sample and feature, the same
  // at every step (Keras 3's cells draw one mask per call of the layer), as a SpatialDropout's
  // of the (steps, features) sample.
  bool random_in_training(const Layer& l) const override { return has_dropout(l); }

  // With dropout, the dropped input and the mask's factors (keep / (1 - rate)), a batch's input
  // each; then the backend's workspace for the sequence.
  std::size_t workspace_bytes(const Layer& l, const LayerState& li, Backend& backend,
                              int64_t batch) const override {
    return dropout_bytes(l, li, batch) + backend.rnn_workspace_bytes(shape(l, li), batch);
  }

  void forward(const ForwardStep& s) const override {
    const LayerState& cell = s.state.inner[0];
    const float* x = s.x;
    if (s.training && has_dropout(s.layer)) {
      const Dropped d = dropped(s);
      s.backend.noise_forward(NoiseKind::spatial_dropout, s.x, d.x, d.factor, s.m, s.state.in_width,
                              s.state.in_shapes.front()[1],
                              static_cast<float>(cell_args(s.layer).dropout), s.seed, s.index,
                              s.counters, s.first_row);
      x = d.x;
    }
    s.backend.rnn_forward(shape(s.layer, s.state), x, weight(s, cell, "kernel"),
                          weight(s, cell, "recurrent_kernel"), weight(s, cell, "bias"), s.y,
                          s.training ? rnn_workspace(s) : nullptr, s.m);
  }

  // With dropout: the sequence's backward on the dropped input, then its input gradient times
  // the mask's factors, into g (whose gradient the sequence's backward has read).
  void backward(BackwardStep& s) const override {
    const LayerState& cell = s.state.inner[0];
    const bool dropout = has_dropout(s.layer);
    const Dropped d = dropout ? dropped(s) : Dropped{};
    auto grad = [&](const char* v) { return s.grad(cell.param(v)); };
    s.backend.rnn_backward(shape(s.layer, s.state), dropout ? d.x : s.x, weight(s, cell, "kernel"),
                           weight(s, cell, "recurrent_kernel"), weight(s, cell, "bias"), s.y, s.g,
                           rnn_workspace(s), s.first ? nullptr : s.spare, grad("kernel"),
                           grad("recurrent_kernel"), grad("bias"), s.m);
    if (!s.first && dropout) {
      BinaryShape shape;
      shape.rows = s.m;
      shape.cols = s.state.in_width;
      s.backend.binary_forward(BinaryOp::multiply, shape, s.spare, d.factor, s.g);
    } else if (!s.first) {
      s.swap();
    }
    s.activation_done = false;
  }

 private:
  static const Layer& cell(const Layer& l) {
    if (l.inner.size() != 1) throw Error(l.name, "internal: a recurrent layer holds its cell");
    return l.inner.front();
  }
  static bool has_dropout(const Layer& l) { return cell_args(l).dropout > 0.0; }
  // The dropout's share of the workspace for m rows, rounded up to 64 bytes (the backend's
  // follows it).
  static std::size_t dropout_bytes(const Layer& l, const LayerState& li, int64_t m) {
    if (!has_dropout(l)) return 0;
    return (2 * static_cast<std::size_t>(m * li.in_width) * sizeof(float) + 63) / 64 * 64;
  }
  static void* rnn_workspace(const LayerStep& s) {
    return static_cast<unsigned char*>(s.workspace) + dropout_bytes(s.layer, s.state, s.m);
  }
  // Where the dropped input and its factors are in the workspace (workspace_bytes's layout).
  struct Dropped {
    float* x = nullptr;
    float* factor = nullptr;
  };
  static Dropped dropped(const LayerStep& s) {
    auto* x = static_cast<float*>(s.workspace);
    return {x, x + s.m * s.state.in_width};
  }
  static const RecurrentCellArgs& cell_args(const Layer& l) {
    return cell(l).args<RecurrentCellArgs>();
  }
  static float* weight(const LayerStep& s, const LayerState& cell, const char* variable) {
    return s.value(cell.param(variable));
  }
  static RnnShape shape(const Layer& l, const LayerState& li) {
    const RecurrentCellArgs& c = cell_args(l);
    const RecurrentArgs& a = l.args<RecurrentArgs>();
    RnnShape s;
    s.cell = cell_of(cell(l).type);
    s.steps = li.in_shapes.front()[0];
    s.inputs = li.in_shapes.front()[1];
    s.units = c.units;
    s.activation = c.activation.kind;
    s.reset_after = c.reset_after;
    s.sequences = a.return_sequences;
    s.reverse = a.go_backwards;
    s.bias = c.use_bias;
    return s;
  }

  LayerType type_;
  std::string_view class_, base_;
  std::optional<LayerType> cell_type_;
  std::string_view cli_;
};

Layer recurrent_layer(LayerType type, LayerType cell_type, int64_t units,
                      LayerActivation activation, bool return_sequences) {
  Layer cell = make_cell(cell_type);
  RecurrentCellArgs& c = cell.args<RecurrentCellArgs>();
  c.units = units;
  c.activation = activation;
  const std::string where(layer_kind(type).class_name());
  if (const CellProblem p = cell_problem(cell_of(cell_type), c); !p.why.empty())
    throw Error(where, "argument " + std::string(p.field) + ": " + p.why);
  Layer l;
  l.type = type;
  l.args<RecurrentArgs>().return_sequences = return_sequences;
  l.inner = {std::move(cell)};
  return l;
}

}  // namespace

Layer SimpleRNN(int64_t units, std::string_view activation, bool return_sequences) {
  return recurrent_layer(LayerType::simple_rnn, LayerType::simple_rnn_cell, units,
                         layer_activation(activation), return_sequences);
}
Layer LSTM(int64_t units, bool return_sequences) {
  return recurrent_layer(LayerType::lstm, LayerType::lstm_cell, units, {ActivationKind::tanh, 0.0f},
                         return_sequences);
}
Layer GRU(int64_t units, bool return_sequences) {
  return recurrent_layer(LayerType::gru, LayerType::gru_cell, units, {ActivationKind::tanh, 0.0f},
                         return_sequences);
}

const LayerKind& simple_rnn_cell_layer_kind() {
  static const CellKind kind(LayerType::simple_rnn_cell, "SimpleRNNCell", "simple_rnn_cell");
  return kind;
}
const LayerKind& lstm_cell_layer_kind() {
  static const CellKind kind(LayerType::lstm_cell, "LSTMCell", "lstm_cell");
  return kind;
}
const LayerKind& gru_cell_layer_kind() {
  static const CellKind kind(LayerType::gru_cell, "GRUCell", "gru_cell");
  return kind;
}
const LayerKind& simple_rnn_layer_kind() {
  static const RecurrentKind kind(LayerType::simple_rnn, "SimpleRNN", "simple_rnn",
                                  LayerType::simple_rnn_cell, "simple_rnn");
  return kind;
}
const LayerKind& lstm_layer_kind() {
  static const RecurrentKind kind(LayerType::lstm, "LSTM", "lstm", LayerType::lstm_cell, "lstm");
  return kind;
}
const LayerKind& gru_layer_kind() {
  static const RecurrentKind kind(LayerType::gru, "GRU", "gru", LayerType::gru_cell, "gru");
  return kind;
}
const LayerKind& rnn_layer_kind() {
  static const RecurrentKind kind(LayerType::rnn, "RNN", "rnn", std::nullopt, "");
  return kind;
}

}  // namespace crossover
