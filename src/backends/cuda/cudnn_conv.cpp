// cuDNN convolutions for the CUDA backend; see cudnn_conv.h for the layout and padding choices.
#include "backends/cuda/cudnn_conv.h"

#include <algorithm>
#include <climits>
#include <vector>

#include "backends/cuda/check.h"
#include "backends/cuda/kernels.h"
#include "core/error.h"

namespace crossover::cuda {
namespace {

// Algorithms that want more workspace than this are passed over.
constexpr std::size_t kMaxWorkspaceBytes = std::size_t{256} << 20;

std::string shape_text(const ConvShape& s, int64_t m) {
  auto hwc = [](int64_t h, int64_t w, int64_t c) {
    return std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c);
  };
  const std::string dilation =
      s.dilation_h == 1 && s.dilation_w == 1
          ? ""
          : " dilation=" + std::to_string(s.dilation_h) + "x" + std::to_string(s.dilation_w);
  return "m=" + std::to_string(m) + " in=" + hwc(s.in_h, s.in_w, s.in_c) +
         " kernel=" + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) + dilation +
         " out=" + hwc(s.out_h, s.out_w, s.out_c);
}

// Device memory used only while a plan is made (the algorithms' trial runs).
struct Scratch {
  void* p = nullptr;
  std::size_t bytes = 0;
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (p) cudaFree(p);
  }
};

}  // namespace

CudnnConv::CudnnConv(int ordinal, Precision precision, cudaStream_t stream)
    : ordinal_(ordinal), where_(device_where(ordinal)), precision_(precision), stream_(stream) {}

CudnnConv::~CudnnConv() {
  for (auto& [key, p] : plans_) destroy_plan(p);
  if (handle_) cudnnDestroy(handle_);
}

void CudnnConv::check(cudaError_t e, const char* call) const { check_cuda(ordinal_, e, call); }
void CudnnConv::check(cudnnStatus_t s, const char* call) const { check_cudnn(ordinal_, s, call); }

void CudnnConv::destroy_plan(ConvPlan& p) noexcept {
  if (p.x) cudnnDestroyTensorDescriptor(p.x);
  if (p.y) cudnnDestroyTensorDescriptor(p.y);
  if (p.w) cudnnDestroyFilterDescriptor(p.w);
  if (p.conv) cudnnDestroyConvolutionDescriptor(p.conv);
  if (p.padded) cudaFree(p.padded);
  if (p.kernel) cudaFree(p.kernel);
  if (p.workspace) cudaFree(p.workspace);
  p = ConvPlan{};
}

ConvPlan& CudnnConv::plan(const ConvShape& s, int64_t m, const char* op, bool may_plan) {
  const auto key = std::pair(s, m);
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  if (!may_plan)
    throw Error(where_, std::string(op) + " " + shape_text(s, m) +
                            ": a convolution not seen in the planning pass was met during graph "
                            "capture (the captured function must make the same calls every time)");
  return plans_.emplace(key, make_plan(s, m)).first->second;
}

ConvPlan CudnnConv::make_plan(const ConvShape& s, int64_t m) {
  const std::string what = "conv2d " + shape_text(s, m);
  ConvPlan p;
  p.explicit_padding = s.pad_top != s.pad_bottom || s.pad_left != s.pad_right;
  const int64_t xh = p.explicit_padding ? s.in_h + s.pad_top + s.pad_bottom : s.in_h;
  const int64_t xw = p.explicit_padding ? s.in_w + s.pad_left + s.pad_right : s.in_w;
  const int64_t x_elements = m * xh * xw * s.in_c;
  const int64_t y_elements = m * s.out_h * s.out_w * s.out_c;
  const int64_t w_elements = s.out_c * s.kernel_h * s.kernel_w * s.in_c;
  for (const int64_t v : {m, xh, xw, s.in_c, s.out_c, s.out_h, s.out_w, x_elements, y_elements,
                          w_elements, s.dilation_h, s.dilation_w, s.pad_top + 1, s.pad_left + 1})
    if (v <= 0 || v > INT_MAX)
      throw Error(where_, what + ": a dimension or tensor size cuDNN cannot take (" +
                              std::to_string(v) + ")");
  const auto floats = [](int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };

  if (!handle_) {
    check(cudnnCreate(&handle_), "cudnnCreate");
    check(cudnnSetStream(handle_, stream_), "cudnnSetStream");
  }
  try {
    set_descriptors(p, s, m, xh, xw, what);
    check(cudaMalloc(reinterpret_cast<void**>(&p.kernel), floats(w_elements)),
          "cudaMalloc (convolution kernel)");
    if (p.explicit_padding)
      check(cudaMalloc(reinterpret_cast<void**>(&p.padded), floats(x_elements)),
            "cudaMalloc (padded input)");
    choose_algorithms(p, x_elements, y_elements, w_elements, what);
    if (p.workspace_bytes > 0)
      check(cudaMalloc(&p.workspace, p.workspace_bytes), "cudaMalloc (convolution workspace)");
  } catch (...) {
    destroy_plan(p);
    throw;
  }
  return p;
}

