// The op list of one training step: its backend calls, recorded (record_step), and each one's
// FLOPs, bytes and launches (op_of, step_ops).
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>

#include "core/error.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/backend_wrappers.h"
#include "perf/cost_model.h"
#include "perf/cost_model_internal.h"

namespace crossover::perf {

namespace {

// The counters a step's bookkeeping reads and writes (not the metric sums after them).
constexpr int64_t kCountersBytes = static_cast<int64_t>(offsetof(StepCounters, metric_sums));

}  // namespace

std::vector<BackendCall> record_step(const ModelDesc& model, int64_t rows, DeviceKind device,
                                     Mode mode, int ranks) {
  if (rows < 1) throw Error("cost model", "a step needs at least one row");
  if (ranks < 1) throw Error("cost model", "a step needs at least one rank");
  Sequential s = model.model();
  RecordingBackend* recorder = nullptr;
  CompileOptions o;
  o.graphs = mode == Mode::resident;
  o.initialize_weights = false;  // the calls do not depend on the values
  // Always a collective, of one rank too: a process started by mpirun may price any count.
  auto ranks_recorder = std::make_shared<RecordingCollective>(ranks);
  o.collective = ranks_recorder;
  o.make_backend = [&recorder, device, ranks_recorder]() -> std::unique_ptr<Backend> {
    auto r = device == DeviceKind::cpu ? std::make_unique<RecordingBackend>("cpu", true)
                                       : std::make_unique<RecordingBackend>("cuda:0", false);
    recorder = r.get();
    ranks_recorder->record_into(recorder);
    return r;
  };
  if (mode == Mode::naive)
    o.wrap_backend = [](std::unique_ptr<Backend> b) -> std::unique_ptr<Backend> {
      return std::make_unique<NaiveBackend>(std::move(b));
    };
  s.compile(model.optimizer, model.loss, {}, o);
  s.trace_training_step(rows, s.input_shape().empty() ? Shape{model.input_width} : Shape{});
  return recorder->calls();
}

Phase call_phase(Call call) {
  switch (call) {
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price) \
  case Call::name:                                                                        \
    return Phase::phase;
#include "backends/backend_ops.h"
    case Call::allreduce:
      return Phase::allreduce;
  }
  return Phase::elementwise;
}

namespace {
// The state an optimizer keeps per parameter (nn/optimizers.h, optimizer_slot_names): Adam's,
// Nadam's and Adamax's two moments, Adadelta's two accumulators, Adagrad's one, SGD's velocity
// (with momentum), RMSprop's mean square (and its momentum).
int64_t state_slots(const OptimizerConfig& cfg) { return optimizer_slot_count(cfg); }
}  // namespace

namespace {
// What op_of's pricing of one call reads, and the op it fills in.
struct OpBuilder {
  const BackendCall& c;
  Op& o;
  bool gpu = false, naive = false;
  int64_t m = 0, n = 0, k = 0, mn = 0;
  std::string at;  // the scope and a space, or ""

