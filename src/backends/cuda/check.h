// Error checking for the CUDA backend: every CUDA, cuBLASLt and cuDNN call goes through one of
// these, and a failure becomes crossover::Error("cuda:N", "<call> failed: <error string>").
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <string>

#include "core/error.h"

namespace crossover::cuda {

inline std::string device_where(int ordinal) { return "cuda:" + std::to_string(ordinal); }

inline void check_cuda(int ordinal, cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
  throw Error(device_where(ordinal), std::string(call) + " failed: " + cudaGetErrorString(e));
}

inline void check_lt(int ordinal, cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw Error(device_where(ordinal), std::string(call) + " failed: " + cublasLtGetStatusString(s) +
                                         " (" + cublasLtGetStatusName(s) + ")");
}

inline void check_cudnn(int ordinal, cudnnStatus_t s, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  throw Error(device_where(ordinal), std::string(call) + " failed: " + cudnnGetErrorString(s) +
                                         " (status " + std::to_string(static_cast<int>(s)) + ")");
}

}  // namespace crossover::cuda