void CudnnConv::set_descriptors(ConvPlan& p, const ConvShape& s, int64_t m, int64_t xh, int64_t xw,
                                const std::string& what) {
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  check(cudnnCreateTensorDescriptor(&p.x), "cudnnCreateTensorDescriptor");
  check(cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(m), i(s.in_c), i(xh),
                                   i(xw)),
        "cudnnSetTensor4dDescriptor (input)");
  check(cudnnCreateTensorDescriptor(&p.y), "cudnnCreateTensorDescriptor");
  check(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(m), i(s.out_c),
                                   i(s.out_h), i(s.out_w)),
        "cudnnSetTensor4dDescriptor (output)");
  check(cudnnCreateFilterDescriptor(&p.w), "cudnnCreateFilterDescriptor");
  check(cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, i(s.out_c), i(s.in_c),
                                   i(s.kernel_h), i(s.kernel_w)),
        "cudnnSetFilter4dDescriptor");
  check(cudnnCreateConvolutionDescriptor(&p.conv), "cudnnCreateConvolutionDescriptor");
  check(cudnnSetConvolution2dDescriptor(p.conv, p.explicit_padding ? 0 : i(s.pad_top),
                                        p.explicit_padding ? 0 : i(s.pad_left), i(s.stride_h),
                                        i(s.stride_w), i(s.dilation_h), i(s.dilation_w),
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  check(cudnnSetConvolutionMathType(
            p.conv, precision_ == Precision::fp32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH),
        "cudnnSetConvolutionMathType");
  int n = 0, c = 0, h = 0, w = 0;
  check(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &n, &c, &h, &w),
        "cudnnGetConvolution2dForwardOutputDim");
  if (n != m || c != s.out_c || h != s.out_h || w != s.out_w)
    throw Error(where_, what + ": cuDNN computes an output of " + std::to_string(h) + "x" +
                            std::to_string(w) + "x" + std::to_string(c) + " for this convolution");
}

void CudnnConv::choose_algorithms(ConvPlan& p, int64_t x_elements, int64_t y_elements,
                                  int64_t w_elements, const std::string& what) {
  const auto floats = [](int64_t n) { return static_cast<std::size_t>(n) * sizeof(float); };
  // Scratch tensors, zeroed, for the trial runs; and a workspace grown as the trials need.
  Scratch sx, sy, sw, sws;
  for (auto [buf, n_floats] :
       {std::pair{&sx, x_elements}, std::pair{&sy, y_elements}, std::pair{&sw, w_elements}}) {
    check(cudaMalloc(&buf->p, floats(n_floats)), "cudaMalloc (convolution trial)");
    check(cudaMemsetAsync(buf->p, 0, floats(n_floats), stream_), "cudaMemsetAsync");
  }
  const auto workspace = [&](std::size_t bytes) {
    if (bytes <= sws.bytes) return;
    if (sws.p) cudaFree(sws.p);
    sws.p = nullptr;
    sws.bytes = 0;
    check(cudaMalloc(&sws.p, bytes), "cudaMalloc (convolution trial workspace)");
    sws.bytes = bytes;
  };
  // Runs one algorithm on the scratch tensors: whether it ran (and loaded its kernels).
  const auto ran = [&](cudnnStatus_t status) {
    if (status != CUDNN_STATUS_SUCCESS) {
      cudaGetLastError();
      return false;
    }
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (convolution trial)");
    return true;
  };
  // The first of cuDNN's heuristic's answers that is deterministic (then: any) and runs.
  const auto choose = [&](const auto& perf, int count, auto&& size_of, auto&& run,
                          const char* pass) {
    for (const bool deterministic : {true, false})
      for (int k = 0; k < count; ++k) {
        const auto& r = perf[static_cast<std::size_t>(k)];
        if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kMaxWorkspaceBytes) continue;
        if (deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
        std::size_t bytes = 0;
        if (size_of(r.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxWorkspaceBytes) continue;
        workspace(bytes);
        if (!ran(run(r.algo))) continue;
        p.workspace_bytes = std::max(p.workspace_bytes, bytes);
        return r.algo;
      }
    throw Error(where_, what + ": cuDNN has no " + pass + " algorithm that runs for it");
  };
  const float one = 1.0f, zero = 0.0f;

  int max_count = 0, count = 0;
  check(cudnnGetConvolutionForwardAlgorithmMaxCount(handle_, &max_count),
        "cudnnGetConvolutionForwardAlgorithmMaxCount");
  std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(static_cast<std::size_t>(max_count));
  check(cudnnGetConvolutionForwardAlgorithm_v7(handle_, p.x, p.w, p.conv, p.y, max_count, &count,
                                               fwd.data()),
        "cudnnGetConvolutionForwardAlgorithm_v7");
  p.forward = choose(
      fwd, count,
      [&](cudnnConvolutionFwdAlgo_t a, std::size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(handle_, p.x, p.w, p.conv, p.y, a, bytes);
      },
      [&](cudnnConvolutionFwdAlgo_t a) {
        return cudnnConvolutionForward(handle_, &one, p.x, sx.p, p.w, sw.p, p.conv, a, sws.p,
                                       sws.bytes, &zero, p.y, sy.p);
      },
      "forward");

  check(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle_, &max_count),
        "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bwd_data(static_cast<std::size_t>(max_count));
  check(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle_, p.w, p.y, p.conv, p.x, max_count,
                                                    &count, bwd_data.data()),
        "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  p.backward_data = choose(
      bwd_data, count,
      [&](cudnnConvolutionBwdDataAlgo_t a, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, p.w, p.y, p.conv, p.x, a,
                                                            bytes);
      },
      [&](cudnnConvolutionBwdDataAlgo_t a) {
        return cudnnConvolutionBackwardData(handle_, &one, p.w, sw.p, p.y, sy.p, p.conv, a, sws.p,
                                            sws.bytes, &zero, p.x, sx.p);
      },
      "backward-data");

  check(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle_, &max_count),
        "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bwd_filter(static_cast<std::size_t>(max_count));
  check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle_, p.x, p.y, p.conv, p.w, max_count,
                                                      &count, bwd_filter.data()),
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  p.backward_filter = choose(
      bwd_filter, count,
      [&](cudnnConvolutionBwdFilterAlgo_t a, std::size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, p.x, p.y, p.conv, p.w, a,
                                                              bytes);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t a) {
        return cudnnConvolutionBackwardFilter(handle_, &one, p.x, sx.p, p.y, sy.p, p.conv, a, sws.p,
                                              sws.bytes, &zero, p.w, sw.p);
      },
      "backward-filter");
}

