// LayerNormalization as a Keras user meets it: weights and their names, the CPU kernels against
// float64 (forward values; dx, dgamma and dbeta against finite differences), the same bits at any
// thread count, the files, the Keras JSON (in, out, refusals) and the op list. (Its gradients in
// a model: gradient_test.cpp; against Keras itself: tests/python/test_layernorm_peers.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/model_config.h"
#include "formats/weights_io.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/cost_model.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

Sequential dense_ln_model(Layer ln = LayerNormalization()) {
  return Sequential({Input({6}), Dense(4), std::move(ln), Dense(3, "softmax")});
}

// ---- weights ----

TEST(LayerNormalization, HasKerasWeightsInKerasOrderWithKerasInitialValues) {
  Sequential model = dense_ln_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1});
  const auto w = model.get_weights();
  ASSERT_EQ(w.size(), 6u);
  EXPECT_EQ(w[2].name, "layer_normalization/gamma");
  EXPECT_EQ(w[3].name, "layer_normalization/beta");
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(w[2].value[i], 1.0f);
    EXPECT_EQ(w[3].value[i], 0.0f);
  }
  EXPECT_EQ(model.count_params(), 28 + 8 + 15);
  EXPECT_EQ(model.trainable_params(), model.count_params());
  EXPECT_EQ(dense_ln_model(LayerNormalization(1e-3, false, true)).count_params(), 28 + 4 + 15);
  EXPECT_EQ(dense_ln_model(LayerNormalization(1e-3, false, false)).count_params(), 28 + 15);
}

TEST(LayerNormalization, BadArgumentsAreRefusedNamingTheLayerAndArgument) {
  EXPECT_EQ(error_of([] { LayerNormalization(0.0); }),
            "LayerNormalization: epsilon must be positive, got 0.000000");
}

// ---- the CPU kernels against float64 ----

struct Rows {
  int64_t rows, n;
};

// y of one row in float64, Keras's formula.
std::vector<double> reference_row(const float* x, const float* gamma, const float* beta, int64_t n,
                                  double epsilon) {
  double mean = 0, var = 0;
  for (int64_t j = 0; j < n; ++j) mean += x[j];
  mean /= static_cast<double>(n);
  for (int64_t j = 0; j < n; ++j) var += (x[j] - mean) * (x[j] - mean);
  var /= static_cast<double>(n);
  std::vector<double> y(static_cast<std::size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    y[static_cast<std::size_t>(j)] =
        (x[j] - mean) / std::sqrt(var + epsilon) * (gamma ? gamma[j] : 1.0) +
        (beta ? beta[j] : 0.0);
  return y;
}

TEST(CpuBackend, LayerNormForwardMatchesTheFloat64Formula) {
  std::unique_ptr<Backend> be = make_cpu_backend(2);
  uint64_t seed = 40;
  // n past, below and not a multiple of the 8 lanes; enough rows for the threads to split.
  for (const Rows& c : {Rows{5, 7}, Rows{3, 8}, Rows{64, 37}, Rows{2000, 20}}) {
    for (const bool affine : {true, false}) {
      SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.n) + (affine ? " gamma" : ""));
      Tensor x = random_tensor({c.rows, c.n}, ++seed, -3.0f, 5.0f);
      const Tensor gamma = random_tensor({c.n}, ++seed), beta = random_tensor({c.n}, ++seed);
      std::vector<float> y(static_cast<std::size_t>(x.size()), std::nanf("")),
          mean(static_cast<std::size_t>(c.rows)), rstd(static_cast<std::size_t>(c.rows));
      be->layernorm_forward(x.data(), affine ? gamma.data() : nullptr,
                            affine ? beta.data() : nullptr, y.data(), mean.data(), rstd.data(),
                            c.rows, c.n, 1e-3f);
      for (int64_t r = 0; r < c.rows; ++r) {
        const auto want = reference_row(x.data() + r * c.n, affine ? gamma.data() : nullptr,
                                        affine ? beta.data() : nullptr, c.n, 1e-3);
        for (int64_t j = 0; j < c.n; ++j)
          ASSERT_NEAR(y[static_cast<std::size_t>(r * c.n + j)], want[static_cast<std::size_t>(j)],
                      2e-5 + 2e-5 * std::abs(want[static_cast<std::size_t>(j)]))
              << r << "," << j;
      }
      // Without statistics (evaluate, predict): the same y.
      std::vector<float> z(y.size(), std::nanf(""));
      be->layernorm_forward(x.data(), affine ? gamma.data() : nullptr,
                            affine ? beta.data() : nullptr, z.data(), nullptr, nullptr, c.rows, c.n,
                            1e-3f);
      EXPECT_EQ(z, y);
    }
  }
}

