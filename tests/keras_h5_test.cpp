// Keras 3's .weights.h5 files: the layout Keras writes (tests/data/keras/, made by real Keras with
// make.py there), read and written, picked by suffix by save_weights / load_weights /
// ModelCheckpoint, and hostile files refused.
#include "formats/keras_h5.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include "core/error.h"
#include "formats/model_checkpoint.h"
#include "formats/weights_io.h"
#include "nn/callbacks.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::temp_folder;

const std::string kKerasData = crossover::testing_util::source_dir() + "/tests/data/keras/";

std::vector<uint8_t> bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The model of tests/data/keras/tiny.weights.h5 (make.py's tiny_keras).
Sequential tiny_keras_model() {
  return Sequential({Input({2, 3}), Flatten(), Dense(5, "relu"), Dropout(0.25),
                     Dense(4, "linear", false), Dense(3), Activation("softmax")},
                    "tiny");
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(float)) == 0;
}

void compile_cpu(Sequential& m) {
  m.compile(SGD(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 3});
}

TEST(KerasH5, ReadsTheGroupsKeras3WroteForASequentialModel) {
  const KerasH5Weights w = read_keras_weights_h5(kKerasData + "tiny.weights.h5");
  EXPECT_EQ(w.model_name, "tiny");
  std::vector<std::string> keys, names;
  std::vector<std::size_t> counts;
  for (const KerasH5Layer& l : w.layers) {
    keys.push_back(l.key);
    names.push_back(l.name);
    counts.push_back(l.vars.size());
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"activation", "dense", "dense_1", "dense_2", "dropout",
                                            "flatten"}));
  EXPECT_EQ(names, keys);  // Keras's default layer names are its group names here
  EXPECT_EQ(counts, (std::vector<std::size_t>{0, 2, 1, 2, 0, 0}));
  EXPECT_EQ(w.layers[1].vars[0].shape(), (Shape{6, 5}));
  EXPECT_EQ(w.layers[2].vars[0].shape(), (Shape{5, 4}));
}

TEST(KerasH5, WritesWhatItReadsBackBitForBit) {
  const KerasH5Weights w = read_keras_weights_h5(kKerasData + "tiny.weights.h5");
  const KerasH5Weights again = parse_keras_weights_h5(keras_weights_h5_bytes(w, "memory"), "mem");
  EXPECT_EQ(again.model_name, w.model_name);
  ASSERT_EQ(again.layers.size(), w.layers.size());
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    EXPECT_EQ(again.layers[i].key, w.layers[i].key);
    EXPECT_EQ(again.layers[i].name, w.layers[i].name);
    ASSERT_EQ(again.layers[i].vars.size(), w.layers[i].vars.size());
    for (std::size_t v = 0; v < w.layers[i].vars.size(); ++v) {
      EXPECT_TRUE(same_bits(again.layers[i].vars[v], w.layers[i].vars[v]));
    }
  }
}

TEST(KerasH5, NamesLayerGroupsByClassAsKerasDoesNotByLayerName) {
  Sequential m({Flatten({2, 2}), Dense(3, "relu"), Dropout(0.5), Dense(2)}, "named");
  compile_cpu(m);
  const KerasH5Weights w = keras_weights_of(m);
  std::vector<std::string> keys;
  for (const KerasH5Layer& l : w.layers) keys.push_back(l.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"flatten", "dense", "dropout", "dense_1"}));
  EXPECT_EQ(w.layers[1].vars.size(), 2u);
  EXPECT_EQ(w.model_name, "named");
}

TEST(KerasH5, SaveWeightsPicksTheFormatByTheSuffix) {
  Sequential m = tiny_keras_model();
  compile_cpu(m);
  const std::string dir = temp_folder("keras-h5-suffix");
  save_weights(m, dir + "/m.weights.h5");
  save_weights(m, dir + "/m.safetensors");
  const std::vector<uint8_t> h5 = bytes_of(dir + "/m.weights.h5");
  ASSERT_GE(h5.size(), 8u);
  EXPECT_EQ(std::memcmp(h5.data(), "\x89HDF\r\n\x1a\n", 8), 0);
  EXPECT_NE(bytes_of(dir + "/m.safetensors")[8], 0x89);
  Sequential back = tiny_keras_model();
  compile_cpu(back);
  load_weights(back, dir + "/m.weights.h5");
  EXPECT_EQ(back.get_weights().size(), m.get_weights().size());
  for (std::size_t i = 0; i < back.get_weights().size(); ++i)
    EXPECT_TRUE(same_bits(back.get_weights()[i].value, m.get_weights()[i].value));
}

