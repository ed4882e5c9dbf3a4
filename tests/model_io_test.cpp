// Models in and out: Keras model JSON (Keras 2 and 3), safetensors weights, checkpoints that
// resume the same trajectory, PNG digits, and hostile files of each kind.
#include <gtest/gtest.h>
#include <png.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/philox.h"
#include "data/png.h"
#include "formats/checkpoint.h"
#include "formats/model_config.h"
#include "formats/safetensors.h"
#include "formats/weights_io.h"
#include "nn/layers/kind.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing_util::random_tensor;
using testing_util::temp_folder;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
std::vector<uint8_t> slurp_bytes(const std::string& path) {
  const std::string s = slurp(path);
  return {s.begin(), s.end()};
}
void write_bytes(const std::string& path, std::span<const uint8_t> b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
std::string keras_file(const std::string& name) {
  return crossover::testing_util::source_dir() + "/tests/data/keras/" + name;
}

using testing_util::error_of;

#define EXPECT_ERROR_HAS(stmt, text)                                                    \
  do {                                                                                  \
    const std::string msg_ = error_of([&] { stmt; });                                   \
    EXPECT_NE(msg_.find(text), std::string::npos)                                       \
        << "expected an Error containing \"" << (text) << "\", got \"" << msg_ << "\""; \
    EXPECT_EQ(msg_.find('\n'), std::string::npos) << msg_;                              \
  } while (0)

Sequential tiny_model() {
  return Sequential({Flatten({4, 4}), Dense(8, "relu"), Dense(3, "softmax")});
}

void compile_cpu(Sequential& m, uint64_t seed = 1, OptimizerConfig opt = Adam()) {
  m.compile(opt, "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1, .seed = seed});
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(float)) == 0;
}

void expect_same_weights(const Sequential& a, const Sequential& b) {
  const auto wa = a.get_weights(), wb = b.get_weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (std::size_t i = 0; i < wa.size(); ++i) {
    EXPECT_EQ(wa[i].name, wb[i].name);
    EXPECT_TRUE(same_bits(wa[i].value, wb[i].value)) << wa[i].name << " differs";
  }
}

std::vector<std::string> temp_leftovers(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp-") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

// ============================== Keras model JSON ================================================

TEST(ModelIoKerasJson, Keras2SmallModelGivesTheSeedSummaryWith101770Parameters) {
  Sequential m = model_from_json(slurp(keras_file("small_keras2.json")), "small_keras2.json");
  EXPECT_EQ(m.count_params(), 101770);
  EXPECT_NE(m.summary().find("Total params: 101770"), std::string::npos) << m.summary();
  const auto& l = m.layers();
  ASSERT_EQ(l.size(), 4u);  // InputLayer + Flatten become one Flatten((28, 28)), as Keras shows it
  EXPECT_EQ(l[0].type, LayerType::flatten);
  EXPECT_EQ(l[0].input_shape, (Shape{28, 28}));
  EXPECT_EQ(l[1].name, "dense");
  EXPECT_EQ(l[1].args<DenseArgs>().units, 128);
  EXPECT_EQ(l[1].args<DenseArgs>().activation.kind, ActivationKind::relu);
  EXPECT_TRUE(l[1].args<DenseArgs>().use_bias);
  EXPECT_EQ(l[2].type, LayerType::dropout);
  EXPECT_FLOAT_EQ(l[2].args<DropoutArgs>().rate, 0.2f);
  EXPECT_EQ(l[3].name, "dense_1");
  EXPECT_EQ(l[3].args<DenseArgs>().activation.kind, ActivationKind::softmax);
  EXPECT_EQ(m.name(), "sequential");
  // No compile_config in the Keras 2 format.
  EXPECT_FALSE(training_config_from_json(slurp(keras_file("small_keras2.json")), "k2").has_value());
}

// Keras 3 to_json() of models that were never compiled ("compile_config": {}): the SMALL MLP and
// the convnet load, with no training configuration (the CLI then trains with its defaults).
TEST(ModelIoKerasJson, Keras3UncompiledModelsHaveNoCompileConfig) {
  for (const char* file : {"small_uncompiled_keras3.json", "cnn_uncompiled_keras3.json"}) {
    SCOPED_TRACE(file);
    const std::string text = slurp(keras_file(file));
    const Sequential m = model_from_json(text, file);
    EXPECT_EQ(m.count_params(), std::string(file).starts_with("small")
                                    ? 101770
                                    : 320 + 26 * 26 * 32 * 128 + 128 + 1290);
    EXPECT_FALSE(training_config_from_json(text, file).has_value());
    // The same model without the key, and with null, as other writers leave it.
    nlohmann::json doc = nlohmann::json::parse(text);
    doc.erase("compile_config");
    EXPECT_FALSE(training_config_from_json(doc.dump(), file).has_value());
    doc["compile_config"] = nullptr;
    EXPECT_FALSE(training_config_from_json(doc.dump(), file).has_value());
    // Compiled, but without a loss: Keras's fit refuses that model, and so does crossover.
    doc["compile_config"] = {{"optimizer", "adam"}, {"loss", nullptr}};
    EXPECT_ERROR_HAS(training_config_from_json(doc.dump(), file), "compiled without a loss");
  }
}

TEST(ModelIoKerasJson, Keras3SmallModelGivesTheSameModelAndItsCompileConfig) {
  const std::string text = slurp(keras_file("small_keras3.json"));
  Sequential m = model_from_json(text, "small_keras3.json");
  EXPECT_EQ(m.count_params(), 101770);
  EXPECT_NE(m.summary().find("Total params: 101770"), std::string::npos);
  ASSERT_EQ(m.layers().size(), 4u);
  EXPECT_EQ(m.input_shape(), (Shape{28, 28}));
  auto tc = training_config_from_json(text, "small_keras3.json");
  ASSERT_TRUE(tc.has_value());
  EXPECT_EQ(tc->optimizer.kind, OptimizerKind::adam);
  EXPECT_EQ(tc->optimizer.schedule.base, 1e-3f);
  EXPECT_EQ(tc->optimizer.args.adam.beta_2, 0.999);
  EXPECT_EQ(tc->optimizer.args.adam.epsilon, static_cast<double>(1e-7f));
  EXPECT_EQ(tc->loss, "sparse_categorical_crossentropy");
  ASSERT_EQ(tc->metrics.size(), 1u);
  EXPECT_TRUE(tc->metrics[0].loss_accuracy);
  EXPECT_EQ(tc->metrics[0].name, "accuracy");
  // The weights are named as Keras names them.
  m.compile_with(tc->optimizer, LossSpec{tc->loss, false}, tc->metrics, {.threads = 1});
  const auto w = m.get_weights();
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].name, "dense/kernel");
  EXPECT_EQ(w[0].value.shape(), (Shape{784, 128}));
  EXPECT_EQ(w[3].name, "dense_1/bias");
}

TEST(ModelIoKerasJson, Keras2DenseWithInputShapeAndNoFlatten) {
  Sequential m = model_from_json(slurp(keras_file("big_keras2_dense_input.json")), "big.json");
  EXPECT_EQ(m.count_params(), 1796010);  // the seed's BIG model
  EXPECT_EQ(m.layers()[0].type, LayerType::input);
  EXPECT_EQ(m.layers()[0].name, "dense_2_input");
  EXPECT_EQ(m.input_shape(), (Shape{784}));
}

TEST(ModelIoKerasJson, KerasDefaultsApplyWhereFieldsAreAbsent) {
  Sequential m = model_from_json(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "Dense", "config": {"units": 5, "batch_input_shape": [null, 3]}},
      {"class_name": "Activation", "config": {"activation": "tanh"}},
      {"class_name": "Dense", "config": {"units": 2, "use_bias": false, "activation": null,
                                          "lora_rank": null, "quantization_config": null}}]}})",
                                 "defaults.json");
  const auto& l = m.layers();
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(l[0].type, LayerType::input);
  EXPECT_EQ(l[1].args<DenseArgs>().activation.kind, ActivationKind::linear);
  EXPECT_TRUE(l[1].args<DenseArgs>().use_bias);
  EXPECT_EQ(l[2].args<ActivationArgs>().activation.kind, ActivationKind::tanh);
  EXPECT_FALSE(l[3].args<DenseArgs>().use_bias);
  EXPECT_EQ(m.count_params(), 3 * 5 + 5 + 5 * 2);
  EXPECT_EQ(m.name(), "sequential");
}

TEST(ModelIoKerasJson, ToJsonWritesKeras3FormatAndReadsBack) {
  Sequential m({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
  m.compile(with_exponential_decay(Adam({.learning_rate = 0.002}), 100, 0.9),
            "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1});
  const std::string text = model_to_json(m);
  const json j = json::parse(text);
  EXPECT_EQ(j["module"], "keras");
  EXPECT_EQ(j["class_name"], "Sequential");
  EXPECT_EQ(j["config"]["build_input_shape"], json::parse("[null, 28, 28]"));
  const json& layers = j["config"]["layers"];
  ASSERT_EQ(layers.size(), 5u);
  EXPECT_EQ(layers[0]["class_name"], "InputLayer");
  EXPECT_EQ(layers[0]["config"]["batch_shape"], json::parse("[null, 28, 28]"));
  EXPECT_EQ(layers[2]["class_name"], "Dense");
  EXPECT_EQ(layers[2]["module"], "keras.layers");
  EXPECT_EQ(layers[2]["config"]["units"], 128);
  EXPECT_EQ(layers[2]["config"]["kernel_initializer"]["class_name"], "GlorotUniform");
  EXPECT_EQ(layers[2]["build_config"]["input_shape"], json::parse("[null, 784]"));
  EXPECT_EQ(layers[3]["config"]["rate"], 0.2);
  EXPECT_EQ(j["compile_config"]["loss"], "sparse_categorical_crossentropy");
  EXPECT_EQ(j["compile_config"]["optimizer"]["class_name"], "Adam");
  EXPECT_EQ(j["compile_config"]["optimizer"]["config"]["learning_rate"]["class_name"],
            "ExponentialDecay");

  Sequential back = model_from_json(text, "roundtrip");
  ASSERT_EQ(back.layers().size(), m.layers().size());
  for (std::size_t i = 0; i < m.layers().size(); ++i) {
    EXPECT_EQ(back.layers()[i].type, m.layers()[i].type);
    EXPECT_EQ(back.layers()[i].name, m.layers()[i].name);
    nlohmann::json a, b;  // each kind's arguments, as the commands' record lists them
    layer_kind(back.layers()[i]).describe(back.layers()[i], a);
    layer_kind(m.layers()[i]).describe(m.layers()[i], b);
    EXPECT_EQ(a, b) << i;
  }
  auto tc = training_config_from_json(text, "roundtrip");
  ASSERT_TRUE(tc);
  EXPECT_EQ(tc->optimizer.schedule.base, 0.002f);
  EXPECT_EQ(tc->optimizer.schedule.decay_steps, 100);
  EXPECT_EQ(tc->optimizer.schedule.decay_rate, 0.9f);
  // An uncompiled model without a known input shape: no build or compile config.
  const json u = json::parse(model_to_json(Sequential({Dense(3)})));
  EXPECT_FALSE(u.contains("compile_config"));
  EXPECT_FALSE(u.contains("build_config"));
}

// A Keras 3 SMALL model with one layer's config field replaced.
std::string keras3_with(const std::string& layer_name, const std::string& field,
                        const json& value) {
  json j = json::parse(slurp(keras_file("small_keras3.json")));
  for (json& l : j["config"]["layers"])
    if (l["config"]["name"] == layer_name) l["config"][field] = value;
  return j.dump();
}

// keras.layers.MaxPool2D and AvgPool2D are MaxPooling2D and AveragePooling2D: read as the class,
// written as Keras writes it.
TEST(ModelIoKerasJson, KerasAliasesOfALayerClassReadAsTheClass) {
  const json doc = json::parse(R"({"class_name": "Sequential", "config": {"name": "aliases",
    "layers": [
      {"class_name": "InputLayer", "config": {"batch_shape": [null, 8, 8, 1], "name": "in"}},
      {"class_name": "MaxPool2D", "config": {"name": "max", "pool_size": [2, 2]}},
      {"class_name": "AvgPool2D", "config": {"name": "avg", "pool_size": 2, "padding": "same"}},
      {"class_name": "Flatten", "config": {"name": "flat"}},
      {"class_name": "Dense", "config": {"name": "out", "units": 3}}]}})");
  const Sequential m = model_from_json(doc.dump(), "aliases.json");
  ASSERT_EQ(m.layers().size(), 5u);
  EXPECT_EQ(m.layers()[1].type, LayerType::max_pooling2d);
  EXPECT_EQ(m.layers()[2].type, LayerType::average_pooling2d);
  EXPECT_EQ(m.layers()[2].args<PoolingArgs>().padding, Padding::same);
  EXPECT_EQ(m.layer_output_shapes()[2], (Shape{2, 2, 1}));
  const json out = json::parse(model_to_json(m));
  EXPECT_EQ(out["config"]["layers"][1]["class_name"], "MaxPooling2D");
  EXPECT_EQ(out["config"]["layers"][2]["class_name"], "AveragePooling2D");
}

// Every layer type has its one kind, found again by its Keras class name and its CLI name.
// A layer holds its kind's arguments by value: copies are independent, a layer that holds none
// reads the kind's defaults, and asking for another kind's is an error naming the layer.
TEST(LayerArgs, HeldByValueWithTheKindsDefaults) {
  Layer a = Dense(4, "relu");
  Layer b = a;
  b.args<DenseArgs>().units = 7;
  EXPECT_EQ(a.args<DenseArgs>().units, 4);
  EXPECT_EQ(b.args<DenseArgs>().units, 7);
  EXPECT_EQ(a.args<DenseArgs>().activation.kind, ActivationKind::relu);
  EXPECT_EQ(a.find_args<ConvArgs>(), nullptr);
  a.name = "d";
  try {
    (void)a.args<BatchNormArgs>();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("d"), std::string::npos) << e.what();
  }
  Layer empty;
  empty.type = LayerType::batch_normalization;
  EXPECT_EQ(std::as_const(empty).args<BatchNormArgs>().momentum, 0.99);  // Keras's default
  EXPECT_EQ(empty.find_args<BatchNormArgs>(), nullptr);  // the const access made none
  empty.args<BatchNormArgs>().momentum = 0.9;            // the mutable access makes them
  ASSERT_NE(empty.find_args<BatchNormArgs>(), nullptr);
  EXPECT_EQ(empty.args<BatchNormArgs>().momentum, 0.9);
  // The activation a kind applies, the same whichever kind holds it.
  EXPECT_EQ(layer_kind(Conv2D(2, 3, "tanh")).activation(Conv2D(2, 3, "tanh")).kind,
            ActivationKind::tanh);
  EXPECT_EQ(layer_kind(LeakyReLU(0.1)).activation(LeakyReLU(0.1)).alpha, 0.1f);
  EXPECT_EQ(layer_kind(Dropout(0.5)).activation(Dropout(0.5)).kind, ActivationKind::linear);
}

