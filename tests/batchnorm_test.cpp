// BatchNormalization as a Keras user meets it: weights and their names, the two modes of its
// forward pass against float64 and against what Keras itself computed
// (tests/data/keras/batchnorm_reference.safetensors, written by Keras 3.15.1 on TensorFlow 2.21
// with tests/data/keras/make_batchnorm.py, which names every tensor and how it was made), the
// moving statistics after a fit step, the files, the JSON, the op list and its prices. (Its
// gradients: gradient_test.cpp; its step's allocations: model_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "formats/checkpoint.h"
#include "formats/keras_h5.h"
#include "formats/model_config.h"
#include "formats/weights_io.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/backend_wrappers.h"
#include "perf/calibrate.h"
#include "perf/cost_model.h"
#include "perf/profile.h"
#include "perf/recording.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;

using testing_util::random_tensor;

const Tensor& tensor(const std::string& name) {
  return testing_util::keras_fixture_tensor("batchnorm_reference.safetensors", name);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (int64_t i = 0; i < std::min(a.size(), b.size()); ++i)
    d = std::max(d, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return d;
}

Sequential dense_bn_model() {
  return Sequential({Input({6}), Dense(4), BatchNormalization(), Dense(3, "softmax")});
}

// ---- weights ----

TEST(BatchNormalization, HasKerasWeightsInKerasOrderWithKerasInitialValues) {
  Sequential model = dense_bn_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1});
  const auto w = model.get_weights();
  ASSERT_EQ(w.size(), 8u);
  const std::vector<std::pair<std::string, float>> expected = {
      {"batch_normalization/gamma", 1.0f},
      {"batch_normalization/beta", 0.0f},
      {"batch_normalization/moving_mean", 0.0f},
      {"batch_normalization/moving_variance", 1.0f}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(w[2 + i].name, expected[i].first);
    EXPECT_EQ(w[2 + i].value.shape(), (Shape{4}));
    for (float v : w[2 + i].value.values()) EXPECT_EQ(v, expected[i].second) << w[2 + i].name;
  }
}

TEST(BatchNormalization, CountsItsMovingStatisticsAsNonTrainableParameters) {
  const Sequential model = dense_bn_model();
  // Keras: Total 59 (dense 28 + batch norm 16 + dense_1 15), trainable 51, non-trainable 8.
  EXPECT_EQ(model.count_params(), 59);
  EXPECT_EQ(model.trainable_params(), 51);
  const std::string s = model.summary();
  EXPECT_NE(s.find("batch_normalization (BatchNormalization)"), std::string::npos) << s;
  EXPECT_NE(s.find("Total params: 59 (236.00 B)"), std::string::npos) << s;
  EXPECT_NE(s.find("Trainable params: 51 (204.00 B)"), std::string::npos) << s;
  EXPECT_NE(s.find("Non-trainable params: 8 (32.00 B)"), std::string::npos) << s;
  // Without center and scale only the moving statistics remain.
  const Sequential bare({Input({3}), BatchNormalization(0.99, 1e-3, false, false)});
  EXPECT_EQ(bare.count_params(), 6);
  EXPECT_EQ(bare.trainable_params(), 0);
}

TEST(BatchNormalization, BadArgumentsAreRefusedNamingTheLayerAndArgument) {
  EXPECT_EQ(error_of([] { BatchNormalization(1.5); }),
            "BatchNormalization: momentum must be in [0, 1], got 1.500000");
  EXPECT_EQ(error_of([] { BatchNormalization(0.99, 0.0); }),
            "BatchNormalization: epsilon must be positive, got 0.000000");
}

// ---- the backend's primitives against float64 ----

struct Stats {
  std::vector<double> mean, variance;
};
// Per channel over the m * spatial rows of x (m * spatial, channels); the biased variance.
Stats batch_stats(const Tensor& x, int64_t channels) {
  const int64_t rows = x.size() / channels;
  Stats s{std::vector<double>(channels, 0.0), std::vector<double>(channels, 0.0)};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < channels; ++c) s.mean[c] += x[r * channels + c];
  for (double& v : s.mean) v /= static_cast<double>(rows);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < channels; ++c) {
      const double d = x[r * channels + c] - s.mean[c];
      s.variance[c] += d * d;
    }
  for (double& v : s.variance) v /= static_cast<double>(rows);
  return s;
}

