// The one narrow kernel interface between the model (nn/) and a device (backends/cpu, cuda).
//
// Model code includes only this header; a backend never includes model code. The operations are
// listed, each with its contract, in backends/backend_ops.h. All pointers they take are the
// backend's own memory (host memory for the CPU, device memory for CUDA), float32,
// row-major, obtained from allocate() (but for gather_rows's src where reads_host_memory()). A call
// only enqueues work: on CUDA it returns before the kernel has run, and the calls of one training
// step are captured once as a CUDA graph and replayed. So nothing that changes from step to step is
// passed by value: it lives in StepCounters, in backend memory, and is advanced by advance_step()
// on the device itself.
//
// The per-element arithmetic (optimizer updates, the learning-rate schedule, a loss row, softmax)
// is written once in backends/kernel_math.h and used by every backend, host and device.
//
// Shapes are written (rows, columns). A "batch" has m rows (m <= the planned batch size; the
// ragged last batch of an epoch has fewer).
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "backends/step_config.h"
#include "core/error.h"

namespace crossover {

// Keras's activations. The first five the loss op may apply to the final layer's logits (softmax
// and sigmoid fused with a cross-entropy); the others (loss_applies_activation false,
// kernel_math.h) are always applied by their layer. leaky_relu and elu take a parameter
// (negative_slope, alpha: `alpha` of the activation calls); gelu (exact, Keras's default) and
// swish need their input for the gradient (activation_needs_input).
enum class ActivationKind {
  linear,
  relu,
  sigmoid,
  tanh,
  softmax,
  elu,
  selu,
  leaky_relu,
  gelu,
  softplus,
  swish,
  exponential,
  // Not a Keras activation (parse_activation refuses the name): the square root of a custom
  // layer's traced call() (tf.sqrt, keras.ops.sqrt), an Activation layer of it (Sqrt()).
  sqrt,
};

// Whether the loss op may apply the activation to the final layer's logits (linear, relu,
// sigmoid, tanh, softmax); it sees the others as linear, and their layer applies them.
constexpr bool loss_applies_activation(ActivationKind a) {
  return a == ActivationKind::linear || a == ActivationKind::relu || a == ActivationKind::sigmoid ||
         a == ActivationKind::tanh || a == ActivationKind::softmax;
}

// Whether the gradient needs the activation's input x, not only its output y: GELU and swish
// are not monotonic, so y does not determine x.
constexpr bool activation_needs_input(ActivationKind a) {
  return a == ActivationKind::gelu || a == ActivationKind::swish;
}

// A metric's per-sample value, computed on the device from a batch's predictions and targets
// (metric_row in backends/kernel_math.h, Keras 3's definitions); nn/metrics.h names them.
enum class MetricKind {
  mean_absolute_error,                // mean over the row of |t - p|
  mean_squared_error,                 // mean over the row of (t - p)^2
  categorical_accuracy,               // argmax p == argmax t
  sparse_categorical_accuracy,        // argmax p == t (a class index)
  binary_accuracy,                    // mean over the row of t == (p > threshold)
  top_k_categorical_accuracy,         // argmax t among p's top k (ties count in)
  sparse_top_k_categorical_accuracy,  // t (a class index) among p's top k
};

// The most metrics besides the loss's accuracy one model computes (StepCounters::metric_sums).
inline constexpr int kMaxMetrics = 8;

// Per-step values that kernels read from backend memory (so a captured graph stays valid).
struct StepCounters {
  int64_t step = 0;         // optimizer steps taken so far (Adam's t is step + 1)
  int64_t batch_index = 0;  // batch within the current epoch
  float learning_rate = 0;  // the schedule's value for this step, written by update_learning_rate
  float grad_scale = 1;     // 1, or the clip-by-global-norm factor computed this step
  // The value the optimizer carries between steps besides its slots (Nadam's u_product), with
  // the step it was brought to (optimizers/unit.h, CarriedValue).
  CarriedValue carried;
  // Running sums for the epoch's loss and metrics, read by the progress line asynchronously.
  double loss_sum = 0;                   // sum over samples of the per-sample loss
  double correct_sum = 0;                // number of correctly classified samples
  double sample_count = 0;               // samples seen
  double metric_sums[kMaxMetrics] = {};  // sums over samples of each compiled metric's value
};

// One parameter tensor and its optimizer state, all of n floats.
struct ParamSlot {
  float* value = nullptr;
  float* grad = nullptr;
  // The optimizer's state, Keras's variables by kind (slot1, slot2): Adam, Nadam (momentum,
  // velocity); SGD (momentum, -); RMSprop (velocity, momentum: only with momentum > 0);
  // Adagrad (accumulator, -); Adadelta (accumulated_grad, accumulated_delta_var); Adamax
  // (momentum, norm); Adam with amsgrad also slot3 (velocity_hat). See optimizer_slot_names in
  // nn/optimizers.h.
  float* slot1 = nullptr;
  float* slot2 = nullptr;  // may be null
  int64_t n = 0;
  bool decay = true;  // weight decay applies (kernels); not to biases
  // Adam's velocity_hat with OptimizerConfig::amsgrad (null otherwise); last, so that the
  // positional initialisations of the two-slot optimizers stay as they are.
  float* slot3 = nullptr;
};

// Memory a device can still allocate, and where that number comes from (for messages).
struct MemoryAvailable {
  std::size_t bytes = 0;
  std::string source;  // "MemAvailable in /proc/meminfo", "cudaMemGetInfo", ...
};

// A 2-D convolution, channels last: x (m, in_h, in_w, in_c), kernel (kernel_h, kernel_w, in_c,
// out_c) as Keras stores it, bias (out_c), y (m, out_h, out_w, out_c). Padding is given per side
// (TensorFlow's 'same' puts the odd row and column at the bottom and right). Dilation (Keras's
// dilation_rate, atrous convolution) spaces the kernel's taps dilation_h rows apart: output row
// oy reads input rows oy * stride_h - pad_top + ky * dilation_h, so the kernel spans an effective
// (kernel_h - 1) * dilation_h + 1 rows; out_h = (in_h + pad_top + pad_bottom - effective
// kernel_h) / stride_h + 1, and the same for the width.
struct ConvShape {
  int64_t in_h = 0, in_w = 0, in_c = 0;
  int64_t out_h = 0, out_w = 0, out_c = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  auto operator<=>(const ConvShape&) const = default;
};
// The rows (columns) a kernel of `kernel` taps `dilation` apart spans: (kernel - 1) * dilation + 1.
inline int64_t dilated_extent(int64_t kernel, int64_t dilation) {
  return (kernel - 1) * dilation + 1;
}

enum class PoolKind { max, average };

// A 2-D pooling window over each channel, channels last: x (m, in_h, in_w, channels), y (m,
// out_h, out_w, channels). Padded positions never count: max ignores them, the average divides by
// the number of real elements in the window (TensorFlow's 'same').
struct PoolShape {
  PoolKind kind = PoolKind::max;
  int64_t in_h = 0, in_w = 0, channels = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t window_h = 0, window_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  auto operator<=>(const PoolShape&) const = default;
};

// A recurrent layer over a batch of m sequences (Keras's SimpleRNN, LSTM, GRU): x (m, steps,
// inputs), the state starting at zeros, y the state after every step (m, steps, units) when
// `sequences` (Keras's return_sequences), else after the last (m, units). The weights as Keras
// keeps them, gates in Keras's order: kernel (inputs, gates * units), recurrent_kernel (units,
// gates * units), bias (gates * units; a GRU with reset_after (2, 3 * units): input and recurrent
// biases). LSTM gates i, f, c, o (sigmoid, tanh for c and the output); GRU z, r, h (sigmoid,
// tanh; h = z * h_prev + (1 - z) * candidate, reset_after: the reset gate applied after the
// recurrent product, Keras 3's default and cuDNN's); SimpleRNN one gate of `activation` (tanh,
// relu or sigmoid). `reverse` (Keras's go_backwards): the steps last to first, and y's steps in
// that order (Keras's reversed sequence).
enum class RnnCell { simple, lstm, gru };
struct RnnShape {
  RnnCell cell = RnnCell::lstm;
  int64_t steps = 0, inputs = 0, units = 0;
  ActivationKind activation = ActivationKind::tanh;  // SimpleRNN's
  bool reset_after = true;                           // GRU's
  bool sequences = false;
  bool reverse = false;
  bool bias = true;  // Keras's use_bias
  auto operator<=>(const RnnShape&) const = default;
};
// The gates of a cell: 1, 4 (LSTM) or 3 (GRU).
inline int64_t rnn_gates(RnnCell c) { return c == RnnCell::lstm ? 4 : c == RnnCell::gru ? 3 : 1; }
// The floats of its bias as Keras keeps it: gates * units, twice for a GRU with reset_after.
inline int64_t rnn_bias_size(const RnnShape& s) {
  return rnn_gates(s.cell) * s.units * (s.cell == RnnCell::gru && s.reset_after ? 2 : 1);
}
// The floats of y for m sequences.
inline int64_t rnn_output_size(const RnnShape& s, int64_t m) {
  return m * s.units * (s.sequences ? s.steps : 1);
}

// An element-wise operation of two operands with numpy's broadcasting, for the ops a custom
// layer's call() applies (x - mean, x * w + b) and Keras's merging layers (Subtract, Multiply,
// Maximum, Minimum, Average). y is (rows, cols); each operand is, in y's terms, full (rows, cols),
// a column (rows, 1: one value per row, e.g. a reduce_mean with keepdims), a row (1, cols: a bias)
// or a scalar; a null operand pointer is the constant a_value / b_value (x * 2, -x as x * -1).
enum class BinaryOp { add, subtract, multiply, divide, maximum, minimum, average };
// The noise layers' training draws (Backend::noise_forward): Keras's GaussianNoise (additive),
// GaussianDropout (multiplicative, mean 1) and SpatialDropout2D (whole channels dropped).
enum class NoiseKind { gaussian_noise, gaussian_dropout, spatial_dropout };
enum class Broadcast { full, column, row, scalar };
struct BinaryShape {
  int64_t rows = 0, cols = 0;
  Broadcast a = Broadcast::full, b = Broadcast::full;
  float a_value = 0.0f, b_value = 0.0f;  // the constants of null operands
  auto operator<=>(const BinaryShape&) const = default;
};
// The values an operand of `how` has in a (rows, cols) result.
inline int64_t broadcast_size(Broadcast how, int64_t rows, int64_t cols) {
  switch (how) {
    case Broadcast::full:
      return rows * cols;
    case Broadcast::column:
      return rows;
    case Broadcast::row:
      return cols;
    case Broadcast::scalar:
      break;
  }
  return 1;
}

// A permutation of each sample's axes (Permute; RepeatVector's backward): x's per-sample shape is
// in[0..rank), y's axis i is x's axis perm[i] (0-based), so y's shape is (in[perm[0]], ...,
// in[perm[rank - 1]]). A copy: every value moves, none changes.
struct PermuteShape {
  static constexpr int kMaxRank = 8;
  int rank = 0;
  int64_t in[kMaxRank] = {};
  int perm[kMaxRank] = {};
  auto operator<=>(const PermuteShape&) const = default;
};
// The values of one sample.
inline int64_t permute_values(const PermuteShape& s) {
  int64_t n = 1;
  for (int i = 0; i < s.rank; ++i) n *= s.in[i];
  return n;
}
// The permutation that undoes s: from y's shape back to x's (the backward of a permute).
inline PermuteShape inverse_permutation(const PermuteShape& s) {
  PermuteShape inv;
  inv.rank = s.rank;
  for (int i = 0; i < s.rank; ++i) {
    inv.in[i] = s.in[s.perm[i]];
    inv.perm[s.perm[i]] = i;
  }
  return inv;
}

// Batch normalization over the last axis (Keras's axis -1): x and y are (m, spatial, channels),
// channels last, where spatial is the product of the dimensions between the batch and the channels
// (1 after a Dense layer, height * width for images). Statistics are per channel over the m *
// spatial values; the variance is the biased one (divided by m * spatial), as Keras computes it.
// gamma (scale) and beta (center) are each optional (null when the layer has scale or center
// off).
struct BatchNormShape {
  int64_t spatial = 1, channels = 0;
  float epsilon = 1e-3f;
  bool scale = true, center = true;
  auto operator<=>(const BatchNormShape&) const = default;
};

// What a backend asks of a communicator between ranks that works in device memory (NCCL between
// GPUs, src/ranks/nccl.h), given the stream to enqueue on (a cudaStream_t; the backend's own).
class DeviceCollective {
 public:
  virtual ~DeviceCollective() = default;
  // Every rank passes n floats of its device's memory; each ends with the element-wise sum.
  virtual void allreduce_sum(float* data, int64_t n, void* stream) = 0;
  // Rank `root`'s bytes copied into every other rank's buffer.
  virtual void broadcast(void* data, std::size_t bytes, int root, void* stream) = 0;
};

// Marks a default implementation's parameters as used (backend_ops.h's fallbacks).
template <class... T>
constexpr void unused_arguments(const T&...) {}

// What Backend does for an operation a device does not override (backend_ops.h's `fallback`).
#define CROSSOVER_BACKEND_FALLBACK_pure(...) = 0;
#define CROSSOVER_BACKEND_FALLBACK_nothing(...) \
  { unused_arguments(__VA_ARGS__); }
#define CROSSOVER_BACKEND_FALLBACK_false(...) \
  { return false; }
#define CROSSOVER_BACKEND_REFUSE(error, ...) \
  {                                          \
    unused_arguments(__VA_ARGS__);           \
    throw error();                           \
  }
#define CROSSOVER_BACKEND_FALLBACK_no_conv2d(...) CROSSOVER_BACKEND_REFUSE(no_conv2d, __VA_ARGS__)
#define CROSSOVER_BACKEND_FALLBACK_no_batch_norm(...) \
  CROSSOVER_BACKEND_REFUSE(no_batch_norm, __VA_ARGS__)
#define CROSSOVER_BACKEND_FALLBACK_no_rnn(...) CROSSOVER_BACKEND_REFUSE(no_rnn, __VA_ARGS__)
#define CROSSOVER_BACKEND_FALLBACK_no_device_collective(...) \
  CROSSOVER_BACKEND_REFUSE(no_device_collective, __VA_ARGS__)
#define CROSSOVER_BACKEND_FALLBACK_no_fused_update(...) \
  CROSSOVER_BACKEND_REFUSE(no_fused_update, __VA_ARGS__)
#define CROSSOVER_BACKEND_FALLBACK_fused_mlp_refusal(...)             \
  {                                                                   \
    unused_arguments(__VA_ARGS__);                                    \
    return device_name() + " has no fused training step (CUDA only)"; \
  }
#define CROSSOVER_BACKEND_FALLBACK_no_fused_mlp(...) \
  CROSSOVER_BACKEND_REFUSE(no_fused_mlp, __VA_ARGS__)

struct FusedMlpStep;  // backends/fused_mlp.h

// The device interface. Its methods, each with its contract, are listed in backends/backend_ops.h.
class Backend {
 public:
  virtual ~Backend() = default;

