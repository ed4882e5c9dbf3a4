#include "backends/cpu/dnnl_rnn.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "backends/cpu/dnnl_exec.h"
#include "core/error.h"

namespace crossover::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr memory::data_type kF32 = memory::data_type::f32;
constexpr std::size_t kAlign = 64;

std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// A reset_after GRU: oneDNN's linear-before-reset GRU, whose bias has a fourth gate.
bool lbr(const RnnShape& s) { return s.cell == RnnCell::gru && s.reset_after; }
int64_t dnnl_bias_gates(const RnnShape& s) { return rnn_gates(s.cell) + (lbr(s) ? 1 : 0); }
// Whether the output sequence is oneDNN's dst_layer itself (else it lives elsewhere: the
// workspace in training, the backend's own block in inference).
bool y_is_dst_layer(const RnnShape& s) { return s.sequences && !s.reverse; }
// The final state is y (!sequences): oneDNN's dst_iter; an LSTM's final cell state beside it.
bool has_dst_iter(const RnnShape& s) { return !s.sequences; }

// The memory descriptors of one shape and batch, in Keras's layouts (weights: `any` for the
// primitive's choice beside the user's ldigo).
struct Descs {
  memory::desc src_layer, dst_layer, iter, weights_layer, weights_iter, bias;
  memory::desc weights_layer_any, weights_iter_any;
  memory::desc none;  // a zero descriptor: the argument is not used (zeros)
};
Descs descs(const RnnShape& s, int64_t m) {
  const int64_t gates = rnn_gates(s.cell);
  Descs d;
  d.src_layer = memory::desc({s.steps, m, s.inputs}, kF32, Tag::ntc);
  d.dst_layer = memory::desc({s.steps, m, s.units}, kF32, Tag::ntc);
  if (has_dst_iter(s)) d.iter = memory::desc({1, 1, m, s.units}, kF32, Tag::ldnc);
  d.weights_layer = memory::desc({1, 1, s.inputs, gates, s.units}, kF32, Tag::ldigo);
  d.weights_iter = memory::desc({1, 1, s.units, gates, s.units}, kF32, Tag::ldigo);
  d.weights_layer_any = memory::desc({1, 1, s.inputs, gates, s.units}, kF32, Tag::any);
  d.weights_iter_any = memory::desc({1, 1, s.units, gates, s.units}, kF32, Tag::any);
  // Always a bias (oneDNN 2.6 refuses a forward without one): zeros without use_bias.
  d.bias = memory::desc({1, 1, dnnl_bias_gates(s), s.units}, kF32, Tag::ldgo);
  return d;
}

dnnl::rnn_direction direction(const RnnShape& s) {
  return s.reverse ? dnnl::rnn_direction::unidirectional_right2left
                   : dnnl::rnn_direction::unidirectional_left2right;
}

dnnl::algorithm simple_activation(const RnnShape& s) {
  switch (s.activation) {
    case ActivationKind::tanh:
      return dnnl::algorithm::eltwise_tanh;
    case ActivationKind::relu:
      return dnnl::algorithm::eltwise_relu;
    case ActivationKind::sigmoid:
      return dnnl::algorithm::eltwise_logistic;
    default:
      throw Error("cpu", "a SimpleRNN's activation must be tanh, relu or sigmoid here");
  }
}

// The forward descriptor of the cell (the iter descriptors zero when the layer returns sequences:
// its final state unread).
dnnl_rnn_desc_t forward_desc(const RnnShape& s, const Descs& d, dnnl::prop_kind prop) {
  const memory::desc& it = d.iter;
  switch (s.cell) {
    case RnnCell::simple:
      return dnnl::vanilla_rnn_forward::desc(prop, simple_activation(s), direction(s), d.src_layer,
                                             d.none, d.weights_layer_any, d.weights_iter_any,
                                             d.bias, d.dst_layer, it)
          .data;
    case RnnCell::lstm:
      return dnnl::lstm_forward::desc(prop, direction(s), d.src_layer, d.none, d.none,
                                      d.weights_layer_any, d.weights_iter_any, d.bias, d.dst_layer,
                                      it, it)
          .data;
    case RnnCell::gru:
      if (s.reset_after)
        return dnnl::lbr_gru_forward::desc(prop, direction(s), d.src_layer, d.none,
                                           d.weights_layer_any, d.weights_iter_any, d.bias,
                                           d.dst_layer, it)
            .data;
      return dnnl::gru_forward::desc(prop, direction(s), d.src_layer, d.none, d.weights_layer_any,
                                     d.weights_iter_any, d.bias, d.dst_layer, it)
          .data;
  }
  throw Error("cpu", "internal: an unknown recurrent cell");
}

