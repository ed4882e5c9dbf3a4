// crossover: one include for the whole C++ API.
#pragma once

#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "data/png.h"
#include "nn/callbacks.h"
#include "nn/checkpoint.h"
#include "nn/keras_h5.h"
#include "nn/layers.h"
#include "nn/metrics.h"
#include "nn/model_config.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "nn/weights_io.h"