// L = sum(dy * y(x, gamma, beta)) in float64, for the finite differences.
double weighted_output(const std::vector<double>& x, const std::vector<double>& gamma,
                       const std::vector<double>& beta, const std::vector<double>& dy, int64_t rows,
                       int64_t n, double epsilon) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mean += x[static_cast<std::size_t>(r * n + j)];
    mean /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) {
      const double d = x[static_cast<std::size_t>(r * n + j)] - mean;
      var += d * d;
    }
    var /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) {
      const auto i = static_cast<std::size_t>(r * n + j);
      const auto k = static_cast<std::size_t>(j);
      total += dy[i] * ((x[i] - mean) / std::sqrt(var + epsilon) * gamma[k] + beta[k]);
    }
  }
  return total;
}

TEST(CpuBackend, LayerNormBackwardMatchesFloat64FiniteDifferencesOfInputGammaAndBeta) {
  std::unique_ptr<Backend> be = make_cpu_backend(2);
  const double epsilon = 1e-3;
  uint64_t seed = 70;
  for (const Rows& c : {Rows{4, 5}, Rows{3, 19}, Rows{300, 70}}) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.n));
    const Tensor x = random_tensor({c.rows, c.n}, ++seed, -2.0f, 3.0f);
    const Tensor dy = random_tensor({c.rows, c.n}, ++seed);
    const Tensor gamma = random_tensor({c.n}, ++seed, 0.5f, 1.5f);
    const Tensor beta = random_tensor({c.n}, ++seed);
    std::vector<float> y(static_cast<std::size_t>(x.size())), mean(c.rows), rstd(c.rows),
        dx(y.size(), std::nanf("")), dgamma(c.n, std::nanf("")), dbeta(c.n, std::nanf(""));
    be->layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(),
                          c.rows, c.n, static_cast<float>(epsilon));
    be->layernorm_backward(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                           dgamma.data(), dbeta.data(), c.rows, c.n);
    std::vector<double> xd(x.values().begin(), x.values().end()),
        gd(gamma.values().begin(), gamma.values().end()),
        bd(beta.values().begin(), beta.values().end()), dyd(dy.values().begin(), dy.values().end());
    auto fd = [&](std::vector<double>& v, std::size_t i) {
      const double h = 1e-6, keep = v[i];
      v[i] = keep + h;
      const double up = weighted_output(xd, gd, bd, dyd, c.rows, c.n, epsilon);
      v[i] = keep - h;
      const double down = weighted_output(xd, gd, bd, dyd, c.rows, c.n, epsilon);
      v[i] = keep;
      return (up - down) / (2 * h);
    };
    // Every element of a small case; a stride through the large one.
    const std::size_t step = x.size() > 1000 ? 97 : 1;
    for (std::size_t i = 0; i < xd.size(); i += step) {
      const double want = fd(xd, i);
      ASSERT_NEAR(dx[i], want, 1e-4 + 1e-3 * std::abs(want)) << "dx " << i;
    }
    for (std::size_t j = 0; j < gd.size(); ++j) {
      const double want_g = fd(gd, j), want_b = fd(bd, j);
      ASSERT_NEAR(dgamma[j], want_g, 1e-4 + 1e-4 * std::abs(want_g)) << "dgamma " << j;
      ASSERT_NEAR(dbeta[j], want_b, 1e-4 + 1e-4 * std::abs(want_b)) << "dbeta " << j;
    }
    // Without gamma (scale=False): dx as with gamma all ones; only dbeta asked for.
    const std::vector<double> ones(static_cast<std::size_t>(c.n), 1.0);
    std::vector<float> dx1(y.size()), dbeta1(c.n, std::nanf(""));
    be->layernorm_backward(x.data(), dy.data(), nullptr, mean.data(), rstd.data(), dx1.data(),
                           nullptr, dbeta1.data(), c.rows, c.n);
    gd = ones;
    for (std::size_t i = 0; i < xd.size(); i += step) {
      const double want = fd(xd, i);
      ASSERT_NEAR(dx1[i], want, 1e-4 + 1e-3 * std::abs(want)) << "dx without gamma " << i;
    }
    EXPECT_EQ(dbeta1, dbeta);
  }
}