TEST(LayerKinds, EveryTypeHasOneKindFoundByItsNames) {
  std::set<std::string_view> classes, cli_names;
  for (const LayerKind* k : layer_kinds()) {
    SCOPED_TRACE(std::string(k->class_name()));
    EXPECT_EQ(&layer_kind(k->type()), k);
    EXPECT_EQ(find_keras_layer_kind(k->class_name()), k);
    EXPECT_EQ(layer_type_name(k->type()), k->class_name());
    EXPECT_TRUE(classes.insert(k->class_name()).second);
    for (std::string_view alias : k->aliases()) EXPECT_EQ(find_keras_layer_kind(alias), k);
    if (!k->cli_name().empty()) {
      EXPECT_TRUE(cli_names.insert(k->cli_name()).second);
      EXPECT_EQ(find_cli_layer_kind(k->cli_name()), k);
      EXPECT_FALSE(k->cli_syntax().empty());
    }
  }
  EXPECT_EQ(find_keras_layer_kind("Conv3D"), nullptr);
  EXPECT_EQ(find_cli_layer_kind("dens"), nullptr);
}

// Each kind's Keras arguments (LayerKind::keras_arguments, Python's signatures) agree with its
// reader and writer: the defaults listed are what the reader takes for an absent field (a config
// of the required arguments alone and one of every argument at its listed default read as the
// same layer), and every field the writer writes is a listed argument.
TEST(LayerKinds, KerasArgumentsAreTheReadersDefaults) {
  using nlohmann::json;
  int listed = 0;
  for (const LayerKind* k : layer_kinds()) {
    const std::string cls(k->class_name());
    SCOPED_TRACE(cls);
    const std::optional<keras_config::Arguments> arguments = k->keras_arguments();
    if (!arguments) {
      EXPECT_TRUE(k->is_model_input() || k->cli_name().empty()) << "a Keras class without them";
      continue;
    }
    ++listed;
    json required = json::object(), every = json::object();
    std::set<std::string> names;
    bool keyword_seen = false;
    for (const keras_config::Argument& a : *arguments) {
      EXPECT_TRUE(names.insert(a.name).second) << a.name << " listed twice";
      EXPECT_FALSE(a.required && a.keyword) << a.name;
      if (a.keyword) keyword_seen = true;
      EXPECT_TRUE(a.keyword || !keyword_seen) << a.name << ": a positional one after a keyword";
      for (const char* base : {"name", "dtype", "trainable", "input_shape"})
        EXPECT_NE(a.name, base) << "every layer's own argument";
      if (a.required) required[a.name] = a.value;
      every[a.name] = a.value;
    }
    const Layer from_required = layer_from_config(cls, required.dump());
    const Layer from_every = layer_from_config(cls, every.dump());
    const json written = json::parse(layer_config_to_json(from_required));
    EXPECT_EQ(written, json::parse(layer_config_to_json(from_every)));
    for (auto it = written.begin(); it != written.end(); ++it) {
      if (it.key() == "name" || it.key() == "trainable" || it.key() == "dtype") continue;
      EXPECT_TRUE(names.count(it.key())) << "writes " << it.key() << ", not an argument";
    }
  }
  // All but InputLayer and the traced ops (BinaryOp, UnaryOp, Reduce, AddLoss).
  EXPECT_EQ(listed, static_cast<int>(layer_kinds().size()) - 5);
  // One default changed is another layer: the comparison above can fail.
  EXPECT_NE(layer_config_to_json(layer_from_config("Dense", R"({"units": 4})")),
            layer_config_to_json(layer_from_config("Dense", R"({"units": 4, "use_bias": false})")));
}

TEST(LayerKinds, BuildLayerGivesTheModelsShapesAndParametersLayerByLayer) {
  const Sequential m = model_from_json(slurp(keras_file("cnn_keras3.json")), "cnn.json");
  const std::vector<Shape> outs = m.layer_output_shapes();
  Shape in = m.input_shape();
  int64_t params = 0;
  for (std::size_t i = 0; i < m.layers().size(); ++i) {
    SCOPED_TRACE(m.layers()[i].name);
    const BuiltLayer b = build_layer(m.layers()[i], {in});
    EXPECT_EQ(b.out_shape, outs[i]);
    for (const LayerParam& p : b.params) params += p.n;
    in = outs[i];
  }
  EXPECT_EQ(params, m.count_params());

  Layer d = Dense(4);
  d.name = "d";
  const BuiltLayer dense = build_layer(d, {{3}});
  ASSERT_EQ(dense.params.size(), 2u);
  EXPECT_EQ(dense.params[0].name, "d/kernel");
  EXPECT_EQ(dense.params[0].shape, (Shape{3, 4}));
  EXPECT_EQ(dense.params[1].shape, (Shape{4}));
  EXPECT_EQ(build_layer(Concatenate(), {{2, 3}, {2, 5}}).out_shape, (Shape{2, 8}));
  // Called on a tensor, a declared input shape is ignored (Keras's); an InputLayer's is its own.
  Layer flat = Flatten();
  flat.input_shape = {9};
  EXPECT_EQ(build_layer(flat, {{2, 3}}).out_shape, (Shape{6}));
  EXPECT_ERROR_HAS(build_layer(Input({9}), {{2, 3}}), "declared input shape (9,) but receives");
  EXPECT_THROW(build_layer(Conv2D(2, 3), {{16}}), Error);
  EXPECT_ERROR_HAS(build_layer(Dense(4), {}), "at least one input shape");
}

TEST(LayerKinds, LayerFromConfigReadsOneLayerAsModelFilesDoAndNamesTheArgument) {
  const Layer d = layer_from_config("Dense", R"({"units": 5, "activation": "relu"})");
  EXPECT_EQ(d.type, LayerType::dense);
  EXPECT_EQ(d.args<DenseArgs>().units, 5);
  EXPECT_TRUE(d.args<DenseArgs>().use_bias);  // Keras's default
  EXPECT_EQ(layer_config_to_json(d), layer_config_to_json(Dense(5, "relu")));
  const Layer f = layer_from_config("Flatten", R"({"input_shape": [2, 3]})");
  EXPECT_EQ(f.input_shape, (Shape{2, 3}));
  EXPECT_EQ(layer_from_config("InputLayer", R"({"shape": [4]})").input_shape, Shape{4});
  EXPECT_ERROR_HAS(layer_from_config("Dense", R"({"units": 0})"), "Dense: argument units: ");
  EXPECT_ERROR_HAS(
      layer_from_config("Dense", R"({"units": 2, "kernel_regularizer": "orthogonal_regularizer"})"),
      "Dense: argument kernel_regularizer: ");
  EXPECT_ERROR_HAS(layer_from_config("Conv3D", "{}"), "Conv3D: no layer kind");
  EXPECT_ERROR_HAS(layer_from_config("Dense", "[1]"), "Dense: the config is not a JSON object");
  EXPECT_THROW(layer_from_config("Dense", "{"), Error);
}

TEST(ModelIoKerasJson, Keras3ConvnetLoadsWithKerasShapes) {
  // Input(28, 28, 1) -> Conv2D(32, 3, relu) -> Flatten -> Dense(128, relu) -> Dropout -> Dense(10).
  const Sequential m = model_from_json(slurp(keras_file("cnn_keras3.json")), "cnn.json");
  EXPECT_EQ(m.input_shape(), (Shape{28, 28, 1}));
  EXPECT_EQ(m.layer_output_shapes()[1], (Shape{26, 26, 32}));
  EXPECT_EQ(m.count_params(), 320 + 26 * 26 * 32 * 128 + 128 + 1290);
}

