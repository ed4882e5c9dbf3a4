// The dense layer's three matrix products through cuBLASLt, with fused epilogues where cuBLASLt
// has them for the shape (bias, bias + ReLU, bias gradient) and small kernels where not.
//
// Row-major data, column-major library: a row-major (r, c) matrix is the column-major (c, r)
// matrix of the same bytes, so each product is computed transposed:
//   forward           y(m,n) = x(m,k) w(k,n)      as  y^T(n,m)  = w^T(n,k)  . x^T(k,m)
//   backward_weights  dw(k,n) = x^T dy            as  dw^T(n,k) = dy^T(n,m) . (x^T(k,m))^T
//   backward_input    dx(m,k) = dy w^T            as  dx^T(k,m) = (w^T(n,k))^T . dy^T(n,m)
// In the first, the bias (n) runs along D's rows: CUBLASLT_EPILOGUE_BIAS / RELU_BIAS. In the
// second, db(n) = row sums of A = dy^T over the GEMM's k (= m): CUBLASLT_EPILOGUE_BGRADA.
//
// Each (operation, shape, epilogue, pointer alignments) gets a plan once: descriptors, layouts,
// the heuristic's algorithm and, for bf16, operand buffers. Later calls look the plan up (no
// allocation). Plans are made eagerly, never during a stream capture (see CudaBackend::capture).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "backends/backend.h"
#include "backends/cuda_info.h"

namespace crossover::cuda {

enum class GemmOp : uint8_t { forward, backward_weights, backward_input };

// What the caller asks the product to do besides multiplying.
enum class GemmEpilogue : uint8_t { none, relu, bias, relu_bias, bias_gradient };

struct GemmKey {
  int64_t m = 0, k = 0, n = 0;
  GemmOp op = GemmOp::forward;
  GemmEpilogue epilogue = GemmEpilogue::none;
  // log2 of each pointer's alignment (capped at 256 bytes): cuBLASLt picks kernels by it.
  uint8_t align_a = 0, align_b = 0, align_d = 0, align_bias = 0;
  bool operator==(const GemmKey&) const = default;
};

struct GemmKeyHash {
  std::size_t operator()(const GemmKey& key) const noexcept;
};

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool fused = false;   // the requested epilogue runs inside the product
  bool warmed = false;  // has run once (so cuBLASLt's kernel is loaded)
  // bf16 copies of the operands (Precision::bf16 only).
  void* a16 = nullptr;
  void* b16 = nullptr;
  int64_t a_elements = 0, b_elements = 0;
};

// Counts for the report: what was fused, and what fell back to a kernel.
struct GemmStats {
  int plans = 0;
  int fused_epilogues = 0;
  int fallback_epilogues = 0;
};

class LtGemm {
 public:
  LtGemm(int ordinal, Precision precision, cudaStream_t stream);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // `enqueue` false: make the plan only (the planning pass before a capture).
  // `may_plan` false: a missing plan is an error (during a stream capture).
  void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k,
                     int64_t n, ActivationKind act, bool enqueue, bool may_plan);
  void dense_backward_weights(const float* x, const float* dy, float* dw, float* db, int64_t m,
                              int64_t k, int64_t n, bool enqueue, bool may_plan);
  void dense_backward_input(const float* dy, const float* w, float* dx, int64_t m, int64_t k,
                            int64_t n, bool enqueue, bool may_plan);

  const GemmStats& stats() const { return stats_; }

 private:
  GemmPlan& plan(const GemmKey& key, bool may_plan);
  GemmPlan make_plan(const GemmKey& key);
  void destroy_plan(GemmPlan& p) noexcept;
  // D = op(A) op(B) with the plan's epilogue; `bias` is the bias or bias-gradient vector.
  void run(GemmPlan& p, const GemmKey& key, const float* a, int64_t a_elements, const float* b,
           int64_t b_elements, float* d, const float* bias);
  // In the planning pass: runs a new plan once on the real inputs into scratch outputs, so the
  // library loads its kernel (CUDA loads modules lazily) before, not during, the capture.
  void warm(GemmPlan& p, const GemmKey& key, const float* a, int64_t a_elements, const float* b,
            int64_t b_elements, const float* bias);

  int ordinal_;
  std::string where_;
  Precision precision_;
  cudaStream_t stream_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  void* warm_scratch_ = nullptr;  // warm()'s outputs; never used by captured work
  std::size_t warm_scratch_bytes_ = 0;
  std::unordered_map<GemmKey, GemmPlan, GemmKeyHash> plans_;
  GemmStats stats_;
};

}  // namespace crossover::cuda
