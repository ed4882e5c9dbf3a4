// The one narrow kernel interface between the model (nn/) and a device (backends/cpu, cuda).
//
// Model code includes only this header; a backend never includes model code. All pointers
// below are the backend's own memory (host memory for the CPU, device memory for CUDA), float32,
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

#include "core/error.h"

namespace crossover {

enum class ActivationKind { linear, relu, sigmoid, tanh, softmax };

// Per-step values that kernels read from backend memory (so a captured graph stays valid).
struct StepCounters {
  int64_t step = 0;         // optimizer steps taken so far (Adam's t is step + 1)
  int64_t batch_index = 0;  // batch within the current epoch
  float learning_rate = 0;  // the schedule's value for this step, written by update_learning_rate
  float grad_scale = 1;     // 1, or the clip-by-global-norm factor computed this step
  // Running sums for the epoch's loss and metrics, read by the progress line asynchronously.
  double loss_sum = 0;      // sum over samples of the per-sample loss
  double correct_sum = 0;   // number of correctly classified samples
  double sample_count = 0;  // samples seen
};

// The learning rate as a function of the optimizer step, evaluated on the device each step.
// lr(step) = base * decay_rate ^ (staircase ? floor(step / decay_steps) : step / decay_steps);
// decay_steps == 0 means constant. Epoch-level schedules (ReduceLROnPlateau, step decay per
// epoch) change `base` between epochs.
struct LearningRateSchedule {
  float base = 1e-3f;
  float decay_rate = 1.0f;
  int64_t decay_steps = 0;
  bool staircase = false;
};

// One parameter tensor and its optimizer state, all of n floats.
struct ParamSlot {
  float* value = nullptr;
  float* grad = nullptr;
  float* slot1 = nullptr;  // Adam m, SGD velocity, RMSprop mean square
  float* slot2 = nullptr;  // Adam v, RMSprop mean (centered only); may be null
  int64_t n = 0;
  bool decay = true;  // weight decay applies (kernels); not to biases
};

enum class OptimizerKind { sgd, adam, rmsprop };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adam;
  LearningRateSchedule schedule;
  // Adam's betas and RMSprop's rho as given, in double: Keras takes 1 - beta in double (Python)
  // and rounds it to float32 once, which a float32 beta cannot reproduce (1 - 0.999f is 1.3e-5
  // from 0.001f). See update_constants.
  double beta1 = 0.9;         // Adam
  double beta2 = 0.999;       // Adam
  float epsilon = 1e-7f;      // Adam, RMSprop (Keras's default)
  float momentum = 0.0f;      // SGD, RMSprop
  bool nesterov = false;      // SGD
  double rho = 0.9;           // RMSprop
  float weight_decay = 0.0f;  // decoupled (AdamW-style; Keras's weight_decay argument)
  float clipnorm = 0.0f;      // clip by global norm when > 0
  float clipvalue = 0.0f;     // clip each element to [-clipvalue, clipvalue] when > 0
};

enum class LossKind {
  sparse_categorical_crossentropy,  // targets: class index per row
  categorical_crossentropy,         // targets: a probability row per row
  binary_crossentropy,              // targets: 0/1 per element
  mean_squared_error,               // targets: a value per element
};

// Memory a device can still allocate, and where that number comes from (for messages).
struct MemoryAvailable {
  std::size_t bytes = 0;
  std::string source;  // "MemAvailable in /proc/meminfo", "cudaMemGetInfo", ...
};

// A 2-D convolution, channels last: x (m, in_h, in_w, in_c), kernel (kernel_h, kernel_w, in_c,
// out_c) as Keras stores it, bias (out_c), y (m, out_h, out_w, out_c). Padding is given per side
// (TensorFlow's 'same' puts the odd row and column at the bottom and right); out_h = (in_h +
// pad_top + pad_bottom - kernel_h) / stride_h + 1, and the same for the width.
struct ConvShape {
  int64_t in_h = 0, in_w = 0, in_c = 0;
  int64_t out_h = 0, out_w = 0, out_c = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  auto operator<=>(const ConvShape&) const = default;
};

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
// GPUs, src/dist/nccl.h), given the stream to enqueue on (a cudaStream_t; the backend's own).
class DeviceCollective {
 public:
  virtual ~DeviceCollective() = default;
  // Every rank passes n floats of its device's memory; each ends with the element-wise sum.
  virtual void allreduce_sum(float* data, int64_t n, void* stream) = 0;
  // Rank `root`'s bytes copied into every other rank's buffer.
  virtual void broadcast(void* data, std::size_t bytes, int root, void* stream) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda:N".
  virtual std::string device_name() const = 0;

