// nanobind half of the binding benchmark (see CMakeLists.txt): a trivial method on a crossover
// object, and a float32 array passed as a zero-copy view.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "crossover.h"

namespace nb = nanobind;

NB_MODULE(bind_nb, m) {
  nb::class_<crossover::Sequential>(m, "Model")
      .def("__init__",
           [](crossover::Sequential* self) {
             new (self) crossover::Sequential({crossover::Flatten({28, 28}), crossover::Dense(10)});
           })
      .def("count_params", &crossover::Sequential::count_params);
  m.def("first", [](nb::ndarray<const float, nb::c_contig, nb::device::cpu> a) {
    return a.size() ? a.data()[0] : 0.0f;
  });
}