TEST(KerasH5, KerasArchivesAndLegacyH5AreRefusedSayingWhatIsSupported) {
  EXPECT_EQ(weights_format_of("a/b.WEIGHTS.H5"), WeightsFormat::keras_h5);
  EXPECT_EQ(weights_format_of("run.ckpt"), WeightsFormat::safetensors);
  for (const char* path : {"model.keras", "model.h5", "model.hdf5"}) {
    try {
      weights_format_of(path);
      ADD_FAILURE() << path << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(".safetensors or Keras 3's .weights.h5"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(KerasH5, ModelCheckpointWritesKerasWeightsForAWeightsH5Path) {
  Sequential m({Flatten({2}), Dense(2, "softmax")});
  compile_cpu(m);
  const std::string path = temp_folder("keras-h5-checkpoint") + "/best.weights.h5";
  FitOptions o;
  o.epochs = 1;
  o.verbose = 0;
  o.callbacks = {ModelCheckpoint(path, {.monitor = "loss"})};
  const std::vector<float> x{0, 1, 1, 0}, y{0, 1};
  m.fit(x, {2, 2}, y, {2}, o);
  const KerasH5Weights w = read_keras_weights_h5(path);
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.layers[0].key, "dense");
  EXPECT_TRUE(same_bits(w.layers[0].vars[0], m.get_weights()[0].value));
}

TEST(KerasH5, TruncatedAndGarbledFilesAreErrorsNamingTheFile) {
  const std::vector<uint8_t> file = bytes_of(kKerasData + "tiny.weights.h5");
  for (std::size_t n : {std::size_t{0}, std::size_t{8}, std::size_t{100}, file.size() / 2}) {
    const std::vector<uint8_t> part(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(parse_keras_weights_h5(part, "cut.weights.h5"), Error) << n;
  }
  std::vector<uint8_t> garbled = file;
  for (std::size_t at = 64; at < garbled.size(); at += 97) garbled[at] ^= 0x5a;
  try {
    parse_keras_weights_h5(garbled, "garbled.weights.h5");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("garbled.weights.h5", 0), 0u) << e.what();
  }
}

// ---- the legacy whole-model .h5 (model.save("m.h5")) ----

// The Error `stmt` throws contains `text`.
void expect_error_has(const std::function<void()>& stmt, const std::string& text) {
  const std::string message = testing_util::error_of(stmt);
  EXPECT_NE(message.find(text), std::string::npos) << "expected \"" << text << "\" in " << message;
}

LegacyH5Model small_legacy_model() {
  LegacyH5Model m;
  m.model_config = R"({"class_name": "Sequential", "config": {"name": "s", "layers": []}})";
  m.training_config = R"({"loss": "mse", "metrics": []})";
  m.keras_version = "3.15.1";
  m.backend = "tensorflow";
  Tensor kernel({3, 2}), bias({2});
  for (int64_t i = 0; i < kernel.size(); ++i) kernel[i] = 0.25f * static_cast<float>(i) - 1.0f;
  bias[1] = 3.5f;
  // Keras's order is the model's, not the groups' (which it makes sorted by name).
  m.layers.push_back({"z_dense", {"s/z_dense/kernel", "s/z_dense/bias"}, {kernel, bias}});
  m.layers.push_back({"a_dropout", {}, {}});
  return m;
}

TEST(LegacyH5, WritesAndReadsBackTheTextsTheLayersInOrderAndTheWeights) {
  const LegacyH5Model m = small_legacy_model();
  const LegacyH5Model back = parse_legacy_h5_model(legacy_h5_model_bytes(m, "m.h5"), "m.h5");
  EXPECT_EQ(back.model_config, m.model_config);
  EXPECT_EQ(back.training_config, m.training_config);
  EXPECT_EQ(back.keras_version, "3.15.1");
  EXPECT_EQ(back.backend, "tensorflow");
  ASSERT_EQ(back.layers.size(), 2u);
  EXPECT_EQ(back.layers[0].name, "z_dense");
  EXPECT_EQ(back.layers[0].weight_names, m.layers[0].weight_names);
  ASSERT_EQ(back.layers[0].weights.size(), 2u);
  EXPECT_TRUE(same_bits(back.layers[0].weights[0], m.layers[0].weights[0]));
  EXPECT_TRUE(same_bits(back.layers[0].weights[1], m.layers[0].weights[1]));
  EXPECT_EQ(back.layers[1].name, "a_dropout");
  EXPECT_TRUE(back.layers[1].weights.empty());
  // A model never compiled has no training_config.
  LegacyH5Model uncompiled = m;
  uncompiled.training_config.clear();
  EXPECT_EQ(
      parse_legacy_h5_model(legacy_h5_model_bytes(uncompiled, "u.h5"), "u.h5").training_config, "");
}

TEST(LegacyH5, NamesThatAreNotHdf5NamesAreRefusedBeforeWriting) {
  LegacyH5Model m = small_legacy_model();
  m.layers[0].name = "a/b";
  expect_error_has([&] { legacy_h5_model_bytes(m, "m.h5"); },
                   "layer 'a/b' cannot name an HDF5 group");
  m = small_legacy_model();
  m.layers[0].weight_names[1] = "s//bias";
  expect_error_has([&] { legacy_h5_model_bytes(m, "m.h5"); }, "cannot name an HDF5 dataset");
  m = small_legacy_model();
  m.layers[0].weight_names.pop_back();
  expect_error_has([&] { legacy_h5_model_bytes(m, "m.h5"); }, "1 weight names for 2 weights");
}

TEST(LegacyH5, AWeightsFileTruncatedOrGarbledFilesAreErrorsNamingTheFile) {
  expect_error_has([&] { parse_legacy_h5_model(bytes_of(kKerasData + "tiny.weights.h5"), "w.h5"); },
                   "a weights file (no model_config attribute)");
  const std::vector<uint8_t> file = legacy_h5_model_bytes(small_legacy_model(), "m.h5");
  for (std::size_t n : {std::size_t{0}, std::size_t{8}, std::size_t{100}, file.size() / 2}) {
    const std::vector<uint8_t> part(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(parse_legacy_h5_model(part, "cut.h5"), Error) << n;
  }
  std::vector<uint8_t> garbled = file;
  for (std::size_t at = 64; at < garbled.size(); at += 97) garbled[at] ^= 0x5a;
  try {
    parse_legacy_h5_model(garbled, "garbled.h5");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("garbled.h5", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace crossover
