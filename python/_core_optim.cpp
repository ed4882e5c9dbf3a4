// crossover._core: learning-rate schedules (nn/optimizers.h), for crossover.keras.optimizers, and
// the CPU backend's optimizer step on arrays Python holds (a custom loop's tf.Variables).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "crossover.h"

namespace nb = nanobind;
using namespace crossover;

namespace {

using MutableArray = nb::ndarray<float, nb::c_contig, nb::device::cpu>;
using ConstArray = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;

// One optimizer applied to variables that live in numpy arrays (tf.Variable outside a model):
// the CPU backend's own optimizer_step (the update fit runs), with the step counters it keeps
// between calls (Keras's optimizer.iterations, Nadam's u_product, the learning rate).
struct ArrayOptimizer {
  OptimizerConfig config;
  StepCounters counters;
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
};

// (value, grad, slot1, slot2, slot3, decay) per variable, float32, all of the same size but slot3,
// which is empty unless the optimizer keeps a third slot (Adam's amsgrad: velocity_hat).
using Slot = std::tuple<MutableArray, ConstArray, MutableArray, MutableArray, MutableArray, bool>;

void step(ArrayOptimizer& o, const std::vector<Slot>& slots) {
  std::vector<ParamSlot> params;
  params.reserve(slots.size());
  const bool third = optimizer_third_slot(o.config);
  for (const auto& [value, grad, slot1, slot2, slot3, decay] : slots) {
    const std::size_t n = value.size();
    if (grad.size() != n || slot1.size() != n || slot2.size() != n || (third && slot3.size() != n))
      throw Error("apply_gradients", "a variable's gradient or optimizer state has " +
                                         std::to_string(grad.size()) + " values, not " +
                                         std::to_string(n));
    ParamSlot p;
    p.value = value.data();
    p.grad = const_cast<float*>(grad.data());  // optimizer_step reads the gradient only
    p.slot1 = slot1.data();
    p.slot2 = slot2.data();
    p.slot3 = third ? slot3.data() : nullptr;
    p.n = static_cast<int64_t>(n);
    p.decay = decay;
    params.push_back(p);
  }
  nb::gil_scoped_release release;
  o.backend->optimizer_step(o.config, params, &o.counters);
}

}  // namespace

void bind_optim(nb::module_& m) {
  m.def("with_exponential_decay", &with_exponential_decay, nb::arg("optimizer"),
        nb::arg("decay_steps"), nb::arg("decay_rate"), nb::arg("staircase"));
  m.def("optimizer_slot_names", [](const OptimizerConfig& c) {
    std::vector<std::string> names;
    for (std::string_view s : optimizer_slot_names(c)) names.emplace_back(s);
    return names;
  });
  nb::class_<ArrayOptimizer>(m, "ArrayOptimizer")
      .def(
          "__init__",
          [](ArrayOptimizer* o, const OptimizerConfig& c) {
            new (o) ArrayOptimizer();
            o->config = c;
          },
          nb::arg("optimizer"))
      .def("step", &step, nb::arg("slots"))
      .def_prop_ro("steps", [](const ArrayOptimizer& o) { return o.counters.step; })
      .def_prop_ro("third_slot",
                   [](const ArrayOptimizer& o) { return optimizer_third_slot(o.config); })
      .def_prop_ro("initial_slot_value",
                   [](const ArrayOptimizer& o) { return initial_slot_value(o.config); })
      .def_prop_ro("learning_rate", [](const ArrayOptimizer& o) { return o.config.schedule.base; })
      .def("set_learning_rate", [](ArrayOptimizer& o, float lr) {
        if (!(lr > 0.0f)) throw Error("learning_rate", "must be positive");
        o.config.schedule.base = lr;
      });
}