  // ---- memory ----
  // Zero-filled block of `bytes`, aligned to at least 64 bytes. Throws Error when out of memory,
  // saying how many bytes were asked for and how many are available.
  virtual void* allocate(std::size_t bytes) = 0;
  // How much more allocate() can hand out now, so that a plan too large for the device is refused
  // before anything is allocated.
  virtual MemoryAvailable available_memory() const = 0;
  virtual void release(void* p) noexcept = 0;
  virtual void upload(void* dst, const void* host_src, std::size_t bytes) = 0;
  // Whether the kernels can read host memory the backend did not allocate (the CPU: its memory is
  // the host's): then fit and evaluate read the caller's data set in place instead of uploading a
  // copy (gather_rows's src is then the caller's memory). A wrapper that tracks what was
  // uploaded keeps the default.
  virtual bool reads_host_memory() const { return false; }
  virtual void download(void* host_dst, const void* src, std::size_t bytes) = 0;
  // Starts a download that completes by the next synchronize(); host_dst must stay valid.
  virtual void download_async(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual void fill(float* dst, float value, int64_t n) = 0;
  // The host wrote [p, p + bytes) of allocate()'s memory itself, not through upload or fill (MPI
  // into the memory of a backend whose memory is the host's): a backend drops what it derived from
  // it (the CPU's bf16 weights copies). Memory from allocate() changes only through upload, fill,
  // the backend's own calls, and writes announced here.
  virtual void host_wrote(void* p, std::size_t bytes) {
    (void)p;
    (void)bytes;
  }
  // Waits for everything enqueued.
  virtual void synchronize() = 0;

  // ---- graphs ----
  // Records the backend calls that `enqueue` makes, once, and returns something that runs them
  // again. CUDA captures them as a CUDA graph (one launch per replay); the CPU, and CUDA in naive
  // mode, simply call `enqueue` again on each replay. `enqueue` must make the same calls every
  // time: whatever varies per step is read from StepCounters. CUDA calls `enqueue` once more
  // beforehand as a planning pass (it creates GEMM plans but launches nothing on the model's
  // buffers), so `enqueue` must not change host state either.
  class StepGraph {
   public:
    virtual ~StepGraph() = default;
    virtual void replay() = 0;
  };
  virtual std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool use_graph) = 0;

  // ---- batching ----
  // dst[i, :] = src[indices[batch_index * batch + i], :] for i < m, where src is (N, cols).
  // Labels are gathered the same way with cols = 1 (or the number of target columns).
  virtual void gather_rows(const float* src, int64_t cols, const int32_t* indices, int64_t batch,
                           const StepCounters* counters, int64_t m, float* dst) = 0;