TEST(CpuBackend, BatchNormForwardInBothModesMatchesTheFloat64Formula) {
  std::unique_ptr<Backend> be = make_cpu_backend(2);
  uint64_t seed = 90;
  struct Setup {
    int64_t m, spatial, channels;
    bool scale, center;
  };
  for (const Setup& c : {Setup{8, 1, 5, true, true}, Setup{3, 12, 4, true, false},
                         Setup{5, 7, 3, false, true}, Setup{2, 9, 6, false, false}}) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.spatial) + "x" +
                 std::to_string(c.channels) + (c.scale ? " scale" : "") +
                 (c.center ? " center" : ""));
    const BatchNormShape s{.spatial = c.spatial,
                           .channels = c.channels,
                           .epsilon = 1e-3f,
                           .scale = c.scale,
                           .center = c.center};
    be->batchnorm_prepare(s, c.m);
    const Tensor x = random_tensor({c.m * c.spatial, c.channels}, ++seed);
    const Tensor gamma = random_tensor({c.channels}, ++seed),
                 beta = random_tensor({c.channels}, ++seed);
    Tensor moving_mean = random_tensor({c.channels}, ++seed),
           moving_var = random_tensor({c.channels}, ++seed);
    for (float& v : moving_var.values()) v = std::abs(v) + 0.5f;
    std::vector<float> y(static_cast<std::size_t>(x.size()), std::nanf("")),
        mean(c.channels, std::nanf("")), var(c.channels, std::nanf(""));
    be->batchnorm_forward_training(s, x.data(), c.scale ? gamma.data() : nullptr,
                                   c.center ? beta.data() : nullptr, y.data(), mean.data(),
                                   var.data(), c.m);
    const Stats st = batch_stats(x, c.channels);
    auto expect_normalised = [&](const std::vector<float>& out, const std::vector<double>& mu,
                                 const std::vector<double>& v, const char* mode) {
      for (int64_t i = 0; i < x.size(); ++i) {
        const int64_t ch = i % c.channels;
        const double want =
            (x[i] - mu[ch]) / std::sqrt(v[ch] + 1e-3) * (c.scale ? gamma[ch] : 1.0) +
            (c.center ? beta[ch] : 0.0);
        ASSERT_NEAR(out[static_cast<std::size_t>(i)], want, 1e-5 + 1e-5 * std::abs(want))
            << mode << " element " << i;
      }
    };
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      EXPECT_NEAR(mean[ch], st.mean[ch], 1e-6) << ch;
      EXPECT_NEAR(var[ch], st.variance[ch], 1e-5 * st.variance[ch]) << ch;
    }
    expect_normalised(y, st.mean, st.variance, "training");
    std::vector<float> z(y.size(), std::nanf(""));
    be->batchnorm_forward_inference(s, x.data(), c.scale ? gamma.data() : nullptr,
                                    c.center ? beta.data() : nullptr, moving_mean.data(),
                                    moving_var.data(), z.data(), c.m);
    const std::vector<double> mm(moving_mean.values().begin(), moving_mean.values().end()),
        mv(moving_var.values().begin(), moving_var.values().end());
    expect_normalised(z, mm, mv, "inference");
  }
}

// ---- against Keras ----

struct KerasCase {
  const char* name;
  Layer layer;
};

std::vector<KerasCase> keras_cases() {
  return {{"dense", BatchNormalization()},
          {"image", BatchNormalization(0.9, 0.01)},
          {"no_center", BatchNormalization(0.99, 1e-3, false, true)}};
}

std::vector<NamedTensor> case_weights(const std::string& name, const Layer& l) {
  std::vector<NamedTensor> w;
  for (const char* v : {"gamma", "beta", "moving_mean", "moving_variance"}) {
    const BatchNormArgs& a = l.args<BatchNormArgs>();
    if ((std::string(v) == "gamma" && !a.scale) || (std::string(v) == "beta" && !a.center))
      continue;
    w.push_back({std::string("batch_normalization/") + v, tensor(name + "/" + v)});
  }
  return w;
}

TEST(KerasBatchNormReference, PredictUsesTheMovingStatisticsAsKerasDoes) {
  for (const KerasCase& c : keras_cases()) {
    SCOPED_TRACE(c.name);
    const Tensor& x = tensor(std::string(c.name) + "/x");
    Sequential model({Input(Shape(x.shape().begin() + 1, x.shape().end())), c.layer, Flatten()});
    model.compile(SGD(), "mean_squared_error", {}, {.threads = 1});
    model.set_weights(case_weights(c.name, c.layer));
    EXPECT_LT(max_abs_diff(model.predict(x), tensor(std::string(c.name) + "/y_inference")), 1e-5);
  }
}

