// cuBLASLt products for the dense layer; see gemm.h for the transposed formulation.
#include "backends/cuda/gemm.h"

#include <algorithm>
#include <bit>
#include <functional>

#include "backends/cuda/check.h"
#include "backends/cuda/kernels.h"
#include "core/error.h"

namespace crossover::cuda {
namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32}
                                        << 20;  // cuBLASLt's scratch, one per backend
constexpr uint8_t kMaxAlignLog2 = 8;            // 256 bytes: what cudaMalloc gives
constexpr uint8_t kEpilogueVectorAlignLog2 =
    4;  // fuse a bias only when its pointer is 16-byte aligned

uint8_t alignment_log2(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  if (v == 0) return kMaxAlignLog2;
  return static_cast<uint8_t>(std::min<int>(std::countr_zero(v), kMaxAlignLog2));
}

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::none:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::relu:
      return CUBLASLT_EPILOGUE_RELU;
    case GemmEpilogue::bias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::relu_bias:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::bias_gradient:
      return CUBLASLT_EPILOGUE_BGRADA;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool uses_bias_pointer(GemmEpilogue e) {
  return e == GemmEpilogue::bias || e == GemmEpilogue::relu_bias ||
         e == GemmEpilogue::bias_gradient;
}

const char* op_name(GemmOp op) {
  switch (op) {
    case GemmOp::forward:
      return "dense_forward";
    case GemmOp::backward_weights:
      return "dense_backward_weights";
    case GemmOp::backward_input:
      return "dense_backward_input";
  }
  return "gemm";
}

std::string shape_text(const GemmKey& key) {
  return std::string(op_name(key.op)) + " m=" + std::to_string(key.m) +
         " k=" + std::to_string(key.k) + " n=" + std::to_string(key.n);
}

}  // namespace

std::size_t GemmKeyHash::operator()(const GemmKey& key) const noexcept {
  std::size_t h = std::hash<int64_t>()(key.m);
  auto mix = [&h](std::size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(std::hash<int64_t>()(key.k));
  mix(std::hash<int64_t>()(key.n));
  mix(static_cast<std::size_t>(key.op) | static_cast<std::size_t>(key.epilogue) << 8 |
      static_cast<std::size_t>(key.align_a) << 16 | static_cast<std::size_t>(key.align_b) << 24 |
      static_cast<std::size_t>(key.align_d) << 32 | static_cast<std::size_t>(key.align_bias) << 40);
  return h;
}

LtGemm::LtGemm(int ordinal, Precision precision, cudaStream_t stream)
    : ordinal_(ordinal), where_(device_where(ordinal)), precision_(precision), stream_(stream) {
  check_lt(ordinal_, cublasLtCreate(&handle_), "cublasLtCreate");
  cudaError_t e = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (e != cudaSuccess) {
    cublasLtDestroy(handle_);
    check_cuda(ordinal_, e, "cudaMalloc (cuBLASLt workspace)");
  }
  workspace_bytes_ = kWorkspaceBytes;
}

LtGemm::~LtGemm() {
  for (auto& [key, p] : plans_) destroy_plan(p);
  if (warm_scratch_) cudaFree(warm_scratch_);
  if (workspace_) cudaFree(workspace_);
  if (handle_) cublasLtDestroy(handle_);
}

void LtGemm::destroy_plan(GemmPlan& p) noexcept {
  if (p.a) cublasLtMatrixLayoutDestroy(p.a);
  if (p.b) cublasLtMatrixLayoutDestroy(p.b);
  if (p.d) cublasLtMatrixLayoutDestroy(p.d);
  if (p.desc) cublasLtMatmulDescDestroy(p.desc);
  if (p.a16) cudaFree(p.a16);
  if (p.b16) cudaFree(p.b16);
  p = GemmPlan{};
}

GemmPlan& LtGemm::plan(const GemmKey& key, bool may_plan) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  if (!may_plan)
    throw Error(where_, shape_text(key) +
                            ": a product not seen in the planning pass was met during graph "
                            "capture (the captured function must make the same calls every time)");
  GemmPlan p = make_plan(key);
  return plans_.emplace(key, p).first->second;
}