dnnl_rnn_desc_t backward_desc(const RnnShape& s, const Descs& d) {
  const memory::desc& it = d.iter;
  const auto prop = dnnl::prop_kind::backward;
  switch (s.cell) {
    case RnnCell::simple:
      return dnnl::vanilla_rnn_backward::desc(
                 prop, simple_activation(s), direction(s), d.src_layer, d.none, d.weights_layer_any,
                 d.weights_iter_any, d.bias, d.dst_layer, it, d.src_layer, d.none,
                 d.weights_layer_any, d.weights_iter_any, d.bias, d.dst_layer, it)
          .data;
    case RnnCell::lstm:
      return dnnl::lstm_backward::desc(prop, direction(s), d.src_layer, d.none, d.none,
                                       d.weights_layer_any, d.weights_iter_any, d.bias, d.dst_layer,
                                       it, it, d.src_layer, d.none, d.none, d.weights_layer_any,
                                       d.weights_iter_any, d.bias, d.dst_layer, it, it)
          .data;
    case RnnCell::gru:
      if (s.reset_after)
        return dnnl::lbr_gru_backward::desc(
                   prop, direction(s), d.src_layer, d.none, d.weights_layer_any, d.weights_iter_any,
                   d.bias, d.dst_layer, it, d.src_layer, d.none, d.weights_layer_any,
                   d.weights_iter_any, d.bias, d.dst_layer, it)
            .data;
      return dnnl::gru_backward::desc(prop, direction(s), d.src_layer, d.none, d.weights_layer_any,
                                      d.weights_iter_any, d.bias, d.dst_layer, it, d.src_layer,
                                      d.none, d.weights_layer_any, d.weights_iter_any, d.bias,
                                      d.dst_layer, it)
          .data;
  }
  throw Error("cpu", "internal: an unknown recurrent cell");
}

memory::desc arg_md(const dnnl::primitive_desc& pd, int arg) {
  return pd.query_md(dnnl::query::exec_arg_md, arg);
}

// Keras's (2, 3 units) reset_after GRU bias -> oneDNN's four gates: z and r each the sum of their
// input and recurrent biases, the candidate's input bias, its recurrent bias.
void fold_gru_bias(const float* keras, float* dnnl, int64_t units) {
  const float* input = keras;
  const float* recurrent = keras + 3 * units;
  for (int64_t i = 0; i < 2 * units; ++i) dnnl[i] = input[i] + recurrent[i];
  std::copy(input + 2 * units, input + 3 * units, dnnl + 2 * units);
  std::copy(recurrent + 2 * units, recurrent + 3 * units, dnnl + 3 * units);
}
// Its gradient back: each summed bias gets the gate's gradient.
void unfold_gru_bias_gradient(const float* dnnl, float* keras, int64_t units) {
  std::copy(dnnl, dnnl + 3 * units, keras);
  std::copy(dnnl, dnnl + 2 * units, keras + 3 * units);
  std::copy(dnnl + 3 * units, dnnl + 4 * units, keras + 5 * units);
}

// y (m, steps, units) from oneDNN's (m, steps, units) in the opposite time order, or back.
void reverse_steps(const float* from, float* to, const RnnShape& s, int64_t m) {
  const int64_t u = s.units;
  for (int64_t n = 0; n < m; ++n)
    for (int64_t t = 0; t < s.steps; ++t)
      std::copy_n(from + (n * s.steps + t) * u, u, to + (n * s.steps + s.steps - 1 - t) * u);
}