TEST(ModelIoKerasJson, RefusesWhatItCannotRunWithOneLineNamingLayerAndField) {
  std::string conv3d = slurp(keras_file("cnn_keras3.json"));
  conv3d.replace(conv3d.find("\"Conv2D\""), 8, "\"Conv3D\"");
  EXPECT_ERROR_HAS(model_from_json(conv3d, "cnn.json"),
                   "cnn.json: layer 2 'conv2d' (Conv3D) is not supported: crossover reads "
                   "InputLayer, Flatten, Dense, Dropout, Activation, Conv2D, MaxPooling2D");
  EXPECT_ERROR_HAS(model_from_json(R"({"class_name": "Model", "config": {"layers": []}})", "m"),
                   "m: the functional model's config has no layers");
  EXPECT_ERROR_HAS(model_from_json(R"({"class_name": "Graph", "config": {"layers": []}})", "m"),
                   "class_name Graph is not supported: only Sequential and functional models");
  const json l2 = json::parse(R"({"module": "keras.regularizers", "class_name": "L2",
                                   "config": {"l2": 0.01}, "registered_name": null})");
  // L1, L2 and L1L2 as kernel, bias and activity regularizers run (tests/regularizer_test.cpp,
  // activity_regularizer_test.cpp); others are refused naming the field.
  const json orthogonal = json::parse(R"({"module": "keras.regularizers",
      "class_name": "OrthogonalRegularizer", "config": {"factor": 0.01, "mode": "rows"}})");
  EXPECT_ERROR_HAS(
      model_from_json(keras3_with("dense", "kernel_regularizer", orthogonal), "r.json"),
      "r.json: layer 'dense' field kernel_regularizer: regularizer ");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense_1", "activity_regularizer", orthogonal), "r"),
                   "layer 'dense_1' field activity_regularizer: regularizer ");
  const Sequential with_activity =
      model_from_json(keras3_with("dense_1", "activity_regularizer", l2), "r");
  EXPECT_EQ(with_activity.layers().back().name, "dense_1");
  EXPECT_EQ(with_activity.layers().back().activity.l2, 0.01);
  const json maxnorm = json::parse(R"({"class_name": "MaxNorm", "config": {"max_value": 2}})");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "bias_constraint", maxnorm), "c"),
                   "layer 'dense' field bias_constraint: constraints are not supported");
  const json my_init = json::parse(R"({"module": null, "class_name": "MyInit",
                                        "config": {}, "registered_name": "Custom>MyInit"})");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "kernel_initializer", my_init), "i"),
                   "layer 'dense' field kernel_initializer: the custom initializer "
                   "'Custom>MyInit' is not supported");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "bias_initializer", json("he")), "i"),
                   "layer 'dense' field bias_initializer: initializer he is not supported");
  // Policies the engine has no arithmetic for: one line naming what it lacks.
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "dtype", json("float16")), "d"),
                   "d: layer 'dense' field dtype: the dtype policy 'float16' is not supported by "
                   "crossover: the engine has no float16 matrix products");
  const json mixed = json::parse(R"({"module": "keras", "class_name": "DTypePolicy",
                                      "config": {"name": "mixed_float16"}, "registered_name": null})");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense_1", "dtype", mixed), "d"),
                   "layer 'dense_1' field dtype: the dtype policy 'mixed_float16' is not supported "
                   "by crossover: the engine has no float16 matrix products (nor the loss scaling "
                   "that float16 training needs); 'mixed_bfloat16' is its reduced precision. "
                   "Supported policies: 'float32' and 'mixed_bfloat16'");
  const json quantized = json::parse(R"({"module": "keras", "class_name": "QuantizedDTypePolicy",
      "config": {"mode": "int8", "source_name": "float32"}, "registered_name": null})");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "dtype", quantized), "q"),
                   "layer 'dense' field dtype: the dtype policy 'int8' is not supported by "
                   "crossover: quantized policies");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "dtype", json(3)), "d"),
                   "layer 'dense' field dtype: expected a dtype policy, got 3");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "trainable", json("no")), "t"),
                   "layer 'dense' field trainable: expected true or false, got \"no\"");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "activation", json("mish")), "a"),
                   "layer 'dense' field activation: activation 'mish' is not supported");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "units", json(0)), "u"),
                   "layer 'dense' field units: units must be a whole number");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "units", json("128")), "u"),
                   "layer 'dense' field units");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dropout", "rate", json(1.5)), "r"),
                   "layer 'dropout' field rate: rate must be a number in [0, 1)");
  EXPECT_ERROR_HAS(
      model_from_json(keras3_with("dropout", "noise_shape", json::parse("[null, 1]")), "n"),
      "layer 'dropout' field noise_shape");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("dense", "lora_rank", json(4)), "l"),
                   "layer 'dense' field lora_rank: crossover does not support this field");
  EXPECT_ERROR_HAS(
      model_from_json(keras3_with("flatten", "data_format", json("channels_first")), "f"),
      "layer 'flatten' field data_format");
  EXPECT_ERROR_HAS(
      model_from_json(keras3_with("input_layer", "batch_shape", json::parse("[null, null, 28]")),
                      "s"),
      "layer 'input_layer' field batch_shape");
  EXPECT_ERROR_HAS(model_from_json(keras3_with("input_layer", "sparse", json(true)), "s"),
                   "layer 'input_layer' field sparse");
  // A custom class registered under Keras's name.
  json custom = json::parse(slurp(keras_file("small_keras3.json")));
  custom["config"]["layers"][2]["registered_name"] = "my_package>Dense";
  EXPECT_ERROR_HAS(model_from_json(custom.dump(), "x"),
                   "layer 3 'dense' (Dense) is a custom class");
  // Structure.
  json twice = json::parse(slurp(keras_file("small_keras3.json")));
  twice["config"]["layers"][4]["config"]["name"] = "dense";
  EXPECT_ERROR_HAS(model_from_json(twice.dump(), "x"), "layer name 'dense' is used twice");
  json late_input = json::parse(slurp(keras_file("small_keras3.json")));
  late_input["config"]["layers"].push_back(late_input["config"]["layers"][0]);
  late_input["config"]["layers"][5]["config"]["name"] = "input_2";
  EXPECT_ERROR_HAS(model_from_json(late_input.dump(), "x"),
                   "InputLayer can only be the first layer");
  // Dense on (28, 28) samples is Keras's Dense on their last axis, not an error.
  EXPECT_EQ(model_from_json(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"batch_shape": [null, 28, 28]}},
      {"class_name": "Dense", "config": {"units": 10}}]}})",
                            "x")
                .layer_output_shapes()
                .back(),
            (Shape{28, 10}));
  EXPECT_ERROR_HAS(model_from_json(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"batch_shape": [null, 1048576]}},
      {"class_name": "Dense", "config": {"units": 2147483647}}]}})",
                                   "x"),
                   "absurdly large");
  EXPECT_ERROR_HAS(
      model_from_json(R"({"class_name": "Sequential", "config": {"layers": []}})", "x"),
      "the model has no layers");
  EXPECT_ERROR_HAS(model_from_json("[1, 2]", "x"), "a Keras model JSON is an object");
}

// What Keras 3.15's model.save wrote (config.json of the .keras archive) for SMALL under
// mixed_bfloat16, the softmax a float32 Activation as Keras's mixed precision guide has it.
TEST(ModelIoDTypePolicy, AKerasSavedMixedBfloat16ModelLoadsWithEachLayersPolicy) {
  const std::string text = slurp(keras_file("small_mixed_bfloat16_keras3.json"));
  const Sequential m = model_from_json(text, "config.json");
  EXPECT_EQ(m.count_params(), 101770);
  std::vector<std::pair<std::string, DTypePolicy>> got;
  for (const Layer& l : m.layers()) got.emplace_back(l.name, l.dtype_policy);
  const std::vector<std::pair<std::string, DTypePolicy>> want = {
      {"flatten", DTypePolicy::mixed_bfloat16},
      {"dense", DTypePolicy::mixed_bfloat16},
      {"dropout", DTypePolicy::mixed_bfloat16},
      {"dense_1", DTypePolicy::mixed_bfloat16},
      {"activation", DTypePolicy::float32}};
  EXPECT_EQ(got, want);
  // The Dense layers decide the engine's precision; the float32 Activation does not matter.
  EXPECT_EQ(model_dtype_policy(m.layers()), DTypePolicy::mixed_bfloat16);
  EXPECT_EQ(dtype_policy_precision(model_dtype_policy(m.layers())), Precision::bf16);
  ASSERT_TRUE(training_config_from_json(text, "config.json"));
}

TEST(ModelIoDTypePolicy, ToJsonWritesEachLayersPolicyAsKeras3AndReadsItBack) {
  std::vector<Layer> layers = {Flatten({4, 4}), Dense(8, "relu"), Dropout(0.1), Dense(3),
                               Activation("softmax")};
  for (std::size_t i = 0; i + 1 < layers.size(); ++i)
    layers[i].dtype_policy = DTypePolicy::mixed_bfloat16;
  const Sequential m(layers);
  const json j = json::parse(model_to_json(m));
  const json bf16 = json::parse(R"({"module": "keras", "class_name": "DTypePolicy",
                                     "config": {"name": "mixed_bfloat16"}, "registered_name": null})");
  EXPECT_EQ(j["config"]["dtype"], bf16);  // the model's: its Dense layers' policy
  const json& out = j["config"]["layers"];
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0]["config"]["dtype"], "float32");  // the InputLayer: its input's dtype
  for (std::size_t i = 1; i < 5; ++i) EXPECT_EQ(out[i]["config"]["dtype"], bf16) << i;
  EXPECT_EQ(out[5]["config"]["dtype"]["config"]["name"], "float32");
  const Sequential back = model_from_json(j.dump(), "roundtrip");
  ASSERT_EQ(back.layers().size(), m.layers().size());
  for (std::size_t i = 0; i < m.layers().size(); ++i)
    EXPECT_EQ(back.layers()[i].dtype_policy, m.layers()[i].dtype_policy) << i;
  // float32 everywhere is what Keras writes by default.
  const json f = json::parse(model_to_json(tiny_model()));
  EXPECT_EQ(f["config"]["dtype"]["config"]["name"], "float32");
  EXPECT_EQ(f["config"]["layers"][1]["config"]["dtype"]["config"]["name"], "float32");
}

TEST(ModelIoDTypePolicy, OlderFormsOfAPolicyReadTheSame) {
  const std::vector<std::pair<const char*, json>> forms = {
      // Keras 3.0-3.3: the plain name.
      {"keras 3.0", json("mixed_bfloat16")},
      // Keras 3.4-3.6's FloatDTypePolicy.
      {"FloatDTypePolicy", json::parse(R"({"module": "keras", "class_name": "FloatDTypePolicy",
                                 "config": {"name": "mixed_bfloat16"}, "registered_name": null})")},
      // tf.keras 2.13-2.15 and, without module, earlier tf.keras 2.
      {"tf.keras 2.13", json::parse(R"({"module": "keras.mixed_precision", "class_name": "Policy",
                                 "config": {"name": "mixed_bfloat16"}, "registered_name": null})")},
      {"tf.keras 2.4", json::parse(R"({"class_name": "Policy",
                                       "config": {"name": "mixed_bfloat16"}})")},
  };
  for (const auto& [what, form] : forms) {
    SCOPED_TRACE(what);
    json j = json::parse(keras3_with("dense", "dtype", form));
    for (json& l : j["config"]["layers"])
      if (l["config"]["name"] == "dense_1") l["config"]["dtype"] = form;
    const Sequential m = model_from_json(j.dump(), what);
    EXPECT_EQ(model_dtype_policy(m.layers()), DTypePolicy::mixed_bfloat16);
  }
  // null: float32, the default policy.
  const Sequential n = model_from_json(keras3_with("dense", "dtype", json()), "null");
  EXPECT_EQ(n.layers()[1].dtype_policy, DTypePolicy::float32);
}

TEST(ModelIoDTypePolicy, DenseAndConv2DLayersOfDifferentPoliciesAreNamedInOneLine) {
  // Keras allows it (a float32 Dense at the end of a mixed model); the engine runs one precision.
  json j = json::parse(keras3_with("dense", "dtype", json("mixed_bfloat16")));
  const Sequential m = model_from_json(j.dump(), "m.json");  // the file itself loads
  EXPECT_ERROR_HAS(model_dtype_policy(m.layers()),
                   "dtype: layers 'dense' (dtype policy 'mixed_bfloat16') and 'dense_1' "
                   "('float32') differ: crossover runs the matrix products of all the Dense and "
                   "Conv2D layers of a model in one precision");
  std::vector<Layer> convnet = {Input({8, 8, 1}), Conv2D(2, 3), Flatten(), Dense(3)};
  convnet[1].dtype_policy = DTypePolicy::mixed_bfloat16;
  EXPECT_ERROR_HAS(model_dtype_policy(Sequential(convnet).layers()),
                   "layers 'conv2d' (dtype policy 'mixed_bfloat16') and 'dense' ('float32')");
  EXPECT_EQ(model_dtype_policy({Flatten({2}), Dropout(0.1)}), DTypePolicy::float32);
}

TEST(ModelIoDTypePolicy, TheEnginesReasonForEachKerasPolicyItLacks) {
  EXPECT_EQ(dtype_policy_problem("float32"), "");
  EXPECT_EQ(dtype_policy_problem("mixed_bfloat16"), "");
  EXPECT_NE(dtype_policy_problem("mixed_float16").find("no float16 matrix products"),
            std::string::npos);
  EXPECT_NE(dtype_policy_problem("bfloat16").find("optimizer state in float32"), std::string::npos);
  EXPECT_NE(dtype_policy_problem("float64").find("float32 at most"), std::string::npos);
  EXPECT_NE(dtype_policy_problem("int8_from_float32").find("quantized"), std::string::npos);
  EXPECT_ERROR_HAS(parse_dtype_policy("float16", "here"),
                   "here: the dtype policy 'float16' is not supported by crossover");
}

TEST(ModelIoKerasJson, MalformedJsonGivesTheBytePosition) {
  std::string text = slurp(keras_file("small_keras2.json"));
  text.resize(100);
  EXPECT_ERROR_HAS(model_from_json(text, "cut.json"), "cut.json: malformed JSON at byte 101");
  EXPECT_ERROR_HAS(model_from_json("{\"class_name\": Sequential}", "bad.json"),
                   "bad.json: malformed JSON at byte 16");
  EXPECT_ERROR_HAS(model_from_json("", "empty.json"), "malformed JSON at byte");
  EXPECT_ERROR_HAS(model_from_json(std::string(100000, '['), "deep.json"), "nested");
  // Every prefix of a real file is refused cleanly (no crash, one line).
  const std::string full = slurp(keras_file("small_keras3.json"));
  for (std::size_t n = 0; n < full.size(); n += 7) {
    const std::string msg = error_of([&] { model_from_json(full.substr(0, n), "p"); });
    EXPECT_FALSE(msg.empty()) << n;
  }
}

