// Keras model JSON: what `model.to_json()` writes, in and out, for Sequential models.
//
//   std::string json = model_to_json(model);            // Keras 3's format
//   Sequential model = model_from_json(text, "model.json");  // Keras 2 (tf.keras 2.x) or Keras 3
//
// crossover reads Sequential models made of InputLayer, Flatten, Dense (units, activation,
// use_bias), Dropout (rate) and Activation, with Keras's defaults where a field is absent.
// Anything it cannot run as written (another layer class, a regularizer, a constraint, an
// initializer other than GlorotUniform kernels and Zeros biases, a dtype policy other than
// float32 and mixed_bfloat16, a frozen layer, a functional model) is refused with one line naming
// the layer and the field,
// e.g. "model.json: layer 3 'conv2d' (Conv2D) is not supported: crossover reads InputLayer,
// Flatten, Dense, Dropout, Activation" (layers are counted from 1, in the file's order).
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/step_config.h"
#include "nn/metrics.h"
#include "nn/sequential.h"

namespace crossover {

// Keras 3's `model.to_json()` for this model: {"module": "keras", "class_name": "Sequential",
// "config": {"name", "trainable", "dtype", "layers": [...], "build_input_shape"},
// "registered_name", "build_config", and "compile_config" when the model is compiled}.
// Each layer has "module", "class_name", "config", "registered_name" and, once the model knows
// its input shape, "build_config"; its "dtype" is its Layer::dtype_policy as Keras 3 writes it
// ({"module": "keras", "class_name": "DTypePolicy", "config": {"name": "mixed_bfloat16"},
// "registered_name": null}), the model's that of its Dense and Conv2D layers.
// model_from_json(model_to_json(m)) rebuilds the same layers, policies included.
std::string model_to_json(const Sequential& model);

// One layer's Keras 3 "config" object as model_to_json writes it (name, trainable, dtype, then the
// kind's arguments with every default spelled out): what keras.layers.<class>.from_config takes.
std::string layer_config_to_json(const Layer& layer);
// One layer of Keras class `class_name` from its "config" (JSON text), read by its kind as
// model_from_json reads a layer: Keras's defaults where a field is absent, anything crossover
// cannot run refused naming the argument ("Dense: argument units: ..."). The config's "name" is
// accepted but not kept: the caller names the layer (keras.layers' classes, which make their
// engine layers with it, name theirs when the model is made).
Layer layer_from_config(std::string_view class_name, std::string_view config_json);

// Rebuilds a Sequential model (uncompiled: call compile() before fit or loading weights) from
// what Keras 2 or Keras 3 `to_json()` writes. `where` names the source in error messages (a
// file name). Each layer keeps the dtype policy the file gives it (Keras 3's DTypePolicy object,
// tf.keras 2's Policy object or plain name, Keras 3.0-3.3's plain name); the model's own "dtype"
// is not read (Keras does not read it either). Throws Error("<where>", ...) for malformed JSON
// (with nlohmann's byte position) and for anything crossover does not support, naming the layer
// and the field.
Sequential model_from_json(std::string_view json, std::string_view where);

// Keras's compile_config: the optimizer, loss and metrics that `compile()` was given.
struct TrainingConfig {
  OptimizerConfig optimizer;
  std::string loss;
  bool from_logits = false;  // the loss object's config {"from_logits": true}
  // The loss object's one argument (Huber's "delta"; LossSpec::parameter), NaN when not given.
  double loss_parameter = std::numeric_limits<double>::quiet_NaN();
  // In the file's order, each under the name Keras reports it by (a metric object's own
  // config "name"), with its k or threshold; Sequential::compile_with takes them.
  std::vector<MetricSpec> metrics;
};

// The model's compile settings in Keras 3's compile_config form ({"optimizer": {"module":
// "keras.optimizers", "class_name": "Adam", "config": {...}}, "loss": ..., "metrics": [...]}),
// as JSON text. Requires a compiled model.
std::string training_config_to_json(const Sequential& model);

// The "compile_config" of a Keras 3 model JSON (or a bare compile_config object), if there is
// one: Adam/AdamW, SGD, RMSprop, Adagrad, Adadelta, Nadam and Adamax with their settings (a
// constant learning rate or ExponentialDecay), the loss (a name), and the metrics crossover
// computes (nn/metrics.h: by name, or as Keras's metric objects with their name, k and threshold;
// the accuracies Keras's "accuracy" picks by the loss read as "accuracy"; others are refused
// naming them). Returns nullopt when the JSON has no
// compile_config, or an empty or null one (a model that was never compiled); a compile_config
// without a loss is refused (Keras's fit refuses it too).
std::optional<TrainingConfig> training_config_from_json(std::string_view json,
                                                        std::string_view where);

}  // namespace crossover
