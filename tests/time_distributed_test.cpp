// TimeDistributed, the first layer built from another (issue 38, item 3): a model Keras 3.15 wrote
// (tests/data/keras/make_time_distributed.py) read, its weights loaded from Keras's own
// .weights.h5 (the inner layer's under layers/time_distributed/layer/vars) and its predictions
// against Keras's; names, parameters and files as Keras makes them; what it refuses. (Its gradient:
// gradient_test.cpp; against Keras in Python: tests/python/test_time_distributed_peers.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/keras_h5.h"
#include "formats/model_config.h"
#include "formats/weights_io.h"
#include "nn/layers.h"
#include "nn/layers/kind.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::keras_fixture_tensor;
using testing_util::random_tensor;

const std::string kKerasData = testing_util::source_dir() + "/tests/data/keras/";

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void compile_cpu(Sequential& m) {
  m.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 3});
}

// tests/data/keras/<name>_keras3.json with Keras's <name>.weights.h5 predicts, for the x of
// <name>_reference.safetensors, its y (what Keras predicted) within `tolerance`.
void predicts_as_keras_did(const std::string& name, double tolerance) {
  SCOPED_TRACE(name);
  Sequential m = model_from_json(text_of(kKerasData + name + "_keras3.json"), name + ".json");
  compile_cpu(m);
  load_weights(m, kKerasData + name + ".weights.h5");
  const std::string reference = name + "_reference.safetensors";
  const Tensor& x = keras_fixture_tensor(reference, "x");
  const Tensor& want = keras_fixture_tensor(reference, "y");
  const Tensor y = m.predict(x);
  ASSERT_EQ(y.shape(), want.shape());
  for (int64_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], tolerance) << i;
}

TEST(TimeDistributed, AKerasModelLoadsWithItsWeightsAndPredictsAsKerasDid) {
  predicts_as_keras_did("time_distributed", 1e-6);
}

TEST(TimeDistributed, NamesParametersAndShapesAreKerass) {
  Sequential m({Input({5, 4}), TimeDistributed(Dense(3, "relu")), Flatten(), Dense(2)});
  compile_cpu(m);
  // The inner Dense is named before its wrapper, as Keras names them (it is made first).
  EXPECT_EQ(m.layers()[1].name, "time_distributed");
  EXPECT_EQ(m.layers()[1].inner.at(0).name, "dense");
  EXPECT_EQ(m.layers()[3].name, "dense_1");
  EXPECT_EQ(m.layer_output_shapes()[1], (Shape{5, 3}));
  std::vector<std::string> names;
  for (const NamedTensor& t : m.get_weights()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"time_distributed/dense/kernel",
                                             "time_distributed/dense/bias", "dense_1/kernel",
                                             "dense_1/bias"}));
  EXPECT_EQ(m.count_params(), 4 * 3 + 3 + 15 * 2 + 2);
}

TEST(TimeDistributed, EachTimeStepIsTheInnerLayerOnItsSliceWithTheSameWeights) {
  Sequential m({Input({3, 4}), TimeDistributed(Dense(2, "tanh")), Flatten()});
  compile_cpu(m);
  const Tensor x = random_tensor({5, 3, 4}, 11);
  const Tensor y = m.predict(x);
  const std::vector<NamedTensor> w = m.get_weights();
  const Tensor &k = w[0].value, &b = w[1].value;
  for (int64_t n = 0; n < 5; ++n)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t j = 0; j < 2; ++j) {
        double z = b[j];
        for (int64_t i = 0; i < 4; ++i) z += double{x[(n * 3 + t) * 4 + i]} * k[i * 2 + j];
        EXPECT_NEAR(y[(n * 3 + t) * 2 + j], std::tanh(z), 1e-6);
      }
}