TEST(ModelIoKerasJson, CompileConfigRefusesWhatCrossoverCannotTrainWith) {
  auto with_opt = [](const std::string& field, const json& v) {
    json j = json::parse(slurp(keras_file("small_keras3.json")));
    j["compile_config"]["optimizer"]["config"][field] = v;
    return j.dump();
  };
  // Adam's amsgrad is read (and so AdamW's); Nadam and Adamax have none in Keras.
  EXPECT_TRUE(
      training_config_from_json(with_opt("amsgrad", true), "o")->optimizer.args.adam.amsgrad);
  EXPECT_FALSE(
      training_config_from_json(with_opt("amsgrad", false), "o")->optimizer.args.adam.amsgrad);
  json nadam = json::parse(with_opt("amsgrad", true));
  nadam["compile_config"]["optimizer"]["class_name"] = "Nadam";
  EXPECT_ERROR_HAS(training_config_from_json(nadam.dump(), "o"), "field amsgrad");
  EXPECT_EQ(training_config_from_json(with_opt("clipnorm", 1.0), "o")->optimizer.tensor_clipnorm,
            1.0f);
  json ftrl = json::parse(slurp(keras_file("small_keras3.json")));
  ftrl["compile_config"]["optimizer"]["class_name"] = "Ftrl";
  EXPECT_ERROR_HAS(training_config_from_json(ftrl.dump(), "o"), "Ftrl is not supported");
  json logits = json::parse(slurp(keras_file("small_keras3.json")));
  logits["compile_config"]["loss"] = json::parse(
      R"({"module": "keras.losses", "class_name": "SparseCategoricalCrossentropy",
          "config": {"from_logits": true}, "registered_name": null})");
  // from_logits is read.
  const auto logits_tc = training_config_from_json(logits.dump(), "o");
  ASSERT_TRUE(logits_tc);
  EXPECT_TRUE(logits_tc->from_logits);
  EXPECT_EQ(logits_tc->loss, "sparse_categorical_crossentropy");
  logits["compile_config"]["loss"]["config"]["from_logits"] = "yes";
  EXPECT_ERROR_HAS(training_config_from_json(logits.dump(), "o"), "from_logits must be");
  json mae = json::parse(slurp(keras_file("small_keras3.json")));
  mae["compile_config"]["metrics"] = json::parse(
      R"(["mae", {"module": "keras.metrics", "class_name": "MeanSquaredError",
                  "config": {"name": "mse", "dtype": "float32"}, "registered_name": null},
          {"module": "keras.metrics", "class_name": "RootMeanSquaredError",
           "config": {"name": "err", "dtype": "float32"}, "registered_name": null}])");
  const auto mae_tc = training_config_from_json(mae.dump(), "o");
  ASSERT_TRUE(mae_tc);
  // Each under the name Keras reports it by: an object's own name ("err"), with its kind.
  std::vector<std::string> names;
  for (const MetricSpec& m : mae_tc->metrics) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"mae", "mse", "err"}));
  ASSERT_EQ(mae_tc->metrics.size(), 3u);
  EXPECT_EQ(mae_tc->metrics[2].kind, MetricKind::mean_squared_error);
  EXPECT_TRUE(mae_tc->metrics[2].root);
  // A top-k's k and a binary accuracy's threshold are the object's; a bad one is refused.
  mae["compile_config"]["metrics"] = json::parse(
      R"([{"module": "keras.metrics", "class_name": "SparseTopKCategoricalAccuracy",
           "config": {"name": "top3", "dtype": "float32", "k": 3}, "registered_name": null},
          {"module": "keras.metrics", "class_name": "BinaryAccuracy",
           "config": {"name": "binary_accuracy", "dtype": "float32", "threshold": 0.7},
           "registered_name": null}])");
  const auto k_tc = training_config_from_json(mae.dump(), "o");
  ASSERT_TRUE(k_tc);
  ASSERT_EQ(k_tc->metrics.size(), 2u);
  EXPECT_EQ(k_tc->metrics[0].name, "top3");
  EXPECT_EQ(k_tc->metrics[0].parameter, 3.0f);
  EXPECT_EQ(k_tc->metrics[1].parameter, 0.7f);
  mae["compile_config"]["metrics"][0]["config"]["k"] = 0;
  EXPECT_ERROR_HAS(training_config_from_json(mae.dump(), "o"), "k must be a whole number");
  mae["compile_config"]["metrics"][0]["config"]["k"] = "3";
  EXPECT_ERROR_HAS(training_config_from_json(mae.dump(), "o"), "k must be a number");
  mae["compile_config"]["metrics"][0]["config"]["k"] = 3;
  mae["compile_config"]["metrics"][0]["config"]["sample_weight"] = 2;
  EXPECT_ERROR_HAS(training_config_from_json(mae.dump(), "o"), "sample_weight 2 is not supported");
  mae["compile_config"]["metrics"] = json::parse(R"(["precision"])");
  EXPECT_ERROR_HAS(training_config_from_json(mae.dump(), "o"),
                   "metric 'precision' is not supported");
  // Keras 3's loss objects and SGD read back.
  json sgd = json::parse(slurp(keras_file("small_keras3.json")));
  sgd["compile_config"]["optimizer"] = json::parse(
      R"({"module": "keras.optimizers", "class_name": "SGD", "config": {"name": "SGD",
          "learning_rate": 0.05, "momentum": 0.9, "nesterov": true, "global_clipnorm": 1.0},
          "registered_name": null})");
  sgd["compile_config"]["loss"] = json::parse(
      R"({"module": "keras.losses", "class_name": "SparseCategoricalCrossentropy",
          "config": {"from_logits": false}, "registered_name": null})");
  auto tc = training_config_from_json(sgd.dump(), "o");
  ASSERT_TRUE(tc);
  EXPECT_EQ(tc->optimizer.kind, OptimizerKind::sgd);
  EXPECT_EQ(tc->optimizer.args.sgd.momentum, static_cast<double>(0.9f));
  EXPECT_TRUE(tc->optimizer.args.sgd.nesterov);
  EXPECT_EQ(tc->optimizer.clipnorm, 1.0f);
  EXPECT_EQ(tc->loss, "sparse_categorical_crossentropy");
  EXPECT_FALSE(tc->from_logits);
}

// Adagrad, Adadelta, Nadam and Adamax: written as Keras 3's get_config writes them (class,
// default name, every field) and read back to the same settings; a Keras 3.15 compile_config
// with non-default settings reads too.
TEST(ModelIoKerasJson, MetricsRoundTripThroughTheCompileConfigAsKerasWritesThem) {
  // Plain names stay names; a renamed metric, or one with a k or threshold other than its class's
  // default, is Keras's metric object (what Keras 3.15's to_json() writes for it).
  MetricSpec top2 = metric_spec("sparse_top_k_categorical_accuracy");
  top2.name = "top2";
  top2.parameter = 2;
  MetricSpec err = metric_spec("RootMeanSquaredError");
  err.name = "err";
  MetricSpec ba = metric_spec("binary_accuracy");
  ba.parameter = 0.25f;
  Sequential m({Input({4}), Dense(3, "softmax")});
  m.compile_with(Adam(), LossSpec{"sparse_categorical_crossentropy", false},
                 {metric_spec("accuracy"), metric_spec("sparse_top_k_categorical_accuracy"), top2},
                 {.threads = 1});
  const std::string text = model_to_json(m);
  EXPECT_EQ(json::parse(text)["compile_config"]["metrics"],
            json::parse(R"(["accuracy", "sparse_top_k_categorical_accuracy",
      {"module": "keras.metrics", "class_name": "SparseTopKCategoricalAccuracy",
       "config": {"name": "top2", "dtype": "float32", "k": 2},
       "registered_name": null}])"));
  const auto tc = training_config_from_json(text, "roundtrip");
  ASSERT_TRUE(tc);
  ASSERT_EQ(tc->metrics.size(), 3u);
  EXPECT_TRUE(tc->metrics[0].loss_accuracy);
  EXPECT_EQ(tc->metrics[1].name, "sparse_top_k_categorical_accuracy");
  EXPECT_EQ(tc->metrics[1].parameter, 5.0f);
  EXPECT_EQ(tc->metrics[2].name, "top2");
  EXPECT_EQ(tc->metrics[2].kind, MetricKind::sparse_top_k_categorical_accuracy);
  EXPECT_EQ(tc->metrics[2].parameter, 2.0f);

  Sequential b({Input({4}), Dense(3, "sigmoid")});
  b.compile_with(Adam(), LossSpec{"binary_crossentropy", false}, {err, ba}, {.threads = 1});
  const auto btc = training_config_from_json(model_to_json(b), "roundtrip");
  ASSERT_TRUE(btc);
  ASSERT_EQ(btc->metrics.size(), 2u);
  EXPECT_EQ(btc->metrics[0].name, "err");
  EXPECT_TRUE(btc->metrics[0].root);
  EXPECT_EQ(btc->metrics[1].name, "binary_accuracy");
  EXPECT_EQ(btc->metrics[1].parameter, 0.25f);
}

// Keras's Huber loss object in compile_config: its delta read, and written back the same way
// (Keras's "huber" string where the delta is its default).
TEST(ModelIoKerasJson, HuberLossAndItsDeltaRoundTripThroughTheCompileConfig) {
  json j = json::parse(slurp(keras_file("small_keras3.json")));
  j["compile_config"]["loss"] = json::parse(
      R"({"module": "keras.losses", "class_name": "Huber", "config": {"name": "huber_loss",
          "reduction": "sum_over_batch_size", "delta": 0.25}, "registered_name": null})");
  const auto tc = training_config_from_json(j.dump(), "h");
  ASSERT_TRUE(tc);
  EXPECT_EQ(tc->loss, "huber");
  EXPECT_EQ(tc->loss_parameter, 0.25);
  Sequential m({Input({4}), Dense(3)});
  m.compile(SGD(), LossSpec{tc->loss, false, tc->loss_parameter}, {}, {.threads = 1});
  const json loss = json::parse(model_to_json(m))["compile_config"]["loss"];
  EXPECT_EQ(loss["class_name"], "Huber");
  EXPECT_EQ(loss["config"]["delta"], 0.25);
  Sequential plain({Input({4}), Dense(3)});
  plain.compile(SGD(), "huber", {}, {.threads = 1});
  EXPECT_EQ(json::parse(model_to_json(plain))["compile_config"]["loss"], "huber");
  EXPECT_ERROR_HAS(plain.compile(SGD(), LossSpec{"huber", false, -1.0}, {}, {.threads = 1}),
                   "huber: delta must be positive, got -1");
  EXPECT_ERROR_HAS(plain.compile(SGD(), LossSpec{"huber", true}, {}, {.threads = 1}),
                   "from_logits applies to the cross-entropies, not huber");
}

TEST(ModelIoKerasJson, NewOptimizersRoundTripThroughTheCompileConfig) {
  struct Case {
    OptimizerConfig config;
    const char* cls;
    const char* name;
    std::vector<const char*> fields;
  };
  const std::vector<Case> cases = {
      {Adagrad({.learning_rate = 0.01, .initial_accumulator_value = 0.2, .epsilon = 1e-6}),
       "Adagrad",
       "adagrad",
       {"initial_accumulator_value", "epsilon"}},
      {Adadelta({.learning_rate = 1.0, .rho = 0.9, .clipvalue = 0.5}),
       "Adadelta",
       "adadelta",
       {"rho", "epsilon"}},
      {with_tensor_clipnorm(Nadam({.learning_rate = 0.002, .beta_1 = 0.8, .weight_decay = 0.01}),
                            0.5),
       "Nadam",
       "nadam",
       {"beta_1", "beta_2", "epsilon"}},
      {Adamax({.learning_rate = 0.002, .beta_2 = 0.99, .clipnorm = 1.0}),
       "Adamax",
       "adamax",
       {"beta_1", "beta_2", "epsilon"}},
      {Adam({.learning_rate = 0.002, .amsgrad = true}),
       "Adam",
       "adam",
       {"beta_1", "beta_2", "epsilon", "amsgrad"}},
      {AdamW({.learning_rate = 0.002, .weight_decay = 0.004, .amsgrad = true}),
       "Adam",
       "adam",
       {"beta_1", "beta_2", "epsilon", "amsgrad"}},
      {Lion({.learning_rate = 3e-4, .beta_1 = 0.95, .beta_2 = 0.98, .weight_decay = 0.1}),
       "Lion",
       "lion",
       {"beta_1", "beta_2"}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cls);
    Sequential m({Input({4}), Dense(3, "softmax")});
    m.compile(c.config, "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1});
    const std::string text = model_to_json(m);
    const json opt = json::parse(text)["compile_config"]["optimizer"];
    EXPECT_EQ(opt["module"], "keras.optimizers");
    EXPECT_EQ(opt["class_name"], c.cls);
    EXPECT_EQ(opt["config"]["name"], c.name);
    for (const char* f : c.fields) EXPECT_TRUE(opt["config"].contains(f)) << f;
    for (const char* f : {"learning_rate", "weight_decay", "clipnorm", "global_clipnorm",
                          "clipvalue", "use_ema", "gradient_accumulation_steps"})
      EXPECT_TRUE(opt["config"].contains(f)) << f;
    const auto tc = training_config_from_json(text, "roundtrip");
    ASSERT_TRUE(tc);
    const OptimizerConfig& a = c.config;
    const OptimizerConfig& b = tc->optimizer;
    EXPECT_EQ(b.kind, a.kind);
    EXPECT_EQ(b.schedule.base, a.schedule.base);
    const auto args_a = optimizer_arguments(a), args_b = optimizer_arguments(b);
    ASSERT_EQ(args_b.size(), args_a.size());
    for (std::size_t i = 0; i < args_a.size(); ++i) {
      EXPECT_EQ(args_b[i].name, args_a[i].name);
      EXPECT_EQ(args_b[i].value, args_a[i].value) << args_a[i].name;
    }
    EXPECT_EQ(b.weight_decay, a.weight_decay);
    EXPECT_EQ(b.clipnorm, a.clipnorm);
    EXPECT_EQ(b.clipvalue, a.clipvalue);
    EXPECT_EQ(b.tensor_clipnorm, a.tensor_clipnorm);
    if (a.kind == OptimizerKind::adam) {
      EXPECT_EQ(opt["config"]["amsgrad"], a.args.adam.amsgrad);
    }
  }
  // Keras 3.15's own get_config of Adadelta(learning_rate=1.0, rho=0.9), and the string names.
  json k = json::parse(slurp(keras_file("small_keras3.json")));
  k["compile_config"]["optimizer"] = json::parse(
      R"({"module": "keras.optimizers", "class_name": "Adadelta", "config": {"name": "adadelta",
          "learning_rate": 1.0, "weight_decay": null, "clipnorm": null, "global_clipnorm": null,
          "clipvalue": null, "use_ema": false, "ema_momentum": 0.99,
          "ema_overwrite_frequency": null, "loss_scale_factor": null,
          "gradient_accumulation_steps": null, "rho": 0.9, "epsilon": 1e-07},
          "registered_name": null})");
  auto tc = training_config_from_json(k.dump(), "k");
  ASSERT_TRUE(tc);
  EXPECT_EQ(tc->optimizer.kind, OptimizerKind::adadelta);
  EXPECT_EQ(tc->optimizer.args.adadelta.rho, 0.9);
  EXPECT_EQ(tc->optimizer.schedule.base, 1.0f);
  for (const char* name : {"adagrad", "Adadelta", "nadam", "adamax"}) {
    k["compile_config"]["optimizer"] = name;
    tc = training_config_from_json(k.dump(), "k");
    ASSERT_TRUE(tc);
    EXPECT_EQ(optimizer_name(tc->optimizer.kind),
              std::string(name) == "Adadelta" ? "adadelta" : name);
  }
}

