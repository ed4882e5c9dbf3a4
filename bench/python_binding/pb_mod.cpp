// pybind11 half of the binding benchmark (see CMakeLists.txt): the same two calls as nb_mod.cpp.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "crossover.h"

namespace py = pybind11;

PYBIND11_MODULE(bind_pb, m) {
  py::class_<crossover::Sequential>(m, "Model")
      .def(py::init([] {
        return crossover::Sequential({crossover::Flatten({28, 28}), crossover::Dense(10)});
      }))
      .def("count_params", &crossover::Sequential::count_params);
  // array_t without forcecast: a float32 C-contiguous array is taken as is (no copy).
  m.def("first",
        [](py::array_t<float, py::array::c_style> a) { return a.size() ? *a.data() : 0.0f; });
}
