#include "perf/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <set>

#include "core/error.h"
#include "nn/layers/kind.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/backend_wrappers.h"

namespace crossover::perf {

namespace {

constexpr int64_t kFloat = 4;
// The counters a step's bookkeeping reads and writes (not the metric sums after them).
constexpr int64_t kCountersBytes = static_cast<int64_t>(offsetof(StepCounters, metric_sums));

}  // namespace

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::host_overhead:
      return "host_overhead";
    case Phase::h2d_copy:
      return "h2d_copy";
    case Phase::d2h_copy:
      return "d2h_copy";
    case Phase::gemm:
      return "gemm";
    case Phase::elementwise:
      return "elementwise";
    case Phase::optimizer:
      return "optimizer";
    case Phase::sync_wait:
      return "sync_wait";
    case Phase::allreduce:
      return "allreduce";
  }
  return "?";
}

Phase parse_phase(const std::string& name) {
  for (int i = 0; i < kPhaseCount; ++i)
    if (name == phase_name(static_cast<Phase>(i))) return static_cast<Phase>(i);
  throw Error("phase", "unknown phase '" + name + "'");
}

const char* mode_name(Mode m) { return m == Mode::resident ? "resident" : "naive"; }

Mode parse_mode(const std::string& text, const std::string& where) {
  if (text == "resident") return Mode::resident;
  if (text == "naive") return Mode::naive;
  throw Error(where, "unknown mode '" + text + "' (expected resident or naive)");
}

Sequential ModelDesc::model() const {
  if (!graph) return Sequential(layers);
  return Sequential(LayerGraph{layers, graph->inputs, graph->input_layers, graph->output_layers,
                               graph->shared_with});
}

int64_t ModelDesc::parameters() const {
  // As the model's own optimizer step sees them: one segment per parameter tensor.
  int64_t n = 0;
  for (const BackendCall& c : record_step(*this, 1, DeviceKind::cpu, Mode::resident))
    for (int64_t s : c.segments) n += s;
  return n;
}

ModelDesc describe(const Sequential& model) {
  ModelDesc d;
  const Shape in = model.input_shape();
  if (in.empty()) throw Error(model.name(), "the model's input shape is not known yet");
  d.input_width = 1;
  for (int64_t v : in) d.input_width *= v;
  d.layers = model.layers();
  if (model.functional()) {
    LayerGraph g = model.layer_graph();
    d.graph = ModelDesc::Graph{std::move(g.inputs), std::move(g.input_layers),
                               std::move(g.output_layers), std::move(g.shared_with)};
  }
  if (model.compiled()) {  // else the defaults: Adam, sparse categorical cross-entropy
    d.optimizer = model.optimizer();
    d.loss = model.loss_name();
  }
  return d;
}

ModelDesc mlp(int64_t input_width, const std::vector<int64_t>& hidden, int64_t classes,
              double dropout) {
  ModelDesc d;
  d.input_width = input_width;
  d.layers.push_back(Flatten({input_width}));
  for (int64_t w : hidden) {
    d.layers.push_back(Dense(w, "relu"));
    if (dropout > 0) d.layers.push_back(Dropout(dropout));
  }
  d.layers.push_back(Dense(classes, "softmax"));
  return d;
}