// A linear output compiled with from_logits writes Keras's loss object and reads it back.
TEST(ModelIoKerasJson, FromLogitsRoundTripsThroughTheModelJson) {
  for (const char* loss :
       {"sparse_categorical_crossentropy", "categorical_crossentropy", "binary_crossentropy"}) {
    SCOPED_TRACE(loss);
    Sequential m({Flatten({4, 4}), Dense(8, "relu"), Dense(3)});
    m.compile(Adam(), LossSpec{loss, true}, {"accuracy"});
    const std::string text = model_to_json(m);
    const json doc = json::parse(text);
    const json& l = doc["compile_config"]["loss"];
    EXPECT_EQ(l["module"], "keras.losses");
    EXPECT_EQ(l["config"]["from_logits"], true);
    EXPECT_EQ(l["config"]["name"], loss);
    const auto tc = training_config_from_json(text, "m.json");
    ASSERT_TRUE(tc);
    EXPECT_EQ(tc->loss, loss);
    EXPECT_TRUE(tc->from_logits);
    Sequential back = model_from_json(text, "m.json");
    back.compile_with(tc->optimizer, LossSpec{tc->loss, tc->from_logits}, tc->metrics);
    EXPECT_TRUE(back.from_logits());
    EXPECT_EQ(json::parse(model_to_json(back))["compile_config"], doc["compile_config"]);
  }
  // Without from_logits the loss stays a name, as before.
  Sequential plain = tiny_model();
  plain.compile(Adam(), "sparse_categorical_crossentropy");
  EXPECT_EQ(json::parse(model_to_json(plain))["compile_config"]["loss"],
            "sparse_categorical_crossentropy");
}

// ============================== safetensors =====================================================

// A safetensors file from its header JSON text and data bytes.
std::vector<uint8_t> make_safetensors(const std::string& header, const std::vector<uint8_t>& data) {
  const uint64_t n = header.size();
  std::vector<uint8_t> out(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}
std::vector<uint8_t> float_bytes(std::initializer_list<float> v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.begin(), b.size());
  return b;
}

TEST(ModelIoSafetensors, SaveThenLoadGivesBitIdenticalWeightsAndPredictions) {
  const std::string dir = temp_folder("st-roundtrip");
  const std::string path = dir + "/small.safetensors";
  Sequential a({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
  compile_cpu(a, 11);
  const Tensor x = random_tensor({64, 28, 28}, 3, 0.0f, 1.0f);
  Tensor y({64});
  for (int64_t i = 0; i < 64; ++i) y[i] = static_cast<float>(i % 10);
  a.fit(x, y, {.epochs = 1, .verbose = 0});
  save_weights(a, path);
  EXPECT_TRUE(temp_leftovers(dir).empty());

  Sequential b({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
  compile_cpu(b, 99);
  load_weights(b, path);
  expect_same_weights(a, b);
  const Tensor pa = a.predict(x), pb = b.predict(x);
  EXPECT_TRUE(same_bits(pa, pb));
}

TEST(ModelIoSafetensors, FileIsPlainSafetensorsNamedAsKerasNamesWeights) {
  const std::string path = temp_folder("st-format") + "/m.safetensors";
  Sequential m = tiny_model();
  compile_cpu(m, 4);
  save_weights(m, path);
  const std::vector<uint8_t> bytes = slurp_bytes(path);
  ASSERT_GT(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(bytes[static_cast<std::size_t>(i)]) << (8 * i);
  EXPECT_EQ((8 + n) % 8, 0u) << "data section 8-byte aligned";
  const json h =
      json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n)));
  EXPECT_EQ(h["dense/kernel"]["dtype"], "F32");
  EXPECT_EQ(h["dense/kernel"]["shape"], json::parse("[16, 8]"));
  EXPECT_EQ(h["dense/bias"]["shape"], json::parse("[8]"));
  EXPECT_EQ(h["dense_1/kernel"]["shape"], json::parse("[8, 3]"));
  EXPECT_EQ(h["__metadata__"]["format"], "crossover");
  EXPECT_EQ(h["__metadata__"]["contents"], "weights");
  // The architecture in the metadata is the model's Keras JSON.
  Sequential again = model_from_json(h["__metadata__"]["architecture"].get<std::string>(), "arch");
  EXPECT_EQ(again.count_params(), m.count_params());
  // Raw little-endian floats at the offsets.
  const auto w = m.get_weights();
  const auto off = h["dense_1/kernel"]["data_offsets"];
  const std::size_t begin = 8 + n + off[0].get<std::size_t>();
  EXPECT_EQ(off[1].get<std::size_t>() - off[0].get<std::size_t>(), 8u * 3u * 4u);
  EXPECT_EQ(std::memcmp(bytes.data() + begin, w[2].value.data(), 96), 0);
  EXPECT_EQ(bytes.size(), 8 + n + (16 * 8 + 8 + 8 * 3 + 3) * 4);
}

TEST(ModelIoSafetensors, LoadsAFileWrittenByAnotherWriter) {
  // As Python's safetensors writes it: keys sorted, no metadata, its own data order, no padding.
  Sequential m({Input({2}), Dense(2, "linear")});
  compile_cpu(m);
  const std::string header =
      R"({"dense/bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("dense/kernel":{"dtype":"F32","shape":[2,2],"data_offsets":[8,24]}})";
  const std::string path = temp_folder("st-other") + "/w.safetensors";
  std::vector<uint8_t> data = float_bytes({0.5f, -0.5f, 1, 2, 3, 4});
  write_bytes(path, make_safetensors(header, data));
  load_weights(m, path);
  const auto w = m.get_weights();
  EXPECT_EQ(w[0].value[3], 4.0f);
  EXPECT_EQ(w[1].value[1], -0.5f);
  const Tensor p = m.predict(Tensor({1, 2}, {1.0f, 1.0f}));
  EXPECT_EQ(p[0], 1 + 3 + 0.5f);
  EXPECT_EQ(p[1], 2 + 4 - 0.5f);
}

TEST(ModelIoSafetensors, LoadingIntoAnotherArchitectureIsRefusedNamingTheFirstDifference) {
  const std::string dir = temp_folder("st-mismatch");
  Sequential a({Flatten({28, 28}), Dense(64, "relu"), Dense(10, "softmax")});
  compile_cpu(a);
  save_weights(a, dir + "/a.safetensors");
  Sequential b({Flatten({28, 28}), Dense(128, "relu"), Dense(10, "softmax")});
  compile_cpu(b);
  const auto before = b.get_weights();
  EXPECT_ERROR_HAS(
      load_weights(b, dir + "/a.safetensors"),
      "tensor dense/kernel has shape (784, 64) in the file but (784, 128) in the model");
  // Nothing was loaded.
  expect_same_weights(b, b);
  EXPECT_TRUE(same_bits(b.get_weights()[0].value, before[0].value));
  Sequential c({Flatten({28, 28}), Dense(64, "relu"), Dense(10, "softmax"), Dense(10, "softmax")});
  compile_cpu(c);
  EXPECT_ERROR_HAS(load_weights(c, dir + "/a.safetensors"),
                   "tensor dense_2/kernel of the model is not in the file");
  Sequential d({Flatten({28, 28}), Dense(64, "relu")});
  compile_cpu(d);
  EXPECT_ERROR_HAS(load_weights(d, dir + "/a.safetensors"),
                   "tensor dense_1/kernel in the file is not in the model");
  Sequential uncompiled({Flatten({28, 28}), Dense(64, "relu"), Dense(10, "softmax")});
  EXPECT_ERROR_HAS(load_weights(uncompiled, dir + "/a.safetensors"), "compile the model before");
  EXPECT_ERROR_HAS(load_weights(a, dir + "/missing.safetensors"),
                   "missing.safetensors: cannot open");
  EXPECT_ERROR_HAS(load_weights(a, dir), "is a folder");
}

TEST(ModelIoSafetensors, HostileFilesAreRefusedWithOneLineAndNoCrash) {
  auto parse = [](const std::vector<uint8_t>& b) { parse_safetensors(b, "f.safetensors"); };
  const std::vector<uint8_t> eight = float_bytes({1, 2});
  auto hdr = [](const std::string& entries) { return "{" + entries + "}"; };
  const std::string ok = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_NO_THROW(parse(make_safetensors(hdr(ok), eight)));

  EXPECT_ERROR_HAS(parse({1, 2, 3}), "f.safetensors: truncated: 3 bytes");
  std::vector<uint8_t> huge = make_safetensors(hdr(ok), eight);
  huge[7] = 0x7f;
  EXPECT_ERROR_HAS(parse(huge), "is absurd");
  std::vector<uint8_t> past = make_safetensors(hdr(ok), eight);
  past[0] = static_cast<uint8_t>(past[0] + 20);
  EXPECT_ERROR_HAS(parse(past), "runs past the end of the file");
  EXPECT_ERROR_HAS(parse(make_safetensors("[1]", {})), "must start with '{'");
  EXPECT_ERROR_HAS(parse(make_safetensors("{\"a\":", {})), "malformed JSON header at byte 6");
  // Other dtypes are valid safetensors (the model loader refuses them, below).
  EXPECT_NO_THROW(parse(make_safetensors(
      hdr(R"("a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]})"), {0, 0, 0, 0})));
  EXPECT_ERROR_HAS(
      parse(make_safetensors(hdr(R"("a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]})"), eight)),
      "tensor a: unknown dtype 'Q4'");
  EXPECT_ERROR_HAS(parse(make_safetensors(
                       hdr(R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), eight)),
                   "tensor a: shape (3,) of F32 needs 12 bytes, but data_offsets [0, 8] hold 8");
  EXPECT_ERROR_HAS(parse(make_safetensors(
                       hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]})"), eight)),
                   "run past the end of the data (8 bytes)");
  EXPECT_ERROR_HAS(parse(make_safetensors(
                       hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), eight)),
                   "end before they begin");
  EXPECT_ERROR_HAS(
      parse(make_safetensors(hdr(R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})"),
                             eight)),
      "overlap");
  EXPECT_ERROR_HAS(parse(make_safetensors(
                       hdr(R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]})"), eight)),
                   "4 bytes of data before tensor a");
  EXPECT_ERROR_HAS(parse(make_safetensors(
                       hdr(R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})"), eight)),
                   "4 bytes after the last tensor belong to no tensor");
  EXPECT_ERROR_HAS(parse(make_safetensors(hdr(ok + "," + ok), eight)), "names 'a' twice");
  EXPECT_ERROR_HAS(parse(make_safetensors(hdr(R"("__metadata__":{"x":1},)" + ok), eight)),
                   "__metadata__ entry 'x' is not a string");
  EXPECT_ERROR_HAS(parse(make_safetensors(
                       hdr(R"("a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), eight)),
                   "invalid dimension");
  EXPECT_ERROR_HAS(
      parse(make_safetensors(
          hdr(R"("a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]})"),
          eight)),
      "absurdly large");
  EXPECT_ERROR_HAS(
      parse(make_safetensors(hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0]})"), eight)),
      "data_offsets must be two non-negative integers");
  EXPECT_FALSE(error_of([&] { parse(make_safetensors(std::string(5000, '{'), {})); }).empty());

  // A real file cut at every length, and with every header byte flipped: an Error each time.
  const std::string dir = temp_folder("st-hostile");
  Sequential m = tiny_model();
  compile_cpu(m);
  save_weights(m, dir + "/ok.safetensors");
  const std::vector<uint8_t> good = slurp_bytes(dir + "/ok.safetensors");
  for (std::size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(n));
    EXPECT_FALSE(error_of([&] { parse(cut); }).empty()) << "cut at " << n;
  }
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i)
    hlen |= static_cast<uint64_t>(good[static_cast<std::size_t>(i)]) << (8 * i);
  for (std::size_t i = 0; i < 8 + hlen; ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x5a;
    error_of([&] { parse(bad); });  // either refused or (for a harmless byte) accepted: no crash
  }
  // The reader refuses a dtype it cannot load, naming the tensor.
  write_bytes(
      dir + "/f16.safetensors",
      make_safetensors(hdr(R"("dense/kernel":{"dtype":"F16","shape":[2],"data_offsets":[0,4]})"),
                       {0, 0, 0, 0}));
  EXPECT_ERROR_HAS(load_weights(m, dir + "/f16.safetensors"),
                   "tensor dense/kernel has dtype F16: crossover loads F32 only");
}