TEST(KerasBatchNormReference, TrainingForwardAndMovingStatisticsAreKerasOwn) {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  for (const KerasCase& c : keras_cases()) {
    SCOPED_TRACE(c.name);
    const std::string n = c.name;
    const Tensor& x = tensor(n + "/x");
    const int64_t channels = x.shape().back(), m = x.dim(0);
    const BatchNormArgs& a = c.layer.args<BatchNormArgs>();
    const BatchNormShape s{.spatial = x.size() / m / channels,
                           .channels = channels,
                           .epsilon = static_cast<float>(a.epsilon),
                           .scale = a.scale,
                           .center = a.center};
    Tensor y(x.shape()), mean({channels}), var({channels});
    Tensor moving_mean = tensor(n + "/moving_mean"), moving_var = tensor(n + "/moving_variance");
    be->batchnorm_forward_training(s, x.data(), a.scale ? tensor(n + "/gamma").data() : nullptr,
                                   a.center ? tensor(n + "/beta").data() : nullptr, y.data(),
                                   mean.data(), var.data(), m);
    be->batchnorm_update_moving(s, mean.data(), var.data(), moving_mean.data(), moving_var.data(),
                                a.momentum);
    EXPECT_LT(max_abs_diff(y, tensor(n + "/y_training")), 1e-5);
    EXPECT_LT(max_abs_diff(moving_mean, tensor(n + "/moving_mean_after")), 1e-6);
    EXPECT_LT(max_abs_diff(moving_var, tensor(n + "/moving_variance_after")), 1e-6);
  }
}

const std::vector<std::string> kFitNames = {"dense/kernel",
                                            "dense/bias",
                                            "batch_normalization/gamma",
                                            "batch_normalization/beta",
                                            "batch_normalization/moving_mean",
                                            "batch_normalization/moving_variance",
                                            "dense_1/kernel",
                                            "dense_1/bias"};

TEST(KerasBatchNormReference, OneFitStepGivesKerasWeightsAndMovingStatistics) {
  Sequential model = dense_bn_model();
  model.compile(Adam({.learning_rate = 1e-2}), "sparse_categorical_crossentropy", {},
                {.threads = 1});
  std::vector<NamedTensor> before;
  for (const std::string& n : kFitNames) before.push_back({n, tensor("fit/" + n)});
  model.set_weights(before);
  model.fit(tensor("fit/x"), tensor("fit/labels"),
            {.epochs = 1, .batch_size = 8, .shuffle = false, .verbose = 0});
  for (const NamedTensor& w : model.get_weights()) {
    if (w.name == "dense/bias") {
      // The bias before a batch normalization has no gradient in exact arithmetic (the batch's
      // mean takes any shift out again): Keras's and crossover's are rounding noise of ~1e-9,
      // which Adam's first step (g / (|g| + 1e-7)) turns into a move of any size up to the
      // learning rate, in either direction. Only that bound is Keras's.
      EXPECT_LE(max_abs_diff(w.value, tensor("fit/" + w.name)), 1e-2 * 1.0001);
      continue;
    }
    const Tensor& keras = tensor("fit/after/" + w.name);
    EXPECT_LT(max_abs_diff(w.value, keras), 2e-6) << w.name;
    EXPECT_GT(max_abs_diff(w.value, tensor("fit/" + w.name)), 1e-4) << w.name << " did not move";
  }
}

TEST(BatchNormalization, TheOptimizerNeverTouchesTheMovingStatistics) {
  // With momentum 1 the moving statistics keep their value through fit: only an optimizer update
  // could change them (their gradient slots are zero, but Adam's would still move them).
  Sequential model({Input({6}), Dense(4), BatchNormalization(1.0), Dense(3, "softmax")});
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 4});
  const Tensor x = random_tensor({40, 6}, 5);
  Tensor y({40});
  for (int64_t i = 0; i < 40; ++i) y[i] = static_cast<float>(i % 3);
  model.fit(x, y, {.epochs = 3, .batch_size = 8, .verbose = 0});
  const auto w = model.get_weights();
  for (float v : w[4].value.values()) EXPECT_EQ(v, 0.0f);  // moving_mean
  for (float v : w[5].value.values()) EXPECT_EQ(v, 1.0f);  // moving_variance
  EXPECT_NE(w[2].value[0], 1.0f);                          // gamma is trained
}

