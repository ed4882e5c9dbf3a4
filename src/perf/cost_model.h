// The cost model: the ops of one training step, their arithmetic (FLOPs, bytes, launches,
// host-device transfers), and a predicted time for each from a calibration profile.
//
// The op list is the step's own: the model is built and one training step is run on a
// RecordingBackend (perf/recording.h), which records each backend call the step makes (gather,
// forward, loss, backward, optimizer; in a GPU's naive mode, through the NaiveBackend, also its
// pageable batch copies, the counters' read-back and the sync). op_of() gives each recorded call
// its arithmetic, in one table keyed by the call; the mode adds only what happens around the
// step: the CPU's host dispatch, or a GPU's graph launch (resident). docs/PERF.md explains each
// formula.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "perf/profile.h"
#include "perf/recording.h"

namespace crossover {
class Sequential;
}

namespace crossover::perf {

// Where a step's time goes.
// allreduce: the gradients summed across the ranks (training over N > 1 ranks), after the
// backward pass and before the optimizer step; one blocking call, so nothing of it overlaps
// (overlapping it with the backward pass was measured not to pay: docs/DISTRIBUTED.md).
enum class Phase {
  host_overhead,
  h2d_copy,
  d2h_copy,
  gemm,
  elementwise,
  optimizer,
  sync_wait,
  allreduce
};
inline constexpr int kPhaseCount = 8;
const char* phase_name(Phase p);
// Throws Error for an unknown name.
Phase parse_phase(const std::string& name);

enum class DeviceKind { cpu, gpu };
// resident: data on the device, graph-captured steps, no per-step sync (a GPU's default; the only
//           mode of the CPU). naive: each batch copied from pageable host memory, one launch per
//           op with no fused epilogues and no graph, a sync every step.
enum class Mode { resident, naive };
const char* mode_name(Mode m);
// "resident" | "naive"; throws Error(where, ...) otherwise.
Mode parse_mode(const std::string& text, const std::string& where = "--mode");

// What the cost model needs to know about a network: enough to build it (a Sequential, or a
// functional model's graph) and run one training step.
struct ModelDesc {
  int64_t input_width = 0;  // features per sample after Flatten (784 for MNIST)
  std::vector<Layer> layers;
  // A functional model (Sequential::functional): how its layers connect (LayerGraph's fields but
  // its layers, which are `layers`); unset for a stack.
  struct Graph {
    std::vector<std::vector<int>> inputs;
    std::vector<int> input_layers, output_layers, shared_with;
  };
  std::optional<Graph> graph;
  OptimizerConfig optimizer = Adam();
  std::string loss = "sparse_categorical_crossentropy";  // as Sequential::compile takes it
  int64_t parameters() const;
  // The model it describes, uncompiled.
  Sequential model() const;
};
// From a built model (its input shape known); throws Error otherwise. An uncompiled model gets
// the defaults (Adam, sparse categorical cross-entropy).
ModelDesc describe(const Sequential& model);
// Flatten(input_width) -> [Dense(width, relu) -> Dropout(dropout)] x hidden -> Dense(classes,
// softmax): SMALL is mlp(784, {128}, 10, 0.2); BIG mlp(784, {1000, 1000}, 10, 0.2).
ModelDesc mlp(int64_t input_width, const std::vector<int64_t>& hidden, int64_t classes,
              double dropout);

struct Op {
  std::string name;   // "dense forward 784->128"
  std::string layer;  // "dense", "" for step-level ops
  std::string call;   // the backend call it is ("dense_forward"); "" for the mode's host op
  Phase phase = Phase::elementwise;
  std::string
      kernel;         // profile key: "gemm_forward", "dropout_forward", "adam", "h2d_pageable", ...
  int64_t flops = 0;  // GEMM floating-point operations (2 m n k); 0 for other ops
  int64_t bytes_read = 0;  // from memory (minimum, as the op's arguments imply)
  int64_t bytes_written = 0;
  int64_t elements = 0;        // the size the op's time scales with (m n for a GEMM's output)
  int64_t launches = 0;        // GPU kernel launches (graph nodes in resident mode); 0 on the CPU
  int64_t transfer_bytes = 0;  // host <-> device bytes
  int64_t calls = 0;           // backend calls the op is made of
  // GEMMs: the dense layer's shape (m, n, k follow from op; see GemmSample).
  int64_t batch = 0, in = 0, out = 0;
  // The call's shape as backend.h names it (BackendCall): a GEMM's x(m, k) . w(k, n); (m, n) for
  // the elementwise calls and the loss; gather_rows' m rows of n columns.
  int64_t m = 0, n = 0, k = 0;
  std::vector<int64_t> segments;  // optimizer: elements of each parameter tensor
  // Convolution and pooling (conv2d_*, pool2d_*): the call's shape and `batch` its samples (m, n,
  // k: the convolution as a GEMM, (batch * out_h * out_w, kernel_h * kernel_w * in_c) . (..,
  // out_c)); `bias` and `act` as recorded (the forward's bias and fused activation, the weight
  // gradient's bias).
  ConvShape conv;
  PoolShape pool;
  // Batch normalization (batchnorm_*): the call's shape, `batch` its samples.
  BatchNormShape norm;
  bool bias = false;
  ActivationKind act = ActivationKind::linear;
  // A GEMM fused with an optimizer update (the CPU's dense_backward_weights_update): the update's
  // profile kernel ("adam"), over `segments`; "" otherwise.
  std::string update;
  int ranks = 1;  // allreduce: the ranks it sums over (bytes_read: the gradients' bytes)
};

// The ops of one training step on `rows` rows (<= the batch size), in call order: the calls
// record_step() records, each priced by op_of(), with the mode's host op in front (the CPU's
// dispatch of the step's calls, or a GPU's graph launch in resident mode). Throws Error for
// rows < 1 and for the CPU in naive mode. With `ranks` > 1, the step of one rank of that many:
// `rows` is its share of the global batch (ceil(batch / ranks) for the largest), no update is
// fused into a weight gradient, the allreduce of the gradients follows the backward pass, and
// the optimizer updates every parameter (on every rank).
std::vector<Op> step_ops(const ModelDesc& model, int64_t rows, DeviceKind device, Mode mode,
                         int ranks = 1);

// The backend calls of one training step on `rows` rows: the model built as a Sequential and
// compiled onto a RecordingBackend that answers as `device` does (the CPU fuses each layer's
// update into its weight gradient, a GPU does not; Backend::fuses_weight_update), wrapped in the
// NaiveBackend in naive mode (graphs off), then Sequential::trace_training_step. No device and no
// parameter memory is needed. The model is compiled with a RecordingCollective of `ranks`
// ranks, whose allreduce is recorded in the list as Call::allreduce.
std::vector<BackendCall> record_step(const ModelDesc& model, int64_t rows, DeviceKind device,
                                     Mode mode, int ranks = 1);

// The one table of what each backend call costs: its phase, profile kernel, FLOPs, bytes read and
// written, elements, GPU launches and host-device bytes, from the call's own arguments. A new
// backend call adds one entry here and nothing per model.
Op op_of(const BackendCall& call, DeviceKind device, Mode mode);
// The phase a call's time belongs to (what op_of gives it; TimingBackend uses it too).
Phase call_phase(Call call);

struct Prediction {
  std::vector<double> op_seconds;  // per op of the list
  std::array<double, kPhaseCount> phase_seconds{};
  double step_seconds = 0;
  // The part of the GEMM phase that is optimizer updates fused into weight gradients (the CPU's
  // dense_backward_weights_update).
  double fused_update_seconds = 0;
  // One line per op the profile has no measurement of its own shape for, priced another way
  // (conv_pool_seconds, norm_seconds): "conv2d conv forward 28x28x1->26x26x32 at batch 128: ...".
  std::vector<std::string> estimates;
};
// One sentence on a prediction's estimates for `what` ("the step", "cuda:0's step"): "4 ops of
// the step have no measurement of their own shape in the profile and are estimated (...): ...";
// "" when there are none.
std::string estimates_sentence(const Prediction& p, const std::string& what,
                               const std::string& remedy);
// Each op's time from the profile (docs/PERF.md): GEMM flops / rate interpolated at its shape;
// elementwise and optimizer ops from the kernel's time-by-size curve (or bytes / bandwidth plus
// a per-call floor when the profile has no curve for it); on a GPU, per-op launch or graph-node
// floors, copies at the measured host-device bandwidth, a sync per step in naive mode.
// With Precision::bf16 the dense GEMMs are priced at the profile's bf16 rates (gemm_bf16).
Prediction predict(const std::vector<Op>& ops, const Profile& profile, Mode mode,
                   Precision precision = Precision::fp32);

// The roofline floor of a step (docs/PERF.md, "The physical floor"): each op at the larger of
// its FLOPs at the profile's peak GEMM rate (the best it measured) and its bytes (read and
// written) at the bandwidth of the smallest memory level whose capacity holds them (the larger of
// the bytes it reads and writes; Profile::memory_levels, or memory_bytes_per_second for every
// byte where the profile has no levels), host-device copies at the copy rate; host overhead and
// waits have none. An op with a fused optimizer update (Op::update) is its two parts one after
// the other: the GEMM's floor, then the update's bytes at their level's bandwidth. A lower bound:
// it assumes each op finds its data in the level that could hold it and overlaps its arithmetic
// with its memory traffic perfectly.
struct Floor {
  std::vector<double> op_seconds;  // per op of the list
  std::array<double, kPhaseCount> phase_seconds{};
  double step_seconds = 0;
  double gemm_seconds = 0;  // the GEMM floor alone: the ops' FLOPs at the peak rate
  // The part of step_seconds that is optimizer updates fused into weight gradients (in the GEMM
  // phase's floor): their bytes at their level's bandwidth, after the GEMM's own floor.
  double update_seconds = 0;
  double peak_flops_per_second = 0;
  std::vector<MemoryLevel> levels;   // the levels priced at (the profile's, or one "memory")
  std::vector<int64_t> level_bytes;  // per level: the bytes of the ops priced there
};
Floor roofline_floor(const std::vector<Op>& ops, const Profile& profile,
                     Precision precision = Precision::fp32);

// The seconds of a convolution or pooling op (conv2d_*, pool2d_*) from the profile: its own
// measurement at the exact shape (calibrate measures every shape a model's step makes, on
// demand); without one, the profile's nearest measurement of the same call scaled by FLOPs
// (convolution) or elements (pooling); without any, a convolution at the GEMM rate of its
// im2col product and pooling by its bytes at the memory bandwidth. `estimate` (when not null)
// gets "" for a measurement, else how the time was made.
double conv_pool_seconds(const Profile& profile, const Op& op, std::string* estimate = nullptr);
// The profile's name of what a conv2d_* or pool2d_* call runs: "forward", "backward_input",
// "backward_weights" (a transposed convolution's calls: those of the convolution it transposes)
// or "forward", "backward" (pooling).
std::string conv_pool_op(const std::string& call);

// The seconds of a batch-normalization op (batchnorm_*) from the profile: its own measurement at
// the exact shape and batch; without one, the nearest measurement of the same call scaled by
// elements; without any, its bytes at the memory bandwidth plus a call's (CPU) or graph node's
// (GPU) floor. `estimate` as for conv_pool_seconds.
double norm_seconds(const Profile& profile, const Op& op, std::string* estimate = nullptr);
// The seconds of an allreduce op (Phase::allreduce) from the profile's allreduce fit at the op's
// rank count (transport "mpi", the fewest hosts): interpolated between the sizes it measured
// (linear in the bytes; past the largest at its bytes per second), or latency + bytes / bandwidth
// for a fit without samples. Without one at that count, the nearest count's, scaled as a ring
// allreduce scales (latency by N - 1, the bytes each rank moves by (N - 1) / N); without any,
// 2 (N - 1) / N of the bytes read and written at the memory bandwidth. `estimate` (when not null)
// gets "" for a measured fit, else how the time was made.
double allreduce_seconds(const Profile& profile, const Op& op, std::string* estimate = nullptr);

// Why `model` cannot be trained on `device`: the Error its compile gives on a recorder that
// answers as that device does; "" when it can. Both of crossover's backends now have every layer
// (the recorder says so), so this finds only what a future layer one device lacks would add.
std::string unsupported_on(const ModelDesc& model, DeviceKind device);

// One epoch of `samples` samples at `batch` (full batches, then the ragged last one).
struct EpochPrediction {
  double seconds = 0;
  int64_t steps = 0;
  Prediction full_step;  // a full batch's step
};
// With `ranks` > 1: each step is the largest rank's share of the batch (ceil(batch / ranks)
// rows, ceil(rest / ranks) for the ragged last one), with the allreduce (step_ops).
EpochPrediction predict_epoch(const ModelDesc& model, int64_t samples, int64_t batch,
                              const Profile& profile, Mode mode, int ranks = 1,
                              Precision precision = Precision::fp32);

// The precision `profile` prices `precision` at: bf16 only where it has bf16 GEMM rates, else
// fp32 (its GEMMs at fp32 rates: an upper bound on a bf16 step, which callers say; the shipped
// H200 profile has none); fp32 and tf32 as they are.
Precision priced_precision(const Profile& profile, Precision precision);

// GEMM FLOPs of one epoch (what the arithmetic tests check: SMALL 24.5 GFLOP, BIG 552 GFLOP for
// 60,000 samples at batch 32).
int64_t epoch_gemm_flops(const ModelDesc& model, int64_t samples, int64_t batch);

// The rate the profile gives a dense GEMM (op "forward", "backward_weights", "backward_input") of
// a layer in -> out at `batch` rows: trilinear interpolation of log(rate) over log(batch),
// log(in), log(out) on the profile's grid, clamped at its edges (inverse-distance weighting when
// the samples do not form a grid). Precision::bf16 reads the profile's bf16 rates (gemm_bf16) and
// throws Error when it has none; fp32 and tf32 read its fp32 rates.
double gemm_rate(const Profile& profile, const std::string& op, int64_t batch, int64_t in,
                 int64_t out, Precision precision = Precision::fp32);
// The time of one call of `kernel` on `elements` elements: piecewise-linear interpolation over
// the kernel's samples, linear extrapolation in elements above, the smallest sample's time below.
// Returns a negative number when the profile has no curve for it.
double kernel_seconds(const Profile& profile, const std::string& kernel, int64_t elements);

// ---- the fused step (backends/fused_mlp.h: CompileOptions::fused_step, train --fused-step) ----
// One stage of the fused kernel, between two of its grid-wide barriers: each layer's forward, the
// loss, each layer's backward (weight and bias gradients, and the input gradient below it), the
// optimizer's update.
struct FusedStage {
  std::string name;    // "forward dense 784->128", "loss", "backward dense 128->10", "update"
  double seconds = 0;  // its work, without its barriers
  int64_t flops = 0;   // its products' FLOPs, as the kernel computes them (whole 32 x 32 tiles)
  int64_t bytes = 0;   // the bytes of its elementwise parts (priced at the memory bandwidth)
  int barriers = 0;    // grid-wide barriers: the one that ends it, and one per split product
};
struct FusedPrediction {
  // Why the step cannot be fused (the first rule it breaks, as train --fused-step says: the
  // model's, then the device's); "" when it can.
  std::string refusal;
  // Why it is not priced although it may be fusable: the profile has no fused-step rates
  // (Profile::fused_step; `crossover calibrate --device cuda:N` measures them). "" when priced.
  std::string unpriced;
  int blocks = 0;           // the cooperative grid (fused_mlp_launch_shape)
  int barriers = 0;         // grid-wide barriers per step
  int64_t state_bytes = 0;  // fused_mlp_state_bytes: parameters, gradients, optimizer slots
  double launch_seconds = 0, barrier_seconds = 0, stage_seconds = 0;
  double step_seconds = 0;  // launch + stages + barriers (0 when not priced)
  std::vector<FusedStage> stages;
  bool priced() const { return refusal.empty() && unpriced.empty(); }
};
// The fused step of `model` on `rows` rows on the GPU `profile` describes (docs/PERF.md, "The
// fused step"): one cooperative launch (profile.launch_seconds), then per stage its products as
// the kernel tiles them (fused_mlp_slices, fused_mlp_launch_shape): ceil(items / blocks) rounds of
// one 32 x 32 tile's FLOPs at the profile's per-block tile rate, its elementwise bytes at the
// memory bandwidth (the loss, which one block computes, at one multiprocessor's share of it), and
// each grid-wide barrier at the profile's barrier latency. Eligibility first (fused_mlp_chain on
// the model as the rules see it, Precision::fp32 and one rank only), then the rates (unpriced
// without them), then the device (the state must fit the profile's L2).
FusedPrediction predict_fused_step(const ModelDesc& model, int64_t rows, const Profile& profile,
                                   Precision precision = Precision::fp32, int ranks = 1);

}  // namespace crossover::perf
