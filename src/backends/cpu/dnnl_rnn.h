// The CPU backend's recurrent layers (Keras's SimpleRNN, LSTM, GRU): oneDNN's RNN primitives,
// forward and backward, the time loop inside the library (its vanilla RNN, its LSTM, its GRU and
// its linear-before-reset GRU, which is Keras's reset_after=True).
//
// Keras's layouts are oneDNN's own: x (m, steps, inputs) is its ntc, a kernel (inputs, gates *
// units) its ldigo with the gates in Keras's order (LSTM i, f, c, o; GRU z, r, h; oneDNN's u, r,
// o), the LSTM's bias its ldgo. What differs is converted around each call: the weights reordered
// to the layout the primitive prefers, a reset_after GRU's (2, 3 units) bias folded into oneDNN's
// four gate biases (the z and r gates' two biases summed, the candidate's two kept) and its
// gradient unfolded, and go_backwards's output reversed in time (oneDNN writes each step's state
// at its input's position). As in dnnl_conv.h, each primitive is made the first time a shape and a
// batch size are asked for, and kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backends/backend.h"

namespace crossover::cpu {

class DnnlRnn {
 public:
  DnnlRnn();
  ~DnnlRnn();
  DnnlRnn(const DnnlRnn&) = delete;
  DnnlRnn& operator=(const DnnlRnn&) = delete;

  // Backend::rnn_workspace_bytes, rnn_forward, rnn_backward (backend_ops.h).
  std::size_t workspace_bytes(const RnnShape& s, int64_t m);
  void forward(const RnnShape& s, const float* x, const float* kernel, const float* recurrent,
               const float* b, float* y, void* workspace, int64_t m);
  void backward(const RnnShape& s, const float* x, const float* kernel, const float* recurrent,
                const float* b, const float* y, const float* dy, const void* workspace, float* dx,
                float* dkernel, float* drecurrent, float* db, int64_t m);

  struct State;  // oneDNN's engine and stream, and the primitives made so far

 private:
  State& state();
  std::unique_ptr<State> state_;
};

}  // namespace crossover::cpu