TEST(TimeDistributed, ItsWeightsAreKeptInTheInnerLayersGroupAndReadBack) {
  Sequential m({Input({5, 4}), TimeDistributed(Dense(3)), TimeDistributed(Dropout(0.5)), Flatten(),
                Dense(2)});
  compile_cpu(m);
  const KerasH5Weights w = keras_weights_of(m);
  std::vector<std::string> keys;
  for (const KerasH5Layer& l : w.layers)
    keys.push_back(l.key + ":" + std::to_string(l.vars.size()));
  EXPECT_EQ(keys, (std::vector<std::string>{"time_distributed:0", "time_distributed/layer:2",
                                            "time_distributed_1:0", "time_distributed_1/layer:0",
                                            "flatten:0", "dense:2"}));
  const std::string path = testing_util::temp_folder("td-h5") + "/m.weights.h5";
  save_weights(m, path);
  const KerasH5Weights back = read_keras_weights_h5(path);
  ASSERT_EQ(back.layers.size(), w.layers.size());
  Sequential again({Input({5, 4}), TimeDistributed(Dense(3)), TimeDistributed(Dropout(0.5)),
                    Flatten(), Dense(2)});
  compile_cpu(again);
  load_weights(again, path);
  const Tensor x = random_tensor({4, 5, 4}, 3);
  const Tensor a = m.predict(x), b = again.predict(x);
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
}

TEST(TimeDistributed, KerasJsonRoundTripsWithTheInnerLayersConfig) {
  const std::string keras = text_of(kKerasData + "time_distributed_keras3.json");
  const Sequential m = model_from_json(keras, "td.json");
  const auto layer = nlohmann::json::parse(model_to_json(m))["config"]["layers"][1];
  EXPECT_EQ(layer["class_name"], "TimeDistributed");
  EXPECT_EQ(layer["config"]["layer"]["class_name"], "Dense");
  EXPECT_EQ(layer["config"]["layer"]["config"]["units"], 3);
  EXPECT_EQ(layer["config"]["layer"]["config"]["activation"], "relu");
  EXPECT_EQ(model_to_json(model_from_json(model_to_json(m), "again")), model_to_json(m));
}

TEST(TimeDistributed, WhatItCannotApplyIsRefusedNamingTheLayer) {
  EXPECT_EQ(error_of([] { TimeDistributed(BatchNormalization()); }),
            "TimeDistributed: BatchNormalization inside TimeDistributed is not supported (yet): "
            "Keras computes its statistics per time step");
  EXPECT_EQ(error_of([] {
              Sequential flat({Input({6}), TimeDistributed(Dense(3))});
            }),
            "time_distributed: TimeDistributed needs samples of at least two axes (time, ...), "
            "but receives samples of shape (6,)");
  const std::string bad = R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"batch_shape": [null, 5, 4]}},
      {"class_name": "TimeDistributed", "config": {"name": "td", "layer":
        {"class_name": "Conv3D", "config": {"name": "c"}}}}]}})";
  const std::string e = error_of([&] { model_from_json(bad, "m.json"); });
  EXPECT_NE(e.find("m.json: layer 'td' field layer: layer 2 'c' (Conv3D) is not supported"),
            std::string::npos)
      << e;
  const std::string none = R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "TimeDistributed", "config": {"name": "td"}}]}})";
  EXPECT_EQ(error_of([&] { model_from_json(none, "m.json"); }),
            "m.json: layer 'td' field layer: TimeDistributed needs the layer it applies");
}

// On one time step, TimeDistributed(Dense) is that Dense: trained with Adam from the same weights
// (the Dense's update fused into its gradient where the backend fuses it, the wrapper's after the
// pass), both end with the same weights.
TEST(TimeDistributed, OnOneTimeStepItTrainsAsItsLayerDoes) {
  Sequential td({Input({1, 4}), TimeDistributed(Dense(3, "relu")), Flatten(), Dense(2, "softmax")});
  Sequential plain({Input({4}), Dense(3, "relu"), Dense(2, "softmax")});
  compile_cpu(td);
  compile_cpu(plain);
  std::vector<NamedTensor> w = td.get_weights();
  std::vector<NamedTensor> same = plain.get_weights();
  for (std::size_t i = 0; i < w.size(); ++i) same[i].value = w[i].value;
  plain.set_weights(same);
  const Tensor x = random_tensor({24, 1, 4}, 9);
  Tensor flat({24, 4});
  for (int64_t i = 0; i < x.size(); ++i) flat[i] = x[i];
  Tensor y({24});
  for (int64_t i = 0; i < 24; ++i) y[i] = x[i * 4] > 0 ? 1.0f : 0.0f;
  td.fit(x, y, {.epochs = 2, .batch_size = 8, .shuffle = false, .verbose = 0});
  plain.fit(flat, y, {.epochs = 2, .batch_size = 8, .shuffle = false, .verbose = 0});
  const std::vector<NamedTensor> a = td.get_weights(), b = plain.get_weights();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    for (int64_t k = 0; k < a[i].value.size(); ++k)
      EXPECT_NEAR(a[i].value[k], b[i].value[k], 1e-6) << a[i].name << "[" << k << "]";
}

