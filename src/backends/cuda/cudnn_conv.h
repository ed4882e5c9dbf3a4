// The CUDA backend's 2-D convolutions through cuDNN 9 (its legacy convolution API, on NHWC
// float32 tensors). See docs/CUDA.md, "Convolutions and pooling".
//
// Each (ConvShape, batch) gets a plan the first time it is asked for: tensor, filter and
// convolution descriptors, an algorithm for each of the three passes (forward, backward data,
// backward filter), each tried once on scratch buffers so that cuDNN has loaded its kernels before
// any stream capture, and the buffers the passes need: the kernel in cuDNN's layout, the padded
// input when the padding is uneven, and the largest of the three workspaces. Later calls look the
// plan up and allocate nothing. Plans are never made during a stream capture.
//
// - Kernel layout: Keras's (kh, kw, in, out) is cuDNN's (out, kh, kw, in) (KRSC, the NHWC filter
//   format) transposed as a (kh*kw*in, out) matrix: a kernel transposes it into the plan before
//   forward and backward data, and the filter gradient back into the caller's dw after.
// - Padding: symmetric padding (valid, or 'same' with an even total) is cuDNN's own. TensorFlow's
//   uneven 'same' (the extra row/column at the bottom/right) cannot be said to cuDNN, so then the
//   input is copied into a zero-padded buffer (exact), the convolution runs unpadded on it, and
//   backward data writes the padded gradient there and a kernel crops it into dx.
// - Dilation (Keras's dilation_rate) is the convolution descriptor's own; the padding above is
//   that of the kernel's dilated span.
// - Bias and ReLU: one elementwise kernel after the convolution (bias_activation, as for a dense
//   layer whose epilogue cuBLASLt cannot fuse); the bias gradient is column_sums of dy viewed as
//   (m * out_h * out_w, out_c).
// - Precision: fp32 runs cuDNN's FMA math (no TF32); tf32 and bf16 allow TF32 tensor cores.
// - Determinism: the first deterministic algorithm of cuDNN's heuristic that runs (a
//   non-deterministic one only when none does).
#pragma once

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "backends/backend.h"
#include "backends/cuda_info.h"

namespace crossover::cuda {

struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr;  // the input as cuDNN sees it (padded when explicit)
  cudnnTensorDescriptor_t y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;  // (out, kh, kw, in)
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  bool explicit_padding = false;
  float* padded = nullptr;  // (m, in_h + top + bottom, in_w + left + right, in_c), when explicit
  float* kernel = nullptr;  // the kernel or its gradient in cuDNN's layout
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

class CudnnConv {
 public:
  CudnnConv(int ordinal, Precision precision, cudaStream_t stream);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // `enqueue` false: make the plan only (the planning pass before a capture).
  // `may_plan` false: a missing plan is an error (during a stream capture).
  void forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
               int64_t m, ActivationKind act, bool enqueue, bool may_plan);
  void backward_input(const ConvShape& s, const float* dy, const float* w, float* dx, int64_t m,
                      bool enqueue, bool may_plan);
  void backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw, float* db,
                        int64_t m, bool enqueue, bool may_plan);

 private:
  ConvPlan& plan(const ConvShape& s, int64_t m, const char* op, bool may_plan);
  ConvPlan make_plan(const ConvShape& s, int64_t m);
  // make_plan's steps: the tensor, filter and convolution descriptors of `p` (input xh x xw, the
  // padded size where the padding is explicit), checked against the shape's output size; then
  // cuDNN's forward, backward-data and backward-filter algorithms, each the first that runs on
  // zeroed scratch tensors of the given sizes (`what` names the convolution in errors).
  void set_descriptors(ConvPlan& p, const ConvShape& s, int64_t m, int64_t xh, int64_t xw,
                       const std::string& what);
  void choose_algorithms(ConvPlan& p, int64_t x_elements, int64_t y_elements, int64_t w_elements,
                         const std::string& what);
  void destroy_plan(ConvPlan& p) noexcept;
  // The input cuDNN reads: x itself, or x copied into the plan's padded buffer.
  const float* input(const ConvPlan& p, const ConvShape& s, const float* x, int64_t m);
  void check(cudaError_t e, const char* call) const;
  void check(cudnnStatus_t s, const char* call) const;

  int ordinal_;
  std::string where_;
  Precision precision_;
  cudaStream_t stream_;
  cudnnHandle_t handle_ = nullptr;  // made with the first plan
  std::map<std::pair<ConvShape, int64_t>, ConvPlan> plans_;
};

}  // namespace crossover::cuda
