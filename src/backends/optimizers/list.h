// The optimizers, each a unit in its own file (unit.h says what a unit holds). Adding one: its
// file, its #include and its line in CROSSOVER_OPTIMIZERS (the kind's C++ name and its unit);
// the kernels, the formats, the CLI and Python find it from here.
#pragma once

#include "backends/optimizers/adadelta.h"
#include "backends/optimizers/adagrad.h"
#include "backends/optimizers/adam.h"
#include "backends/optimizers/adamax.h"
#include "backends/optimizers/lion.h"
#include "backends/optimizers/nadam.h"
#include "backends/optimizers/rmsprop.h"
#include "backends/optimizers/sgd.h"

// X(kind, Unit): OptimizerKind::kind is optimizers::Unit. The order is the enum's.
#define CROSSOVER_OPTIMIZERS(X) \
  X(sgd, SGD)                   \
  X(adam, Adam)                 \
  X(rmsprop, RMSprop)           \
  X(adagrad, Adagrad)           \
  X(adadelta, Adadelta)         \
  X(nadam, Nadam)               \
  X(adamax, Adamax)             \
  X(lion, Lion)