TEST(BatchNormalization, EvaluateAndPredictLeaveTheMovingStatisticsAlone) {
  Sequential model = dense_bn_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 4});
  const Tensor x = random_tensor({16, 6}, 5);
  Tensor y({16});
  model.predict(x);
  model.evaluate(x, y, {.verbose = 0});
  model.gradients(x, y);
  const auto w = model.get_weights();
  for (float v : w[4].value.values()) EXPECT_EQ(v, 0.0f);
  for (float v : w[5].value.values()) EXPECT_EQ(v, 1.0f);
}

// ---- files ----

TEST(BatchNormalization, KerasWeightsH5LoadsAsKerasSavedIt) {
  Sequential model = dense_bn_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1});
  load_weights(model,
               crossover::testing_util::source_dir() + "/tests/data/keras/batchnorm.weights.h5");
  for (const NamedTensor& w : model.get_weights())
    EXPECT_EQ(max_abs_diff(w.value, tensor("fit/after/" + w.name)), 0.0) << w.name;
  const KerasH5Weights h5 = keras_weights_of(model);
  ASSERT_EQ(h5.layers.size(), 3u);
  EXPECT_EQ(h5.layers[1].key, "batch_normalization");
  EXPECT_EQ(h5.layers[1].vars.size(), 4u);
}

TEST(BatchNormalization, SafetensorsAndH5RoundTripsKeepThePredictions) {
  for (const char* file : {"w.safetensors", "w.weights.h5"}) {
    SCOPED_TRACE(file);
    Sequential model({Input({5, 5, 2}), Conv2D(3, 3, "relu"), BatchNormalization(0.9), Flatten(),
                      Dense(4, "softmax")});
    model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 2});
    const Tensor x = random_tensor({6, 5, 5, 2}, 3);
    Tensor y({6});
    model.fit(x, y, {.epochs = 2, .batch_size = 3, .verbose = 0});  // moving statistics move
    const std::string path = testing_util::temp_folder("bn_weights") + "/" + file;
    save_weights(model, path);
    Sequential other({Input({5, 5, 2}), Conv2D(3, 3, "relu"), BatchNormalization(0.9), Flatten(),
                      Dense(4, "softmax")});
    other.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 99});
    load_weights(other, path);
    const Tensor a = model.predict(x), b = other.predict(x);
    for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
  }
}

TEST(BatchNormalization, CheckpointsResumeTheSameTrajectory) {
  const Tensor x = random_tensor({48, 6}, 8);
  Tensor y({48});
  for (int64_t i = 0; i < 48; ++i) y[i] = static_cast<float>(i % 3);
  const CompileOptions copts{.threads = 1, .seed = 5};
  Sequential straight = dense_bn_model();
  straight.compile(Adam(), "sparse_categorical_crossentropy", {}, copts);
  straight.fit(x, y, {.epochs = 2, .batch_size = 16, .verbose = 0});
  Sequential first = dense_bn_model();
  first.compile(Adam(), "sparse_categorical_crossentropy", {}, copts);
  first.fit(x, y, {.epochs = 1, .batch_size = 16, .verbose = 0});
  const std::string path = testing_util::temp_folder("bn_ckpt") + "/run.ckpt";
  save_checkpoint(first, path, 1);
  int epoch = -1;
  Sequential resumed = model_from_checkpoint(path, copts, &epoch);
  resumed.fit(x, y, {.epochs = 2, .batch_size = 16, .verbose = 0, .initial_epoch = epoch});
  const auto a = straight.get_weights(), b = resumed.get_weights();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(max_abs_diff(a[i].value, b[i].value), 0.0) << a[i].name;
}

// ---- JSON ----

// As Keras 3.15's to_json() writes BatchNormalization (every default spelled out).
std::string keras3_json(const std::string& bn_config_tail = "") {
  return R"({"module": "keras", "class_name": "Sequential", "config": {"name": "sequential",
    "trainable": true, "dtype": "float32", "layers": [
    {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [null, 4, 4, 2],
     "dtype": "float32", "sparse": false, "ragged": false, "name": "input_layer"}, "registered_name": null},
    {"module": "keras.layers", "class_name": "BatchNormalization", "config": {"name": "batch_normalization",
     "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
     "registered_name": null}, "axis": -1, "momentum": 0.99, "epsilon": 0.001, "center": true, "scale": true,
     "beta_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
     "gamma_initializer": {"module": "keras.initializers", "class_name": "Ones", "config": {}, "registered_name": null},
     "moving_mean_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
     "moving_variance_initializer": {"module": "keras.initializers", "class_name": "Ones", "config": {}, "registered_name": null},
     "beta_regularizer": null, "gamma_regularizer": null, "beta_constraint": null, "gamma_constraint": null,
     "synchronized": false, "renorm": false, "renorm_clipping": null, "renorm_momentum": 0.99)" +
         bn_config_tail +
         R"(}, "registered_name": null, "build_config": {"input_shape": [null, 4, 4, 2]}},
    {"module": "keras.layers", "class_name": "Flatten", "config": {"name": "flatten", "trainable": true,
     "dtype": "float32", "data_format": "channels_last"}, "registered_name": null}
    ]}, "registered_name": null})";
}