  // What capture returns (backend_ops.h): runs the captured calls again.
  class StepGraph {
   public:
    virtual ~StepGraph() = default;
    virtual void replay() = 0;
  };

  // Whether the kernels can read host memory the backend did not allocate (the CPU: its memory is
  // the host's): then fit and evaluate read the caller's data set in place instead of uploading a
  // copy (gather_rows's src is then the caller's memory). Not in backend_ops.h, because a wrapper
  // does not forward it: one that tracks what was uploaded (perf's wrappers) keeps the default.
  virtual bool reads_host_memory() const { return false; }

#define CROSSOVER_BACKEND_OP(name, parameters, arguments, fallback, phase, record, price) \
  virtual void name parameters CROSSOVER_BACKEND_FALLBACK_##fallback arguments
#define CROSSOVER_BACKEND_SETUP(type, name, parameters, arguments, qualifiers, fallback) \
  virtual type name parameters qualifiers CROSSOVER_BACKEND_FALLBACK_##fallback arguments
#include "backends/backend_ops.h"

 private:
  Error no_conv2d() const {
    return Error(device_name(), "Conv2D and pooling layers are not available on this device yet");
  }
  Error no_batch_norm() const {
    return Error(device_name(), "BatchNormalization is not available on this device yet");
  }
  Error no_rnn() const {
    return Error(device_name(), "recurrent layers are not available on this device yet");
  }
  Error no_device_collective() const {
    return Error(device_name(), "this backend cannot sum its memory over ranks");
  }
  Error no_fused_mlp() const {
    return Error(device_name(), "this backend has no fused training step");
  }
  Error no_fused_update() const {
    return Error(device_name(), "this backend does not fuse the weight update into its gradient");
  }
};

// The arithmetic of the dense layers' matrix products. Everything else is float32.
//   fp32: float32 operands, float32 accumulation, no TF32 (CUBLAS_COMPUTE_32F). The default: the
//         one that follows the CPU's trajectory up to summation order.
//   tf32: float32 operands rounded to TF32 inside the tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
//   bf16: bfloat16 copies of both operands (converted by a kernel before each product, rounded
//         to nearest even), float32 accumulation and output. On CUDA, and on CPUs with
//         AVX512_BF16 or AMX-BF16 (oneDNN's bf16 matmul): forward, input gradient and weight
//         gradient alike, as Keras's mixed_bfloat16 policy and PyTorch's autocast do; the
//         weights, their gradients and the optimizer's state stay float32.
enum class Precision { fp32, tf32, bf16 };

inline const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::tf32:
      return "tf32";
    case Precision::bf16:
      return "bf16";
  }
  return "fp32";
}

