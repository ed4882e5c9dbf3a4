// Training checkpoints (see checkpoint.h).
#include "formats/checkpoint.h"

#include <fmt/format.h>

#include <charconv>

#include "core/error.h"
#include "formats/safetensors.h"
#include "nn/optimizers.h"

namespace crossover {
namespace {

constexpr const char* kPrefix = "optimizer/";
constexpr const char* kStepName = "optimizer/step";  // get_optimizer_state()'s step entry

int64_t parse_count(const std::map<std::string, std::string>& meta, const char* key, int64_t max,
                    const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end())
    throw Error(path, std::string("the checkpoint has no '") + key + "' in its metadata");
  const std::string& s = it->second;
  int64_t v = -1;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max)
    throw Error(path, fmt::format("the checkpoint's {} '{}' is not a count from 0 to {}", key,
                                  s.substr(0, 40), max));
  return v;
}

CheckpointInfo info_from(const SafetensorsFile& file, const std::string& path) {
  const auto& meta = file.header.metadata;
  auto contents = meta.find("contents");
  if (meta.find("format") == meta.end() || meta.at("format") != "crossover" ||
      contents == meta.end() || contents->second != "checkpoint")
    throw Error(path,
                "not a crossover checkpoint (no \"contents\": \"checkpoint\" in its "
                "metadata): a weights file loads with --load / load_weights");
  CheckpointInfo info;
  info.metadata = meta;
  info.epoch = static_cast<int>(parse_count(meta, "epoch", 1'000'000'000, path));
  info.step = parse_count(meta, "step", int64_t{1} << 62, path);
  auto arch = meta.find("architecture");
  if (arch == meta.end()) throw Error(path, "the checkpoint has no architecture in its metadata");
  info.architecture = arch->second;
  auto opt = meta.find("optimizer");
  if (opt == meta.end())
    throw Error(path, "the checkpoint has no optimizer settings in its metadata");
  std::optional<TrainingConfig> tc = training_config_from_json(opt->second, path + " (optimizer)");
  if (!tc) throw Error(path, "the checkpoint's optimizer settings are empty");
  info.training = *tc;
  return info;
}

void restore(Sequential& model, const SafetensorsFile& file, const CheckpointInfo& info,
             const std::string& path) {
  if (!model.compiled()) throw Error(path, "compile the model before loading a checkpoint into it");
  if (model.optimizer().kind != info.training.optimizer.kind)
    throw Error(path, fmt::format("the checkpoint was trained with {} but the model is compiled "
                                  "with {}: compile it with the same optimizer",
                                  optimizer_name(info.training.optimizer.kind),
                                  optimizer_name(model.optimizer().kind)));
  // The same kind with other slots (Adam with and without amsgrad): the arguments that differ.
  const OptimizerConfig& now = model.optimizer();
  const OptimizerConfig& then = info.training.optimizer;
  if (optimizer_slot_names(now) != optimizer_slot_names(then)) {
    std::string was, is;
    const auto a = optimizer_arguments(then), b = optimizer_arguments(now);
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (a[i].value == b[i].value) continue;
      const auto shown = [](const OptimizerArgumentValue& v) {
        if (v.type == OptimizerArgumentValue::Type::flag)
          return std::string(v.value ? "True" : "False");
        return fmt::format("{:g}", v.value);
      };
      was += fmt::format("{}{}={}", was.empty() ? "" : ", ", a[i].name, shown(a[i]));
      is += fmt::format("{}{}={}", is.empty() ? "" : ", ", b[i].name, shown(b[i]));
    }
    throw Error(path, fmt::format("the checkpoint was trained with {} ({}) but the model is "
                                  "compiled with {}: compile it with the same optimizer",
                                  optimizer_name(then.kind), was, is));
  }
  load_weights(model, file, path);  // checks names and shapes, warns about NaN/Inf
  std::vector<NamedTensor> state = model.get_optimizer_state();
  for (NamedTensor& s : state) {
    if (s.name == kStepName) {
      s.value = Tensor({1}, {static_cast<float>(info.step)});
      continue;
    }
    const std::string name = kPrefix + s.name;
    const Tensor* t = file.find(name);
    if (!t) throw Error(path, "the checkpoint has no optimizer state " + name + " for this model");
    if (t->shape() != s.value.shape())
      throw Error(path, "optimizer state " + name + " has shape " + shape_to_string(t->shape()) +
                            " in the checkpoint but " + shape_to_string(s.value.shape()) +
                            " in the model");
    s.value = *t;
  }
  model.set_optimizer_state(state);
  model.set_optimizer_steps(info.step);  // exact, past 2^24 steps too
  // A rate a callback changed; a schedule is the model's own (as Keras, which saves no schedule
  // in its optimizer variables), and the steps restored above give its value.
  const float lr = info.training.optimizer.schedule.base;
  if (lr > 0 && lr != model.optimizer().schedule.base &&
      model.optimizer().schedule.decay_steps == 0)
    model.set_learning_rate(lr);
}

}  // namespace

void save_checkpoint(const Sequential& model, const std::string& path, int epoch,
                     const std::map<std::string, std::string>& extra) {
  if (!model.compiled())
    throw Error(path, "the model is not compiled: there is nothing to checkpoint");
  if (epoch < 0) throw Error(path, "the checkpoint's epoch must not be negative");
  std::vector<NamedTensor> tensors = model.get_weights();
  if (tensors.empty())
    throw Error(
        path,
        "the model has no weights to save yet: compile it with a known input shape, or fit it");
  for (NamedTensor& s : model.get_optimizer_state()) {
    if (s.name == kStepName) continue;  // kept exactly in the metadata
    tensors.push_back({kPrefix + s.name, std::move(s.value)});
  }
  std::map<std::string, std::string> meta{{"format", "crossover"},
                                          {"contents", "checkpoint"},
                                          {"architecture", model_to_json(model)},
                                          {"optimizer", training_config_to_json(model)},
                                          {"epoch", std::to_string(epoch)},
                                          {"step", std::to_string(model.optimizer_steps())},
                                          {"crossover_version", "0.1.0"}};
  for (const auto& [k, v] : extra) {
    if (meta.count(k)) throw Error(path, "the checkpoint metadata key '" + k + "' is reserved");
    meta[k] = v;
  }
  write_safetensors(path, tensors, meta);
}

int load_checkpoint(Sequential& model, const std::string& path) {
  if (!model.compiled()) throw Error(path, "compile the model before loading a checkpoint into it");
  const SafetensorsFile file = read_safetensors(path);
  const CheckpointInfo info = info_from(file, path);
  restore(model, file, info, path);
  return info.epoch;
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return info_from(read_safetensors(path), path);
}

Sequential model_from_checkpoint(const std::string& path, CompileOptions options, int* epoch) {
  const SafetensorsFile file = read_safetensors(path);
  const CheckpointInfo info = info_from(file, path);
  const std::string where = path + " (architecture)";
  Sequential model = model_from_json(info.architecture, where);
  if (model.input_shape().empty())
    throw Error(where, "the architecture does not declare the model's input shape");
  model.compile_with(
      info.training.optimizer,
      LossSpec{info.training.loss, info.training.from_logits, info.training.loss_parameter},
      info.training.metrics, options);
  restore(model, file, info, path);
  if (epoch) *epoch = info.epoch;
  return model;
}

}  // namespace crossover
