// crossover: one include for the whole C++ API.
#pragma once

#include "core/error.h"
#include "core/tensor.h"
#include "data/dataset.h"
#include "nn/callbacks.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "nn/weights_io.h"