// "fp32" | "tf32" | "bf16"; throws Error(where, ...) for anything else.
inline Precision parse_precision(const std::string& text,
                                 const std::string& where = "--precision") {
  if (text == "fp32") return Precision::fp32;
  if (text == "tf32") return Precision::tf32;
  if (text == "bf16") return Precision::bf16;
  throw Error(where, "unknown precision '" + text + "' (expected fp32, tf32 or bf16)");
}

// The most threads the CPU backend takes: 4 x the logical cores it may run on. More threads than
// cores only wait for each other at every OpenMP barrier (1,000 threads on 2 cores made a
// one-second epoch take over a minute), and libgomp places every new thread's start data on the
// forking thread's stack with alloca, so ~100,000 threads overflow an 8 MiB stack: a segmentation
// fault, not an error. Up to 4x stays allowed so that oversubscription can still be measured.
int max_cpu_threads();
// Why `threads` is not a count make_cpu_backend takes (negative, or above max_cpu_threads()), or
// "" when it is: one message for the library and the CLI's --threads.
std::string cpu_threads_problem(int64_t threads);
// Whether the CPU backend's fp32 dense forward y(m, n) = x(m, k) . w(k, n) at `threads` threads
// splits w's rows (the reduction dimension) across the threads, as the weight and input gradients
// do, on a CPU whose cores have `l2_bytes` of L2 each (0: unknown): when w's rows outnumber the
// partial sums' (k >= threads * m) and a thread's share of the layer's state (w, its gradient and
// two optimizer slots: 16 bytes a weight) fits its L2, so that it stays there from step to step.
// The bits then depend on the thread count (docs/PERF.md, "Weights that stay with a thread").
bool cpu_forward_splits_weight_rows(int64_t m, int64_t k, int64_t n, int threads, int64_t l2_bytes);
// The CPU backend with `threads` threads (0 = all cores). Never null. Throws Error for a negative
// count or one above max_cpu_threads().
std::unique_ptr<Backend> make_cpu_backend(int threads);