TEST(BatchNormalization, KerasJsonWithTheDefaultsEveryRealFileCarriesLoads) {
  const Sequential m = model_from_json(keras3_json(), "bn.json");
  ASSERT_EQ(m.layers().size(), 3u);
  const Layer& l = m.layers()[1];
  EXPECT_EQ(l.type, LayerType::batch_normalization);
  EXPECT_EQ(l.args<BatchNormArgs>().momentum, 0.99);
  EXPECT_EQ(l.args<BatchNormArgs>().epsilon, 0.001);
  EXPECT_EQ(m.count_params(), 8);
  EXPECT_EQ(m.trainable_params(), 4);
}

TEST(BatchNormalization, KerasJsonRoundTripKeepsTheArguments) {
  const Sequential model(
      {Input({6}), Dense(4), BatchNormalization(0.9, 0.01, false, true), Dense(3, "softmax")});
  const Sequential back = model_from_json(model_to_json(model), "model.json");
  const Layer& l = back.layers()[2];
  EXPECT_EQ(l.type, LayerType::batch_normalization);
  const BatchNormArgs& a = l.args<BatchNormArgs>();
  EXPECT_EQ(a.momentum, 0.9);
  EXPECT_EQ(a.epsilon, 0.01);
  EXPECT_FALSE(a.center);
  EXPECT_TRUE(a.scale);
  EXPECT_EQ(back.count_params(), model.count_params());
  // As Keras writes them: Keras refuses a seed in the constant initializers' config.
  const auto doc = nlohmann::json::parse(model_to_json(model));
  const auto& config = doc["config"]["layers"][2]["config"];
  EXPECT_EQ(doc["config"]["layers"][2]["class_name"], "BatchNormalization");
  EXPECT_EQ(config["gamma_initializer"]["class_name"], "Ones");
  EXPECT_EQ(config["gamma_initializer"]["config"], nlohmann::json::object());
  EXPECT_EQ(config["moving_variance_initializer"]["config"], nlohmann::json::object());
  EXPECT_EQ(config["axis"], -1);
}

TEST(BatchNormalization, KerasJsonWithAnUnsupportedArgumentIsRefusedNamingIt) {
  auto refusal = [](const std::string& from, const std::string& to) {
    std::string json = keras3_json();
    json.replace(json.find(from), from.size(), to);
    return error_of([&] { model_from_json(json, "bn.json"); });
  };
  EXPECT_EQ(refusal("\"renorm\": false", "\"renorm\": true"),
            "bn.json: layer 'batch_normalization' field renorm: renorm true is not supported: "
            "only false");
  EXPECT_EQ(refusal("\"synchronized\": false", "\"synchronized\": true"),
            "bn.json: layer 'batch_normalization' field synchronized: synchronized true is not "
            "supported: only false");
  // L1, L2 and L1L2 run (tests/regularizer_test.cpp); another regularizer is refused by name.
  EXPECT_EQ(refusal("\"gamma_regularizer\": null",
                    "\"gamma_regularizer\": {\"class_name\": \"OrthogonalRegularizer\"}"),
            "bn.json: layer 'batch_normalization' field gamma_regularizer: regularizer "
            "{\"class_name\":\"OrthogonalRegularizer\"} is not supported: L1, L2 and L1L2 "
            "(keras.regularizers) only");
  EXPECT_EQ(refusal("\"beta_constraint\": null", "\"beta_constraint\": \"NonNeg\""),
            "bn.json: layer 'batch_normalization' field beta_constraint: constraints are not "
            "supported");
  EXPECT_EQ(refusal("\"axis\": -1", "\"axis\": 1"),
            "bn.json: batch_normalization: BatchNormalization axis 1 is not supported on samples "
            "of shape (4, 4, 2): only the last axis (-1)");
  EXPECT_EQ(refusal("\"class_name\": \"Ones\"", "\"class_name\": \"Zeroes\""),
            "bn.json: layer 'batch_normalization' field gamma_initializer: initializer Zeroes is "
            "not supported: crossover has Keras's GlorotUniform, GlorotNormal, HeNormal, "
            "HeUniform, LecunNormal, LecunUniform, VarianceScaling, RandomNormal, RandomUniform, "
            "TruncatedNormal, Zeros, Ones, Constant, Identity and Orthogonal");
  // tf.keras 2 writes the axis as a list holding the last axis' index: accepted.
  EXPECT_EQ(refusal("\"axis\": -1", "\"axis\": [3]"), "");
}

