// Saving and loading a model's weights (safetensors, named and shaped as Keras stores them).
#pragma once

#include <string>

namespace crossover {

class Sequential;

// Writes the model's weights to `path` atomically (a temporary file in the same folder, flushed,
// then renamed over the target): a failed save leaves any old file exactly as it was.
void save_weights(const Sequential& model, const std::string& path);
// Loads weights saved by save_weights into a model of the same architecture.
void load_weights(Sequential& model, const std::string& path);

}  // namespace crossover
