// The CUDA backend: one non-blocking stream, a caching device allocator, cuBLASLt products
// (gemm.h), cuDNN convolutions (cudnn_conv.h) and the kernels of kernels.cu and the
// *_kernels.cu beside it. See docs/CUDA.md for the design.
//
// Execution states. Normally each call enqueues its work on the stream and returns. capture()
// with use_graph first runs the step's function in a *planning pass*: every call makes what it
// will need (cuBLASLt and cuDNN plans, scratch, the optimizer's slot table; all of it allocation
// and uploads) and enqueues nothing. Then it runs the function again inside a stream capture, where
// every lookup hits, so nothing is allocated, uploaded or asked of cuBLASLt's heuristic while
// capturing. A miss during capture (a function that does not make the same calls every time) is
// an Error rather than a silent allocation inside the graph.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/allocator.h"
#include "backends/cuda/check.h"
#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/fused_mlp.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda_info.h"
#include "backends/optimizers/visit.h"
#include "core/error.h"

namespace crossover {
namespace {

using cuda::check_cuda;

constexpr std::size_t kStagingBytes = 64 * 1024;  // pinned memory for small async downloads

bool same_slots(std::span<const ParamSlot> a, const std::vector<ParamSlot>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const ParamSlot& x = a[i];
    const ParamSlot& y = b[i];
    if (x.value != y.value || x.grad != y.grad || x.slot1 != y.slot1 || x.slot2 != y.slot2 ||
        x.slot3 != y.slot3 || x.n != y.n || x.decay != y.decay)
      return false;
  }
  return true;
}

class CudaBackend;

// A captured step: one cudaGraphLaunch per replay. Must not outlive its backend.
class CudaStepGraph final : public Backend::StepGraph {
 public:
  CudaStepGraph(CudaBackend* backend, cudaGraphExec_t exec) : backend_(backend), exec_(exec) {}
  ~CudaStepGraph() override { cudaGraphExecDestroy(exec_); }
  void replay() override;

 private:
  CudaBackend* backend_;
  cudaGraphExec_t exec_;
};

// Naive mode: each replay makes the calls again, one launch per op.
class EagerStepGraph final : public Backend::StepGraph {
 public:
  explicit EagerStepGraph(std::function<void()> fn) : fn_(std::move(fn)) {}
  void replay() override { fn_(); }

