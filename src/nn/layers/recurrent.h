// Keras's recurrent layers: SimpleRNN, LSTM, GRU and RNN(cell), each holding its cell
// (SimpleRNNCell, LSTMCell, GRUCell) as Layer::inner[0], as Keras holds it in the layer's "cell"
// attribute: the weights are the cell's (kernel (inputs, gates * units), recurrent_kernel (units,
// gates * units), bias), named "lstm/lstm_cell/kernel" and kept under layers/lstm/cell/vars in
// Keras's weights files. The backend runs the whole sequence in one call (Backend::rnn_forward).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "nn/layer.h"

namespace crossover {

// A cell's Keras arguments, with Keras 3.15's defaults (SimpleRNN's, LSTM's and GRU's that are
// not the layer's own). The engine runs activation tanh (SimpleRNN: also relu and sigmoid) and
// recurrent_activation sigmoid, the ones oneDNN's and cuDNN's cells have; dropout and
// recurrent_dropout 0.
struct RecurrentCellArgs {
  int64_t units = 0;
  LayerActivation activation{ActivationKind::tanh, 0.0f};
  LayerActivation recurrent_activation{ActivationKind::sigmoid, 0.0f};  // LSTM, GRU
  bool use_bias = true;
  Initializer kernel_initializer = GlorotUniform();
  Initializer recurrent_initializer = Orthogonal();
  Initializer bias_initializer = Zeros();
  bool unit_forget_bias = true;  // LSTM: the forget gate's bias starts at 1
  bool reset_after = true;       // GRU: the reset gate after the recurrent product (two biases)
  Regularizer kernel_regularizer, recurrent_regularizer, bias_regularizer;
  double dropout = 0.0, recurrent_dropout = 0.0;
};

// The layer's own: Keras's RNN base arguments. return_state and stateful are refused.
struct RecurrentArgs {
  bool return_sequences = false;  // every step's output (steps, units), else the last (units)
  bool go_backwards = false;      // the steps last to first (the output sequence reversed too)
};

// SimpleRNN(units), LSTM(units), GRU(units) with Keras's defaults, on (steps, features) samples.
Layer SimpleRNN(int64_t units, std::string_view activation = "tanh", bool return_sequences = false);
Layer LSTM(int64_t units, bool return_sequences = false);
Layer GRU(int64_t units, bool return_sequences = false);

}  // namespace crossover
