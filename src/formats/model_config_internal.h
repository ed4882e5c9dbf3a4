// Internal to model_config's files: what the layers' JSON (model_config.cpp) and the
// compile_config (model_config_compile.cpp) share. Included by src/formats/model_config*.cpp only.
#pragma once

#include <string>
#include <string_view>

#include "nn/layers/keras_config.h"
#include "nn/sequential.h"

namespace crossover::model_config_detail {

// The text as JSON (at most 64 MiB, 64 levels deep); malformed JSON is an Error(where, ...).
keras_config::json parse_json(std::string_view text, const std::string& where);
// The model's compile settings as Keras 3's compile_config object (a compiled model).
keras_config::ojson compile_config_json(const Sequential& model);

}  // namespace crossover::model_config_detail