const float* CudnnConv::input(const ConvPlan& p, const ConvShape& s, const float* x, int64_t m) {
  if (!p.explicit_padding) return x;
  check(launch_pad_nhwc(stream_, x, p.padded, m, s.in_h, s.in_w, s.in_c, s.pad_top, s.pad_bottom,
                        s.pad_left, s.pad_right),
        "pad_nhwc kernel launch");
  return p.padded;
}

void CudnnConv::forward(const ConvShape& s, const float* x, const float* w, const float* b,
                        float* y, int64_t m, ActivationKind act, bool enqueue, bool may_plan) {
  if (act != ActivationKind::linear && act != ActivationKind::relu)
    throw Error(where_, "conv2d_forward fuses linear or relu only");
  if (m <= 0) return;
  ConvPlan& p = plan(s, m, "conv2d_forward", may_plan);
  if (!enqueue) return;
  check(launch_transpose(stream_, w, p.kernel, s.kernel_h * s.kernel_w * s.in_c, s.out_c),
        "transpose kernel launch");
  const float* in = input(p, s, x, m);
  const float one = 1.0f, zero = 0.0f;
  check(cudnnConvolutionForward(handle_, &one, p.x, in, p.w, p.kernel, p.conv, p.forward,
                                p.workspace, p.workspace_bytes, &zero, p.y, y),
        "cudnnConvolutionForward");
  if (b || act == ActivationKind::relu)
    check(launch_bias_activation(stream_, y, b, m * s.out_h * s.out_w, s.out_c, act),
          "bias_activation kernel launch");
}

void CudnnConv::backward_input(const ConvShape& s, const float* dy, const float* w, float* dx,
                               int64_t m, bool enqueue, bool may_plan) {
  if (m <= 0) return;
  ConvPlan& p = plan(s, m, "conv2d_backward_input", may_plan);
  if (!enqueue) return;
  check(launch_transpose(stream_, w, p.kernel, s.kernel_h * s.kernel_w * s.in_c, s.out_c),
        "transpose kernel launch");
  const float one = 1.0f, zero = 0.0f;
  check(cudnnConvolutionBackwardData(handle_, &one, p.w, p.kernel, p.y, dy, p.conv, p.backward_data,
                                     p.workspace, p.workspace_bytes, &zero, p.x,
                                     p.explicit_padding ? p.padded : dx),
        "cudnnConvolutionBackwardData");
  if (p.explicit_padding)
    check(launch_crop_nhwc(stream_, p.padded, dx, m, s.in_h, s.in_w, s.in_c, s.pad_top,
                           s.pad_bottom, s.pad_left, s.pad_right),
          "crop_nhwc kernel launch");
}

void CudnnConv::backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw,
                                 float* db, int64_t m, bool enqueue, bool may_plan) {
  if (m <= 0) return;
  ConvPlan& p = plan(s, m, "conv2d_backward_weights", may_plan);
  if (!enqueue) return;
  const float* in = input(p, s, x, m);
  const float one = 1.0f, zero = 0.0f;
  check(cudnnConvolutionBackwardFilter(handle_, &one, p.x, in, p.y, dy, p.conv, p.backward_filter,
                                       p.workspace, p.workspace_bytes, &zero, p.w, p.kernel),
        "cudnnConvolutionBackwardFilter");
  check(launch_transpose(stream_, p.kernel, dw, s.out_c, s.kernel_h * s.kernel_w * s.in_c),
        "transpose kernel launch");
  if (db)
    check(launch_column_sums(stream_, dy, db, m * s.out_h * s.out_w, s.out_c),
          "column_sums kernel launch");
}

}  // namespace crossover::cuda