TEST(CpuBackend, LayerNormGivesTheSameBitsAtAnyThreadCount) {
  const int64_t rows = 512, n = 96;
  const Tensor x = random_tensor({rows, n}, 1), dy = random_tensor({rows, n}, 2);
  const Tensor gamma = random_tensor({n}, 3), beta = random_tensor({n}, 4);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    std::unique_ptr<Backend> be = make_cpu_backend(threads);
    std::vector<float> y(static_cast<std::size_t>(rows * n)), mean(rows), rstd(rows), dx(y.size()),
        dgamma(n), dbeta(n);
    be->layernorm_forward(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(),
                          rows, n, 1e-3f);
    be->layernorm_backward(x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx.data(),
                           dgamma.data(), dbeta.data(), rows, n);
    std::vector<float> all = y;
    for (const auto* v : {&dx, &dgamma, &dbeta}) all.insert(all.end(), v->begin(), v->end());
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// ---- in a model ----

TEST(LayerNormalization, TrainingAndPredictNormaliseEachSampleAlone) {
  // Over the last axis of (3, 5) samples: each of the 3 rows of 5 has its own statistics, and a
  // sample's output does not depend on the others in the batch.
  Sequential model({Input({3, 5}), LayerNormalization(1e-6, false, false), Flatten()});
  model.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  const Tensor x = random_tensor({4, 3, 5}, 5, -2.0f, 6.0f);
  const Tensor y = model.predict(x);
  for (int64_t r = 0; r < 12; ++r) {
    double mean = 0, sq = 0;
    for (int64_t j = 0; j < 5; ++j) mean += y[r * 5 + j];
    for (int64_t j = 0; j < 5; ++j) sq += (y[r * 5 + j] - mean / 5) * (y[r * 5 + j] - mean / 5);
    EXPECT_NEAR(mean / 5, 0.0, 1e-5) << r;
    EXPECT_NEAR(sq / 5, 1.0, 1e-4) << r;
  }
  Tensor one({1, 3, 5});
  for (int64_t i = 0; i < 15; ++i) one[i] = x[15 + i];
  const Tensor y1 = model.predict(one);
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(y1[i], y[15 + i]);
}

TEST(LayerNormalization, SafetensorsAndH5RoundTripsKeepThePredictions) {
  for (const char* file : {"w.safetensors", "w.weights.h5"}) {
    SCOPED_TRACE(file);
    Sequential model = dense_ln_model(LayerNormalization(1e-2, true, true));
    model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 2});
    const Tensor x = random_tensor({6, 6}, 3);
    Tensor y({6});
    model.fit(x, y, {.epochs = 2, .batch_size = 3, .verbose = 0});  // gamma and beta move
    const std::string path = testing_util::temp_folder("ln_weights") + "/" + file;
    save_weights(model, path);
    Sequential other = dense_ln_model(LayerNormalization(1e-2, true, true));
    other.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 99});
    load_weights(other, path);
    const auto a = model.get_weights(), b = other.get_weights();
    EXPECT_NE(a[2].value[0], 1.0f);
    for (std::size_t i = 0; i < a.size(); ++i)
      for (int64_t k = 0; k < a[i].value.size(); ++k) EXPECT_EQ(a[i].value[k], b[i].value[k]);
    const Tensor pa = model.predict(x), pb = other.predict(x);
    for (int64_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i], pb[i]);
  }
}

// ---- Keras JSON ----

// A Keras 3.15 model JSON of Input(6) -> Dense(4) -> LayerNormalization() (fields as Keras writes
// them for a built layer).
std::string keras3_json() {
  return R"({"module": "keras", "class_name": "Sequential", "config": {"name": "sequential",
    "layers": [
      {"module": "keras.layers", "class_name": "InputLayer",
       "config": {"batch_shape": [null, 6], "dtype": "float32", "name": "input_layer"}},
      {"module": "keras.layers", "class_name": "Dense",
       "config": {"name": "dense", "trainable": true, "units": 4, "activation": "linear",
                  "use_bias": true}},
      {"module": "keras.layers", "class_name": "LayerNormalization",
       "config": {"name": "layer_normalization", "trainable": true, "dtype": "float32",
                  "axis": [-1], "epsilon": 0.001, "center": true, "scale": true,
                  "rms_scaling": false,
                  "beta_initializer": {"module": "keras.initializers", "class_name": "Zeros",
                                       "config": {}, "registered_name": null},
                  "gamma_initializer": {"module": "keras.initializers", "class_name": "Ones",
                                        "config": {}, "registered_name": null},
                  "beta_regularizer": null, "gamma_regularizer": null,
                  "beta_constraint": null, "gamma_constraint": null},
       "build_config": {"input_shape": [null, 4]}}]}})";
}

TEST(LayerNormalization, KerasJsonAsKerasWritesItLoads) {
  const Sequential m = model_from_json(keras3_json(), "ln.json");
  ASSERT_EQ(m.layers().size(), 3u);
  const Layer& l = m.layers()[2];
  EXPECT_EQ(l.type, LayerType::layer_normalization);
  EXPECT_EQ(l.args<LayerNormArgs>().epsilon, 0.001);
  EXPECT_TRUE(l.args<LayerNormArgs>().center && l.args<LayerNormArgs>().scale);
  EXPECT_EQ(m.count_params(), 28 + 8);
}