TEST(TimeDistributed, TrainsAndItsDropoutIsTheIdentityOutsideTraining) {
  Sequential m({Input({4, 3}), TimeDistributed(Dense(8, "relu")), TimeDistributed(Dropout(0.5)),
                Flatten(), Dense(2, "softmax")});
  compile_cpu(m);
  const Tensor x = random_tensor({32, 4, 3}, 5);
  Tensor y({32});
  for (int64_t i = 0; i < 32; ++i) y[i] = x[i * 12] > 0 ? 1.0f : 0.0f;
  const double before = m.evaluate(x, y, {.verbose = 0}).loss;
  m.fit(x, y, {.epochs = 20, .batch_size = 8, .verbose = 0});
  EXPECT_LT(m.evaluate(x, y, {.verbose = 0}).loss, before);
  const Tensor a = m.predict(x), b = m.predict(x);
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
}

// Keras's softmax normalizes the last axis: each time step of an Activation's (steps, features)
// samples, each pixel of a Conv2D's channels; with MSE on such an output the layer applies it
// (the loss ops' softmax is over a whole sample).
TEST(Softmax, NormalizesTheLastAxisOfSamplesOfSeveralAxes) {
  Sequential seq({Input({3, 4}), Activation("softmax")});
  Sequential image({Input({4, 4, 1}), Conv2D(3, 1, "softmax")});
  for (Sequential* m : {&seq, &image}) {
    m->compile(Adam(), "mse", {}, {.threads = 1, .seed = 3});
    const Shape in = m->input_shape();
    Shape batch{2};
    batch.insert(batch.end(), in.begin(), in.end());
    const Tensor y = m->predict(random_tensor(batch, 4));
    const int64_t c = m->layer_output_shapes().back().back();
    for (int64_t r = 0; r < y.size() / c; ++r) {
      double sum = 0;
      for (int64_t j = 0; j < c; ++j) sum += y[r * c + j];
      EXPECT_NEAR(sum, 1.0, 1e-5) << r;
    }
  }
  const Tensor x = random_tensor({8, 3, 4}, 6);
  const Tensor before = seq.predict(x);
  seq.fit(x, random_tensor({8, 3, 4}, 7, 0.0f, 1.0f), {.epochs = 1, .verbose = 0});
  EXPECT_EQ(seq.predict(x).shape(), before.shape());
}

// A functional model as Keras 3.15 writes it: the Dropout node's recorded {"training": false} and
// the BatchNormalization node's {"mask": null} read as the plain calls they are (fit's and
// predict's own flag replaces a recorded one); one that changes the computation is refused.
TEST(KerasFunctional, RecordedCallArgumentsReadAsKerasRunsThem) {
  predicts_as_keras_did("functional_dropout", 1e-5);

  const std::string keras = text_of(kKerasData + "functional_dropout_keras3.json");
  const auto with = [&](const std::string& recorded) {
    std::string text = keras;
    const std::string from = R"("kwargs": {"training": false})";
    text.replace(text.find(from), from.size(), R"("kwargs": )" + recorded);
    return text;
  };
  EXPECT_NE(error_of([&] { model_from_json(with(R"({"training": true})"), "f.json"); })
                .find("a layer called with training=true (a layer kept in training mode in "
                      "inference, as Monte Carlo dropout does) is not supported (yet)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              model_from_json(with(R"({"noise_shape": [1, 8]})"), "f.json");
            }).find("the keyword argument noise_shape=[1,8] is not supported (yet)"),
            std::string::npos);
}

}  // namespace
}  // namespace crossover
