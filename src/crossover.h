// crossover: one include for the whole C++ API.
#pragma once

#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "data/png.h"
#include "formats/checkpoint.h"
#include "formats/files.h"
#include "formats/keras_h5.h"
#include "formats/model_checkpoint.h"
#include "formats/model_config.h"
#include "formats/safetensors.h"
#include "formats/weights_io.h"
#include "nn/callbacks.h"
#include "nn/layers.h"
#include "nn/metrics.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