// ---- devices and the op list ----

TEST(BatchNormalization, IsRefusedAtCompileOnABackendWithoutIt) {
  // A backend that answers has_batch_norm() false (both of crossover's own have it).
  struct NoBatchNorm : perf::ForwardingBackend {
    NoBatchNorm() : ForwardingBackend(make_cpu_backend(1)) {}
    bool has_batch_norm() const override { return false; }
  };
  Sequential model = dense_bn_model();
  const std::string why = error_of([&] {
    model.compile(Adam(), "sparse_categorical_crossentropy", {},
                  {.make_backend = [] { return std::make_unique<NoBatchNorm>(); }});
  });
  EXPECT_EQ(why,
            "batch_normalization: BatchNormalization is not available on cpu (its backend has no "
            "batch normalization)");
}

TEST(BatchNormalization, CompilesForAGpusRecordedStepAsForTheCudaBackend) {
  Sequential model = dense_bn_model();
  EXPECT_EQ(error_of([&] {
              model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.make_backend = [] {
                              return std::make_unique<perf::RecordingBackend>("cuda:0", false);
                            }});
            }),
            "");
  EXPECT_EQ(perf::unsupported_on(perf::describe(dense_bn_model()), perf::DeviceKind::gpu), "");
}

// ---- the cost model ----

// A convnet with batch normalization after its convolution: at 32 samples the layer normalises
// (32, 6 x 6, 4).
perf::ModelDesc conv_bn_model() {
  return perf::describe(Sequential({Input({8, 8, 3}), Conv2D(4, 3, "relu"), BatchNormalization(),
                                    Flatten(), Dense(10, "softmax")}));
}

std::vector<perf::Op> bn_ops(const std::vector<perf::Op>& ops) {
  std::vector<perf::Op> out;
  for (const perf::Op& o : ops)
    if (o.call.rfind("batchnorm_", 0) == 0) out.push_back(o);
  return out;
}

TEST(BatchNormCost, TheOpListHasEachCallOnceWithItsShapeBytesAndLaunches) {
  const auto cpu =
      bn_ops(perf::step_ops(conv_bn_model(), 32, perf::DeviceKind::cpu, perf::Mode::resident));
  std::vector<std::string> calls;
  const int64_t x = 32 * 6 * 6 * 4, ch = 4;
  for (const perf::Op& o : cpu) {
    calls.push_back(o.call);
    EXPECT_EQ(o.layer, "batch_normalization");
    EXPECT_EQ(o.batch, o.call == "batchnorm_update_moving" ? 1 : 32) << o.call;
    EXPECT_EQ(o.norm, (BatchNormShape{.spatial = 36, .channels = 4})) << o.call;
    EXPECT_EQ(o.launches, 0) << o.call;
  }
  ASSERT_EQ(calls, (std::vector<std::string>{"batchnorm_forward_training",
                                             "batchnorm_update_moving", "batchnorm_backward"}));
  // Training forward: x twice (the statistics, then y) and gamma, beta; y and the statistics.
  EXPECT_EQ(cpu[0].elements, x);
  EXPECT_EQ(cpu[0].bytes_read, 4 * (2 * x + 2 * ch));
  EXPECT_EQ(cpu[0].bytes_written, 4 * (x + 2 * ch));
  EXPECT_EQ(cpu[0].flops, 8 * x);
  // Moving update: both statistics and both moving ones read, the moving ones written.
  EXPECT_EQ(cpu[1].bytes_read, 4 * 4 * ch);
  EXPECT_EQ(cpu[1].bytes_written, 4 * 2 * ch);
  // Backward: x and dy twice, gamma, beta, the statistics; dx, dgamma, dbeta.
  EXPECT_EQ(cpu[2].elements, x);
  EXPECT_EQ(cpu[2].bytes_read, 4 * (4 * x + 2 * ch + 2 * ch));
  EXPECT_EQ(cpu[2].bytes_written, 4 * (x + 2 * ch));
  // On a GPU: the kernels of norm_kernels.cu (two sums and their totals, then y; the moving update;
  // the backward's sums, their totals, then dx).
  const auto gpu =
      bn_ops(perf::step_ops(conv_bn_model(), 32, perf::DeviceKind::gpu, perf::Mode::resident));
  ASSERT_EQ(gpu.size(), 3u);
  EXPECT_EQ(gpu[0].launches, 5);
  EXPECT_EQ(gpu[1].launches, 1);
  EXPECT_EQ(gpu[2].launches, 3);
}