 private:
  std::function<void()> fn_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(int ordinal, Precision precision)
      : ordinal_(ordinal),
        where_(cuda::device_where(ordinal)),
        precision_(precision),
        allocator_(ordinal) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      cudaGetLastError();
      throw Error(where_, std::string("no CUDA device is available (cudaGetDeviceCount: ") +
                              (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + ")");
    }
    if (ordinal < 0 || ordinal >= count)
      throw Error(where_, "no such CUDA device: " + std::to_string(count) +
                              " visible (cuda:0 to cuda:" + std::to_string(count - 1) + ")");
    try {
      check(cudaSetDevice(ordinal_), "cudaSetDevice");
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags");
      check(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, ordinal_),
            "cudaDeviceGetAttribute(MultiProcessorCount)");
      void* staging = nullptr;
      check(cudaMallocHost(&staging, kStagingBytes), "cudaMallocHost (staging)");
      staging_ = static_cast<unsigned char*>(staging);
      pending_.reserve(64);
      // Reduction scratch: partials and tickets, zeroed once (the kernels leave tickets at 0).
      const std::size_t partial_bytes =
          (2 * cuda::kLossMaxBlocks + cuda::kNormMaxBlocks) * sizeof(double);
      const std::size_t scratch_bytes = partial_bytes + 4 * sizeof(unsigned int);
      check(cudaMalloc(&reduction_block_, scratch_bytes), "cudaMalloc (reduction scratch)");
      check(cudaMemsetAsync(reduction_block_, 0, scratch_bytes, stream_), "cudaMemsetAsync");
      auto* base = static_cast<unsigned char*>(reduction_block_);
      reduction_.loss_partials = reinterpret_cast<double*>(base);
      reduction_.norm_partials = reduction_.loss_partials + 2 * cuda::kLossMaxBlocks;
      reduction_.tickets = reinterpret_cast<unsigned int*>(base + partial_bytes);
      gemm_ = std::make_unique<cuda::LtGemm>(ordinal_, precision_, stream_);
      conv_ = std::make_unique<cuda::CudnnConv>(ordinal_, precision_, stream_);
      check(cuda::preload_kernels(), "cudaFuncGetAttributes (loading the kernels)");
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    } catch (...) {
      destroy();
      throw;
    }
  }

  ~CudaBackend() override { destroy(); }

  std::string device_name() const override { return where_; }

  // ---- memory ----
  void* allocate(std::size_t bytes) override {
    activate();
    if (capturing_)
      throw Error(where_, "allocate() during graph capture (buffers belong in the static plan)");
    void* p = allocator_.allocate(bytes, [this] { cudaStreamSynchronize(stream_); });
    check(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");  // zero-filled, in order
    return p;
  }
  void release(void* p) noexcept override { allocator_.release(p); }
  // The device's free memory plus the blocks this backend's allocator holds for reuse.
  MemoryAvailable available_memory() const override {
    activate();
    std::size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    return {free_bytes + allocator_.cached_bytes(),
            "cudaMemGetInfo's free memory of " + where_ + ", plus blocks cached for reuse"};
  }

  void upload(void* dst, const void* host_src, std::size_t bytes) override {
    if (planning_ || bytes == 0) return;
    not_while_capturing("upload");
    activate();
    check(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }
  void download(void* host_dst, const void* src, std::size_t bytes) override {
    if (planning_) return;
    not_while_capturing("download");
    activate();
    if (bytes)
      check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync");
    synchronize_and_flush();
  }
  // Small copies go through pinned staging (truly asynchronous) and are copied to host_dst by
  // the next synchronize(); large ones, or into memory already pinned, go directly.
  void download_async(void* host_dst, const void* src, std::size_t bytes) override {
    if (planning_ || bytes == 0) return;
    not_while_capturing("download_async");
    activate();
    const std::size_t offset = (staging_used_ + 15) / 16 * 16;
    cudaPointerAttributes attr{};
    const bool pinned =
        cudaPointerGetAttributes(&attr, host_dst) == cudaSuccess && attr.type == cudaMemoryTypeHost;
    cudaGetLastError();
    if (!pinned && offset + bytes <= kStagingBytes) {
      check(cudaMemcpyAsync(staging_ + offset, src, bytes, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync");
      pending_.push_back({host_dst, offset, bytes});
      staging_used_ = offset + bytes;
    } else {
      check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_),
            "cudaMemcpyAsync");
    }
  }
  void fill(float* dst, float value, int64_t n) override {
    if (planning_) return;
    activate();
    check(cuda::launch_fill(stream_, dst, value, n), "fill kernel launch");
  }
  void synchronize() override {
    if (planning_) return;
    not_while_capturing("synchronize");
    activate();
    synchronize_and_flush();
  }

  // ---- ranks ----
  // On the step's stream, in order: NCCL's collectives can be captured into the step's graph.
  void allreduce_sum(float* data, int64_t n, DeviceCollective& with) override {
    if (planning_) return;
    activate();
    with.allreduce_sum(data, n, stream_);
  }
  void broadcast(void* data, std::size_t bytes, int root, DeviceCollective& with) override {
    if (planning_) return;
    activate();
    with.broadcast(data, bytes, root, stream_);
  }

  // ---- the fused training step (backends/fused_mlp.h) ----
  std::string fused_mlp_problem(const FusedMlpStep& step) const override {
    activate();
    if (precision_ != Precision::fp32)
      return std::string("the fused step computes in fp32, this backend in ") +
             precision_name(precision_);
    int cooperative = 0, l2 = 0;
    check(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, ordinal_),
          "cudaDeviceGetAttribute (cooperative launch)");
    check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, ordinal_),
          "cudaDeviceGetAttribute (L2 size)");
    return fused_mlp_device_problem(step, cooperative != 0, fused_blocks_per_sm(), l2);
  }
  void fused_mlp_step(const FusedMlpStep& step, StepCounters* counters) override {
    if (planning_) return;
    not_while_capturing("fused_mlp_step");  // a cooperative launch: enqueued directly
    activate();
    const std::size_t bytes = cuda::fused_mlp_scratch_bytes(step);
    if (bytes > fused_scratch_bytes_) {
      void* p = nullptr;
      check(cudaMalloc(&p, bytes), "cudaMalloc (fused step scratch)");
      if (fused_scratch_) retired_.push_back(static_cast<float*>(fused_scratch_));
      fused_scratch_ = p;
      fused_scratch_bytes_ = bytes;
    }
    const FusedLaunchShape shape =
        fused_mlp_launch_shape(sm_count_, fused_blocks_per_sm(), fused_mlp_work_items(step));
    if (shape.blocks < 1) throw Error(where_, "the fused step's kernel fits on no multiprocessor");
    check(cuda::launch_fused_mlp(stream_, step, counters, fused_scratch_, shape.blocks),
          "fused step (cooperative launch)");
  }

  // ---- graphs ----
  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool use_graph) override {
    if (!use_graph) return std::make_unique<EagerStepGraph>(std::move(enqueue));
    activate();
    if (planning_ || capturing_) throw Error(where_, "capture() inside capture()");
    planning_ = true;
    try {
      enqueue();
    } catch (...) {
      planning_ = false;
      throw;
    }
    planning_ = false;

    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
    capturing_ = true;
    cudaGraph_t graph = nullptr;
    try {
      enqueue();
    } catch (...) {
      capturing_ = false;
      cudaStreamEndCapture(stream_, &graph);  // leave the stream usable
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    capturing_ = false;
    check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(e, "cudaGraphInstantiate");
    // Upload now, so the first replay does not pay for it.
    const cudaError_t u = cudaGraphUpload(exec, stream_);
    if (u != cudaSuccess) {
      cudaGraphExecDestroy(exec);
      check(u, "cudaGraphUpload");
    }
    return std::make_unique<CudaStepGraph>(this, exec);
  }

  void launch_graph(cudaGraphExec_t exec) {
    if (planning_) return;
    activate();
    check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
  }

  // ---- batching ----
  void gather_rows(const float* src, int64_t cols, const int32_t* indices, int64_t batch,
                   const StepCounters* counters, int64_t m, float* dst) override {
    if (planning_) return;
    activate();
    check(cuda::launch_gather_rows(stream_, src, cols, indices, batch, counters, m, dst),
          "gather_rows kernel launch");
  }

  // ---- dense layer ----
  void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k,
                     int64_t n, ActivationKind act) override {
    activate();
    gemm_->dense_forward(x, w, b, y, m, k, n, act, !planning_, !capturing_);
  }
  void dense_backward_weights(const float* x, const float* dy, float* dw, float* db, int64_t m,
                              int64_t k, int64_t n) override {
    activate();
    gemm_->dense_backward_weights(x, dy, dw, db, m, k, n, !planning_, !capturing_);
  }
  void dense_backward_input(const float* dy, const float* w, float* dx, int64_t m, int64_t k,
                            int64_t n) override {
    activate();
    gemm_->dense_backward_input(dy, w, dx, m, k, n, !planning_, !capturing_);
  }

  // ---- convolution (cuDNN) and pooling (conv_pool_kernels.cu) ----
  bool has_conv2d() const override { return true; }
  void conv2d_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                      int64_t m, ActivationKind act) override {
    activate();
    conv_->forward(s, x, w, b, y, m, act, !planning_, !capturing_);
  }
  void conv2d_backward_input(const ConvShape& s, const float* dy, const float* w, float* dx,
                             int64_t m) override {
    activate();
    conv_->backward_input(s, dy, w, dx, m, !planning_, !capturing_);
  }
  void conv2d_backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw,
                               float* db, int64_t m) override {
    activate();
    conv_->backward_weights(s, x, dy, dw, db, m, !planning_, !capturing_);
  }
  // The transposed convolution as the convolution it transposes (cuDNN's backward data is its
  // forward, the forward its input gradient, backward filter with x and dy exchanged its kernel
  // gradient); the bias and its gradient are kernels.cu's.
  void conv2d_transpose_forward(const ConvShape& s, const float* x, const float* w, const float* b,
                                float* y, int64_t m) override {
    activate();
    conv_->backward_input(s, x, w, y, m, !planning_, !capturing_);
    if (planning_ || !b || m <= 0) return;
    check(cuda::launch_bias_activation(stream_, y, b, m * s.in_h * s.in_w, s.in_c,
                                       ActivationKind::linear),
          "bias_activation kernel launch");
  }
  void conv2d_transpose_backward_input(const ConvShape& s, const float* dy, const float* w,
                                       float* dx, int64_t m) override {
    activate();
    conv_->forward(s, dy, w, nullptr, dx, m, ActivationKind::linear, !planning_, !capturing_);
  }
  void conv2d_transpose_backward_weights(const ConvShape& s, const float* x, const float* dy,
                                         float* dw, float* db, int64_t m) override {
    activate();
    conv_->backward_weights(s, dy, x, dw, nullptr, m, !planning_, !capturing_);
    if (planning_ || !db || m <= 0) return;
    check(cuda::launch_column_sums(stream_, dy, db, m * s.in_h * s.in_w, s.in_c),
          "column_sums kernel launch");
  }
  // Max pooling records each output's source position (int32) for its backward pass; average
  // pooling needs nothing.
  std::size_t pool2d_workspace_bytes(const PoolShape& s, int64_t m) override {
    if (s.kind != PoolKind::max) return 0;
    return static_cast<std::size_t>(m * s.out_h * s.out_w * s.channels) * sizeof(int32_t);
  }
  void pool2d_forward(const PoolShape& s, const float* x, float* y, void* workspace,
                      int64_t m) override {
    if (planning_) return;
    activate();
    check(cuda::launch_pool_forward(stream_, s, x, y, static_cast<int32_t*>(workspace), m),
          "pool_forward kernel launch");
  }
  void pool2d_backward(const PoolShape& s, const float* dy, const void* workspace, float* dx,
                       int64_t m) override {
    if (s.kind == PoolKind::max && !workspace)
      throw Error(where_, "pool2d_backward: max pooling needs the training forward's workspace");
    if (planning_) return;
    activate();
    check(cuda::launch_pool_backward(stream_, s, dy, static_cast<const int32_t*>(workspace), dx, m),
          "pool_backward kernel launch");
  }

  // ---- batch normalization (norm_kernels.cu: per-channel sums without atomics) ----
  bool has_batch_norm() const override { return true; }
  void batchnorm_prepare(const BatchNormShape& s, int64_t m) override {
    activate();
    norm_scratch(s, m);
  }
  void batchnorm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, float* y, float* mean, float* variance,
                                  int64_t m) override {
    activate();
    float* scratch = norm_scratch(s, m);
    if (planning_) return;
    check(cuda::launch_batchnorm_forward_training(stream_, s, x, gamma, beta, y, mean, variance, m,
                                                  scratch),
          "batchnorm_forward_training kernel launch");
  }
  void batchnorm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                   const float* beta, const float* mean, const float* variance,
                                   float* y, int64_t m) override {
    if (planning_) return;
    activate();
    check(
        cuda::launch_batchnorm_forward_inference(stream_, s, x, gamma, beta, mean, variance, y, m),
        "batchnorm_forward_inference kernel launch");
  }
  void batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                          const float* gamma, const float* mean, const float* variance, float* dx,
                          float* dgamma, float* dbeta, int64_t m) override {
    activate();
    float* scratch = norm_scratch(s, m);
    if (planning_) return;
    check(cuda::launch_batchnorm_backward(stream_, s, x, dy, gamma, mean, variance, dx, dgamma,
                                          dbeta, m, scratch),
          "batchnorm_backward kernel launch");
  }
  void batchnorm_update_moving(const BatchNormShape& s, const float* mean, const float* variance,
                               float* moving_mean, float* moving_variance,
                               double momentum) override {
    if (planning_) return;
    activate();
    check(cuda::launch_batchnorm_update_moving(stream_, mean, variance, moving_mean,
                                               moving_variance, s.channels, momentum),
          "batchnorm_update_moving kernel launch");
  }

  // ---- layer normalization (norm_kernels.cu: a warp per row) ----
  void layernorm_forward(const float* x, const float* gamma, const float* beta, float* y,
                         float* mean, float* rstd, int64_t rows, int64_t n,
                         float epsilon) override {
    if (planning_) return;
    activate();
    check(cuda::launch_layernorm_forward(stream_, x, gamma, beta, y, mean, rstd, rows, n, epsilon),
          "layernorm_forward kernel launch");
  }
  void layernorm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                          const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                          int64_t n) override {
    if (planning_) return;
    activate();
    check(cuda::launch_layernorm_backward(stream_, x, dy, gamma, mean, rstd, dx, dgamma, dbeta,
                                          rows, n),
          "layernorm_backward kernel launch");
  }

  // ---- activations ----
  void activation_forward(ActivationKind act, float alpha, const float* x, float* y, int64_t m,
                          int64_t n) override {
    if (planning_) return;
    activate();
    check(cuda::launch_activation_forward(stream_, act, alpha, x, y, m, n),
          "activation kernel launch");
  }
  void activation_backward(ActivationKind act, float alpha, const float* x, const float* y,
                           const float* dy, float* dx, int64_t m, int64_t n) override {
    if (planning_) return;
    activate();
    check(cuda::launch_activation_backward(stream_, act, alpha, x, y, dy, dx, m, n),
          "activation_backward kernel launch");
  }

  // ---- merging layers and a graph's gradients ----
  void add(const float* a, const float* b, float* y, int64_t n) override {
    if (planning_) return;
    activate();
    check(cuda::launch_add(stream_, a, b, y, n), "add kernel launch");
  }
  void copy_columns(const float* src, int64_t src_cols, int64_t src_col, float* dst,
                    int64_t dst_cols, int64_t dst_col, int64_t rows, int64_t cols) override {
    if (planning_) return;
    activate();
    check(cuda::launch_copy_columns(stream_, src, src_cols, src_col, dst, dst_cols, dst_col, rows,
                                    cols),
          "copy_columns kernel launch");
  }

  // ---- element-wise arithmetic with broadcasting, row sums (kernels.cu) ----
  void binary_forward(BinaryOp op, const BinaryShape& s, const float* a, const float* b,
                      float* y) override {
    if (planning_) return;
    activate();
    check(cuda::launch_binary_forward(stream_, op, s, a, b, y), "binary_forward kernel launch");
  }
  void binary_backward(BinaryOp op, const BinaryShape& s, const float* a, const float* b,
                       const float* dy, float* da, float* db) override {
    if (planning_) return;
    activate();
    check(cuda::launch_binary_backward(stream_, op, s, a, b, dy, da, db),
          "binary_backward kernel launch");
  }
  void row_sum(const float* x, float* y, int64_t rows, int64_t cols, float scale) override {
    if (planning_) return;
    activate();
    check(cuda::launch_row_sum(stream_, x, y, rows, cols, scale), "row_sum kernel launch");
  }

  // ---- permuting each sample's axes (kernels.cu) ----
  void permute(const PermuteShape& s, const float* x, float* y, int64_t m) override {
    if (planning_) return;
    activate();
    check(cuda::launch_permute(stream_, s, x, y, m), "permute kernel launch");
  }

  // ---- nearest-neighbour upsampling (conv_pool_kernels.cu) ----
  void upsample2d_forward(const PoolShape& s, const float* x, float* y, int64_t m) override {
    if (planning_) return;
    activate();
    check(cuda::launch_upsample2d_forward(stream_, x, y, m, s.in_h, s.in_w, s.channels, s.window_h,
                                          s.window_w),
          "upsample2d_forward kernel launch");
  }
  void upsample2d_backward(const PoolShape& s, const float* dy, float* dx, int64_t m) override {
    if (planning_) return;
    activate();
    check(cuda::launch_upsample2d_backward(stream_, dy, dx, m, s.in_h, s.in_w, s.channels,
                                           s.window_h, s.window_w),
          "upsample2d_backward kernel launch");
  }

  // ---- dropout ----
  void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n, float rate,
                       uint64_t seed, uint32_t layer, const StepCounters* counters,
                       int64_t first_row) override {
    if (planning_) return;
    activate();
    check(cuda::launch_dropout_forward(stream_, x, y, mask, m, n, rate, seed, layer, counters,
                                       first_row),
          "dropout_forward kernel launch");
  }
  void noise_forward(NoiseKind kind, const float* x, float* y, float* factor, int64_t m, int64_t n,
                     int64_t channels, float amount, uint64_t seed, uint32_t layer,
                     const StepCounters* counters, int64_t first_row) override {
    if (planning_) return;
    activate();
    check(cuda::launch_noise_forward(stream_, kind, x, y, factor, m, n, channels, amount, seed,
                                     layer, counters, first_row),
          "noise_forward kernel launch");
  }
  void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m, int64_t n,
                        float rate) override {
    if (planning_) return;
    activate();
    check(cuda::launch_dropout_backward(stream_, dy, mask, dx, m * n, rate),
          "dropout_backward kernel launch");
  }
  void relu_dropout_backward(const float* y_after_dropout, const uint8_t* /*mask*/, const float* dy,
                             float* dz, int64_t m, int64_t n, float rate) override {
    // y > 0 exactly when the unit was kept and positive, so the mask is not read (as on the CPU).
    if (planning_) return;
    activate();
    check(cuda::launch_relu_dropout_backward(stream_, y_after_dropout, dy, dz, m * n, rate),
          "relu_dropout_backward kernel launch");
  }

  // ---- loss ----
  void loss_forward_backward(LossConfig loss, ActivationKind act, const float* out,
                             const float* targets, const float* weights, float* probs, float* d_out,
                             int64_t m, int64_t c, StepCounters* counters,
                             int64_t mean_rows) override {
    activate();
    if (m <= 0) return;
    float* p = probs ? probs : probs_scratch(static_cast<std::size_t>(m * c));
    if (planning_) return;
    check(cuda::launch_loss(stream_, loss, act, out, targets, weights, p, d_out, m, c, counters,
                            reduction_, mean_rows),
          "loss kernel launch");
  }

  void metric_sum(MetricKind kind, const float* pred, const float* targets, int64_t m, int64_t c,
                  int64_t target_cols, float parameter, double* sum) override {
    if (planning_ || m <= 0) return;
    activate();
    check(cuda::launch_metric(stream_, kind, pred, targets, m, c, target_cols, parameter, sum,
                              reduction_),
          "metric kernel launch");
  }

  // ---- optimizer ----
  void regularize(const float* value, float* grad, int64_t n, float l1, float l2, float linear,
                  StepCounters* counters, int64_t rows) override {
    if (planning_ || n <= 0 || (!grad && !counters)) return;
    activate();
    check(cuda::launch_regularize(stream_, value, grad, n, l1, l2, linear, counters, rows,
                                  reduction_),
          "regularize kernel launch");
  }
  void optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                      StepCounters* counters) override {
    if (optimizer_third_slot(config))
      for (const ParamSlot& p : params)
        if (p.n > 0 && p.slot3 == nullptr)
          throw Error(where_,
                      "optimizer_step: Adam with amsgrad needs a third slot (velocity_hat)");
    activate();
    const SlotTable& table = slot_table(params);
    if (planning_) return;
    if (config.clipnorm > 0.0f)
      check(cuda::launch_gradient_norm(stream_, table.device, table.count, table.total,
                                       config.clipnorm, counters, reduction_),
            "gradient_norm kernel launch");
    if (config.tensor_clipnorm > 0.0f)
      check(cuda::launch_tensor_norms(stream_, table.device, table.count, config.tensor_clipnorm),
            "tensor_norm kernel launch");
    check(cuda::launch_optimizer_update(stream_, config, table.device, table.count, table.total,
                                        counters, reduction_, 8 * sm_count_),
          "optimizer kernel launch");
  }
  void advance_batch(StepCounters* counters) override {
    if (planning_) return;
    activate();
    check(cuda::launch_advance_batch(stream_, counters), "advance_batch kernel launch");
  }

 private:
  // The slot descriptors of one distinct params span, on the device (uploaded once).
  struct SlotTable {
    std::vector<ParamSlot> slots;  // the span's contents, to recognise it
    cuda::SlotDescriptor* device = nullptr;
    int count = 0;
    int64_t total = 0;
  };

  void check(cudaError_t e, const char* call) const { check_cuda(ordinal_, e, call); }
  int fused_blocks_per_sm() const {
    if (fused_blocks_per_sm_ < 0) {
      int blocks = 0;
      check(cuda::fused_mlp_blocks_per_sm(&blocks),
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
      fused_blocks_per_sm_ = blocks;
    }
    return fused_blocks_per_sm_;
  }
  // Makes this backend's device current for the calling thread (a no-op call when it is). Not
  // while capturing: the capture is on this thread and the device is already current.
  void activate() const {
    if (!capturing_) check(cudaSetDevice(ordinal_), "cudaSetDevice");
  }
  void not_while_capturing(const char* what) const {
    if (capturing_)
      throw Error(where_, std::string(what) + "() during graph capture: it cannot be captured");
  }

  void synchronize_and_flush() {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    for (const PendingDownload& d : pending_) std::memcpy(d.dst, staging_ + d.offset, d.bytes);
    pending_.clear();
    staging_used_ = 0;
  }

  // Made outside capture only: allocation and upload are not capturable.
  void require_may_prepare(const char* what) const {
    if (capturing_)
      throw Error(where_, std::string(what) +
                              ": a call not seen in the planning pass was met during graph capture "
                              "(the captured function must make the same calls every time)");
  }

  const SlotTable& slot_table(std::span<const ParamSlot> params) {
    for (const SlotTable& t : slot_tables_)
      if (same_slots(params, t.slots)) return t;
    require_may_prepare("optimizer_step");
    SlotTable t;
    t.slots.assign(params.begin(), params.end());
    t.count = static_cast<int>(params.size());
    std::vector<cuda::SlotDescriptor> host(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      const ParamSlot& p = params[i];
      host[i] = {p.value, p.grad, p.slot1, p.slot2, p.slot3, p.n, t.total, p.decay ? 1 : 0, 1.0f};
      t.total += p.n;
    }
    if (!host.empty()) {
      const std::size_t bytes = host.size() * sizeof(cuda::SlotDescriptor);
      void* d = nullptr;
      check(cudaMalloc(&d, bytes), "cudaMalloc (optimizer slot table)");
      cudaError_t e = cudaMemcpyAsync(d, host.data(), bytes, cudaMemcpyHostToDevice, stream_);
      if (e == cudaSuccess) e = cudaStreamSynchronize(stream_);
      if (e != cudaSuccess) {
        cudaFree(d);
        check(e, "cudaMemcpyAsync (optimizer slot table)");
      }
      t.device = static_cast<cuda::SlotDescriptor*>(d);
    }
    slot_tables_.push_back(std::move(t));  // owned from here on (freed by destroy())
    return slot_tables_.back();
  }

  // Row buffer for the activated output when the caller passes probs == nullptr. Grows only;
  // an outgrown buffer is kept until destruction (a captured graph may still use it).
  float* probs_scratch(std::size_t floats) {
    if (floats <= probs_scratch_floats_) return probs_scratch_;
    require_may_prepare("loss_forward_backward");
    void* p = nullptr;
    check(cudaMalloc(&p, floats * sizeof(float)), "cudaMalloc (loss scratch)");
    if (probs_scratch_) retired_.push_back(probs_scratch_);
    probs_scratch_ = static_cast<float*>(p);
    probs_scratch_floats_ = floats;
    return probs_scratch_;
  }

  // The partial sums of batch normalization: one block for every layer and both passes (they run
  // in order on the stream), sized by batchnorm_prepare when a batch size is planned. Grows only;
  // an outgrown block is kept until destruction (a captured graph may still use it).
  float* norm_scratch(const BatchNormShape& s, int64_t m) {
    const auto floats = static_cast<std::size_t>(cuda::batchnorm_scratch_floats(s, m));
    if (floats <= norm_scratch_floats_) return norm_scratch_;
    require_may_prepare("batch normalization");
    void* p = nullptr;
    check(cudaMalloc(&p, floats * sizeof(float)), "cudaMalloc (batch normalization scratch)");
    if (norm_scratch_) retired_.push_back(norm_scratch_);
    norm_scratch_ = static_cast<float*>(p);
    norm_scratch_floats_ = floats;
    return norm_scratch_;
  }

  void destroy() noexcept {
    if (cudaSetDevice(ordinal_) != cudaSuccess) cudaGetLastError();
    if (stream_) cudaStreamSynchronize(stream_);
    conv_.reset();
    gemm_.reset();
    for (SlotTable& t : slot_tables_)
      if (t.device) cudaFree(t.device);
    slot_tables_.clear();
    if (probs_scratch_) cudaFree(probs_scratch_);
    probs_scratch_ = nullptr;
    if (norm_scratch_) cudaFree(norm_scratch_);
    if (fused_scratch_) cudaFree(fused_scratch_);
    fused_scratch_ = nullptr;
    norm_scratch_ = nullptr;
    for (float* p : retired_) cudaFree(p);
    retired_.clear();
    if (reduction_block_) cudaFree(reduction_block_);
    reduction_block_ = nullptr;
    if (staging_) cudaFreeHost(staging_);
    staging_ = nullptr;
    allocator_.free_cached();
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = nullptr;
    cudaGetLastError();
  }

  struct PendingDownload {
    void* dst;
    std::size_t offset;
    std::size_t bytes;
  };

  int ordinal_;
  std::string where_;
  Precision precision_;
  cudaStream_t stream_ = nullptr;
  int sm_count_ = 1;
  mutable int fused_blocks_per_sm_ = -1;  // occupancy of the fused step's kernel, once known
  void* fused_scratch_ = nullptr;
  std::size_t fused_scratch_bytes_ = 0;
  cuda::CachingAllocator allocator_;
  std::unique_ptr<cuda::LtGemm> gemm_;
  std::unique_ptr<cuda::CudnnConv> conv_;
  unsigned char* staging_ = nullptr;
  std::size_t staging_used_ = 0;
  std::vector<PendingDownload> pending_;
  void* reduction_block_ = nullptr;
  cuda::ReductionScratch reduction_{};
  float* probs_scratch_ = nullptr;
  std::size_t probs_scratch_floats_ = 0;
  float* norm_scratch_ = nullptr;
  std::size_t norm_scratch_floats_ = 0;
  std::vector<float*> retired_;
  std::vector<SlotTable> slot_tables_;
  bool planning_ = false;   // planning pass: prepare, enqueue nothing
  bool capturing_ = false;  // inside the stream capture: prepare nothing
};

void CudaStepGraph::replay() { backend_->launch_graph(exec_); }

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int ordinal, Precision precision) {
  return std::make_unique<CudaBackend>(ordinal, precision);
}

std::unique_ptr<Backend> make_cuda_backend(int ordinal) {
  return make_cuda_backend(ordinal, Precision::fp32);
}

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace crossover