  // ---- dense layer ----
  // y(m, n) = act(x(m, k) . w(k, n) + b(n)); b may be null. Linear and relu are fused into the
  // product; sigmoid, tanh and softmax take a second pass over y.
  virtual void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m,
                             int64_t k, int64_t n, ActivationKind act) = 0;
  // dw(k, n) = x(m, k)^T . dy(m, n);  db(n) = column sums of dy (if db is not null).
  virtual void dense_backward_weights(const float* x, const float* dy, float* dw, float* db,
                                      int64_t m, int64_t k, int64_t n) = 0;
  // dx(m, k) = dy(m, n) . w(k, n)^T.
  // A backend may keep state derived from w between calls (the CPU's bf16 copies of the weights,
  // dropped when w changes: see host_wrote), so w must be memory from allocate().
  virtual void dense_backward_input(const float* dy, const float* w, float* dx, int64_t m,
                                    int64_t k, int64_t n) = 0;

  // ---- 2-D convolution and pooling (ConvShape, PoolShape above; m samples) ----
  // Whether this backend has them at all; a model with Conv2D or pooling layers is refused at
  // compile time on one that does not, naming the layer.
  virtual bool has_conv2d() const { return false; }
  // y = act(conv(x, w) + b); b may be null; act is linear or relu (fused).
  virtual void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b,
                              float* y, int64_t m, ActivationKind act) {
    (void)s, (void)x, (void)w, (void)b, (void)y, (void)m, (void)act;
    throw no_conv2d();
  }
  // dx (m, in_h, in_w, in_c) from dy (m, out_h, out_w, out_c) and the kernel.
  virtual void conv2d_backward_input(const ConvShape& s, const float* dy, const float* w, float* dx,
                                     int64_t m) {
    (void)s, (void)dy, (void)w, (void)dx, (void)m;
    throw no_conv2d();
  }
  // dw (kernel_h, kernel_w, in_c, out_c) and db (out_c; if not null) from x and dy.
  virtual void conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy,
                                       float* dw, float* db, int64_t m) {
    (void)s, (void)x, (void)dy, (void)dw, (void)db, (void)m;
    throw no_conv2d();
  }
  // The bytes of the workspace pool2d_forward writes in training for pool2d_backward (max
  // pooling's argmax), for a batch of m: the model sizes it when it plans a batch size. Also
  // prepares what the backend needs for that shape, so that no step has to.
  virtual std::size_t pool2d_workspace_bytes(const PoolShape& s, int64_t m) {
    (void)s, (void)m;
    throw no_conv2d();
  }
  // y from x; with a workspace (training) it records what the backward pass needs; null: the
  // forward of evaluate and predict.
  virtual void pool2d_forward(const PoolShape& s, const float* x, float* y, void* workspace,
                              int64_t m) {
    (void)s, (void)x, (void)y, (void)workspace, (void)m;
    throw no_conv2d();
  }
  // dx (m, in_h, in_w, channels) from dy and the training forward's workspace.
  virtual void pool2d_backward(const PoolShape& s, const float* dy, const void* workspace,
                               float* dx, int64_t m) {
    (void)s, (void)dy, (void)workspace, (void)dx, (void)m;
    throw no_conv2d();
  }

  // ---- batch normalization (BatchNormShape above; m samples) ----
  // Whether this backend has it; a model with BatchNormalization is refused at compile time on
  // one that does not, naming the layer.
  virtual bool has_batch_norm() const { return false; }
  // Prepares what the backend needs for this shape and batch size (all three calls below), so
  // that no step has to. The model calls it when it plans a batch size.
  virtual void batchnorm_prepare(const BatchNormShape& s, int64_t m) {
    (void)s, (void)m;
    throw no_batch_norm();
  }
  // Training: y = gamma * (x - mean) / sqrt(variance + epsilon) + beta with the batch's own
  // statistics, which it writes to mean and variance (channels each) for the backward pass.
  virtual void batchnorm_forward_training(const BatchNormShape& s, const float* x,
                                          const float* gamma, const float* beta, float* y,
                                          float* mean, float* variance, int64_t m) {
    (void)s, (void)x, (void)gamma, (void)beta, (void)y, (void)mean, (void)variance, (void)m;
    throw no_batch_norm();
  }
  // Evaluate and predict: the same with the given (moving) statistics.
  virtual void batchnorm_forward_inference(const BatchNormShape& s, const float* x,
                                           const float* gamma, const float* beta, const float* mean,
                                           const float* variance, float* y, int64_t m) {
    (void)s, (void)x, (void)gamma, (void)beta, (void)mean, (void)variance, (void)y, (void)m;
    throw no_batch_norm();
  }
  // dx (through the batch statistics), dgamma and dbeta (each if not null) from the training
  // forward's x, mean and variance and the incoming dy.
  virtual void batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                                  const float* gamma, const float* mean, const float* variance,
                                  float* dx, float* dgamma, float* dbeta, int64_t m) {
    (void)s, (void)x, (void)dy, (void)gamma, (void)mean, (void)variance, (void)dx, (void)dgamma,
        (void)dbeta, (void)m;
    throw no_batch_norm();
  }
  // Keras's moving statistics after a training batch: moving = moving * momentum + batch *
  // (1 - momentum), per channel, in float32 as Keras computes it: momentum and 1 - momentum (taken
  // in double, as Python does) each rounded to float once (backends/kernel_math.h).
  virtual void batchnorm_update_moving(const BatchNormShape& s, const float* mean,
                                       const float* variance, float* moving_mean,
                                       float* moving_variance, double momentum) {
    (void)s, (void)mean, (void)variance, (void)moving_mean, (void)moving_variance, (void)momentum;
    throw no_batch_norm();
  }

  // ---- activations (elementwise on (m, n); softmax is per row) ----
  virtual void activation_forward(ActivationKind act, const float* x, float* y, int64_t m,
                                  int64_t n) = 0;
  // dx from the forward output y and the incoming gradient dy. dx may alias dy.
  virtual void activation_backward(ActivationKind act, const float* y, const float* dy, float* dx,
                                   int64_t m, int64_t n) = 0;

  // ---- dropout (inverted): y = x * keep / (1 - rate), keep drawn by dropout_keep(seed, layer,
  // counters->step, (first_row + row) * n + col, rate). mask (m * n bytes) records keep for the
  // backward pass. first_row is the global batch row of x's row 0: 0 in one process; in one rank
  // of several (data parallelism), where its rows start in the global batch, so that every row
  // draws the mask one process at the global batch would draw for it.
  virtual void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n,
                               float rate, uint64_t seed, uint32_t layer,
                               const StepCounters* counters, int64_t first_row) = 0;
  virtual void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m,
                                int64_t n, float rate) = 0;
  // The fused backward of Dense(relu) followed by Dropout: dz = dy * keep / (1 - rate) * (h > 0),
  // where h is the ReLU output before dropout (so y = h * keep / (1 - rate)).
  virtual void relu_dropout_backward(const float* y_after_dropout, const uint8_t* mask,
                                     const float* dy, float* dz, int64_t m, int64_t n,
                                     float rate) = 0;

  // ---- loss, fused with the output activation's backward ----
  // `out` (m, c) is the model output *before* the final activation `act` (logits when act is
  // softmax or sigmoid). Computes the activated output into `probs` (may be null when not
  // needed), the gradient w.r.t. `out` of the per-sample losses summed over these m rows and
  // divided by `mean_rows` into d_out (if not null), and adds sum of per-sample losses and the
  // count of correct predictions to counters (if `counters` is not null). targets: class indices
  // as floats (sparse) or (m, c) values. mean_rows is m in one process (the batch mean); in one
  // rank of several, the global batch's rows, so that the ranks' gradients sum to the global
  // batch mean.
  virtual void loss_forward_backward(LossKind loss, ActivationKind act, const float* out,
                                     const float* targets, float* probs, float* d_out, int64_t m,
                                     int64_t c, StepCounters* counters, int64_t mean_rows) = 0;

  // ---- optimizer: one update of every parameter (one launch on CUDA) ----
  // Reads counters->step (t = step + 1), writes counters->learning_rate from the schedule,
  // applies clipping, then increments counters->step and counters->batch_index. With no params
  // (the layers were updated by dense_backward_weights_update) only that bookkeeping is done.
  virtual void optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                              StepCounters* counters) = 0;

  // ---- the weight gradient and that layer's update in one call ----
  // Whether dense_backward_weights_update pays here. On the CPU it does: each block of the
  // gradient is applied while it is still in cache, instead of in a pass over every parameter at
  // the end. A GPU's single launch over all parameters is cheaper than one per layer. The model
  // uses it for every Dense layer when the update needs nothing global (no clipnorm).
  virtual bool fuses_weight_update() const { return false; }
  // dense_backward_weights into kernel.grad (and bias->grad when bias is not null), then the
  // update of kernel and bias exactly as optimizer_step would make it this step: counters->step
  // is read, not advanced, and config.clipnorm must be 0. Backends that do not fuse throw Error.
  virtual void dense_backward_weights_update(const float* x, const float* dy,
                                             const ParamSlot& kernel, const ParamSlot* bias,
                                             int64_t m, int64_t k, int64_t n,
                                             const OptimizerConfig& config,
                                             const StepCounters* counters) {
    (void)x, (void)dy, (void)kernel, (void)bias, (void)m, (void)k, (void)n, (void)config,
        (void)counters;
    throw Error(device_name(), "this backend does not fuse the weight update into its gradient");
  }
  // counters->batch_index += 1 without an update (evaluation steps).
  virtual void advance_batch(StepCounters* counters) = 0;

  // ---- ranks ----
  // Sums n floats of this device's memory over the ranks of `with`, in place, as one of the
  // step's calls: enqueued in order after the calls before it (on CUDA: on the step's stream, so
  // that it is captured into the step's graph), and skipped in a planning pass. A device whose
  // memory the host reaches (the CPU) is summed by nn's Collective directly instead; the default
  // throws Error.
  virtual void allreduce_sum(float* data, int64_t n, DeviceCollective& with) {
    (void)data, (void)n, (void)with;
    throw no_device_collective();
  }
  // Rank `root`'s bytes of this device's memory into every other rank's, in order; the default
  // throws Error.
  virtual void broadcast(void* data, std::size_t bytes, int root, DeviceCollective& with) {
    (void)data, (void)bytes, (void)root, (void)with;
    throw no_device_collective();
  }

  // ---- annotation ----
  // Names what the calls that follow belong to, until the next set_scope: the model passes a
  // layer's name ("dense_1") around each layer's calls, and "batch x", "batch y", "loss",
  // "optimizer" around a step's own. Host-side only, never part of a captured graph; a backend
  // ignores it, a wrapper that records or times calls may read it.
  virtual void set_scope(std::string_view name) { (void)name; }

 private:
  Error no_conv2d() const {
    return Error(device_name(), "Conv2D and pooling layers are not available on this device yet");
  }
  Error no_batch_norm() const {
    return Error(device_name(), "BatchNormalization is not available on this device yet");
  }
  Error no_device_collective() const {
    return Error(device_name(), "this backend cannot sum its memory over ranks");
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