// The profile's own entry for each batch-normalization call of `needs`: 1 ms, 2 ms, ... times
// `scale`.
void add_norm_entries(perf::Profile& p, const perf::ShapeNeeds& needs, double scale) {
  double t = 1e-3;
  for (const perf::NormNeed& c : needs.norms) {
    p.batchnorm.push_back({c.op, c.shape, c.batch, t * scale});
    t += 1e-3;
  }
}

TEST(BatchNormCost, ShapeNeedsAreEachCallAndEvenAGridProfileLacksThem) {
  const perf::ShapeNeeds needs = perf::cpu_shape_needs({{conv_bn_model(), {32, 5}}});
  std::set<perf::NormNeed> want;
  for (int64_t m : {32, 5}) {
    want.insert({"forward_training", {.spatial = 36, .channels = 4}, m});
    want.insert({"backward", {.spatial = 36, .channels = 4}, m});
  }
  want.insert({"update_moving", {.spatial = 36, .channels = 4}, 1});
  EXPECT_EQ(needs.norms, want);
  perf::Profile grid = testing_util::made_up_cpu_profile();
  grid.coverage = "grid";
  EXPECT_EQ(perf::missing_shapes(grid, needs).norms, want);
  add_norm_entries(grid, needs, 1.0);
  EXPECT_TRUE(perf::missing_shapes(grid, needs).norms.empty());
}

TEST(BatchNormCost, EachCallCostsItsOwnMeasurementAndTheStepTheirSum) {
  const perf::ModelDesc model = conv_bn_model();
  const perf::ShapeNeeds needs = perf::cpu_shape_needs({{model, {32}}});
  ASSERT_EQ(needs.norms.size(), 3u);
  perf::Profile once = testing_util::made_up_cpu_profile(),
                twice = testing_util::made_up_cpu_profile();
  add_norm_entries(once, needs, 1.0);
  add_norm_entries(twice, needs, 2.0);
  const auto ops = perf::step_ops(model, 32, perf::DeviceKind::cpu, perf::Mode::resident);
  const perf::Prediction a = perf::predict(ops, once, perf::Mode::resident);
  const perf::Prediction b = perf::predict(ops, twice, perf::Mode::resident);
  for (const std::string& e : a.estimates) EXPECT_EQ(e.find("batch norm"), std::string::npos) << e;
  double measured = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].call.rfind("batchnorm_", 0) != 0) continue;
    double expected = -1;
    for (const perf::NormSample& c : once.batchnorm)
      if (ops[i].call == "batchnorm_" + c.op && c.shape == ops[i].norm && c.batch == ops[i].batch)
        expected = c.seconds;
    EXPECT_DOUBLE_EQ(a.op_seconds[i], expected) << ops[i].name;
    measured += expected;
  }
  EXPECT_NEAR(measured, 6e-3, 1e-12);  // 1 + 2 + 3 ms, each call once
  EXPECT_NEAR(b.step_seconds - a.step_seconds, measured, 1e-12);
}

