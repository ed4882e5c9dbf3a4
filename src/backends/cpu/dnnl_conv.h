// The CPU backend's 2-D convolution and batch normalization: oneDNN primitives on channels-last
// data (pooling is the CPU backend's own loops, cpu_pooling.cpp).
//
// Each primitive (and the reorders of the kernel between Keras's (kh, kw, in, out) layout and the
// one oneDNN's convolution prefers, and its scratchpad) is created the first time a shape and a
// batch size are asked for, and kept: a later call finds it in a map and only points its memory
// objects at the caller's buffers. oneDNN 2.6's dnnl_primitive_execute itself makes a few small
// heap allocations per call (its argument map); nothing else does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "backends/backend.h"

namespace crossover::cpu {

class DnnlConv {
 public:
  DnnlConv();
  ~DnnlConv();
  DnnlConv(const DnnlConv&) = delete;
  DnnlConv& operator=(const DnnlConv&) = delete;

  void conv_forward(const ConvShape& s, const float* x, const float* w, const float* b, float* y,
                    int64_t m, ActivationKind act);
  void conv_backward_input(const ConvShape& s, const float* dy, const float* w, float* dx,
                           int64_t m);
  void conv_backward_weights(const ConvShape& s, const float* x, const float* dy, float* dw,
                             float* db, int64_t m);

  // Batch normalization (backend.h's BatchNormShape): oneDNN's batch_normalization primitive with
  // separate scale and shift, on (m, channels, spatial, 1) in nhwc order, which is Keras's (m,
  // ..., channels) with every axis but the last reduced.
  void batchnorm_prepare(const BatchNormShape& s, int64_t m);
  void batchnorm_forward_training(const BatchNormShape& s, const float* x, const float* gamma,
                                  const float* beta, float* y, float* mean, float* variance,
                                  int64_t m);
  void batchnorm_forward_inference(const BatchNormShape& s, const float* x, const float* gamma,
                                   const float* beta, const float* mean, const float* variance,
                                   float* y, int64_t m);
  void batchnorm_backward(const BatchNormShape& s, const float* x, const float* dy,
                          const float* gamma, const float* mean, const float* variance, float* dx,
                          float* dgamma, float* dbeta, int64_t m);

  struct State;  // oneDNN's engine and stream, and the primitives made so far

 private:
  // Made at the first convolution or batch-normalization call: a model without them never creates
  // oneDNN's engine and stream.
  State& state();
  std::unique_ptr<State> state_;
};

}  // namespace crossover::cpu