  void in_layer() { o.layer = c.scope; }
  void gemm(const char* kernel, int64_t batch, int64_t in, int64_t out) {
    in_layer();
    o.kernel = kernel;
    o.flops = 2 * m * k * n;
    o.batch = batch, o.in = in, o.out = out;
  }
};

// ---- convolution: priced from its own measurements (conv_pool_seconds). m, k, n: the
// convolution as a GEMM, (m * out_h * out_w, kernel_h * kernel_w * in_c) . (.., out_c); a dilated
// kernel has as many taps, so as many FLOPs, as a dense one. ----
void price_conv(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  const int64_t m = b.m;
  b.in_layer();
  const ConvShape& s = c.conv;
  const int64_t x = m * s.in_h * s.in_w * s.in_c, y = m * s.out_h * s.out_w * s.out_c;
  const int64_t w = s.kernel_h * s.kernel_w * s.in_c * s.out_c;
  o.m = m * s.out_h * s.out_w, o.k = s.kernel_h * s.kernel_w * s.in_c, o.n = s.out_c;
  o.flops = 2 * o.m * o.k * o.n;
  o.kernel = call_name(c.call);
  o.batch = m, o.conv = s, o.bias = c.bias, o.act = c.act;
  const std::string dilation = s.dilation_h == 1 && s.dilation_w == 1
                                   ? ""
                                   : fmt::format(" dilation {}x{}", s.dilation_h, s.dilation_w);
  const std::string shapes = fmt::format("{}x{}x{}->{}x{}x{}{}", s.in_h, s.in_w, s.in_c, s.out_h,
                                         s.out_w, s.out_c, dilation);
  // A transposed convolution's calls are those of the convolution s it transposes (forward and
  // backward input exchanged), named by its own shapes, out -> in.
  const std::string transposed = fmt::format("{}x{}x{}->{}x{}x{}{}", s.out_h, s.out_w, s.out_c,
                                             s.in_h, s.in_w, s.in_c, dilation);
  if (c.call == Call::conv2d_transpose_forward) {
    o.name = b.at + "conv transpose forward " + transposed;
    o.bytes_read = kFloat * (y + w + (c.bias ? s.in_c : 0));
    o.bytes_written = kFloat * x;
    o.elements = x;
  } else if (c.call == Call::conv2d_transpose_backward_input) {
    o.name = b.at + "conv transpose backward input " + transposed;
    o.bytes_read = kFloat * (x + w);
    o.bytes_written = kFloat * y;
    o.elements = y;
  } else if (c.call == Call::conv2d_transpose_backward_weights) {
    o.name = b.at + "conv transpose backward weights " + transposed;
    o.bytes_read = kFloat * (x + y);
    o.bytes_written = kFloat * (w + (c.bias ? s.in_c : 0));
    o.elements = w;
  } else if (c.call == Call::conv2d_forward) {
    o.name = b.at + "conv forward " + shapes;
    o.bytes_read = kFloat * (x + w + (c.bias ? s.out_c : 0));
    o.bytes_written = kFloat * y;
    o.elements = y;
  } else if (c.call == Call::conv2d_backward_input) {
    o.name = b.at + "conv backward input " + shapes;
    o.bytes_read = kFloat * (y + w);
    o.bytes_written = kFloat * x;
    o.elements = x;
  } else {
    o.name = b.at + "conv backward weights " + shapes;
    o.bytes_read = kFloat * (x + y);
    o.bytes_written = kFloat * (w + (c.bias ? s.out_c : 0));
    o.elements = w;
  }
}

// ---- pooling: priced from its own measurements too ----
void price_pool(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  const int64_t m = b.m;
  b.in_layer();
  const PoolShape& s = c.pool;
  const int64_t x = m * s.in_h * s.in_w * s.channels, y = m * s.out_h * s.out_w * s.channels;
  const bool forward = c.call == Call::pool2d_forward;
  o.kernel = call_name(c.call);
  o.name =
      fmt::format("{}{} pool {} {}x{}x{}->{}x{}", b.at, s.kind == PoolKind::max ? "max" : "average",
                  forward ? "forward" : "backward", s.in_h, s.in_w, s.channels, s.out_h, s.out_w);
  o.m = m, o.n = y / std::max<int64_t>(m, 1);
  o.batch = m, o.pool = s;
  o.elements = forward ? y : x;
  o.bytes_read = kFloat * (forward ? x : y);
  o.bytes_written = kFloat * (forward ? y : x);
}

// ---- nearest-neighbour upsampling: copies and block sums, priced by their bytes at the memory
// bandwidth (calibrate has no curve for it). ----
void price_upsample(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  b.in_layer();
  const PoolShape& s = c.pool;
  const int64_t x = b.m * s.in_h * s.in_w * s.channels, y = b.m * s.out_h * s.out_w * s.channels;
  const bool forward = c.call == Call::upsample2d_forward;
  o.kernel = call_name(c.call);
  o.name = fmt::format("{}upsample {} {}x{}x{}->{}x{}", b.at, forward ? "forward" : "backward",
                       s.in_h, s.in_w, s.channels, s.out_h, s.out_w);
  o.m = b.m, o.n = y / std::max<int64_t>(b.m, 1);
  o.elements = y;
  o.flops = forward ? 0 : y;
  o.bytes_read = kFloat * (forward ? x : y);
  o.bytes_written = kFloat * (forward ? y : x);
}

// ---- batch normalization: priced from its own measurements (norm_seconds). Per element:
// the training forward reads x twice (statistics, then normalisation) and writes y, ~8
// FLOPs; the backward reads x and dy twice (the two channel sums, then dx) and writes dx,
// ~12 FLOPs; the moving update is 6 FLOPs per channel. On a GPU (norm_kernels.cu) the training
// forward is 5 kernels (two sums and their totals, then y), the backward 3. ----
void price_batch_norm(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  b.in_layer();
  const BatchNormShape& s = c.norm;
  const int64_t x = b.m * s.spatial * s.channels, ch = s.channels;
  const int64_t weights = (s.scale ? ch : 0) + (s.center ? ch : 0);
  o.kernel = call_name(c.call);
  o.m = b.m, o.n = s.spatial * ch;
  o.batch = b.m, o.norm = s;
  const std::string shape = fmt::format("{}x{}", s.spatial, ch);
  if (c.call == Call::batchnorm_forward_training) {
    o.name = b.at + "batch norm forward (batch statistics) " + shape;
    if (b.gpu) o.launches = 5;
    o.flops = 8 * x;
    o.elements = x;
    o.bytes_read = kFloat * (2 * x + weights);
    o.bytes_written = kFloat * (x + 2 * ch);
  } else if (c.call == Call::batchnorm_forward_inference) {
    o.name = b.at + "batch norm forward (moving statistics) " + shape;
    o.flops = 2 * x;
    o.elements = x;
    o.bytes_read = kFloat * (x + weights + 2 * ch);
    o.bytes_written = kFloat * x;
  } else if (c.call == Call::batchnorm_backward) {
    o.name = b.at + "batch norm backward " + shape;
    if (b.gpu) o.launches = 3;
    o.flops = 12 * x;
    o.elements = x;
    o.bytes_read = kFloat * (4 * x + weights + 2 * ch);
    o.bytes_written = kFloat * (x + weights);
  } else {
    o.name = b.at + "batch norm moving statistics " + shape;
    o.m = 1, o.n = ch;
    o.flops = 6 * ch;
    o.elements = 2 * ch;
    o.bytes_read = kFloat * 4 * ch;
    o.bytes_written = kFloat * 2 * ch;
  }
}

// ---- layer normalization over rows of n features (m rows): priced by its bytes at the memory
// bandwidth (calibrate has no curve for it). The forward reads x twice (the row is in cache for
// the second pass only when it is short: counted as read once more) and writes y and two floats
// a row, ~8 FLOPs an element; the backward reads x and dy for the row sums, again for dx, and
// once more for the parameters' column sums, ~14 FLOPs an element. On a GPU the backward is
// 2 kernels (the columns' sums, then dx). ----
void price_layer_norm(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  b.in_layer();
  const int64_t x = b.mn, rows = b.m, n = b.n;
  o.kernel = call_name(c.call);
  o.elements = x;
  const std::string shape = fmt::format("{}x{}", rows, n);
  if (c.call == Call::layernorm_forward) {
    o.name = b.at + "layer norm forward " + shape;
    o.flops = 8 * x;
    o.bytes_read = kFloat * (2 * x + 2 * n);
    o.bytes_written = kFloat * (x + (c.gradient ? 2 * rows : 0));
  } else {
    o.name = b.at + "layer norm backward " + shape;
    if (b.gpu && c.bias) o.launches = 2;
    o.flops = 14 * x;
    o.bytes_read = kFloat * ((c.bias ? 6 : 4) * x + n + 2 * rows);
    o.bytes_written = kFloat * (x + (c.bias ? 2 * n : 0));
  }
}

// ---- host <-> device (inside a step only in naive mode: the NaiveBackend's copies), the
// step's sync, the ranks' allreduce, and the step's own small calls ----
void price_step_call(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  switch (c.call) {
    case Call::upload:
      o.name = "copy " + c.scope + " to device (pageable)";
      o.kernel = "h2d_pageable";
      o.elements = c.bytes / kFloat;
      o.bytes_read = o.bytes_written = o.transfer_bytes = c.bytes;
      o.launches = 0;
      break;
    case Call::download:
    case Call::download_async:  // recorded as Call::download
      o.name = fmt::format("read back {} bytes (d2h)", c.bytes);
      o.kernel = "d2h_pageable";
      o.bytes_read = o.bytes_written = o.transfer_bytes = c.bytes;
      o.launches = 0;
      break;
    case Call::synchronize:
      o.name = "synchronize (each step)";
      o.kernel = "sync";
      o.launches = 0;
      break;
    // The gradients summed across the ranks (Collective::allreduce_sum, in place).
    case Call::allreduce:
      o.name = fmt::format("allreduce gradients over {} ranks ({:.2f} MB)", c.ranks,
                           static_cast<double>(c.bytes) / 1e6);
      o.kernel = "allreduce";
      o.elements = b.n;
      o.bytes_read = o.bytes_written = c.bytes;
      o.ranks = c.ranks;
      o.launches = 0;
      break;
    case Call::fill:
      o.name = b.at + "fill";
      o.kernel = "fill";
      o.elements = b.n;
      o.bytes_written = kFloat * b.n;
      break;
    case Call::advance_batch:
      o.name = "advance the batch counter";
      o.kernel = "advance_batch";
      o.elements = 1;
      o.bytes_read = o.bytes_written = kCountersBytes;
      break;
    // The batch: m rows of n columns by the epoch's indices.
    case Call::gather_rows:
      o.name = "gather " + c.scope;
      o.kernel = b.n == 1 ? "gather_labels" : "gather_rows";
      o.elements = b.mn;
      o.bytes_read = kFloat * b.mn + 4 * b.m;  // the rows and their int32 indices
      o.bytes_written = kFloat * b.mn;
      break;
    default:  // op_of sends only the calls above here
      break;
  }
}

// ---- recurrent layers: each step's two products (the input's and the state's) as one GEMM of
// (m, inputs + units) . (.., gates * units) per step, at the dense GEMMs' measured rate for that
// shape; the gates' element-wise work rides on it. The backward pass is two such products per
// step (the input gradients and the weight gradients). ----
void price_rnn(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  const RnnShape& s = c.rnn;
  const int64_t m = b.m, in = s.inputs + s.units, out = rnn_gates(s.cell) * s.units;
  const bool forward = c.call == Call::rnn_forward;
  b.m = m * s.steps, b.k = in, b.n = out;
  b.gemm(forward ? "gemm_forward" : "gemm_backward_input", m, in, out);
  if (!forward) o.flops *= 2;
  o.m = m * s.steps, o.k = in, o.n = out;
  const char* cell = s.cell == RnnCell::lstm ? "lstm" : s.cell == RnnCell::gru ? "gru" : "rnn";
  o.name = fmt::format("{}{} {} {}x{}->{}", b.at, cell, forward ? "forward" : "backward", s.steps,
                       s.inputs, s.units);
  const int64_t x = m * s.steps * s.inputs, y = rnn_output_size(s, m);
  const int64_t w = in * out + rnn_bias_size(s), gates = m * s.steps * out;
  o.bytes_read = kFloat * (forward ? x + w : x + w + y + gates);
  o.bytes_written = kFloat * (forward ? y + (c.gradient ? gates : 0) : x + w);
  o.elements = forward ? y : w;
  if (b.gpu) o.launches = 2 * s.steps;
}

// ---- the dense layers' GEMMs ----
void price_dense(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  const int64_t m = b.m, n = b.n, k = b.k, mn = b.mn;
  if (c.call == Call::dense_forward) {
    b.gemm("gemm_forward", m, k, n);
    o.name = fmt::format("{}forward {}->{}", b.at, k, n);
    o.bytes_read = kFloat * (m * k + k * n + (c.bias ? n : 0));
    o.bytes_written = kFloat * mn;
    o.elements = mn;
    // Naive mode (no graph): the bias and ReLU epilogue runs as its own kernel.
    const bool epilogue = c.bias || c.act == ActivationKind::relu;
    if (b.gpu && b.naive && epilogue) o.launches = 2;
  } else if (c.call == Call::dense_backward_weights) {
    b.gemm("gemm_backward_weights", m, k, n);
    o.name = fmt::format("{}backward weights {}->{}", b.at, k, n);
    o.bytes_read = kFloat * (m * k + mn);
    o.bytes_written = kFloat * (k * n + (c.bias ? n : 0));
    o.elements = k * n;
    if (b.gpu && b.naive && c.bias) o.launches = 2;  // the bias gradient, its own kernel
  } else if (c.call == Call::dense_backward_weights_update) {
    // The CPU's fused call: the weight gradient, each thread's rows of it then updated from
    // that thread's cache, so the gradient is not read back from memory.
    b.gemm("gemm_backward_weights", m, k, n);
    const int64_t params = k * n + (c.bias ? n : 0);
    o.name = fmt::format("{}backward weights {}->{} + {} update", b.at, k, n,
                         optimizer_name(c.optimizer.kind));
    o.update = optimizer_name(c.optimizer.kind);
    o.segments = c.segments;
    const int64_t slots = state_slots(c.optimizer);
    o.bytes_read = kFloat * (m * k + mn) + kFloat * params * (1 + slots);
    o.bytes_written = kFloat * params * (1 + slots);
    o.elements = k * n;
  } else {  // dense_backward_input
    b.gemm("gemm_backward_input", m, k, n);
    o.name = fmt::format("{}backward input {}->{}", b.at, k, n);
    o.bytes_read = kFloat * (mn + k * n);
    o.bytes_written = kFloat * m * k;
    o.elements = m * k;
  }
}

// ---- activations, elementwise over (m, n) ----
void price_activation(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  const int64_t mn = b.mn;
  b.in_layer();
  const bool forward = c.call == Call::activation_forward;
  o.name = fmt::format("{}{} {}", b.at, activation_name(c.act), forward ? "forward" : "backward");
  o.elements = mn;
  if (c.act == ActivationKind::linear && c.in_place) {
    o.kernel = "identity";  // nothing to do: the call returns at once
    o.launches = 0;
  } else if (c.act == ActivationKind::linear) {
    o.kernel = "copy";
    o.bytes_read = o.bytes_written = kFloat * mn;
  } else {
    o.kernel = std::string(activation_name(c.act)) + (forward ? "_forward" : "_backward");
    // backward: y and dy, and x for the activations whose gradient needs their input
    o.bytes_read = (forward ? 1 : activation_needs_input(c.act) ? 3 : 2) * kFloat * mn;
    o.bytes_written = kFloat * mn;
  }
}

// ---- the merging layers' sums and column copies (Add, Concatenate, a graph's gradients) ----
void price_merge(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  b.in_layer();
  if (c.call == Call::add) {
    o.name = b.at + "add";
    o.kernel = "add";
    o.elements = b.n;
    o.bytes_read = 2 * kFloat * b.n;
    o.bytes_written = kFloat * b.n;
  } else if (c.call == Call::binary_forward || c.call == Call::binary_backward) {
    // at most two operands read (and dy), the result (or two gradients) written
    const bool forward = c.call == Call::binary_forward;
    o.name = b.at + (forward ? "element-wise forward" : "element-wise backward");
    o.kernel = forward ? "binary_forward" : "binary_backward";
    o.elements = b.mn;
    o.bytes_read = (forward ? 2 : 3) * kFloat * b.mn;
    o.bytes_written = (forward ? 1 : 2) * kFloat * b.mn;
  } else if (c.call == Call::row_sum) {
    o.name = b.at + "row sums";
    o.kernel = "row_sum";
    o.elements = b.mn;
    o.bytes_read = kFloat * b.mn;
    o.bytes_written = kFloat * c.m;
  } else if (c.call == Call::permute) {
    o.name = b.at + "permute";
    o.kernel = "permute";
    o.elements = b.mn;
    o.bytes_read = o.bytes_written = kFloat * b.mn;
  } else {  // copy_columns
    o.name = b.at + fmt::format("copy {} columns", b.n);
    o.kernel = "copy";
    o.elements = b.mn;
    o.bytes_read = o.bytes_written = kFloat * b.mn;
  }
}

// ---- dropout and the noise layers, elementwise over (m, n), with a byte mask or factors ----
void price_dropout(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  const int64_t mn = b.mn;
  b.in_layer();
  o.elements = mn;
  if (c.call == Call::dropout_forward) {
    o.name = b.at + "forward";
    o.kernel = "dropout_forward";
    o.bytes_read = kFloat * mn;
    o.bytes_written = kFloat * mn + mn;  // the output and the mask
  } else if (c.call == Call::dropout_backward) {
    o.name = b.at + "backward";
    o.kernel = "dropout_backward";
    o.bytes_read = kFloat * mn + mn;
    o.bytes_written = kFloat * mn;
  } else if (c.call == Call::noise_forward) {
    // Priced as dropout's forward (Philox draws per value): the output and the float factors.
    o.name = b.at + "noise";
    o.kernel = "dropout_forward";
    o.bytes_read = kFloat * mn;
    o.bytes_written = 2 * kFloat * mn;
  } else {  // relu_dropout_backward
    o.name = b.at + "+ relu backward";
    o.kernel = "relu_dropout_backward";
    o.bytes_read = 2 * kFloat * mn;
    o.bytes_written = kFloat * mn;
  }
}

// ---- the loss, fused with the output activation's backward ----
void price_loss(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  const bool sparse = c.loss == LossKind::sparse_categorical_crossentropy;
  o.name = b.at + (c.gradient ? "forward+backward" : "forward");
  o.kernel = sparse && c.act == ActivationKind::softmax ? "loss_sparse_softmax" : "loss";
  o.elements = b.mn;
  o.bytes_read = kFloat * (b.mn + b.m * (sparse ? 1 : b.n));  // the output and the targets
  o.bytes_written = c.gradient ? kFloat * b.mn : 0;
}

// A compiled metric's sum over the batch: reads the output and the targets.
void price_metric(OpBuilder& b) {
  Op& o = b.o;
  o.name = b.at + "metric";
  o.kernel = "metric";
  o.elements = b.mn;
  o.bytes_read = kFloat * (b.mn + b.m * b.c.k);
  o.bytes_written = 0;
}

// A regularizer (a weight's kernel_regularizer after backward; a layer's activity regularizer or
// add_loss term, in the passes): reads the values (and the gradient it adds to), writes the
// gradient; its penalty is one sum.
void price_regularizer(OpBuilder& b) {
  Op& o = b.o;
  o.name = b.at + (b.c.gradient ? "penalty gradient" : "penalty");
  o.kernel = "regularize";
  o.elements = b.n;
  o.bytes_read = kFloat * b.n * (b.c.gradient ? 2 : 1);
  o.bytes_written = b.c.gradient ? kFloat * b.n : 0;
}

// ---- the optimizer: every parameter, one call ----
void price_optimizer(OpBuilder& b) {
  const BackendCall& c = b.c;
  Op& o = b.o;
  const OptimizerConfig& cfg = c.optimizer;
  if (c.segments.empty()) {
    // Every layer was updated with its gradient: the step's learning rate and counters only.
    o.name = "end of step (learning rate, counters)";
    o.kernel = "step_end";
    o.elements = 1;
    o.bytes_read = o.bytes_written = kCountersBytes;
    return;
  }
  o.name = std::string(optimizer_name(cfg.kind)) + " update";
  o.kernel = std::string(optimizer_name(cfg.kind));
  o.segments = c.segments;
  for (int64_t s : c.segments) o.elements += s;
  // Per element it reads the value, the gradient and its state (state_slots), and writes the
  // value and the state; clipping by the global norm reads every gradient once more first.
  const int64_t slots = state_slots(cfg);
  o.bytes_read =
      kFloat * o.elements * (2 + slots + (cfg.clipnorm > 0 || cfg.tensor_clipnorm > 0 ? 1 : 0));
  o.bytes_written = kFloat * o.elements * (1 + slots);
}
}  // namespace

