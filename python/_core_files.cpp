// crossover._core's files: weights (.safetensors and Keras 3's .weights.h5, picked by the path's
// suffix: formats/weights_io.h, formats/keras_h5.h) and Keras model JSON (formats/model_config.h).
// crossover/keras/saving.py gives them Keras's names.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "crossover.h"

namespace nb = nanobind;
using namespace crossover;

namespace {

using FloatArray = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using NumpyArray = nb::ndarray<nb::numpy, float>;
// (name, [(weight name, array), ...]) per layer, as saving.py gives and takes them.
using LegacyLayers =
    std::vector<std::pair<std::string, std::vector<std::pair<std::string, FloatArray>>>>;

NumpyArray numpy_copy(const Tensor& t) {
  auto* data = new float[static_cast<std::size_t>(t.size())];
  if (t.size() > 0) std::memcpy(data, t.data(), static_cast<std::size_t>(t.size()) * sizeof(float));
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<float*>(p); });
  std::vector<std::size_t> shape(t.shape().begin(), t.shape().end());
  return NumpyArray(data, shape.size(), shape.data(), owner);
}

}  // namespace

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
  // The legacy whole-model .h5 (formats/keras_h5.h): the texts (model_config, training_config,
  // keras_version, backend) and each layer's named weights.
  m.def(
      "write_legacy_h5",
      [](const std::string& path, const std::string& model_config,
         const std::string& training_config, const std::string& keras_version,
         const std::string& backend, const LegacyLayers& layers) {
        LegacyH5Model model{model_config, training_config, keras_version, backend, {}};
        for (const auto& [name, weights] : layers) {
          LegacyH5Layer l{name, {}, {}};
          for (const auto& [weight, a] : weights) {
            Shape shape(a.ndim());
            for (std::size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
            l.weight_names.push_back(weight);
            l.weights.emplace_back(shape, std::span<const float>(a.data(), a.size()));
          }
          model.layers.push_back(std::move(l));
        }
        nb::gil_scoped_release release;
        write_legacy_h5_model(path, model);
      },
      nb::arg("path"), nb::arg("model_config"), nb::arg("training_config"),
      nb::arg("keras_version"), nb::arg("backend"), nb::arg("layers"));
  m.def(
      "read_legacy_h5",
      [](const std::string& path) {
        LegacyH5Model model;
        {
          nb::gil_scoped_release release;
          model = read_legacy_h5_model(path);
        }
        nb::list layers;
        for (const LegacyH5Layer& l : model.layers) {
          nb::list weights;
          for (std::size_t i = 0; i < l.weights.size(); ++i)
            weights.append(nb::make_tuple(l.weight_names[i], numpy_copy(l.weights[i])));
          layers.append(nb::make_tuple(l.name, weights));
        }
        nb::dict texts;
        texts["model_config"] = model.model_config;
        texts["training_config"] = model.training_config;
        texts["keras_version"] = model.keras_version;
        texts["backend"] = model.backend;
        return nb::make_tuple(texts, layers);
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
