// crossover._core's files: weights (.safetensors and Keras 3's .weights.h5, picked by the path's
// suffix: formats/weights_io.h, formats/keras_h5.h) and Keras model JSON (formats/model_config.h).
// crossover/keras/saving.py gives them Keras's names.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include "crossover.h"

namespace nb = nanobind;
using namespace crossover;

void bind_files(nb::module_& m) {
  // File work is C++ only: other Python threads run meanwhile.
  m.def(
      "save_weights",
      [](const Sequential& model, const std::string& path) {
        nb::gil_scoped_release release;
        save_weights(model, path);
      },
      nb::arg("model"), nb::arg("path"));
  m.def(
      "load_weights",
      [](Sequential& model, const std::string& path) {
        nb::gil_scoped_release release;
        load_weights(model, path);
      },
      nb::arg("model"), nb::arg("path"));
  m.def(
      "weights_format",
      [](const std::string& path) {
        return weights_format_of(path) == WeightsFormat::keras_h5 ? "keras_h5" : "safetensors";
      },
      nb::arg("path"));
  m.def(
      "model_to_json", [](const Sequential& model) { return model_to_json(model); },
      nb::arg("model"));
  m.def(
      "model_from_json",
      [](const std::string& text, const std::string& where) {
        return model_from_json(text, where);
      },
      nb::arg("json"), nb::arg("where"));
}
