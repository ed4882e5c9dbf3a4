// crossover._core: learning-rate schedules (nn/optimizers.h), for crossover.keras.optimizers.
#include <nanobind/nanobind.h>

#include "crossover.h"

namespace nb = nanobind;
using namespace crossover;

void bind_optim(nb::module_& m) {
  m.def("with_exponential_decay", &with_exponential_decay, nb::arg("optimizer"),
        nb::arg("decay_steps"), nb::arg("decay_rate"), nb::arg("staircase"));
}
