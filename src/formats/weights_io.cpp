// Weights and models in and out of files, the format picked by the path's suffix
// (formats/weights_io.h).
#include "formats/weights_io.h"

#include <cctype>
#include <map>
#include <optional>

#include "core/error.h"
#include "formats/keras_h5.h"
#include "formats/model_config.h"
#include "formats/safetensors.h"
#include "nn/optimizers.h"

namespace crossover {

WeightsFormat weights_format_of(const std::string& path) {
  auto ends_with = [&](std::string_view suffix) {
    if (path.size() < suffix.size()) return false;
    for (std::size_t i = 0; i < suffix.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(path[path.size() - suffix.size() + i])) !=
          suffix[i])
        return false;
    return true;
  };
  constexpr const char* kSupported =
      "crossover saves and loads weights as .safetensors or Keras 3's .weights.h5";
  if (ends_with(".weights.h5")) return WeightsFormat::keras_h5;
  if (ends_with(".keras"))
    throw Error(path, std::string("a .keras archive (model.save) is not supported: ") + kSupported +
                          " (model.save_weights)");
  if (ends_with(".h5") || ends_with(".hdf5") || ends_with(".he5"))
    throw Error(path, std::string("a legacy Keras 2 .h5 file is not supported: ") + kSupported +
                          " (name the file *.weights.h5)");
  return WeightsFormat::safetensors;
}

void save_weights(const Sequential& model, const std::string& path) {
  if (weights_format_of(path) == WeightsFormat::keras_h5) {
    save_keras_weights_h5(model, path);
    return;
  }
  std::vector<NamedTensor> w = model.get_weights();
  if (w.empty())
    throw Error(
        path,
        "the model has no weights to save yet: compile it with a known input shape, or fit it");
  std::map<std::string, std::string> meta{{"format", "crossover"},
                                          {"contents", "weights"},
                                          {"architecture", model_to_json(model)},
                                          {"crossover_version", "0.1.0"}};
  write_safetensors(path, w, meta);
}

void load_weights(Sequential& model, const std::string& path) {
  if (!model.compiled())
    throw Error(path,
                "compile the model before loading weights into it (compile() sets up the "
                "parameters, and re-initializes them)");
  if (weights_format_of(path) == WeightsFormat::keras_h5) {
    load_keras_weights_h5(model, path);
    return;
  }
  load_weights(model, read_safetensors(path), path);
}

Sequential load_model(const std::string& path, CompileOptions options) {
  if (weights_format_of(path) == WeightsFormat::keras_h5)
    throw Error(path,
                "a .weights.h5 file holds weights only, without the architecture: build the model "
                "in code and use load_weights");
  const SafetensorsFile file = read_safetensors(path);
  auto arch = file.header.metadata.find("architecture");
  if (arch == file.header.metadata.end())
    throw Error(path,
                "the file holds weights only, without the architecture (no 'architecture' in "
                "__metadata__): build the model in code and use load_weights");
  const std::string where = path + " (architecture)";
  Sequential model = model_from_json(arch->second, where);
  if (model.input_shape().empty())
    throw Error(where, "the architecture does not declare the model's input shape");
  std::optional<TrainingConfig> tc = training_config_from_json(arch->second, where);
  if (tc)
    model.compile_with(tc->optimizer, LossSpec{tc->loss, tc->from_logits, tc->loss_parameter},
                       tc->metrics, options);
  else
    model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, options);
  load_weights(model, file, path);
  return model;
}

}  // namespace crossover