TEST(BatchNormCost, AShapeNotMeasuredIsScaledByElementsFromTheNearestAndSaysSo) {
  const perf::ModelDesc model = conv_bn_model();
  perf::Profile p = testing_util::made_up_cpu_profile();
  add_norm_entries(p, perf::cpu_shape_needs({{model, {32}}}), 1.0);
  // At 8 samples only the moving update (per channel, the same at any batch) is measured: the
  // others are a quarter of the elements of the same call at 32.
  const auto at8 = perf::step_ops(model, 8, perf::DeviceKind::cpu, perf::Mode::resident);
  const auto at32 = perf::step_ops(model, 32, perf::DeviceKind::cpu, perf::Mode::resident);
  const perf::Prediction r8 = perf::predict(at8, p, perf::Mode::resident);
  const perf::Prediction r32 = perf::predict(at32, p, perf::Mode::resident);
  auto index = [](const std::vector<perf::Op>& ops, const std::string& call) {
    std::size_t i = 0;
    while (ops[i].call != call) ++i;
    return i;
  };
  for (const char* call : {"batchnorm_forward_training", "batchnorm_backward"})
    EXPECT_DOUBLE_EQ(r8.op_seconds[index(at8, call)], r32.op_seconds[index(at32, call)] / 4)
        << call;
  std::vector<std::string> norm_estimates;
  for (const std::string& e : r8.estimates)
    if (e.find("batch norm") != std::string::npos) norm_estimates.push_back(e);
  ASSERT_EQ(norm_estimates.size(), 2u);
  EXPECT_NE(norm_estimates.front().find("not measured; scaled by elements from the profile's "
                                        "forward_training 36x4 at batch 32"),
            std::string::npos)
      << norm_estimates.front();
  // A profile without any: a call's floor plus the bytes at the memory bandwidth, and the
  // estimates sentence counts them.
  const perf::Prediction flat =
      perf::predict(at8, testing_util::made_up_cpu_profile(), perf::Mode::resident);
  const std::size_t f = index(at8, "batchnorm_forward_training");
  EXPECT_DOUBLE_EQ(flat.op_seconds[f],
                   1e-7 + double(at8[f].bytes_read + at8[f].bytes_written) / 1e10);
  std::size_t flat_norms = 0;
  for (const std::string& e : flat.estimates)
    if (e.find("the profile has no batch normalization") != std::string::npos) ++flat_norms;
  EXPECT_EQ(flat_norms, 3u);
  EXPECT_NE(perf::estimates_sentence(flat, "the step", "calibrate").find("estimated"),
            std::string::npos);
}

TEST(BatchNormCost, EntriesSurviveTheJsonRoundTripAndOlderProfilesHaveNone) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  add_norm_entries(p, perf::cpu_shape_needs({{conv_bn_model(), {32}}}), 1.0);
  p.batchnorm.push_back({"forward_inference",
                         {.spatial = 1, .channels = 7, .epsilon = 0.01f, .scale = false},
                         5,
                         2.5e-5});
  const nlohmann::json j = perf::profile_to_json(p);
  ASSERT_EQ(j["batchnorm"].size(), 4u);
  const perf::Profile back = perf::profile_from_json(j);
  ASSERT_EQ(back.batchnorm.size(), p.batchnorm.size());
  for (std::size_t i = 0; i < p.batchnorm.size(); ++i) {
    EXPECT_EQ(back.batchnorm[i].shape, p.batchnorm[i].shape);
    EXPECT_EQ(std::tie(back.batchnorm[i].op, back.batchnorm[i].batch, back.batchnorm[i].seconds),
              std::tie(p.batchnorm[i].op, p.batchnorm[i].batch, p.batchnorm[i].seconds));
  }
  nlohmann::json old = j;
  old.erase("batchnorm");
  EXPECT_TRUE(perf::profile_from_json(old).batchnorm.empty());
  nlohmann::json bad = j;
  bad["batchnorm"][0]["op"] = "sideways";
  EXPECT_EQ(error_of([&] { perf::profile_from_json(bad, "p.json"); }),
            "p.json: field 'batchnorm[0].op' must be forward_training, forward_inference, "
            "backward or update_moving, got \"sideways\"");
  // Merging adds what is new and keeps what is there.
  perf::Profile into = testing_util::made_up_cpu_profile();
  into.batchnorm.push_back(p.batchnorm[0]);
  into.batchnorm[0].seconds = 9;
  perf::merge_profile(into, p);
  ASSERT_EQ(into.batchnorm.size(), p.batchnorm.size());
  EXPECT_EQ(into.batchnorm[0].seconds, 9);
}

TEST(BatchNormCost, CalibratingStoresExactlyTheModelsCalls) {
  const perf::ShapeNeeds needs = perf::cpu_shape_needs({{conv_bn_model(), {4}}});
  perf::ShapeNeeds norms_only;
  norms_only.norms = needs.norms;
  ASSERT_EQ(norms_only.norms.size(), 3u);
  std::size_t left = 99;
  const perf::Profile p = perf::calibrate_cpu_shapes(norms_only, 1, false, 120, &left);
  EXPECT_EQ(left, 0u);
  std::set<perf::NormNeed> got;
  for (const perf::NormSample& c : p.batchnorm) {
    got.insert({c.op, c.shape, c.batch});
    EXPECT_GT(c.seconds, 0);
  }
  EXPECT_EQ(got, needs.norms);
  EXPECT_EQ(p.batchnorm.size(), needs.norms.size());
  EXPECT_TRUE(p.gemm.empty());
  EXPECT_TRUE(p.conv2d.empty());
}

}  // namespace
}  // namespace crossover