TEST(LayerNormalization, KerasJsonRoundTripKeepsTheArguments) {
  const Sequential model = dense_ln_model(LayerNormalization(0.01, false, true));
  const Sequential back = model_from_json(model_to_json(model), "model.json");
  const Layer& l = back.layers()[2];
  EXPECT_EQ(l.type, LayerType::layer_normalization);
  const LayerNormArgs& a = l.args<LayerNormArgs>();
  EXPECT_EQ(a.epsilon, 0.01);
  EXPECT_FALSE(a.center);
  EXPECT_TRUE(a.scale);
  EXPECT_EQ(back.count_params(), model.count_params());
  EXPECT_EQ(model_to_json(back), model_to_json(model));
  const auto doc = nlohmann::json::parse(model_to_json(model));
  const auto& layer = doc["config"]["layers"][2];
  EXPECT_EQ(layer["class_name"], "LayerNormalization");
  EXPECT_EQ(layer["config"]["axis"], nlohmann::json::parse("[-1]"));
  EXPECT_EQ(layer["config"]["rms_scaling"], false);
  EXPECT_EQ(layer["config"]["gamma_initializer"]["class_name"], "Ones");
  EXPECT_EQ(layer["build_config"]["input_shape"], nlohmann::json::parse("[null, 4]"));
}

TEST(LayerNormalization, KerasJsonWithAnUnsupportedArgumentIsRefusedNamingIt) {
  auto refusal = [](const std::string& from, const std::string& to) {
    std::string json = keras3_json();
    json.replace(json.find(from), from.size(), to);
    return error_of([&] { model_from_json(json, "ln.json"); });
  };
  EXPECT_EQ(refusal("\"rms_scaling\": false", "\"rms_scaling\": true"),
            "ln.json: layer 'layer_normalization' field rms_scaling: rms_scaling true is not "
            "supported: only false");
  EXPECT_EQ(refusal("\"axis\": [-1]", "\"axis\": [1, 2]"),
            "ln.json: layer 'layer_normalization' field axis: axis [1,2] is not supported: only "
            "the last axis (-1)");
  EXPECT_EQ(refusal("\"epsilon\": 0.001", "\"epsilon\": 0"),
            "ln.json: layer 'layer_normalization' field epsilon: epsilon must be positive, got 0");
  // L1, L2 and L1L2 run (tests/regularizer_test.cpp); another regularizer is refused by name.
  EXPECT_EQ(refusal("\"gamma_regularizer\": null",
                    "\"gamma_regularizer\": {\"class_name\": \"OrthogonalRegularizer\"}"),
            "ln.json: layer 'layer_normalization' field gamma_regularizer: regularizer "
            "{\"class_name\":\"OrthogonalRegularizer\"} is not supported: L1, L2 and L1L2 "
            "(keras.regularizers) only");
  // Keras 3 before build writes -1; tf.keras 2 the last axis' index: both accepted.
  EXPECT_EQ(refusal("\"axis\": [-1]", "\"axis\": -1"), "");
  EXPECT_EQ(refusal("\"axis\": [-1]", "\"axis\": [1]"), "");
}

// ---- the op list ----

TEST(LayerNormCost, TheOpListHasTheForwardAndBackwardWithTheirShapeAndBytes) {
  const perf::ModelDesc model = perf::describe(dense_ln_model());
  for (const perf::DeviceKind device : {perf::DeviceKind::cpu, perf::DeviceKind::gpu}) {
    std::vector<perf::Op> ln;
    for (const perf::Op& o : perf::step_ops(model, 32, device, perf::Mode::resident))
      if (o.call.rfind("layernorm_", 0) == 0) ln.push_back(o);
    ASSERT_EQ(ln.size(), 2u);
    EXPECT_EQ(ln[0].call, "layernorm_forward");
    EXPECT_EQ(ln[1].call, "layernorm_backward");
    const int64_t x = 32 * 4, n = 4, rows = 32;
    for (const perf::Op& o : ln) {
      EXPECT_EQ(o.layer, "layer_normalization");
      EXPECT_EQ(o.elements, x);
      EXPECT_EQ(o.m, rows);
      EXPECT_EQ(o.n, n);
    }
    EXPECT_EQ(ln[0].bytes_read, 4 * (2 * x + 2 * n));
    EXPECT_EQ(ln[0].bytes_written, 4 * (x + 2 * rows));
    EXPECT_EQ(ln[1].bytes_read, 4 * (6 * x + n + 2 * rows));
    EXPECT_EQ(ln[1].bytes_written, 4 * (x + 2 * n));
    EXPECT_EQ(ln[1].launches, device == perf::DeviceKind::gpu ? 2 : 0);
  }
}

}  // namespace
}  // namespace crossover
