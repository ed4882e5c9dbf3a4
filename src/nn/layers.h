// The layers of a model, as Keras names them: every kind's constructor and arguments.
//
//   Sequential model({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
//
// A layer here is a description (a value, nn/layer.h); each kind's Keras arguments, their
// defaults and its constructor are in its own header, nn/layers/<kind>.h, gathered here.
//
// Images are channels last, as Keras's default: a sample is (height, width, channels), and a
// Conv2D's kernel is (kernel_h, kernel_w, in_channels, filters).
#pragma once

#include "nn/layer.h"
#include "nn/layers/activation.h"
#include "nn/layers/activity_regularization.h"
#include "nn/layers/add.h"
#include "nn/layers/batch_normalization.h"
#include "nn/layers/concatenate.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dense.h"
#include "nn/layers/dropout.h"
#include "nn/layers/elementwise.h"
#include "nn/layers/flatten.h"
#include "nn/layers/global_pooling2d.h"
#include "nn/layers/input.h"
#include "nn/layers/layer_normalization.h"
#include "nn/layers/noise.h"
#include "nn/layers/permute.h"
#include "nn/layers/pooling1d.h"
#include "nn/layers/pooling2d.h"
#include "nn/layers/recurrent.h"
#include "nn/layers/reduce.h"
#include "nn/layers/rescaling.h"
#include "nn/layers/reshape.h"
#include "nn/layers/time_distributed.h"
#include "nn/layers/up_sampling2d.h"
#include "nn/layers/zero_padding2d.h"