TEST(ModelIoSafetensors, NanOrInfInLoadedWeightsGivesAWarning) {
  const std::string path = temp_folder("st-nan") + "/nan.safetensors";
  Sequential m({Input({2}), Dense(2)});
  compile_cpu(m);
  auto w = m.get_weights();
  w[0].value[0] = std::numeric_limits<float>::quiet_NaN();
  w[0].value[3] = std::numeric_limits<float>::infinity();
  write_safetensors(path, w, {});
  testing::internal::CaptureStderr();
  load_weights(m, path);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning: " + path + ": tensor dense/kernel holds 2 NaN/Inf values"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("dense/bias"), std::string::npos);
  EXPECT_TRUE(std::isnan(m.get_weights()[0].value[0]));
}

TEST(ModelIoSafetensors, SaveIsAtomicAFailedSaveLeavesTheOldFileAndNoTemporary) {
  const std::string dir = temp_folder("st-atomic");
  const std::string path = dir + "/model.safetensors";
  Sequential small({Flatten({28, 28}), Dense(128, "relu"), Dense(10, "softmax")});
  compile_cpu(small, 1);
  Sequential other({Flatten({28, 28}), Dense(128, "relu"), Dense(10, "softmax")});
  compile_cpu(other, 2);
  save_weights(small, path);
  ::chmod(path.c_str(), 0640);
  const std::string old = slurp(path);

  // The file system refuses the write part-way (a file size limit: EFBIG).
  struct rlimit saved {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto* previous = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small_limit = saved;
  small_limit.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small_limit), 0);
  const std::string msg = error_of([&] { save_weights(other, path); });
  setrlimit(RLIMIT_FSIZE, &saved);
  ::signal(SIGXFSZ, previous);
  EXPECT_NE(msg.find(path + ": write failed"), std::string::npos) << msg;
  EXPECT_EQ(slurp(path), old) << "the old file must be exactly as it was";
  EXPECT_TRUE(temp_leftovers(dir).empty());

  // The rename fails (a non-empty folder in the way): nothing left behind.
  fs::create_directories(dir + "/taken/inside");
  EXPECT_ERROR_HAS(save_weights(other, dir + "/taken"), "is a folder");
  EXPECT_TRUE(temp_leftovers(dir).empty());
  // A folder that does not exist.
  EXPECT_ERROR_HAS(save_weights(other, dir + "/no/such/folder/m.safetensors"),
                   "cannot create a temporary file in");
  EXPECT_FALSE(fs::exists(dir + "/no"));

  // A successful save replaces the file completely and keeps its permissions.
  save_weights(other, path);
  EXPECT_NE(slurp(path), old);
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_TRUE(temp_leftovers(dir).empty());
  Sequential check({Flatten({28, 28}), Dense(128, "relu"), Dense(10, "softmax")});
  compile_cpu(check, 3);
  load_weights(check, path);
  expect_same_weights(check, other);
  // A model without weights yet.
  Sequential unbuilt({Dense(3)});
  compile_cpu(unbuilt);
  EXPECT_ERROR_HAS(save_weights(unbuilt, dir + "/u.safetensors"), "no weights to save yet");
}

TEST(ModelIoSafetensors, LoadModelRebuildsCompilesAndLoadsLikeKeras) {
  const std::string dir = temp_folder("st-loadmodel");
  Sequential a({Flatten({28, 28}), Dense(32, "relu"), Dropout(0.1), Dense(10, "softmax")},
               "digits");
  a.compile(RMSprop({.learning_rate = 0.0005}), "sparse_categorical_crossentropy", {"accuracy"},
            {.threads = 1, .seed = 8});
  const Tensor x = random_tensor({40, 28, 28}, 5, 0.0f, 1.0f);
  Tensor y({40});
  for (int64_t i = 0; i < 40; ++i) y[i] = static_cast<float>(i % 10);
  a.fit(x, y, {.epochs = 1, .verbose = 0});
  save_weights(a, dir + "/a.safetensors");
  Sequential b = load_model(dir + "/a.safetensors", {.threads = 1});
  EXPECT_TRUE(b.compiled());
  EXPECT_EQ(b.name(), "digits");
  EXPECT_EQ(b.optimizer().kind, OptimizerKind::rmsprop);
  EXPECT_EQ(b.optimizer().schedule.base, 0.0005f);
  EXPECT_EQ(b.loss_name(), "sparse_categorical_crossentropy");
  EXPECT_EQ(b.metrics(), std::vector<std::string>{"accuracy"});
  expect_same_weights(a, b);
  const auto ea = a.evaluate(x, y, {.verbose = 0}), eb = b.evaluate(x, y, {.verbose = 0});
  EXPECT_EQ(ea.loss, eb.loss);
  EXPECT_EQ(ea.accuracy, eb.accuracy);
  // A weights-only file (no architecture) cannot be a model by itself.
  write_safetensors(dir + "/bare.safetensors", a.get_weights(), {});
  EXPECT_ERROR_HAS(load_model(dir + "/bare.safetensors"), "without the architecture");
}

// ============================== checkpoints =====================================================

struct Synthetic {
  Tensor x, y;
};
Synthetic synthetic(int64_t n) {
  Synthetic s{random_tensor({n, 8, 8}, 21, 0.0f, 1.0f), Tensor({n})};
  for (int64_t i = 0; i < n; ++i) {
    // A learnable rule: the class is which quarter of the image is brightest.
    double q[4] = {0, 0, 0, 0};
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) q[(r / 4) * 2 + c / 4] += s.x[i * 64 + r * 8 + c];
    s.y[i] = static_cast<float>(std::max_element(q, q + 4) - q);
  }
  return s;
}
Sequential resumable_model() {
  return Sequential(
      {Flatten({8, 8}), Dense(32, "relu"), Dropout(0.2), Dense(16, "relu"), Dense(4, "softmax")});
}

void check_resume(OptimizerConfig opt, const char* label) {
  SCOPED_TRACE(label);
  const Synthetic d = synthetic(500);  // 16 batches of 32, the last one partial
  const std::string path = temp_folder(std::string("ckpt-") + label) + "/run.ckpt";
  const CompileOptions copts{.threads = 2, .seed = 77};
  Sequential straight = resumable_model();
  straight.compile(opt, "sparse_categorical_crossentropy", {"accuracy"}, copts);
  straight.fit(d.x, d.y, {.epochs = 3, .verbose = 0});

  Sequential first = resumable_model();
  first.compile(opt, "sparse_categorical_crossentropy", {"accuracy"}, copts);
  first.fit(d.x, d.y, {.epochs = 1, .verbose = 0});
  save_checkpoint(first, path, 1, {{"seed", "77"}});

  Sequential resumed = resumable_model();
  resumed.compile(opt, "sparse_categorical_crossentropy", {"accuracy"}, copts);
  const int epoch = load_checkpoint(resumed, path);
  EXPECT_EQ(epoch, 1);
  EXPECT_EQ(resumed.optimizer_steps(), 16);
  resumed.fit(d.x, d.y, {.epochs = 3, .verbose = 0, .initial_epoch = epoch});
  expect_same_weights(straight, resumed);
  EXPECT_EQ(straight.optimizer_steps(), resumed.optimizer_steps());

  // The CLI's path: everything from the file.
  int epoch2 = -1;
  Sequential rebuilt = model_from_checkpoint(path, copts, &epoch2);
  EXPECT_EQ(epoch2, 1);
  rebuilt.fit(d.x, d.y, {.epochs = 3, .verbose = 0, .initial_epoch = epoch2});
  expect_same_weights(straight, rebuilt);
}

TEST(ModelIoCheckpoint, ResumingContinuesTheSameTrajectoryBitForBitAdam) {
  check_resume(Adam(), "adam");
}

// Adam's amsgrad: the checkpoint keeps its third slot (velocity_hat), so the resumed run is the
// uninterrupted one; a model compiled without amsgrad (or with it, for a plain Adam checkpoint)
// is refused by name.
TEST(ModelIoCheckpoint, ResumingContinuesTheSameTrajectoryBitForBitAdamAmsgrad) {
  check_resume(Adam({.learning_rate = 0.01, .amsgrad = true}), "adam-amsgrad");
  const std::string dir = temp_folder("ckpt-amsgrad");
  Sequential m = tiny_model();
  compile_cpu(m, 5, Adam({.amsgrad = true}));
  const Tensor x = random_tensor({20, 4, 4}, 2, 0.0f, 1.0f);
  Tensor y({20});
  m.fit(x, y, {.epochs = 1, .batch_size = 8, .verbose = 0});
  save_checkpoint(m, dir + "/c.ckpt", 1);
  const SafetensorsFile f = read_safetensors(dir + "/c.ckpt");
  EXPECT_NE(f.find("optimizer/dense/kernel/slot3"), nullptr);
  EXPECT_TRUE(read_checkpoint_info(dir + "/c.ckpt").training.optimizer.args.adam.amsgrad);
  Sequential plain = tiny_model();
  compile_cpu(plain, 5, Adam());
  EXPECT_ERROR_HAS(load_checkpoint(plain, dir + "/c.ckpt"),
                   "trained with adam (amsgrad=True) but the model is compiled with amsgrad=False");
  save_checkpoint(plain, dir + "/p.ckpt", 0);
  EXPECT_EQ(read_safetensors(dir + "/p.ckpt").find("optimizer/dense/kernel/slot3"), nullptr);
  EXPECT_ERROR_HAS(load_checkpoint(m, dir + "/p.ckpt"), "amsgrad=False) but the model");
}

TEST(ModelIoCheckpoint, ResumingContinuesTheSameTrajectoryBitForBitSgdMomentumWithDecay) {
  check_resume(with_exponential_decay(SGD({.learning_rate = 0.05, .momentum = 0.9}), 10, 0.8),
               "sgd");
}

TEST(ModelIoCheckpoint, MetadataMismatchesAndWeightsOnlyUse) {
  const std::string dir = temp_folder("ckpt-misc");
  Sequential m = tiny_model();
  compile_cpu(m, 5);
  const Tensor x = random_tensor({20, 4, 4}, 2, 0.0f, 1.0f);
  Tensor y({20});
  m.fit(x, y, {.epochs = 2, .batch_size = 8, .verbose = 0});
  save_checkpoint(m, dir + "/c.ckpt", 2, {{"seed", "5"}, {"data", "synthetic"}});
  EXPECT_TRUE(temp_leftovers(dir).empty());

  const CheckpointInfo info = read_checkpoint_info(dir + "/c.ckpt");
  EXPECT_EQ(info.epoch, 2);
  EXPECT_EQ(info.step, 6);
  EXPECT_EQ(info.metadata.at("seed"), "5");
  EXPECT_EQ(info.training.optimizer.kind, OptimizerKind::adam);
  EXPECT_EQ(info.training.loss, "sparse_categorical_crossentropy");

  // The weights of a checkpoint load on their own.
  Sequential w = tiny_model();
  compile_cpu(w, 6);
  load_weights(w, dir + "/c.ckpt");
  expect_same_weights(m, w);
  // Another optimizer is refused; a weights file is not a checkpoint.
  Sequential sgd = tiny_model();
  compile_cpu(sgd, 6, SGD());
  EXPECT_ERROR_HAS(load_checkpoint(sgd, dir + "/c.ckpt"),
                   "the checkpoint was trained with adam but the model is compiled with sgd");
  save_weights(m, dir + "/w.safetensors");
  EXPECT_ERROR_HAS(load_checkpoint(w, dir + "/w.safetensors"), "not a crossover checkpoint");
  Sequential bigger({Flatten({4, 4}), Dense(9, "relu"), Dense(3, "softmax")});
  compile_cpu(bigger);
  EXPECT_ERROR_HAS(load_checkpoint(bigger, dir + "/c.ckpt"),
                   "tensor dense/kernel has shape (16, 8) in the file but (16, 9) in the model");
  EXPECT_ERROR_HAS(save_checkpoint(m, dir + "/x.ckpt", 1, {{"epoch", "3"}}), "'epoch' is reserved");
  // A tampered step count is refused.
  SafetensorsFile f = read_safetensors(dir + "/c.ckpt");
  f.header.metadata["step"] = "-4";
  write_safetensors(dir + "/bad.ckpt", f.tensors, f.header.metadata);
  EXPECT_ERROR_HAS(load_checkpoint(w, dir + "/bad.ckpt"), "step '-4' is not a count");
}