// "RNN of 4 steps 3 -> 5, batch 32": a primitive's shape in oneDNN's messages.
std::string described(const RnnShape& s, int64_t m) {
  return fmt::format("RNN of {} steps {} -> {}, batch {}", s.steps, s.inputs, s.units, m);
}

// A weight: the caller's (Keras's ldigo) memory, or a block in the primitive's layout that a
// reorder fills from it (forward) or empties into it (a gradient).
struct Weight {
  Exec reorder;
  bool reordered = false;
  std::size_t arg = 0;  // its index in the primitive's Exec
};

// The argument indices of one primitive's Exec (-1: not an argument).
struct Args {
  int src = -1, weights_layer = -1, weights_iter = -1, bias = -1, dst_layer = -1, dst_iter = -1,
      dst_iter_c = -1, workspace = -1;
  int diff_src = -1, diff_weights_layer = -1, diff_weights_iter = -1, diff_bias = -1,
      diff_dst_layer = -1, diff_dst_iter = -1, diff_dst_iter_c = -1;
};

}  // namespace

struct DnnlRnn::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};

  struct Primitive {
    Exec rnn;
    Args a;
    Weight weights_layer, weights_iter, diff_weights_layer, diff_weights_iter;
    Buffer bias;      // the bias oneDNN reads where it is not the caller's (zeros without
                      // use_bias, a reset_after GRU's folded one), then (backward) its gradient
    Buffer sequence;  // the output sequence where y is not it (inference), or dy reversed
    Buffer zeros;     // the gradient of what the layer does not output
    Buffer diff_src;  // dx where the caller needs none
    std::size_t workspace_bytes = 0;  // oneDNN's, at the front of the layer's workspace
    std::size_t dst_layer_offset = 0, dst_iter_c_offset = 0;  // in the layer's workspace
    std::size_t layer_workspace_bytes = 0;
  };
  std::map<std::tuple<RnnShape, int64_t, bool>, Primitive> forward;  // training
  std::map<std::tuple<RnnShape, int64_t>, Primitive> backward;

  dnnl::primitive_attr attr() const {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // ours, made with the primitive
    return a;
  }
  dnnl::primitive_desc forward_pd(const RnnShape& s, int64_t m, bool training) const {
    const Descs d = descs(s, m);
    dnnl_rnn_desc_t desc = forward_desc(
        s, d, training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference);
    const dnnl::primitive_attr a = attr();
    return dnnl::primitive_desc(reinterpret_cast<const_dnnl_op_desc_t>(&desc), &a, engine, nullptr);
  }

  // A weight argument of `e`: the caller's ldigo block, or one in the primitive's layout with a
  // reorder between the two (to the primitive's before a run; from it after, for a gradient).
  Weight weight(Exec& e, int arg, const memory::desc& user, const memory::desc& wanted,
                bool gradient) const {
    Weight w;
    w.arg = e.memories.size();
    w.reordered = wanted != user;
    if (!w.reordered) {
      e.add(arg, user, engine);
      return w;
    }
    e.add_owned(arg, wanted, engine);
    const memory::desc& from = gradient ? wanted : user;
    const memory::desc& to = gradient ? user : wanted;
    w.reorder.primitive = dnnl::reorder(dnnl::reorder::primitive_desc(engine, from, engine, to));
    w.reorder.add(DNNL_ARG_FROM, from, engine);
    w.reorder.add(DNNL_ARG_TO, to, engine);
    w.reorder.point(gradient ? 0 : 1, e.owned.back().get());
    return w;
  }
  static int add(Exec& e, int arg, const memory::desc& md, const dnnl::engine& engine) {
    e.add(arg, md, engine);
    return static_cast<int>(e.memories.size() - 1);
  }
  static void owned(Buffer& b, std::size_t bytes) {
    b.bytes = make_aligned<unsigned char>(std::max<std::size_t>(bytes, 1));
    std::memset(b.get(), 0, bytes);
  }

  // The primitive of `pd` with the arguments the forward pass and the backward pass both take:
  // x, the weights, the bias, the output sequence and (!sequences) the final state.
  Primitive with_forward_arguments(const RnnShape& s, const Descs& d,
                                   const dnnl::primitive_desc& pd) const {
    Primitive p;
    Exec& e = p.rnn;
    e.primitive = dnnl::primitive(pd);
    Args& a = p.a;
    a.src = add(e, DNNL_ARG_SRC_LAYER, d.src_layer, engine);
    p.weights_layer = weight(e, DNNL_ARG_WEIGHTS_LAYER, d.weights_layer,
                             arg_md(pd, DNNL_ARG_WEIGHTS_LAYER), false);
    p.weights_iter =
        weight(e, DNNL_ARG_WEIGHTS_ITER, d.weights_iter, arg_md(pd, DNNL_ARG_WEIGHTS_ITER), false);
    a.bias = add(e, DNNL_ARG_BIAS, d.bias, engine);
    a.dst_layer = add(e, DNNL_ARG_DST_LAYER, d.dst_layer, engine);
    if (has_dst_iter(s)) {
      a.dst_iter = add(e, DNNL_ARG_DST_ITER, d.iter, engine);
      if (s.cell == RnnCell::lstm) a.dst_iter_c = add(e, DNNL_ARG_DST_ITER_C, d.iter, engine);
    }
    return p;
  }

  // The primitives of a shape and batch: found in the maps, made (and kept) the first time, with
  // oneDNN's failures naming the shape. A step only finds them: nothing is made or formatted.
  Primitive& forward_for(const RnnShape& s, int64_t m, bool training) {
    const auto key = std::tuple(s, m, training);
    if (auto it = forward.find(key); it != forward.end()) return it->second;
    return guarded(described(s, m).c_str(), [&]() -> Primitive& {
      return forward.emplace(key, make_forward(s, m, training)).first->second;
    });
  }
  Primitive& backward_for(const RnnShape& s, int64_t m) {
    const auto key = std::tuple(s, m);
    if (auto it = backward.find(key); it != backward.end()) return it->second;
    return guarded(described(s, m).c_str(), [&]() -> Primitive& {
      return backward.emplace(key, make_backward(s, m)).first->second;
    });
  }

  Primitive make_forward(const RnnShape& s, int64_t m, bool training) const {
    const Descs d = descs(s, m);
    const dnnl::primitive_desc pd = forward_pd(s, m, training);
    Primitive p = with_forward_arguments(s, d, pd);
    Exec& e = p.rnn;
    Args& a = p.a;
    owned(p.bias, d.bias.get_size());
    p.workspace_bytes = training ? aligned(pd.workspace_desc().get_size()) : 0;
    if (training) a.workspace = add(e, DNNL_ARG_WORKSPACE, pd.workspace_desc(), engine);
    e.add_owned(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc(), engine);
    // Training keeps in the layer's workspace what the backward pass reads: oneDNN's workspace,
    // the output sequence where y is not it, an LSTM's final cell state. Inference keeps the
    // sequence and the cell state in a block of its own, laid out alike.
    std::size_t at = training ? p.workspace_bytes : 0;
    p.dst_layer_offset = at;
    at += y_is_dst_layer(s) ? 0 : aligned(d.dst_layer.get_size());
    p.dst_iter_c_offset = at;
    at += a.dst_iter_c >= 0 ? aligned(d.iter.get_size()) : 0;
    if (!training) owned(p.sequence, at);
    p.layer_workspace_bytes = training ? at : 0;
    return p;
  }

  Primitive make_backward(const RnnShape& s, int64_t m) const {
    const Descs d = descs(s, m);
    const dnnl::primitive_desc hint = forward_pd(s, m, true);
    dnnl_rnn_desc_t desc = backward_desc(s, d);
    const dnnl::primitive_attr at = attr();
    const dnnl::primitive_desc pd(reinterpret_cast<const_dnnl_op_desc_t>(&desc), &at, engine,
                                  hint.get());
    Primitive p = with_forward_arguments(s, d, pd);
    Exec& e = p.rnn;
    Args& a = p.a;
    a.workspace = add(e, DNNL_ARG_WORKSPACE, pd.workspace_desc(), engine);
    a.diff_src = add(e, DNNL_ARG_DIFF_SRC_LAYER, d.src_layer, engine);
    owned(p.diff_src, d.src_layer.get_size());
    p.diff_weights_layer = weight(e, DNNL_ARG_DIFF_WEIGHTS_LAYER, d.weights_layer,
                                  arg_md(pd, DNNL_ARG_DIFF_WEIGHTS_LAYER), true);
    p.diff_weights_iter = weight(e, DNNL_ARG_DIFF_WEIGHTS_ITER, d.weights_iter,
                                 arg_md(pd, DNNL_ARG_DIFF_WEIGHTS_ITER), true);
    a.diff_bias = add(e, DNNL_ARG_DIFF_BIAS, d.bias, engine);
    owned(p.bias, 2 * d.bias.get_size());  // the bias, then its gradient
    a.diff_dst_layer = add(e, DNNL_ARG_DIFF_DST_LAYER, d.dst_layer, engine);
    if (has_dst_iter(s)) {
      a.diff_dst_iter = add(e, DNNL_ARG_DIFF_DST_ITER, d.iter, engine);
      if (s.cell == RnnCell::lstm)
        a.diff_dst_iter_c = add(e, DNNL_ARG_DIFF_DST_ITER_C, d.iter, engine);
    }
    // The gradients of what the layer does not output: every step's state but the last, and an
    // LSTM's final cell state (zeros, never written).
    owned(p.zeros, std::max(d.dst_layer.get_size(), d.iter.get_size()));
    if (s.sequences && s.reverse) owned(p.sequence, d.dst_layer.get_size());
    e.add_owned(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc(), engine);
    return p;
  }

  // Points the forward weights (reordering them where the primitive wants its own layout) and the
  // bias (folded for a reset_after GRU) of p at the caller's.
  void point_weights(Primitive& p, const RnnShape& s, const float* kernel, const float* recurrent,
                     const float* b, float* folded) {
    for (auto [w, user] : {std::pair{&p.weights_layer, kernel}, {&p.weights_iter, recurrent}}) {
      if (w->reordered) {
        w->reorder.point(0, user);
        w->reorder.run(stream);
      } else {
        p.rnn.point(w->arg, user);
      }
    }
    if (!s.bias) {
      p.rnn.point(static_cast<std::size_t>(p.a.bias), folded);  // zeros, never written
    } else if (lbr(s)) {
      fold_gru_bias(b, folded, s.units);
      p.rnn.point(static_cast<std::size_t>(p.a.bias), folded);
    } else {
      p.rnn.point(static_cast<std::size_t>(p.a.bias), b);
    }
  }
  void point(Primitive& p, int arg, const void* at) {
    if (arg >= 0) p.rnn.point(static_cast<std::size_t>(arg), at);
  }
};