Op op_of(const BackendCall& c, DeviceKind device, Mode mode) {
  Op o;
  OpBuilder b{.c = c,
              .o = o,
              .gpu = device == DeviceKind::gpu,
              .naive = mode == Mode::naive,
              .m = c.m,
              .n = c.n,
              .k = c.k,
              .mn = c.m * c.n,
              .at = c.scope.empty() ? "" : c.scope + " "};
  o.call = call_name(c.call);
  o.phase = call_phase(c.call);
  o.m = c.m, o.n = c.n, o.k = c.k;
  o.calls = 1;
  o.launches = b.gpu ? 1 : 0;  // one kernel (one graph node in resident mode), unless said below
  switch (c.call) {            // each operation's price family (backends/backend_ops.h)
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price) \
  case Call::name:                                                                        \
    price_##price(b);                                                                     \
    break;
#include "backends/backend_ops.h"
    case Call::allreduce:  // the Collective's, not a backend operation
      price_step_call(b);
      break;
  }
  return o;
}

std::vector<Op> step_ops(const ModelDesc& model, int64_t m, DeviceKind device, Mode mode,
                         int ranks) {
  if (device == DeviceKind::cpu && mode == Mode::naive)
    throw Error("--mode",
                "naive mode applies to a GPU: the CPU has no launches or host-device copies");
  std::vector<Op> ops;
  for (const BackendCall& c : record_step(model, m, device, mode, ranks))
    ops.push_back(op_of(c, device, mode));
  // Around the step: the host's dispatch of its calls (CPU), or the graph's launch (GPU
  // resident). Naive mode's copies and sync are recorded calls already.
  if (device == DeviceKind::cpu) {
    Op o;
    o.name = fmt::format("host: step dispatch ({} backend calls)", ops.size());
    o.phase = Phase::host_overhead;
    o.kernel = "call";
    o.elements = static_cast<int64_t>(ops.size());
    ops.insert(ops.begin(), std::move(o));
  } else if (mode == Mode::resident) {
    Op o;
    o.name = "host: graph launch";
    o.phase = Phase::host_overhead;
    o.kernel = "graph_launch";
    o.calls = 1;
    ops.insert(ops.begin(), std::move(o));
  }
  return ops;
}

}  // namespace crossover::perf