TEST(ModelIoCheckpoint, StepCountIsExactPastFloatPrecision) {
  const std::string path = temp_folder("ckpt-steps") + "/s.ckpt";
  Sequential m = tiny_model();
  compile_cpu(m);
  const int64_t big = (int64_t{1} << 24) + 1;  // not representable as a float
  m.set_optimizer_steps(big);
  save_checkpoint(m, path, 7);
  Sequential r = tiny_model();
  compile_cpu(r);
  EXPECT_EQ(load_checkpoint(r, path), 7);
  EXPECT_EQ(r.optimizer_steps(), big);
}

// ============================== PNG ==============================================================

struct PngSpec {
  uint32_t width = 28, height = 28;
  int bit_depth = 8;
  int color_type = PNG_COLOR_TYPE_GRAY;
  bool interlaced = false;
};

void png_write_to_vector(png_structp png, png_bytep data, png_size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}
void png_flush_nothing(png_structp) {}

// Pixel (r, c) of channel k: (r * 9 + c * 3 + k * 50) % 256.
std::vector<uint8_t> encode_png(const PngSpec& s) {
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return {};
  }
  png_set_write_fn(png, &out, png_write_to_vector, png_flush_nothing);
  png_set_IHDR(png, info, s.width, s.height, s.bit_depth, s.color_type,
               s.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_color palette[256];
  for (int i = 0; i < 256; ++i)
    palette[i] = {static_cast<png_byte>(i), static_cast<png_byte>(i), static_cast<png_byte>(i)};
  if (s.color_type == PNG_COLOR_TYPE_PALETTE) png_set_PLTE(png, info, palette, 256);
  png_write_info(png, info);
  int channels = s.color_type == PNG_COLOR_TYPE_RGB          ? 3
                 : s.color_type == PNG_COLOR_TYPE_RGB_ALPHA  ? 4
                 : s.color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                                                             : 1;
  const std::size_t row_bytes = png_get_rowbytes(png, info);
  std::vector<std::vector<uint8_t>> rows(s.height, std::vector<uint8_t>(row_bytes, 0));
  for (uint32_t r = 0; r < s.height; ++r)
    for (uint32_t c = 0; c < s.width && s.bit_depth == 8; ++c)
      for (int k = 0; k < channels; ++k)
        rows[r][c * static_cast<uint32_t>(channels) + static_cast<uint32_t>(k)] =
            static_cast<uint8_t>((r * 9 + c * 3 + static_cast<uint32_t>(k) * 50) % 256);
  std::vector<png_bytep> ptrs;
  for (auto& row : rows) ptrs.push_back(row.data());
  png_write_image(png, ptrs.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

TEST(ModelIoPng, ReadsAn8BitGrey28x28DigitAsFloatsOver255) {
  const std::string path = temp_folder("png-ok") + "/digit.png";
  for (bool interlaced : {false, true}) {
    write_bytes(path, encode_png({.interlaced = interlaced}));
    const Tensor t = data::read_png_gray28(path);
    EXPECT_EQ(t.shape(), (Shape{1, 28, 28}));
    for (int r = 0; r < 28; ++r)
      for (int c = 0; c < 28; ++c)
        ASSERT_EQ(t[r * 28 + c], static_cast<float>((r * 9 + c * 3) % 256) / 255.0f)
            << r << "," << c;
  }
  // Colour images of the right size are converted to grey.
  for (int ct : {PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA, PNG_COLOR_TYPE_GRAY_ALPHA}) {
    const Tensor t = data::decode_png_gray28(encode_png({.color_type = ct}), "colour.png");
    EXPECT_EQ(t.shape(), (Shape{1, 28, 28}));
    for (int64_t i = 0; i < t.size(); ++i) ASSERT_TRUE(t[i] >= 0.0f && t[i] <= 1.0f);
  }
  // Grey+alpha: the grey channel, alpha ignored.
  const Tensor ga =
      data::decode_png_gray28(encode_png({.color_type = PNG_COLOR_TYPE_GRAY_ALPHA}), "ga.png");
  EXPECT_EQ(ga[5], static_cast<float>(15) / 255.0f);
}

TEST(ModelIoPng, OtherFormatsAndCorruptFilesAreRefusedWithoutACrash) {
  EXPECT_ERROR_HAS(data::decode_png_gray28(encode_png({.width = 32, .height = 28}), "w.png"),
                   "w.png: is a 32x28 8-bit grey PNG: crossover reads 8-bit grey 28x28 images");
  EXPECT_ERROR_HAS(data::decode_png_gray28(encode_png({.bit_depth = 16}), "d.png"),
                   "is a 28x28 16-bit grey PNG");
  EXPECT_ERROR_HAS(data::decode_png_gray28(encode_png({.bit_depth = 1}), "d.png"),
                   "is a 28x28 1-bit grey PNG");
  EXPECT_ERROR_HAS(
      data::decode_png_gray28(encode_png({.color_type = PNG_COLOR_TYPE_PALETTE}), "p.png"),
      "8-bit palette PNG");
  const std::vector<uint8_t> good = encode_png({});
  EXPECT_ERROR_HAS(
      data::decode_png_gray28(std::vector<uint8_t>{'G', 'I', 'F', '8', '9', 'a', 0, 0, 0}, "x.png"),
      "not a PNG file");
  EXPECT_ERROR_HAS(data::read_png_gray28("/nonexistent/digit.png"),
                   "/nonexistent/digit.png: cannot open");
  EXPECT_ERROR_HAS(data::read_png_gray28(temp_folder("png-dir")), "is a folder");
  // Truncated at every length.
  for (std::size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(n));
    EXPECT_FALSE(error_of([&] { data::decode_png_gray28(cut, "cut.png"); }).empty()) << n;
  }
  EXPECT_ERROR_HAS(
      data::decode_png_gray28(std::vector<uint8_t>(good.begin(), good.end() - 20), "t.png"),
      "t.png: corrupt PNG");
  // Random byte changes with the chunk CRCs fixed up, so the damage reaches the decoder.
  uint64_t accepted = 0, refused = 0;
  for (uint32_t trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bad = good;
    const int flips = 1 + static_cast<int>(philox_uniform(7, RngStream::init, 1, trial, 0) * 4);
    for (int f = 0; f < flips; ++f) {
      const auto at = static_cast<std::size_t>(
          8 + philox_uniform(7, RngStream::init, 2, trial, static_cast<uint64_t>(f)) *
                  static_cast<float>(bad.size() - 8));
      bad[std::min(at, bad.size() - 1)] = static_cast<uint8_t>(
          philox_uniform(7, RngStream::init, 3, trial, static_cast<uint64_t>(f)) * 256);
    }
    // Recompute each chunk's CRC where the chunk structure is still readable.
    std::size_t p = 8;
    while (p + 12 <= bad.size()) {
      const uint32_t len = (uint32_t{bad[p]} << 24) | (uint32_t{bad[p + 1]} << 16) |
                           (uint32_t{bad[p + 2]} << 8) | bad[p + 3];
      if (len > bad.size() - p - 12) break;
      const uLong crc = crc32(0, bad.data() + p + 4, len + 4);
      for (int k = 0; k < 4; ++k)
        bad[p + 8 + len + static_cast<std::size_t>(k)] = static_cast<uint8_t>(crc >> (24 - 8 * k));
      p += 12 + len;
    }
    try {
      const Tensor t = data::decode_png_gray28(bad, "fuzz.png");
      EXPECT_EQ(t.size(), 784);
      ++accepted;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      ++refused;
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_EQ(accepted + refused, 3000u);
}

}  // namespace
}  // namespace crossover

namespace crossover {
namespace {

// ============================== the command ======================================================

// The issue's "done when": a model trained with `crossover train --save` evaluates to the same
// test accuracy with `crossover evaluate --load`; a checkpointed run resumes to the same model;
// predict classifies a PNG digit.
TEST(ModelIoCli, TrainSaveEvaluateLoadResumeAndPredict) {
  using testing_util::run_crossover;
  const std::string dir = temp_folder("cli-io");
  const std::string common = " --data mnist-10k --seed 5 --threads 2 --quiet";
  auto r = run_crossover("train --epochs 2" + common + " --save " + dir + "/m.safetensors --json " +
                         dir + "/train.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_crossover("evaluate --load " + dir + "/m.safetensors --data mnist-10k --quiet --json " +
                    dir + "/eval.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json train = json::parse(slurp(dir + "/train.json")),
             eval = json::parse(slurp(dir + "/eval.json"));
  EXPECT_EQ(train["test"]["accuracy"], eval["test"]["accuracy"]);
  EXPECT_EQ(train["test"]["loss"], eval["test"]["loss"]);
  EXPECT_EQ(eval["test"]["samples"], 2000);

  // One epoch, a checkpoint, then --resume to two epochs: the same model, byte for byte.
  r = run_crossover("train --epochs 1" + common + " --checkpoint " + dir + "/c.ckpt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_crossover("train --epochs 2 --data mnist-10k --threads 2 --quiet --resume " + dir +
                    "/c.ckpt --save " + dir + "/r.safetensors");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(slurp(dir + "/r.safetensors"), slurp(dir + "/m.safetensors"));

  // predict on a 28x28 grey PNG.
  write_bytes(dir + "/digit.png", encode_png({}));
  r = run_crossover("predict --load " + dir + "/m.safetensors --image " + dir + "/digit.png");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("digit.png: class "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n   9  "), std::string::npos) << r.out;

  // Refusals: one line, exit code 2, before any training.
  r = run_crossover("train --epochs 1 --data mnist-10k --quiet --save " + dir +
                    "/no/such/m.safetensors");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--save " + dir + "/no/such/m.safetensors: cannot be written"),
            std::string::npos)
      << r.err;
  r = run_crossover("evaluate --load " + dir + "/digit.png --data mnist-10k");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("digit.png"), std::string::npos) << r.err;
  r = run_crossover("predict --load " + dir + "/m.safetensors --image " + dir + "/m.safetensors");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a PNG file"), std::string::npos) << r.err;
  // A Keras 3 functional model JSON trains.
  r = run_crossover("train --epochs 1 --data mnist-10k --threads 2 --model " +
                    keras_file("functional_keras3.json"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Total params: 7850"), std::string::npos) << r.out;
  // A Keras 2 model JSON trains.
  r = run_crossover("train --epochs 1 --data mnist-10k --threads 2 --model " +
                    keras_file("small_keras2.json"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Total params: 101770"), std::string::npos) << r.out;
}

// predict --image feeds the 28x28 grey PNG to a convnet as one (1, 28, 28, 1) sample: the
// probabilities it prints are the ones the model gives the same pixels in process.
TEST(ModelIoCli, PredictFeedsAPngToAConvnetAsAOneChannelImage) {
  using testing_util::run_crossover;
  const std::string dir = temp_folder("cli-predict-conv");
  Sequential model(
      {Input({28, 28, 1}), Conv2D(4, 3, "relu"), MaxPooling2D(2), Flatten(), Dense(10, "softmax")});
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1, .seed = 8});
  save_weights(model, dir + "/conv.safetensors");
  write_bytes(dir + "/digit.png", encode_png({}));
  const auto r = run_crossover("predict --load " + dir + "/conv.safetensors --image " + dir +
                               "/digit.png --json " + dir + "/p.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json p = json::parse(slurp(dir + "/p.json"));
  const Tensor want =
      model.predict(data::read_png_gray28(dir + "/digit.png").reshaped({1, 28, 28, 1}));
  ASSERT_EQ(p["probabilities"].size(), 10u);
  int64_t best = 0;
  for (int64_t c = 0; c < 10; ++c) {
    EXPECT_EQ(p["probabilities"][static_cast<std::size_t>(c)].get<float>(), want[c]) << c;
    if (want[c] > want[best]) best = c;
  }
  EXPECT_EQ(p["class"], best);
  EXPECT_NE(r.out.find("digit.png: class " + std::to_string(best)), std::string::npos) << r.out;
}

}  // namespace
}  // namespace crossover

namespace crossover {
namespace {

// ---- functional models: Keras 3's JSON in and out ----

TEST(ModelIoKerasJson, ReadsKeras3FunctionalJsonAndWritesItBack) {
  const Sequential m = model_from_json(slurp(keras_file("functional_keras3.json")), "f.json");
  EXPECT_TRUE(m.functional());
  EXPECT_EQ(m.name(), "functional");
  ASSERT_EQ(m.layers().size(), 2u);
  EXPECT_EQ(m.layer_inputs()[1], std::vector<int>{0});
  EXPECT_EQ(m.count_params(), 7850);
  const json out = json::parse(model_to_json(m));
  EXPECT_EQ(out["class_name"], "Functional");
  EXPECT_EQ(out["registered_name"], "Functional");
  EXPECT_EQ(out["config"]["input_layers"], json::parse(R"(["input_layer", 0, 0])"));
  EXPECT_EQ(out["config"]["output_layers"], json::parse(R"(["dense", 0, 0])"));
  EXPECT_EQ(out["config"]["layers"][1]["inbound_nodes"][0]["args"][0]["config"]["keras_history"],
            json::parse(R"(["input_layer", 0, 0])"));
}

TEST(ModelIoKerasJson, AFunctionalGraphRoundTripsWithItsConnections) {
  GraphBuilder g;
  const int x = g.input({6});
  const int a = g.add(Dense(4, "relu"), x);
  const int b = g.add(Dense(4, "tanh"), a);
  const int s = g.add(Add(), {b, a});
  const int c = g.add(Concatenate(), {s, x});
  Sequential model(g.graph(g.add(Dense(3, "softmax"), c)), "joined");
  const std::string text = model_to_json(model);
  const Sequential again = model_from_json(text, "j.json");
  EXPECT_EQ(again.name(), "joined");
  EXPECT_EQ(again.layer_inputs(), model.layer_inputs());
  ASSERT_EQ(again.layers().size(), model.layers().size());
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    EXPECT_EQ(again.layers()[i].name, model.layers()[i].name);
    EXPECT_EQ(again.layers()[i].type, model.layers()[i].type);
  }
  EXPECT_EQ(model_to_json(again), text);
  // A merging layer's build_config lists every input's shape, as Keras writes it.
  const json doc = json::parse(text);
  EXPECT_EQ(doc["config"]["layers"][3]["build_config"]["input_shape"],
            json::parse("[[null, 4], [null, 4]]"));
  EXPECT_EQ(doc["config"]["layers"][3]["inbound_nodes"][0]["args"][0].size(), 2u);
}

TEST(ModelIoKerasJson, AModelOfSeveralInputsRoundTripsItsInputsInTheirOrder) {
  GraphBuilder g;
  const int a = g.input({3}, "a");
  const int h = g.add(Dense(4, "relu"), a);
  const int b = g.input({2}, "b");
  const int c = g.input({2, 2}, "c");
  const int j = g.add(Concatenate(), {h, b, g.add(Flatten(), c)});
  Sequential model(g.graph(g.add(Dense(1, "sigmoid"), j), {c, a, b}), "three");
  EXPECT_EQ(model.input_shape(), (Shape{9}));
  const std::string text = model_to_json(model);
  const json doc = json::parse(text);
  // Keras 3 writes several inputs as a list of [layer, node, index], in the model's order.
  EXPECT_EQ(doc["config"]["input_layers"],
            json::parse(R"([["c", 0, 0], ["a", 0, 0], ["b", 0, 0]])"));
  EXPECT_EQ(doc["config"]["layers"][2]["class_name"], "InputLayer");
  const Sequential again = model_from_json(text, "three.json");
  EXPECT_EQ(again.input_layers(), model.input_layers());
  EXPECT_EQ(again.layer_inputs(), model.layer_inputs());
  EXPECT_EQ(again.input_shape(), (Shape{9}));
  EXPECT_EQ(model_to_json(again), text);
  // A dict of inputs (Keras's inputs={"x": ...}): its keys' order.
  json dict = doc;
  dict["config"]["input_layers"] =
      json::parse(R"({"z": ["b", 0, 0], "y": ["a", 0, 0], "x": ["c", 0, 0]})");
  EXPECT_EQ(model_from_json(dict.dump(), "d.json").input_layers(), model.input_layers());
  json missing = doc;
  missing["config"]["input_layers"] = json::parse(R"([["c", 0, 0], ["a", 0, 0]])");
  EXPECT_ERROR_HAS(model_from_json(missing.dump(), "m.json"),
                   "must list each of its InputLayers ('a', 'b', 'c') once");
}

TEST(ModelIoKerasJson, RefusesFunctionalModelsItCannotRunNamingWhy) {
  json doc = json::parse(slurp(keras_file("functional_keras3.json")));
  json twice = doc;
  twice["config"]["layers"][1]["inbound_nodes"].push_back(
      twice["config"]["layers"][1]["inbound_nodes"][0]);
  EXPECT_ERROR_HAS(model_from_json(twice.dump(), "t.json"),
                   "t.json: the model's output, call 0 of layer 'dense', is not its last call: "
                   "crossover's models of one output end with it");
  json call = doc;
  call["config"]["output_layers"] = json::parse(R"(["dense_2", 1, 0])");
  EXPECT_ERROR_HAS(model_from_json(call.dump(), "c.json"),
                   "c.json: output_layers names call 1 of layer 'dense_2', which the model does "
                   "not have");
  json tensor = doc;
  tensor["config"]["layers"][1]["inbound_nodes"][0]["args"][0]["config"]["keras_history"][2] = 1;
  EXPECT_ERROR_HAS(model_from_json(tensor.dump(), "x.json"),
                   "a layer with several outputs is not supported");
  json outputs = doc;
  outputs["config"]["output_layers"] = json::parse(R"([["dense", 0, 0], ["dense", 0, 0]])");
  EXPECT_ERROR_HAS(model_from_json(outputs.dump(), "o.json"),
                   "o.json: dense: is given twice among the model's outputs");
  outputs["config"]["output_layers"] = json::parse(R"([["dense", 0, 0], ["nowhere", 0, 0]])");
  EXPECT_ERROR_HAS(model_from_json(outputs.dump(), "o.json"),
                   "o.json: output_layers names call 0 of layer 'nowhere', which the model does "
                   "not have");
  json not_input = doc;
  not_input["config"]["input_layers"] = json::parse(R"([["dense", 0, 0]])");
  EXPECT_ERROR_HAS(model_from_json(not_input.dump(), "i.json"),
                   "i.json: input_layers names 'dense', which is not one of the model's "
                   "InputLayers");
  json unknown = doc;
  unknown["config"]["layers"][1]["inbound_nodes"][0]["args"][0]["config"]["keras_history"][0] =
      "nowhere";
  EXPECT_ERROR_HAS(model_from_json(unknown.dump(), "u.json"),
                   "u.json: layer 'dense' (call 0) reads call 0 of layer 'nowhere', which is not "
                   "one of the model's layers");
  // A layer that reads its own output: a cycle.
  json cycle = doc;
  cycle["config"]["layers"][1]["inbound_nodes"][0]["args"][0]["config"]["keras_history"][0] =
      "dense";
  EXPECT_ERROR_HAS(model_from_json(cycle.dump(), "y.json"),
                   "y.json: layer 'dense' (call 0) waits for a call the model never makes (its "
                   "inputs form a cycle)");
}

// A layer called twice (Keras's shared layer): one entry in the file with two inbound nodes, the
// second call's output read as ["dense", 1, 0], one set of weights; the file reads back into the
// same graph and writes the same text.
TEST(ModelIoKerasJson, ASharedLayerRoundTripsAsOneLayerWithTwoCalls) {
  GraphBuilder g;
  const int x = g.input({6});
  const int a = g.add(Dense(6, "tanh"), x);
  const int b = g.add(Dense(6, "relu"), a);
  const int again = g.again(a, b);  // dense on dense_1's output: its second call
  Sequential model(g.graph(g.add(Dense(3, "softmax"), g.add(Add(), {a, again}))), "siamese");
  const std::string text = model_to_json(model);
  const json doc = json::parse(text);
  const json& layers = doc["config"]["layers"];
  ASSERT_EQ(layers.size(), 5u) << "the shared layer once";
  EXPECT_EQ(layers[1]["name"], "dense");
  ASSERT_EQ(layers[1]["inbound_nodes"].size(), 2u);
  EXPECT_EQ(layers[1]["inbound_nodes"][1]["args"][0]["config"]["keras_history"],
            json::parse(R"(["dense_1", 0, 0])"));
  EXPECT_EQ(layers[3]["inbound_nodes"][0]["args"][0][1]["config"]["keras_history"],
            json::parse(R"(["dense", 1, 0])"));
  const Sequential read = model_from_json(text, "s.json");
  EXPECT_EQ(read.layer_shared_with(), model.layer_shared_with());
  EXPECT_EQ(read.layer_inputs(), model.layer_inputs());
  EXPECT_EQ(read.count_params(), 2 * (36 + 6) + 18 + 3);
  EXPECT_EQ(model_to_json(read), text);
  // Keras lists the shared layer at its first call; the second reads a layer listed after it.
  EXPECT_LT(text.find("\"dense\""), text.find("\"dense_1\""));
  const std::string table = model.summary();
  EXPECT_NE(table.find("input_layer[0][0], dense_1[0][0]"), std::string::npos) << table;
  EXPECT_NE(table.find("dense[0][0], dense[1][0]"), std::string::npos) << table;
}

// The command line trains a model file with a shared block; a file whose shared layer is called
// again on an input its weights do not fit is one line naming the weight, exit code 2.
TEST(ModelIoCli, AModelFileWithASharedLayerTrainsAndAMisfitCallIsOneLine) {
  using testing_util::run_crossover;
  const std::string dir = temp_folder("cli-shared");
  GraphBuilder g;
  const int flat = g.add(Flatten(), g.input({28, 28}));
  const int h = g.add(Dense(16, "relu"), flat);
  const int block = g.add(Dense(16, "relu"), h);
  const int sum = g.add(Add(), {h, g.again(block, block)});
  Sequential model(g.graph(g.add(Dense(10, "softmax"), sum)));
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1});
  const std::string text = model_to_json(model);
  std::ofstream(dir + "/shared.json") << text;
  auto r = run_crossover("train --epochs 1 --data mnist-10k --threads 2 --quiet --model " + dir +
                         "/shared.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The same graph declared on flat (784,) samples takes the (28, 28) images through a Flatten
  // after its input, its skip connection and shared block kept.
  GraphBuilder g784;
  const int h784 = g784.add(Dense(16, "relu"), g784.input({784}));
  const int block784 = g784.add(Dense(16, "relu"), h784);
  const int sum784 = g784.add(Add(), {h784, g784.again(block784, block784)});
  Sequential flat_model(g784.graph(g784.add(Dense(10, "softmax"), sum784)));
  std::ofstream(dir + "/flat.json") << model_to_json(flat_model);
  r = run_crossover("train --epochs 1 --data mnist-10k --threads 2 --model " + dir + "/flat.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("flatten (Flatten)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dense[0][0], dense_1[1][0]"), std::string::npos) << r.out;
  // The block's first call reads the Flatten's 784 values: its kernel is (784, 16), which its
  // second call (on the block's own 16) cannot take.
  json bad = json::parse(text);
  json& first = bad["config"]["layers"][3]["inbound_nodes"][0]["args"][0]["config"];
  ASSERT_EQ(first["keras_history"], json::parse(R"(["dense", 0, 0])"));
  first["keras_history"] = json::parse(R"(["flatten", 0, 0])");
  std::ofstream(dir + "/bad.json") << bad.dump();
  r = run_crossover("train --epochs 1 --data mnist-10k --quiet --model " + dir + "/bad.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("dense_1: is called again on an input of shape (16,), but its weights "
                       "were made for its first call: dense_1/kernel is (784, 16), this input "
                       "needs (16, 16)"),
            std::string::npos)
      << r.err;
}

}  // namespace
// A model file whose output is an image (an autoencoder, compiled with mean_squared_error): train
// takes the images as the targets (no accuracy: null in the JSON), evaluate the same, and predict
// prints the output's shape and writes its values.
TEST(ModelIoCli, AnAutoencoderTrainsEvaluatesAndPredictsOnTheImagesThemselves) {
  using testing_util::run_crossover;
  const std::string dir = temp_folder("cli-autoencoder");
  Sequential model({Input({28, 28, 1}), Conv2D(2, 3, "relu", 1, "same"), MaxPooling2D(2),
                    UpSampling2D(2), Conv2D(1, 3, "sigmoid", 1, "same")});
  model.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  std::ofstream(dir + "/ae.json") << model_to_json(model);
  auto r = run_crossover("train --epochs 1 --data mnist-10k --threads 1 --quiet --model " + dir +
                         "/ae.json --save " + dir + "/ae.safetensors --json " + dir + "/t.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json t = json::parse(slurp(dir + "/t.json"));
  EXPECT_EQ(t["loss"], "mean_squared_error");
  EXPECT_TRUE(t["history"][0]["accuracy"].is_null());
  const double loss = t["test"]["loss"].get<double>();
  EXPECT_GT(loss, 0.0);
  EXPECT_LT(loss, 0.1) << "a reconstruction of [0, 1] pixels";
  r = run_crossover("evaluate --load " + dir + "/ae.safetensors --data mnist-10k --quiet --json " +
                    dir + "/e.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(slurp(dir + "/e.json"))["test"]["loss"].get<double>(), loss);
  write_bytes(dir + "/digit.png", encode_png({}));
  r = run_crossover("predict --load " + dir + "/ae.safetensors --image " + dir +
                    "/digit.png --json " + dir + "/p.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("digit.png: an output of shape (28, 28, 1), values in ["), std::string::npos)
      << r.out;
  const json p = json::parse(slurp(dir + "/p.json"));
  EXPECT_EQ(p["output_shape"], json::array({28, 28, 1}));
  EXPECT_EQ(p["output"].size(), 784u);
}

}  // namespace crossover