GemmPlan LtGemm::make_plan(const GemmKey& key) {
  const bool bf16 = precision_ == Precision::bf16;
  const cublasComputeType_t compute =
      precision_ == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cudaDataType_t ab_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const uint64_t m = static_cast<uint64_t>(key.m), k = static_cast<uint64_t>(key.k),
                 n = static_cast<uint64_t>(key.n);

  // Column-major shapes (rows, cols, leading dimension) of A, B, D as stored, and the ops.
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  uint64_t ar = 0, ac = 0, br = 0, bc = 0, dr = 0, dc = 0;
  switch (key.op) {
    case GemmOp::forward:  // D(n,m) = W(n,k) . X(k,m)
      ar = n, ac = k, br = k, bc = m, dr = n, dc = m;
      break;
    case GemmOp::backward_weights:  // D(n,k) = dY(n,m) . X(k,m)^T
      ar = n, ac = m, br = k, bc = m, dr = n, dc = k, tb = CUBLAS_OP_T;
      break;
    case GemmOp::backward_input:  // D(k,m) = W(n,k)^T . dY(n,m)
      ar = n, ac = k, br = n, bc = m, dr = k, dc = m, ta = CUBLAS_OP_T;
      break;
  }

  GemmPlan p;
  cublasLtMatmulPreference_t pref = nullptr;
  try {
    check_lt(ordinal_, cublasLtMatmulDescCreate(&p.desc, compute, CUDA_R_32F),
             "cublasLtMatmulDescCreate");
    check_lt(ordinal_,
             cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
             "cublasLtMatmulDescSetAttribute(TRANSA)");
    check_lt(ordinal_,
             cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
             "cublasLtMatmulDescSetAttribute(TRANSB)");
    check_lt(ordinal_, cublasLtMatrixLayoutCreate(&p.a, ab_type, ar, ac, static_cast<int64_t>(ar)),
             "cublasLtMatrixLayoutCreate(A)");
    check_lt(ordinal_, cublasLtMatrixLayoutCreate(&p.b, ab_type, br, bc, static_cast<int64_t>(br)),
             "cublasLtMatrixLayoutCreate(B)");
    check_lt(ordinal_,
             cublasLtMatrixLayoutCreate(&p.d, CUDA_R_32F, dr, dc, static_cast<int64_t>(dr)),
             "cublasLtMatrixLayoutCreate(D)");
    if (bf16) {
      p.a_elements = static_cast<int64_t>(ar * ac);
      p.b_elements = static_cast<int64_t>(br * bc);
      check_cuda(ordinal_, cudaMalloc(&p.a16, static_cast<std::size_t>(p.a_elements) * 2),
                 "cudaMalloc (bf16 operand)");
      check_cuda(ordinal_, cudaMalloc(&p.b16, static_cast<std::size_t>(p.b_elements) * 2),
                 "cudaMalloc (bf16 operand)");
    }

    check_lt(ordinal_, cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = workspace_bytes_;
    check_lt(ordinal_,
             cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws),
             "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)");
    const uint32_t align_a = 1u << key.align_a, align_b = 1u << key.align_b,
                   align_d = 1u << key.align_d;
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d}};
    for (const auto& [attr, value] : alignments)
      check_lt(ordinal_, cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value),
               "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)");

    // The heuristic's best algorithm for this epilogue, or false if it has none.
    auto try_epilogue = [&](GemmEpilogue e) {
      const cublasLtEpilogue_t lt = lt_epilogue(e);
      check_lt(
          ordinal_,
          cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt, sizeof lt),
          "cublasLtMatmulDescSetAttribute(EPILOGUE)");
      if (uses_bias_pointer(e)) {
        const cudaDataType_t bias_type = CUDA_R_32F;  // float32 bias, also with bf16 operands
        check_lt(ordinal_,
                 cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                &bias_type, sizeof bias_type),
                 "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
      }
      cublasLtMatmulHeuristicResult_t result{};
      int count = 0;
      const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d,
                                                              pref, 1, &result, &count);
      if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && count == 0))
        return false;
      check_lt(ordinal_, s, "cublasLtMatmulAlgoGetHeuristic");
      p.algo = result.algo;
      return true;
    };

    if (key.epilogue != GemmEpilogue::none && try_epilogue(key.epilogue)) {
      p.fused = true;
    } else if (!try_epilogue(GemmEpilogue::none)) {
      throw Error(where_,
                  "cublasLtMatmulAlgoGetHeuristic found no algorithm for " + shape_text(key));
    }
    cublasLtMatmulPreferenceDestroy(pref);
  } catch (...) {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    destroy_plan(p);
    throw;
  }
  ++stats_.plans;
  if (key.epilogue != GemmEpilogue::none)
    ++(p.fused ? stats_.fused_epilogues : stats_.fallback_epilogues);
  return p;
}