// What this CPU has for bf16 GEMMs: AVX512_BF16 (CPUID.(7,1):EAX[5]) with the OS saving the
// AVX-512 state, and AMX-BF16 (CPUID.(7,0):EDX[22]) with the OS saving the tile state.
struct CpuBf16Support {
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
};
CpuBf16Support cpu_bf16_support();
// Why Precision::bf16 cannot run on a CPU with `isa` (one line naming the missing instruction
// sets), or "" when it can.
std::string cpu_bf16_problem(const CpuBf16Support& isa);
// Why the CPU cannot train in `precision` (tf32: a GPU precision; bf16: cpu_bf16_problem(isa)),
// or "" when it can: one message for the backend, the commands and --device auto.
std::string cpu_precision_problem(Precision precision,
                                  const CpuBf16Support& isa = cpu_bf16_support());
// The CPU backend with its dense GEMMs in `precision`: fp32, or bf16 where `isa` allows; else
// Error("precision " + name, cpu_precision_problem(precision, isa)) (tf32 always).
// `isa` is injectable so that the refusal can be tested on any CPU.
std::unique_ptr<Backend> make_cpu_backend(int threads, Precision precision,
                                          const CpuBf16Support& isa = cpu_bf16_support());
// The CUDA backend on device `ordinal`; throws Error("cuda:N", why) if that device is
// unavailable or the binary was built without CUDA.
std::unique_ptr<Backend> make_cuda_backend(int ordinal);
// Number of CUDA devices visible (0 when built without CUDA or no driver).
int cuda_device_count();

}  // namespace crossover