DnnlRnn::DnnlRnn() = default;
DnnlRnn::~DnnlRnn() = default;

DnnlRnn::State& DnnlRnn::state() {
  if (!state_) state_ = guarded("engine", [] { return std::make_unique<State>(); });
  return *state_;
}

std::size_t DnnlRnn::workspace_bytes(const RnnShape& s, int64_t m) {
  State& st = state();
  st.forward_for(s, m, false);
  st.backward_for(s, m);
  return st.forward_for(s, m, true).layer_workspace_bytes;
}

void DnnlRnn::forward(const RnnShape& s, const float* x, const float* kernel,
                      const float* recurrent, const float* b, float* y, void* workspace,
                      int64_t m) {
  const bool training = workspace != nullptr;
  State& st = state();
  State::Primitive& p = st.forward_for(s, m, training);
  auto* ws = static_cast<unsigned char*>(workspace);
  unsigned char* kept = training ? ws : static_cast<unsigned char*>(p.sequence.get());
  st.point_weights(p, s, kernel, recurrent, b, static_cast<float*>(p.bias.get()));
  st.point(p, p.a.src, x);
  float* sequence = y_is_dst_layer(s) ? y : reinterpret_cast<float*>(kept + p.dst_layer_offset);
  st.point(p, p.a.dst_layer, sequence);
  st.point(p, p.a.dst_iter, y);
  st.point(p, p.a.dst_iter_c, kept + p.dst_iter_c_offset);
  st.point(p, p.a.workspace, ws);
  p.rnn.run(st.stream);
  if (s.sequences && s.reverse) reverse_steps(sequence, y, s, m);
}

