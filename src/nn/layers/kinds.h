// The layer kinds, listed once (an X-macro list): nn/layer.h makes LayerType from it, and
// nn/layers/registry.cpp the registry (each kind's `<id>_layer_kind()`, defined in its unit).
// Adding a kind is one entry here, last (LayerType's values are its order), plus its own files
// (docs/ARCHITECTURE.md, "Adding a layer").
//
// Included several times, no include guard: the includer defines
//
//   CROSSOVER_LAYER_KIND(id)
//     LayerType::id, and the kind `const LayerKind& id##_layer_kind()`.
//
// The list is undefined again at the end.

// clang-format off
CROSSOVER_LAYER_KIND(input)  // nn/layers/input.cpp
CROSSOVER_LAYER_KIND(flatten)  // nn/layers/flatten.cpp
CROSSOVER_LAYER_KIND(dense)  // nn/layers/dense.cpp
CROSSOVER_LAYER_KIND(dropout)  // nn/layers/dropout.cpp
CROSSOVER_LAYER_KIND(activation)  // nn/layers/activation.cpp
CROSSOVER_LAYER_KIND(conv2d)  // nn/layers/conv2d.cpp
CROSSOVER_LAYER_KIND(max_pooling2d)  // nn/layers/pooling2d.cpp
CROSSOVER_LAYER_KIND(average_pooling2d)  // nn/layers/pooling2d.cpp
CROSSOVER_LAYER_KIND(global_average_pooling2d)  // nn/layers/global_pooling2d.cpp
CROSSOVER_LAYER_KIND(global_max_pooling2d)  // nn/layers/global_pooling2d.cpp
CROSSOVER_LAYER_KIND(reshape)  // nn/layers/reshape.cpp
CROSSOVER_LAYER_KIND(batch_normalization)  // nn/layers/batch_normalization.cpp
CROSSOVER_LAYER_KIND(layer_normalization)  // nn/layers/layer_normalization.cpp
CROSSOVER_LAYER_KIND(add)  // nn/layers/add.cpp
CROSSOVER_LAYER_KIND(concatenate)  // nn/layers/concatenate.cpp
CROSSOVER_LAYER_KIND(leaky_relu)  // nn/layers/leaky_relu.cpp
CROSSOVER_LAYER_KIND(elu)  // nn/layers/elu.cpp
CROSSOVER_LAYER_KIND(up_sampling2d)  // nn/layers/up_sampling2d.cpp
CROSSOVER_LAYER_KIND(conv2d_transpose)  // nn/layers/conv2d_transpose.cpp
CROSSOVER_LAYER_KIND(subtract)  // nn/layers/elementwise.cpp
CROSSOVER_LAYER_KIND(multiply)  // nn/layers/elementwise.cpp
CROSSOVER_LAYER_KIND(maximum)  // nn/layers/elementwise.cpp
CROSSOVER_LAYER_KIND(minimum)  // nn/layers/elementwise.cpp
CROSSOVER_LAYER_KIND(average)  // nn/layers/elementwise.cpp
CROSSOVER_LAYER_KIND(binary_op)  // nn/layers/elementwise.cpp
CROSSOVER_LAYER_KIND(unary_op)  // nn/layers/elementwise.cpp
CROSSOVER_LAYER_KIND(reduce)  // nn/layers/reduce.cpp
CROSSOVER_LAYER_KIND(rescaling)  // nn/layers/rescaling.cpp
CROSSOVER_LAYER_KIND(zero_padding2d)  // nn/layers/zero_padding2d.cpp
CROSSOVER_LAYER_KIND(cropping2d)  // nn/layers/zero_padding2d.cpp
CROSSOVER_LAYER_KIND(zero_padding1d)  // nn/layers/zero_padding2d.cpp
CROSSOVER_LAYER_KIND(cropping1d)  // nn/layers/zero_padding2d.cpp
CROSSOVER_LAYER_KIND(gaussian_noise)  // nn/layers/noise.cpp
CROSSOVER_LAYER_KIND(gaussian_dropout)  // nn/layers/noise.cpp
CROSSOVER_LAYER_KIND(spatial_dropout2d)  // nn/layers/noise.cpp
CROSSOVER_LAYER_KIND(permute)  // nn/layers/permute.cpp
CROSSOVER_LAYER_KIND(repeat_vector)  // nn/layers/permute.cpp
CROSSOVER_LAYER_KIND(time_distributed)  // nn/layers/time_distributed.cpp
CROSSOVER_LAYER_KIND(conv1d)  // nn/layers/conv2d.cpp
CROSSOVER_LAYER_KIND(max_pooling1d)  // nn/layers/pooling1d.cpp
CROSSOVER_LAYER_KIND(average_pooling1d)  // nn/layers/pooling1d.cpp
CROSSOVER_LAYER_KIND(global_average_pooling1d)  // nn/layers/pooling1d.cpp
CROSSOVER_LAYER_KIND(global_max_pooling1d)  // nn/layers/pooling1d.cpp
CROSSOVER_LAYER_KIND(activity_regularization)  // nn/layers/activity_regularization.cpp
CROSSOVER_LAYER_KIND(add_loss)  // nn/layers/activity_regularization.cpp
CROSSOVER_LAYER_KIND(simple_rnn_cell)  // nn/layers/recurrent.cpp
CROSSOVER_LAYER_KIND(lstm_cell)  // nn/layers/recurrent.cpp
CROSSOVER_LAYER_KIND(gru_cell)  // nn/layers/recurrent.cpp
CROSSOVER_LAYER_KIND(simple_rnn)  // nn/layers/recurrent.cpp
CROSSOVER_LAYER_KIND(lstm)  // nn/layers/recurrent.cpp
CROSSOVER_LAYER_KIND(gru)  // nn/layers/recurrent.cpp
CROSSOVER_LAYER_KIND(rnn)  // nn/layers/recurrent.cpp
// clang-format on

#undef CROSSOVER_LAYER_KIND