// ---- the op list: the step's own calls, recorded -----------------------------------------------
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
#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase) \
  case Call::name:                                                         \
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
// ~12 FLOPs; the moving update is 6 FLOPs per channel. On a GPU (kernels.cu) the training
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
  switch (c.call) {
    case Call::conv2d_forward:
    case Call::conv2d_backward_input:
    case Call::conv2d_backward_weights:
    case Call::conv2d_transpose_forward:
    case Call::conv2d_transpose_backward_input:
    case Call::conv2d_transpose_backward_weights:
      price_conv(b);
      break;
    case Call::pool2d_forward:
    case Call::pool2d_backward:
      price_pool(b);
      break;
    case Call::upsample2d_forward:
    case Call::upsample2d_backward:
      price_upsample(b);
      break;
    case Call::batchnorm_forward_training:
    case Call::batchnorm_forward_inference:
    case Call::batchnorm_backward:
    case Call::batchnorm_update_moving:
      price_batch_norm(b);
      break;
    case Call::layernorm_forward:
    case Call::layernorm_backward:
      price_layer_norm(b);
      break;
    case Call::upload:
    case Call::download:
    case Call::download_async:
    case Call::synchronize:
    case Call::allreduce:
    case Call::fill:
    case Call::advance_batch:
    case Call::gather_rows:
      price_step_call(b);
      break;
    case Call::dense_forward:
    case Call::dense_backward_weights:
    case Call::dense_backward_weights_update:
    case Call::dense_backward_input:
      price_dense(b);
      break;
    case Call::activation_forward:
    case Call::activation_backward:
      price_activation(b);
      break;
    case Call::dropout_forward:
    case Call::dropout_backward:
    case Call::relu_dropout_backward:
    case Call::noise_forward:
      price_dropout(b);
      break;
    case Call::add:
    case Call::copy_columns:
    case Call::binary_forward:
    case Call::binary_backward:
    case Call::row_sum:
    case Call::permute:
      price_merge(b);
      break;
    case Call::loss_forward_backward:
      price_loss(b);
      break;
    case Call::metric_sum:
      price_metric(b);
      break;
    case Call::optimizer_step:
      price_optimizer(b);
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

// ---- interpolation --------------------------------------------------------------------------
namespace {

struct GemmPoint {
  double b, i, o;  // log2 of batch, in, out
  double log_rate;
};

void to_layer_shape(const GemmSample& g, int64_t& batch, int64_t& in, int64_t& out) {
  if (g.op == "backward_weights") {
    batch = g.k, in = g.m, out = g.n;
  } else if (g.op == "backward_input") {
    batch = g.m, in = g.n, out = g.k;
  } else {
    batch = g.m, in = g.k, out = g.n;
  }
}

// Index of the grid value at or below v (clamped), and the fraction towards the next one.
void bracket(const std::vector<double>& axis, double v, std::size_t& lo, double& t) {
  if (axis.size() == 1 || v <= axis.front()) {
    lo = 0;
    t = 0;
    return;
  }
  if (v >= axis.back()) {
    lo = axis.size() - 2;
    t = 1;
    return;
  }
  lo = static_cast<std::size_t>(std::upper_bound(axis.begin(), axis.end(), v) - axis.begin()) - 1;
  t = (v - axis[lo]) / (axis[lo + 1] - axis[lo]);
}

}  // namespace

Precision priced_precision(const Profile& profile, Precision precision) {
  return precision == Precision::bf16 && profile.gemm_bf16.empty() ? Precision::fp32 : precision;
}

double gemm_rate(const Profile& profile, const std::string& op, int64_t batch, int64_t in,
                 int64_t out, Precision precision) {
  const bool bf16 = precision == Precision::bf16;
  const std::vector<GemmSample>& samples = bf16 ? profile.gemm_bf16 : profile.gemm;
  if (bf16 && samples.empty())
    throw Error(profile.source.empty() ? "profile" : profile.source,
                "has no bf16 GEMM rates: calibrate measures them on a CPU with AVX512_BF16 or "
                "AMX-BF16");
  std::vector<GemmPoint> pts;
  for (const std::string& want : {op, std::string()}) {
    for (const GemmSample& g : samples) {
      if (g.op != want) continue;
      int64_t b, i, o;
      to_layer_shape(g, b, i, o);
      pts.push_back({std::log2(double(b)), std::log2(double(i)), std::log2(double(o)),
                     std::log(g.flops_per_second)});
    }
    if (!pts.empty()) break;
  }
  if (pts.empty())
    for (const GemmSample& g : samples) {
      int64_t b, i, o;
      to_layer_shape(g, b, i, o);
      pts.push_back({std::log2(double(b)), std::log2(double(i)), std::log2(double(o)),
                     std::log(g.flops_per_second)});
    }
  if (pts.empty())
    throw Error(profile.source.empty() ? "profile" : profile.source, "has no GEMM rates");
  const double qb = std::log2(double(std::max<int64_t>(batch, 1)));
  const double qi = std::log2(double(std::max<int64_t>(in, 1)));
  const double qo = std::log2(double(std::max<int64_t>(out, 1)));

  // A full grid: trilinear interpolation of log(rate), clamped at the edges.
  std::set<double> sb, si, so;
  std::map<std::tuple<double, double, double>, double> grid;
  for (const GemmPoint& p : pts) {
    sb.insert(p.b), si.insert(p.i), so.insert(p.o);
    grid[{p.b, p.i, p.o}] = p.log_rate;
  }
  if (grid.size() == sb.size() * si.size() * so.size()) {
    const std::vector<double> ab(sb.begin(), sb.end()), ai(si.begin(), si.end()),
        ao(so.begin(), so.end());
    std::size_t lb, li, lo;
    double tb, ti, to;
    bracket(ab, qb, lb, tb);
    bracket(ai, qi, li, ti);
    bracket(ao, qo, lo, to);
    double acc = 0;
    for (int db = 0; db < 2; ++db)
      for (int di = 0; di < 2; ++di)
        for (int dn = 0; dn < 2; ++dn) {
          const double w = (db ? tb : 1 - tb) * (di ? ti : 1 - ti) * (dn ? to : 1 - to);
          if (w == 0) continue;
          const double b = ab[std::min(lb + db, ab.size() - 1)];
          const double i = ai[std::min(li + di, ai.size() - 1)];
          const double o = ao[std::min(lo + dn, ao.size() - 1)];
          acc += w * grid.at({b, i, o});
        }
    return std::exp(acc);
  }
  // Scattered samples: inverse-distance weighting in log space (power 4: nearly nearest).
  double num = 0, den = 0;
  for (const GemmPoint& p : pts) {
    const double d2 = (p.b - qb) * (p.b - qb) + (p.i - qi) * (p.i - qi) + (p.o - qo) * (p.o - qo);
    if (d2 < 1e-12) return std::exp(p.log_rate);
    const double w = 1.0 / (d2 * d2);
    num += w * p.log_rate;
    den += w;
  }
  return std::exp(num / den);
}

double kernel_seconds(const Profile& profile, const std::string& kernel, int64_t elements) {
  auto it = profile.kernels.find(kernel);
  if (it == profile.kernels.end() || it->second.empty()) return -1;
  const auto& s = it->second;
  const double n = static_cast<double>(elements);
  if (elements <= s.front().elements) return s.front().seconds;
  if (elements >= s.back().elements)
    return s.back().seconds * n / static_cast<double>(s.back().elements);
  const auto hi = std::upper_bound(s.begin(), s.end(), elements,
                                   [](int64_t e, const KernelSample& k) { return e < k.elements; });
  const auto lo = hi - 1;
  const double t = (n - double(lo->elements)) / double(hi->elements - lo->elements);
  return lo->seconds + t * (hi->seconds - lo->seconds);
}

// ---- prediction ----------------------------------------------------------------------------
namespace {

double streaming(const Profile& p, int64_t bytes) {
  return static_cast<double>(bytes) / p.memory_bytes_per_second;
}

// Device (or CPU) time of an elementwise or optimizer op.
double kernel_time(const Profile& p, const Op& o, double floor) {
  if (o.phase == Phase::optimizer && p.kind == "cpu" && !o.segments.empty()) {
    // The CPU updates one parameter tensor after another (a parallel loop each): at least the sum
    // of each tensor's time, measured alone. Alone, a tensor's state may fit a cache that the
    // whole update overflows (BIG's 1.8 M parameters move 50 MB through Adam each step), so also
    // at least the time of one call on all the elements at once, from the same curve.
    double t = 0;
    bool have = true;
    for (int64_t s : o.segments) {
      const double k = kernel_seconds(p, o.kernel, s);
      if (k < 0) {
        have = false;
        break;
      }
      t += k;
    }
    if (have) return std::max(t, kernel_seconds(p, o.kernel, o.elements));
  }
  const double k = kernel_seconds(p, o.kernel, o.elements);
  if (k >= 0) return k;
  return floor + streaming(p, o.bytes_read + o.bytes_written);
}

// The update fused into a weight gradient (the CPU's dense_backward_weights_update): each
// tensor's update as the profile's curve measured it alone, at the op's own bytes per element
// where the profile has no curve for it.
double fused_update_time(const Profile& p, const Op& o) {
  int64_t elements = 0;
  for (int64_t s : o.segments) elements += s;
  if (elements == 0) return 0;
  const double gemm_bytes = double(kFloat * (o.m * o.k + o.m * o.n));
  const double per_element = (double(o.bytes_read + o.bytes_written) - gemm_bytes) / elements;
  double t = 0;
  for (int64_t s : o.segments) {
    const double k = kernel_seconds(p, o.update, s);
    t += k >= 0 ? k : streaming(p, static_cast<int64_t>(per_element * double(s)));
  }
  return t;
}

const char* gemm_op(const std::string& kernel) {
  if (kernel == "gemm_backward_weights") return "backward_weights";
  if (kernel == "gemm_backward_input") return "backward_input";
  return "forward";
}

}  // namespace

std::string conv_pool_op(const std::string& call) {
  // A transposed convolution runs the convolution it transposes, with forward and backward_input
  // exchanged (backends/backend_ops.h).
  if (call == "conv2d_transpose_forward") return "backward_input";
  if (call == "conv2d_transpose_backward_input") return "forward";
  if (call == "conv2d_transpose_backward_weights") return "backward_weights";
  return call.substr(call.find('_') + 1);
}

double conv_pool_seconds(const Profile& p, const Op& o, std::string* estimate) {
  const std::string op = conv_pool_op(o.call);
  const std::string at = fmt::format("{} at batch {}: ", o.name, o.batch);
  auto say = [&](const std::string& how) {
    if (estimate) *estimate = at + how;
  };
  if (estimate) estimate->clear();
  const double flops = static_cast<double>(o.flops);
  if (o.call.rfind("conv2d_", 0) == 0) {
    const bool relu = o.act == ActivationKind::relu;
    const ConvSample* nearest = nullptr;
    double distance = 0;
    for (const ConvSample& s : p.conv2d) {
      if (s.op != op) continue;
      if (s.shape == o.conv && s.batch == o.batch && s.bias == o.bias && s.relu == relu)
        return s.seconds;
      const ConvShape& c = s.shape;
      const double f = 2.0 * double(s.batch * c.out_h * c.out_w) *
                       double(c.kernel_h * c.kernel_w * c.in_c) * double(c.out_c);
      const double d = std::fabs(std::log(f) - std::log(std::max(flops, 1.0)));
      if (!nearest || d < distance) nearest = &s, distance = d;
    }
    if (nearest) {
      const ConvShape& c = nearest->shape;
      const double f = 2.0 * double(nearest->batch * c.out_h * c.out_w) *
                       double(c.kernel_h * c.kernel_w * c.in_c) * double(c.out_c);
      say(fmt::format(
          "not measured; scaled by FLOPs from the profile's {} {}x{}x{}->{}x{}x{} at batch {}", op,
          c.in_h, c.in_w, c.in_c, c.out_h, c.out_w, c.out_c, nearest->batch));
      return nearest->seconds * flops / f;
    }
    say("not measured (the profile has no convolutions); priced at the GEMM rate of its im2col "
        "product");
    const char* gemm = op == "forward"          ? "forward"
                       : op == "backward_input" ? "backward_input"
                                                : "backward_weights";
    return flops / gemm_rate(p, gemm, o.m, o.k, o.n);
  }
  const PoolSample* nearest = nullptr;
  double distance = 0;
  auto elements_of = [&](const PoolSample& s) {
    const PoolShape& c = s.shape;
    return static_cast<double>(s.batch * c.channels *
                               (op == "forward" ? c.out_h * c.out_w : c.in_h * c.in_w));
  };
  for (const PoolSample& s : p.pool2d) {
    if (s.op != op || s.shape.kind != o.pool.kind) continue;
    if (s.shape == o.pool && s.batch == o.batch) return s.seconds;
    const double d = std::fabs(std::log(elements_of(s)) -
                               std::log(std::max<double>(static_cast<double>(o.elements), 1)));
    if (!nearest || d < distance) nearest = &s, distance = d;
  }
  if (nearest) {
    const PoolShape& c = nearest->shape;
    say(fmt::format("not measured; scaled by elements from the profile's {} {}x{}x{} at batch {}",
                    op, c.in_h, c.in_w, c.channels, nearest->batch));
    return nearest->seconds * static_cast<double>(o.elements) / elements_of(*nearest);
  }
  say("not measured (the profile has no pooling); priced by its bytes at the memory bandwidth");
  return (p.kind == "gpu" ? p.graph_node_seconds : p.call_seconds) +
         streaming(p, o.bytes_read + o.bytes_written);
}

double norm_seconds(const Profile& p, const Op& o, std::string* estimate) {
  const std::string op = o.call.substr(o.call.find('_') + 1);  // "forward_training", ...
  if (estimate) estimate->clear();
  auto elements_of = [](const NormSample& s) {
    return static_cast<double>(s.op == "update_moving"
                                   ? 2 * s.shape.channels
                                   : s.batch * s.shape.spatial * s.shape.channels);
  };
  const NormSample* nearest = nullptr;
  double distance = 0;
  const double elements = std::max<double>(static_cast<double>(o.elements), 1);
  for (const NormSample& s : p.batchnorm) {
    if (s.op != op) continue;
    if (s.shape == o.norm && s.batch == o.batch) return s.seconds;
    const double d = std::fabs(std::log(elements_of(s)) - std::log(elements));
    if (!nearest || d < distance) nearest = &s, distance = d;
  }
  const std::string at = fmt::format("{} at batch {}: ", o.name, o.batch);
  if (nearest) {
    if (estimate)
      *estimate = at + fmt::format(
                           "not measured; scaled by elements from the profile's {} {}x{} "
                           "at batch {}",
                           op, nearest->shape.spatial, nearest->shape.channels, nearest->batch);
    return nearest->seconds * elements / elements_of(*nearest);
  }
  if (estimate)
    *estimate = at +
                "not measured (the profile has no batch normalization); priced by its bytes at the "
                "memory bandwidth";
  return (p.kind == "gpu" ? p.graph_node_seconds : p.call_seconds) +
         streaming(p, o.bytes_read + o.bytes_written);
}

namespace {
// The time of an allreduce of `bytes` at the fit's own rank count, as latency + the bytes' part.
// From the measured sizes where the fit has them: between two of them linear in the bytes, past
// the largest at the largest's bytes per second, below the smallest the smallest's time. The line
// of the fit alone misleads between sizes: on shared memory a buffer that fits the caches moves
// three to four times faster than one that does not (2026-12-01, Zen 4: 3.1 GB/s at 1 MB, 0.8
// at 4 MB and up), and the line through all sizes followed the small ones. A fit without samples
// (made by hand): its latency + bytes / its bandwidth.
std::pair<double, double> allreduce_at(const AllreduceFit& f, double bytes) {
  const std::vector<AllreduceSample>& s = f.samples;
  if (s.size() < 2) return {f.latency_seconds, bytes / f.bytes_per_second};
  double t;
  if (bytes <= static_cast<double>(s.front().bytes)) {
    t = s.front().seconds;
  } else if (bytes >= static_cast<double>(s.back().bytes)) {
    t = s.back().seconds * bytes / static_cast<double>(s.back().bytes);
  } else {
    const auto hi = std::upper_bound(
        s.begin(), s.end(), bytes,
        [](double b, const AllreduceSample& x) { return b < static_cast<double>(x.bytes); });
    const auto lo = hi - 1;
    const double w = (bytes - double(lo->bytes)) / double(hi->bytes - lo->bytes);
    t = lo->seconds + w * (hi->seconds - lo->seconds);
  }
  const double latency = std::clamp(f.latency_seconds, 0.0, t);
  return {latency, t - latency};
}
}  // namespace

double allreduce_seconds(const Profile& p, const Op& o, std::string* estimate) {
  if (estimate) estimate->clear();
  const double bytes = static_cast<double>(o.bytes_read);
  const int n = std::max(o.ranks, 1);
  if (n == 1) return 0;
  // A ring allreduce: each rank sends and receives (N - 1) / N of the buffer twice, in 2 (N - 1)
  // steps.
  auto ring = [](int ranks) { return static_cast<double>(ranks - 1) / ranks; };
  // The fit at the nearest rank count (the exact one first), on the fewest hosts.
  const AllreduceFit* nearest = nullptr;
  for (const AllreduceFit& f : p.allreduce) {
    if (f.transport != "mpi") continue;
    const auto key = [n](const AllreduceFit& e) {
      return std::pair{std::abs(e.ranks - n), e.hosts};
    };
    if (!nearest || key(f) < key(*nearest)) nearest = &f;
  }
  if (nearest) {
    const auto [latency, transfer] = allreduce_at(*nearest, bytes);
    if (nearest->ranks == n) return latency + transfer;
    if (estimate)
      *estimate = fmt::format(
          "{}: not measured at {} ranks; scaled from the profile's {} ranks as a ring allreduce "
          "scales",
          o.name, n, nearest->ranks);
    return latency * (n - 1) / std::max(nearest->ranks - 1, 1) +
           transfer * ring(n) / ring(nearest->ranks);
  }
  if (estimate)
    *estimate = o.name +
                ": not measured (the profile has no allreduce); priced as a ring allreduce at the "
                "memory bandwidth";
  return p.call_seconds + 2 * ring(n) * 2 * bytes / p.memory_bytes_per_second;
}

std::string unsupported_on(const ModelDesc& model, DeviceKind device) {
  try {
    record_step(model, 1, device, Mode::resident);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string estimates_sentence(const Prediction& p, const std::string& what,
                               const std::string& remedy) {
  const std::vector<std::string>& est = p.estimates;
  if (est.empty()) return "";
  const bool one = est.size() == 1;
  return fmt::format(
      "{} op{} of {} {} no measurement of {} own shape in the profile and {} "
      "estimated ({}): {}{}.",
      est.size(), one ? "" : "s", what, one ? "has" : "have", one ? "its" : "their",
      one ? "is" : "are", remedy, est.front(),
      one ? "" : fmt::format(" (and {} more)", est.size() - 1));
}

Floor roofline_floor(const std::vector<Op>& ops, const Profile& p, Precision precision) {
  Floor f;
  const std::vector<GemmSample>& rates =
      precision == Precision::bf16 && !p.gemm_bf16.empty() ? p.gemm_bf16 : p.gemm;
  for (const GemmSample& g : rates)
    f.peak_flops_per_second = std::max(f.peak_flops_per_second, g.flops_per_second);
  if (!(f.peak_flops_per_second > 0)) throw Error("roofline", "the profile has no GEMM rate");
  f.levels = p.memory_levels;
  if (f.levels.empty()) f.levels.push_back({"memory", 0, p.memory_bytes_per_second});
  f.level_bytes.assign(f.levels.size(), 0);
  f.op_seconds.assign(ops.size(), 0.0);
  // The seconds of `bytes` (read and written; `held` the larger side) at the bandwidth of the
  // smallest level that holds `held`, counted there.
  const auto memory = [&f](int64_t bytes, int64_t held) {
    std::size_t level = f.levels.size() - 1;
    for (std::size_t l = 0; l < f.levels.size(); ++l)
      if (f.levels[l].bytes == 0 || held <= f.levels[l].bytes) {
        level = l;
        break;
      }
    f.level_bytes[level] += bytes;
    return double(bytes) / f.levels[level].bytes_per_second;
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    if (o.phase == Phase::host_overhead || o.phase == Phase::sync_wait) continue;
    const double compute = static_cast<double>(o.flops) / f.peak_flops_per_second;
    double t = 0;
    if (o.update.empty()) {
      t = std::max(compute,
                   memory(o.bytes_read + o.bytes_written, std::max(o.bytes_read, o.bytes_written)));
    } else {
      // An optimizer update fused into a weight gradient runs after it on each thread's rows
      // (the gradient stays in cache, not read back): the two parts one after the other, the
      // GEMM at its roofline and the update's pass over weights and state at its bandwidth.
      const int64_t gemm_read = kFloat * (o.m * o.k + o.m * o.n);
      const int64_t update_read = std::max<int64_t>(o.bytes_read - gemm_read, 0);
      const double update =
          memory(update_read + o.bytes_written, std::max(update_read, o.bytes_written));
      t = std::max(compute, memory(gemm_read, gemm_read)) + update;
      f.update_seconds += update;
    }
    if (o.transfer_bytes > 0) {
      const TransferRates& r =
          o.phase == Phase::d2h_copy ? p.d2h_bytes_per_second : p.h2d_bytes_per_second;
      const double rate = r.pinned.value_or(r.pageable.value_or(p.memory_bytes_per_second));
      t += double(o.transfer_bytes) / rate;
    }
    f.op_seconds[i] = t;
    f.phase_seconds[static_cast<std::size_t>(o.phase)] += t;
    f.step_seconds += t;
    if (o.phase == Phase::gemm) f.gemm_seconds += compute;
  }
  return f;
}

Prediction predict(const std::vector<Op>& ops, const Profile& p, Mode mode, Precision precision) {
  Prediction r;
  r.op_seconds.assign(ops.size(), 0.0);
  const bool gpu = p.kind == "gpu";
  if (!gpu && mode == Mode::naive)
    throw Error("--mode",
                "naive mode applies to a GPU: the CPU has no launches or host-device copies");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& o = ops[i];
    const bool norm = o.call.rfind("batchnorm_", 0) == 0;
    const bool conv_pool = o.call.rfind("conv2d_", 0) == 0 || o.call.rfind("pool2d_", 0) == 0;
    double device = 0;  // time the op's own phase gets
    double host = 0;    // time host_overhead gets on its account (GPU naive: launch-bound part)
    switch (o.phase) {
      case Phase::gemm: {
        if (conv_pool) {
          std::string estimate;
          device = conv_pool_seconds(p, o, &estimate);
          if (!estimate.empty()) r.estimates.push_back(estimate);
          break;
        }
        device = static_cast<double>(o.flops) /
                 gemm_rate(p, gemm_op(o.kernel), o.batch, o.in, o.out, precision);
        if (gpu && mode == Mode::naive && o.launches > 1) {
          // The epilogue the graph mode fuses runs as its own kernel: one more pass over the
          // output.
          const int64_t extra = o.kernel == "gemm_forward" ? 2 * kFloat * o.batch * o.out
                                                           : kFloat * (o.batch * o.out + o.out);
          device += streaming(p, extra);
        }
        if (!o.update.empty()) {
          const double u = fused_update_time(p, o);
          device += u;
          r.fused_update_seconds += u;
        }
        break;
      }
      case Phase::elementwise:
      case Phase::optimizer:
        if (norm) {
          std::string estimate;
          device = norm_seconds(p, o, &estimate);
          if (!estimate.empty()) r.estimates.push_back(estimate);
          break;
        }
        if (conv_pool) {
          std::string estimate;
          device = conv_pool_seconds(p, o, &estimate);
          if (!estimate.empty()) r.estimates.push_back(estimate);
          break;
        }
        device = kernel_time(p, o, gpu ? p.graph_node_seconds : p.call_seconds);
        break;
      case Phase::host_overhead:
        if (o.kernel == "graph_launch")
          host = p.graph_launch_seconds;
        else
          host = static_cast<double>(o.elements) * p.call_seconds;
        break;
      case Phase::h2d_copy:
        device = p.h2d_latency_seconds +
                 static_cast<double>(o.transfer_bytes) /
                     p.h2d_bytes_per_second.pageable.value_or(p.memory_bytes_per_second);
        break;
      case Phase::d2h_copy:
        device = p.d2h_latency_seconds +
                 static_cast<double>(o.transfer_bytes) /
                     p.d2h_bytes_per_second.pageable.value_or(p.memory_bytes_per_second);
        break;
      case Phase::sync_wait:
        device = p.sync_seconds;
        break;
      case Phase::allreduce: {
        // One blocking call after the backward pass: nothing overlaps it yet.
        std::string estimate;
        device = allreduce_seconds(p, o, &estimate);
        if (!estimate.empty()) r.estimates.push_back(estimate);
        break;
      }
    }
    if (gpu && o.launches > 0) {
      if (mode == Mode::resident) {
        device = std::max(device, static_cast<double>(o.launches) * p.graph_node_seconds);
      } else {
        // The host enqueues each launch; when that takes longer than the kernels run, the GPU
        // waits for the host: the difference is host overhead.
        host += std::max(0.0, static_cast<double>(o.launches) * p.launch_seconds - device);
      }
    }
    r.phase_seconds[static_cast<std::size_t>(o.phase)] += device;
    r.phase_seconds[static_cast<std::size_t>(Phase::host_overhead)] += host;
    r.op_seconds[i] = device + host;
    r.step_seconds += device + host;
  }
  return r;
}

EpochPrediction predict_epoch(const ModelDesc& model, int64_t samples, int64_t batch,
                              const Profile& profile, Mode mode, int ranks, Precision precision) {
  if (samples < 1 || batch < 1)
    throw Error("cost model", "samples and batch size must be positive");
  const DeviceKind dev = profile.kind == "gpu" ? DeviceKind::gpu : DeviceKind::cpu;
  const int64_t b = std::min(batch, samples);
  const int64_t full = samples / b, rest = samples % b;
  if (ranks < 1) throw Error("cost model", "ranks must be positive");
  // The largest rank's share of a batch of `rows`: the step every rank waits for.
  auto share = [ranks](int64_t rows) { return (rows + ranks - 1) / ranks; };
  EpochPrediction e;
  e.full_step = predict(step_ops(model, share(b), dev, mode, ranks), profile, mode, precision);
  e.steps = full + (rest ? 1 : 0);
  e.seconds = static_cast<double>(full) * e.full_step.step_seconds;
  if (rest)
    e.seconds += predict(step_ops(model, share(rest), dev, mode, ranks), profile, mode, precision)
                     .step_seconds;
  return e;
}

int64_t epoch_gemm_flops(const ModelDesc& model, int64_t samples, int64_t batch) {
  const int64_t b = std::min(batch, samples);
  const int64_t full = samples / b, rest = samples % b;
  auto flops = [&](int64_t rows) {
    int64_t f = 0;
    for (const Op& o : step_ops(model, rows, DeviceKind::cpu, Mode::resident)) f += o.flops;
    return f;
  };
  return full * flops(b) + (rest ? flops(rest) : 0);
}

}  // namespace crossover::perf

// ---- the fused step -----------------------------------------------------------------------------
namespace crossover::perf {

namespace {

// The model as the fused step's rules see it (backends/fused_mlp.h), from its description: a
// stack of layers (ModelDesc is a Sequential's), no sample weights, no metrics beyond accuracy.
// `slots` holds the parameter sizes the view points at.
FusedModelView fused_view_of(const ModelDesc& model, Precision precision, int ranks,
                             std::vector<ParamSlot>& slots) {
  FusedModelView v;
  v.loss = model.loss == "categorical_crossentropy" ? LossKind::categorical_crossentropy
           : model.loss == "sparse_categorical_crossentropy"
               ? LossKind::sparse_categorical_crossentropy
               : LossKind::mean_squared_error;  // any other: refused as not a cross-entropy
  v.optimizer = model.optimizer;
  v.ranks = ranks;
  v.fp32 = precision == Precision::fp32;
  slots.reserve(2 * model.layers.size());  // pointers into it stay valid
  // A graph: whether it is a chain, and which of its layers are called more than once.
  std::vector<char> shared(model.layers.size(), 0);
  if (model.graph) {
    const ModelDesc::Graph& g = *model.graph;
    for (std::size_t i = 0; i < g.inputs.size(); ++i)
      v.chain = v.chain && (i == 0 ? g.inputs[i].empty()
                                   : g.inputs[i] == std::vector<int>{static_cast<int>(i) - 1});
    shared = called_more_than_once(g.shared_with);
  }
  int64_t width = model.input_width;
  for (const Layer& l : model.layers) {
    // What each kind tells the fused step's rules (as Sequential's compile asks it).
    const LayerKind& kind = layer_kind(l);
    FusedLayerView lv;
    kind.describe_fused(l, lv);
    lv.name = l.name.empty() ? std::string(layer_type_name(l.type)) : l.name;
    lv.activation = kind.activation(l).kind;
    lv.trainable = l.trainable;
    lv.shared = shared[static_cast<std::size_t>(&l - model.layers.data())] != 0;
    lv.in_width = width;
    lv.out_width = width;
    if (lv.kind == FusedLayerView::Kind::dense) {
      const DenseArgs& a = l.args<DenseArgs>();
      lv.out_width = a.units;
      ParamSlot kernel;
      kernel.n = width * a.units;
      slots.push_back(kernel);
      lv.kernel = &slots.back();
      if (a.use_bias) {
        ParamSlot bias;
        bias.n = a.units;
        bias.decay = false;
        slots.push_back(bias);
        lv.bias = &slots.back();
      }
      width = a.units;
    }
    v.layers.push_back(lv);
  }
  return v;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

FusedPrediction predict_fused_step(const ModelDesc& model, int64_t rows, const Profile& profile,
                                   Precision precision, int ranks) {
  FusedPrediction f;
  if (rows < 1) throw Error("cost model", "a step needs at least one row");
  std::vector<ParamSlot> slots;
  FusedMlpStep step;
  f.refusal = fused_mlp_chain(fused_view_of(model, precision, ranks, slots), step);
  if (!f.refusal.empty()) return f;
  step.rows = rows;
  step.batch = rows;
  step.y_cols = step.loss == LossKind::categorical_crossentropy ? step.layers.back().out : 1;
  f.state_bytes = fused_mlp_state_bytes(step);
  if (profile.kind != "gpu") {
    f.refusal = "the fused step runs on a GPU, and this is a CPU's profile";
    return f;
  }
  if (!profile.fused_step) {
    f.unpriced = fmt::format(
        "the profile ({}) has no fused-step rates (its grid barrier and tile rate: `crossover "
        "calibrate --device cuda:N` measures them)",
        profile.source.empty() ? profile.name : profile.source);
    return f;
  }
  const FusedStepRates& rates = *profile.fused_step;
  // Cooperative launch: calibrate measured the rates with one, so the device has it.
  f.refusal = fused_mlp_device_problem(step, true, rates.blocks_per_sm, rates.l2_bytes);
  if (!f.refusal.empty()) return f;
  const FusedLaunchShape shape =
      fused_mlp_launch_shape(profile.cores, rates.blocks_per_sm, fused_mlp_work_items(step));
  if (shape.blocks < 1) {
    f.refusal = "the profile records no multiprocessor";
    return f;
  }
  f.blocks = shape.blocks;
  const double bandwidth = profile.memory_bytes_per_second;
  const int64_t t = kFusedTile;
  // A product of (r, c, depth) in `slices` slices: its seconds, FLOPs and extra barriers (the
  // slices' sum after one), as tile_product and product in backends/cuda/fused_mlp.cu run it.
  auto product = [&](FusedStage& s, int64_t r, int64_t c, int64_t depth, int slices) {
    const int64_t tiles = ceil_div(r, t) * ceil_div(c, t);
    const int64_t chunks = std::max<int64_t>(ceil_div(ceil_div(depth, t), slices), 1);
    const int64_t items = tiles * slices;
    const int64_t item_flops = 2 * t * t * chunks * t;
    s.seconds +=
        static_cast<double>(ceil_div(items, f.blocks) * item_flops) / rates.block_flops_per_second;
    s.flops += items * item_flops;
    if (slices > 1) {  // the slices' partial sums added in order after a barrier
      const int64_t bytes = (slices + 1) * r * c * 4;
      s.bytes += bytes;
      s.seconds += static_cast<double>(bytes) / bandwidth;
      ++s.barriers;
    }
  };
  const int64_t m = rows;
  const std::size_t n = step.layers.size();
  for (std::size_t l = 0; l < n; ++l) {
    const FusedDense& d = step.layers[l];
    FusedStage s{fmt::format("forward dense {}->{}", d.in, d.out)};
    product(s, m, d.out, d.in,
            fused_mlp_slices(d.in, ceil_div(m, t) * ceil_div(d.out, t), f.blocks));
    ++s.barriers;
    f.stages.push_back(s);
  }
  {
    // Block 0 alone: the targets copied, each row's softmax, loss and gradient, the rows' sums.
    const int64_t c = step.layers.back().out;
    FusedStage s{"loss"};
    s.bytes = m * c * 4 * 3 + m * step.y_cols * 4 * 2 + m * 16 * 2;
    s.seconds = static_cast<double>(s.bytes) / (bandwidth / std::max(profile.cores, 1));
    s.barriers = 1;
    f.stages.push_back(s);
  }
  for (std::size_t l = n; l-- > 0;) {
    const FusedDense& d = step.layers[l];
    FusedStage s{fmt::format("backward dense {}->{}", d.in, d.out)};
    product(s, d.in, d.out, m, 1);  // dW = x^T . dz
    if (d.bias.n > 0) {             // db: column sums of dz
      const int64_t bytes = (m + 1) * d.out * 4;
      s.bytes += bytes;
      s.seconds += static_cast<double>(bytes) / bandwidth;
    }
    if (l > 0)  // dz below = dz . W^T (through the mask and the relu's derivative)
      product(s, m, d.in, d.out,
              fused_mlp_slices(d.out, ceil_div(m, t) * ceil_div(d.in, t), f.blocks));
    ++s.barriers;
    f.stages.push_back(s);
  }
  {
    int64_t params = 0;
    for (const FusedDense& d : step.layers) params += d.kernel.n + d.bias.n;
    const int64_t s_count = optimizer_slot_count(step.optimizer);
    FusedStage s{"update"};
    s.bytes = params * 4 * ((2 + s_count) + (1 + s_count));  // w, g, slots in; w, slots out
    s.seconds = static_cast<double>(s.bytes) / bandwidth;
    f.stages.push_back(s);
  }
  for (const FusedStage& s : f.stages) {
    f.barriers += s.barriers;
    f.stage_seconds += s.seconds;
  }
  f.launch_seconds = profile.launch_seconds;
  f.barrier_seconds = f.barriers * rates.grid_sync_seconds;
  f.step_seconds = f.launch_seconds + f.stage_seconds + f.barrier_seconds;
  return f;
}

}  // namespace crossover::perf