void LtGemm::run(GemmPlan& p, const GemmKey& key, const float* a, int64_t a_elements,
                 const float* b, int64_t b_elements, float* d, const float* bias) {
  const void* a_ptr = a;
  const void* b_ptr = b;
  if (precision_ == Precision::bf16) {
    check_cuda(ordinal_, launch_to_bf16(stream_, a, p.a16, a_elements, b, p.b16, b_elements),
               "to_bf16 kernel launch");
    a_ptr = p.a16;
    b_ptr = p.b16;
  }
  if (p.fused && uses_bias_pointer(key.epilogue)) {
    // Host-side: read when cublasLtMatmul enqueues (so also right inside a capture).
    check_lt(ordinal_,
             cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                            sizeof bias),
             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  const float one = 1.0f, zero = 0.0f;
  check_lt(ordinal_,
           cublasLtMatmul(handle_, p.desc, &one, a_ptr, p.a, b_ptr, p.b, &zero, d, p.d, d, p.d,
                          &p.algo, workspace_, workspace_bytes_, stream_),
           "cublasLtMatmul");
}

void LtGemm::warm(GemmPlan& p, const GemmKey& key, const float* a, int64_t a_elements,
                  const float* b, int64_t b_elements, const float* bias) {
  const int64_t d_elements = key.op == GemmOp::forward            ? key.n * key.m
                             : key.op == GemmOp::backward_weights ? key.n * key.k
                                                                  : key.k * key.m;
  auto round_up = [](std::size_t bytes) { return (bytes + 255) / 256 * 256; };
  const std::size_t d_bytes = round_up(static_cast<std::size_t>(d_elements) * sizeof(float));
  const std::size_t need = d_bytes + round_up(static_cast<std::size_t>(key.n) * sizeof(float));
  if (need > warm_scratch_bytes_) {
    if (warm_scratch_) {
      check_cuda(ordinal_, cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      cudaFree(warm_scratch_);
      warm_scratch_ = nullptr;
      warm_scratch_bytes_ = 0;
    }
    check_cuda(ordinal_, cudaMalloc(&warm_scratch_, need), "cudaMalloc (cuBLASLt warm-up)");
    warm_scratch_bytes_ = need;
  }
  auto* base = static_cast<unsigned char*>(warm_scratch_);
  const float* bias_out = key.epilogue == GemmEpilogue::bias_gradient
                              ? reinterpret_cast<const float*>(base + d_bytes)
                              : bias;
  run(p, key, a, a_elements, b, b_elements, reinterpret_cast<float*>(base), bias_out);
  p.warmed = true;
}

void LtGemm::dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m,
                           int64_t k, int64_t n, ActivationKind act, bool enqueue, bool may_plan) {
  if (m <= 0 || n <= 0) return;
  const bool relu = act == ActivationKind::relu;
  if (k <= 0) {  // y = act(b): no product at all
    if (!enqueue) return;
    check_cuda(ordinal_,
               cudaMemsetAsync(y, 0, static_cast<std::size_t>(m * n) * sizeof(float), stream_),
               "cudaMemsetAsync");
    check_cuda(ordinal_,
               launch_bias_activation(stream_, y, b, m, n,
                                      relu ? ActivationKind::relu : ActivationKind::linear),
               "bias_activation kernel launch");
  } else {
    GemmEpilogue e = relu ? GemmEpilogue::relu : GemmEpilogue::none;
    if (b) {
      const bool fusable = alignment_log2(b) >= kEpilogueVectorAlignLog2;
      e = fusable ? (relu ? GemmEpilogue::relu_bias : GemmEpilogue::bias) : GemmEpilogue::none;
    }
    const bool bf16 = precision_ == Precision::bf16;
    GemmKey key{m,
                k,
                n,
                GemmOp::forward,
                e,
                bf16 ? kMaxAlignLog2 : alignment_log2(w),
                bf16 ? kMaxAlignLog2 : alignment_log2(x),
                alignment_log2(y),
                b ? alignment_log2(b) : uint8_t{0}};
    GemmPlan& p = plan(key, may_plan);
    if (!enqueue) {
      if (!p.warmed) warm(p, key, w, k * n, x, m * k, b);
      return;
    }
    run(p, key, w, k * n, x, m * k, y, b);
    p.warmed = true;
    if (!p.fused && (b || relu))
      check_cuda(ordinal_,
                 launch_bias_activation(stream_, y, b, m, n,
                                        relu ? ActivationKind::relu : ActivationKind::linear),
                 "bias_activation kernel launch");
  }
  if (act != ActivationKind::linear && !relu)  // sigmoid, tanh, softmax: after the bias
    check_cuda(ordinal_, launch_activation_forward(stream_, act, 0.0f, y, y, m, n),
               "activation kernel launch");
}

void LtGemm::dense_backward_weights(const float* x, const float* dy, float* dw, float* db,
                                    int64_t m, int64_t k, int64_t n, bool enqueue, bool may_plan) {
  if (n <= 0) return;
  if (m <= 0 || k <= 0) {  // dw is empty or zero; db is zero or the plain column sums
    if (!enqueue) return;
    if (k > 0)
      check_cuda(ordinal_,
                 cudaMemsetAsync(dw, 0, static_cast<std::size_t>(k * n) * sizeof(float), stream_),
                 "cudaMemsetAsync");
    if (db)
      check_cuda(ordinal_, launch_column_sums(stream_, dy, db, m < 0 ? 0 : m, n),
                 "column_sums kernel launch");
    return;
  }
  const bool fusable = db && alignment_log2(db) >= kEpilogueVectorAlignLog2;
  const GemmEpilogue e = fusable ? GemmEpilogue::bias_gradient : GemmEpilogue::none;
  const bool bf16 = precision_ == Precision::bf16;
  GemmKey key{m,
              k,
              n,
              GemmOp::backward_weights,
              e,
              bf16 ? kMaxAlignLog2 : alignment_log2(dy),
              bf16 ? kMaxAlignLog2 : alignment_log2(x),
              alignment_log2(dw),
              db ? alignment_log2(db) : uint8_t{0}};
  GemmPlan& p = plan(key, may_plan);
  if (!enqueue) {
    if (!p.warmed) warm(p, key, dy, m * n, x, m * k, db);
    return;
  }
  run(p, key, dy, m * n, x, m * k, dw, db);
  p.warmed = true;
  if (db && !p.fused)
    check_cuda(ordinal_, launch_column_sums(stream_, dy, db, m, n), "column_sums kernel launch");
}

void LtGemm::dense_backward_input(const float* dy, const float* w, float* dx, int64_t m, int64_t k,
                                  int64_t n, bool enqueue, bool may_plan) {
  if (m <= 0 || k <= 0) return;
  if (n <= 0) {
    if (enqueue)
      check_cuda(ordinal_,
                 cudaMemsetAsync(dx, 0, static_cast<std::size_t>(m * k) * sizeof(float), stream_),
                 "cudaMemsetAsync");
    return;
  }
  const bool bf16 = precision_ == Precision::bf16;
  GemmKey key{m,
              k,
              n,
              GemmOp::backward_input,
              GemmEpilogue::none,
              bf16 ? kMaxAlignLog2 : alignment_log2(w),
              bf16 ? kMaxAlignLog2 : alignment_log2(dy),
              alignment_log2(dx),
              0};
  GemmPlan& p = plan(key, may_plan);
  if (!enqueue) {
    if (!p.warmed) warm(p, key, w, k * n, dy, m * n, nullptr);
    return;
  }
  run(p, key, w, k * n, dy, m * n, dx, nullptr);
  p.warmed = true;
}

}  // namespace crossover::cuda