void DnnlRnn::backward(const RnnShape& s, const float* x, const float* kernel,
                       const float* recurrent, const float* b, const float* y, const float* dy,
                       const void* workspace, float* dx, float* dkernel, float* drecurrent,
                       float* db, int64_t m) {
  State& st = state();
  State::Primitive& f = st.forward_for(s, m, true);
  State::Primitive& p = st.backward_for(s, m);
  const auto* ws = static_cast<const unsigned char*>(workspace);
  const std::size_t bias_floats = static_cast<std::size_t>(dnnl_bias_gates(s) * s.units);
  auto* folded = static_cast<float*>(p.bias.get());
  st.point_weights(p, s, kernel, recurrent, b, folded);
  st.point(p, p.a.src, x);
  st.point(p, p.a.dst_layer,
           y_is_dst_layer(s) ? static_cast<const void*>(y)
                             : static_cast<const void*>(ws + f.dst_layer_offset));
  st.point(p, p.a.dst_iter, y);
  st.point(p, p.a.dst_iter_c, ws + f.dst_iter_c_offset);
  st.point(p, p.a.workspace, ws);
  st.point(p, p.a.diff_src, dx ? static_cast<void*>(dx) : p.diff_src.get());
  // The gradients are written, not added to: zero what oneDNN accumulates into.
  const int64_t gates = rnn_gates(s.cell);
  const auto layer_bytes = static_cast<std::size_t>(s.inputs * gates * s.units) * sizeof(float);
  const auto iter_bytes = static_cast<std::size_t>(s.units * gates * s.units) * sizeof(float);
  for (auto [w, user, bytes] : {std::tuple{&p.diff_weights_layer, dkernel, layer_bytes},
                                {&p.diff_weights_iter, drecurrent, iter_bytes}}) {
    if (w->reordered) {  // into the primitive's layout, then reordered into the caller's
      w->reorder.point(1, user);
      dnnl::memory& mem = p.rnn.memories[w->arg];
      std::memset(mem.get_data_handle(), 0, mem.get_desc().get_size());
    } else {
      std::memset(user, 0, bytes);
      p.rnn.point(w->arg, user);
    }
  }
  float* diff_bias = lbr(s) || !s.bias ? folded + bias_floats : db;
  std::memset(diff_bias, 0, bias_floats * sizeof(float));
  st.point(p, p.a.diff_bias, diff_bias);
  const float* zeros = static_cast<const float*>(p.zeros.get());
  if (s.sequences && s.reverse) {
    reverse_steps(dy, static_cast<float*>(p.sequence.get()), s, m);
    st.point(p, p.a.diff_dst_layer, p.sequence.get());
  } else {
    st.point(p, p.a.diff_dst_layer, s.sequences ? dy : zeros);
  }
  st.point(p, p.a.diff_dst_iter, dy);
  st.point(p, p.a.diff_dst_iter_c, zeros);
  p.rnn.run(st.stream);
  for (Weight* w : {&p.diff_weights_layer, &p.diff_weights_iter})
    if (w->reordered) w->reorder.run(st.stream);
  if (s.bias && lbr(s)) unfold_gru_bias_gradient(diff_bias, db, s.units);
}

}  // namespace crossover::cpu
