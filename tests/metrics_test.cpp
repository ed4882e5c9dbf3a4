// Metrics beyond the loss's accuracy (nn/metrics.h): each kind's device sum (Backend::metric_sum
// on the CPU) against a float64 evaluation of Keras 3's definition on random data; the model's
// sums over an epoch with a partial last batch (fit and evaluate) against the same evaluation of
// predict's output; names, order, keys and refusals; a model without them makes no extra call.
// (Against Keras itself: tests/python/test_metrics_peers.py.)
#include "nn/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/recording.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

// Keras 3's per-sample value (keras/src/metrics), in float64, of one row: p (c values), t
// (target_cols values: c, or one broadcast over the row / a class index).
double keras_row(MetricKind kind, const float* p, const float* t, int64_t c, int64_t target_cols,
                 double parameter) {
  auto target = [&](int64_t j) { return static_cast<double>(t[target_cols == 1 ? 0 : j]); };
  auto argmax = [](const float* v, int64_t n) {
    return static_cast<int64_t>(std::max_element(v, v + n) - v);  // the first maximum
  };
  double s = 0;
  switch (kind) {
    case MetricKind::mean_absolute_error:
      for (int64_t j = 0; j < c; ++j) s += std::abs(target(j) - p[j]);
      return s / static_cast<double>(c);
    case MetricKind::mean_squared_error:
      for (int64_t j = 0; j < c; ++j) s += (target(j) - p[j]) * (target(j) - p[j]);
      return s / static_cast<double>(c);
    case MetricKind::binary_accuracy:
      for (int64_t j = 0; j < c; ++j) s += target(j) == (p[j] > parameter ? 1.0 : 0.0) ? 1 : 0;
      return s / static_cast<double>(c);
    case MetricKind::categorical_accuracy:
      return argmax(p, c) == argmax(t, target_cols) ? 1 : 0;
    case MetricKind::sparse_categorical_accuracy:
      return static_cast<double>(argmax(p, c)) == t[0] ? 1 : 0;
    case MetricKind::top_k_categorical_accuracy:
    case MetricKind::sparse_top_k_categorical_accuracy: {
      const int64_t truth = kind == MetricKind::top_k_categorical_accuracy
                                ? argmax(t, target_cols)
                                : static_cast<int64_t>(t[0]);
      int64_t greater = 0;
      for (int64_t j = 0; j < c; ++j) greater += p[j] > p[truth] ? 1 : 0;
      return greater < parameter ? 1 : 0;
    }
  }
  return 0;
}

double keras_sum(MetricKind kind, const std::vector<float>& p, const std::vector<float>& t,
                 int64_t m, int64_t c, int64_t target_cols, double parameter) {
  double s = 0;
  for (int64_t r = 0; r < m; ++r)
    s += keras_row(kind, p.data() + r * c, t.data() + r * target_cols, c, target_cols, parameter);
  return s;
}

// Targets as each kind reads them: one-hot rows, class indices, 0/1 values or any values.
std::vector<float> targets_for(MetricKind kind, int64_t m, int64_t c, int64_t target_cols,
                               uint64_t seed) {
  const Tensor u = random_tensor({m, c}, seed, 0.0f, 1.0f);
  std::vector<float> t(static_cast<std::size_t>(m * target_cols));
  for (int64_t r = 0; r < m; ++r) {
    const auto label = static_cast<int64_t>(u[r * c] * static_cast<float>(c)) % c;
    for (int64_t j = 0; j < target_cols; ++j) {
      float& v = t[static_cast<std::size_t>(r * target_cols + j)];
      if (target_cols == 1 && (kind == MetricKind::sparse_categorical_accuracy ||
                               kind == MetricKind::sparse_top_k_categorical_accuracy))
        v = static_cast<float>(label);
      else if (kind == MetricKind::binary_accuracy)
        v = u[r * c + j] > 0.5f ? 1.0f : 0.0f;
      else if (kind == MetricKind::mean_absolute_error || kind == MetricKind::mean_squared_error)
        v = 3.0f * u[r * c + j] - 1.0f;
      else
        v = j == label ? 1.0f : 0.0f;
    }
  }
  return t;
}

struct KernelCase {
  MetricKind kind;
  int64_t target_cols;  // 0: c
  float parameter;
};

TEST(MetricSum, EachKindOnTheCpuEqualsKerasDefinitionInFloat64) {
  const KernelCase cases[] = {
      {MetricKind::mean_absolute_error, 0, 0},
      {MetricKind::mean_absolute_error, 1, 0},  // one value broadcast over the row
      {MetricKind::mean_squared_error, 0, 0},
      {MetricKind::mean_squared_error, 1, 0},
      {MetricKind::binary_accuracy, 0, 0.5f},
      {MetricKind::binary_accuracy, 0, 0.3f},
      {MetricKind::categorical_accuracy, 0, 0},
      {MetricKind::sparse_categorical_accuracy, 1, 0},
      {MetricKind::top_k_categorical_accuracy, 0, 5},
      {MetricKind::top_k_categorical_accuracy, 0, 2},
      {MetricKind::sparse_top_k_categorical_accuracy, 1, 5},
  };
  auto backend = make_cpu_backend(1);
  const int64_t m = 37, c = 10;
  uint64_t seed = 1;
  for (const KernelCase& k : cases) {
    const int64_t tc = k.target_cols == 0 ? c : k.target_cols;
    const Tensor pred = random_tensor({m, c}, ++seed, -1.0f, 2.0f);
    const std::vector<float> t = targets_for(k.kind, m, c, tc, ++seed);
    std::vector<float> p(pred.data(), pred.data() + m * c);
    // Ties at the top-k boundary count in (TensorFlow's in_top_k): make some.
    if (k.kind == MetricKind::top_k_categorical_accuracy) p[3] = p[4] = p[5];
    auto* dp = static_cast<float*>(backend->allocate(p.size() * sizeof(float)));
    auto* dt = static_cast<float*>(backend->allocate(t.size() * sizeof(float)));
    auto* sum = static_cast<double*>(backend->allocate(sizeof(double)));
    backend->upload(dp, p.data(), p.size() * sizeof(float));
    backend->upload(dt, t.data(), t.size() * sizeof(float));
    const double start = 2.5;  // it adds to what is there
    backend->upload(sum, &start, sizeof start);
    backend->metric_sum(k.kind, dp, dt, m, c, tc, k.parameter, sum);
    double got = 0;
    backend->synchronize();
    backend->download(&got, sum, sizeof got);
    const double want = keras_sum(k.kind, p, t, m, c, tc, k.parameter);
    EXPECT_NEAR(got - start, want, 1e-6 * std::max(1.0, std::abs(want)))
        << "kind " << static_cast<int>(k.kind) << ", target columns " << tc;
    if (k.kind != MetricKind::mean_absolute_error && k.kind != MetricKind::mean_squared_error) {
      EXPECT_GT(want, 0.0);  // the case tests something: some rows are right
    }
    backend->release(dp);
    backend->release(dt);
    backend->release(sum);
  }
}

// ---- in a model ----

// 70 samples: two batches of 32 and a partial one of 6.
struct Data {
  Tensor x = random_tensor({70, 6}, 11);
  Tensor onehot{Shape{70, 4}};
  Tensor labels{Shape{70}};
  Data() {
    const Tensor u = random_tensor({70}, 12, 0.0f, 4.0f);
    for (int64_t r = 0; r < 70; ++r) {
      const int64_t label = std::min<int64_t>(static_cast<int64_t>(u[r]), 3);
      labels[r] = static_cast<float>(label);
      for (int64_t j = 0; j < 4; ++j) onehot[r * 4 + j] = j == label ? 1.0f : 0.0f;
    }
  }
};

double host_metric(const std::string& name, const Tensor& pred, const Tensor& y) {
  const MetricSpec spec = metric_spec(name);
  const int64_t m = pred.dim(0), c = pred.dim(1), tc = y.rank() == 1 ? 1 : y.dim(1);
  const std::vector<float> p(pred.data(), pred.data() + m * c);
  const std::vector<float> t(y.data(), y.data() + m * tc);
  return metric_result(spec, keras_sum(spec.kind, p, t, m, c, tc, spec.parameter),
                       static_cast<double>(m));
}

TEST(Metrics, EvaluateAndFitReportEachUnderItsNameOverEveryRowIncludingAPartialBatch) {
  const Data d;
  const std::vector<std::string> names = {"mae",
                                          "accuracy",
                                          "mean_squared_error",
                                          "root_mean_squared_error",
                                          "categorical_accuracy",
                                          "top_k_categorical_accuracy",
                                          "binary_accuracy"};
  Sequential model({Input({6}), Dense(5, "relu"), Dense(4, "softmax")});
  // SGD with a negligible learning rate: fit's epoch sees the weights predict sees (no dropout).
  model.compile(SGD(SGDOptions{.learning_rate = 1e-30}), "categorical_crossentropy", names,
                {.threads = 1, .seed = 3});
  EXPECT_EQ(model.metrics(), names);
  const Tensor pred = model.predict(d.x, 32);
  const EvaluateResult r = model.evaluate(d.x, d.onehot, {.batch_size = 32, .verbose = 0});
  ASSERT_EQ(r.metrics.size(), names.size() - 1);
  std::size_t i = 0;
  for (const std::string& name : names) {
    if (name == "accuracy") continue;
    EXPECT_EQ(r.metrics[i].first, name);
    EXPECT_NEAR(r.metrics[i].second, host_metric(name, pred, d.onehot), 1e-6) << name;
    ++i;
  }
  EXPECT_NEAR(r.accuracy, host_metric("categorical_accuracy", pred, d.onehot), 1e-12);

  const Tensor val_x = random_tensor({9, 6}, 13);
  Tensor val_y{Shape{9, 4}};
  for (int64_t k = 0; k < 9 * 4; ++k) val_y[k] = k % 4 == k / 4 % 4 ? 1.0f : 0.0f;
  const History h = model.fit(d.x, d.onehot,
                              {.epochs = 2,
                               .shuffle = false,
                               .validation_x = &val_x,
                               .validation_y = &val_y,
                               .verbose = 0});
  const Tensor val_pred = model.predict(val_x, 32);
  for (const std::string& name : names) {
    const std::string key = name == "accuracy" ? "accuracy" : name;
    ASSERT_TRUE(h.history.count(key)) << key;
    ASSERT_TRUE(h.history.count("val_" + key)) << key;
    const std::string kind = name == "accuracy" ? "categorical_accuracy" : name;
    for (int e = 0; e < 2; ++e) {
      EXPECT_NEAR(h.history.at(key)[static_cast<std::size_t>(e)], host_metric(kind, pred, d.onehot),
                  1e-6)
          << key << " epoch " << e;
      EXPECT_NEAR(h.history.at("val_" + key)[static_cast<std::size_t>(e)],
                  host_metric(kind, val_pred, val_y), 1e-6)
          << key;
    }
  }
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(h.epochs[1].metrics.size(), names.size() - 1);
  EXPECT_EQ(h.epochs[1].val_metrics.front().first, "mae");
}

TEST(Metrics, SparseKindsReadClassIndicesAndRegressionReadsTheOutput) {
  const Data d;
  Sequential model({Input({6}), Dense(4, "softmax")});
  model.compile(SGD(SGDOptions{.learning_rate = 1e-30}), "sparse_categorical_crossentropy",
                {"sparse_top_k_categorical_accuracy", "sparse_categorical_accuracy"},
                {.threads = 1});
  const Tensor pred = model.predict(d.x, 16);
  const EvaluateResult r = model.evaluate(d.x, d.labels, {.batch_size = 16, .verbose = 0});
  EXPECT_NEAR(r.metrics[0].second, host_metric("sparse_top_k_categorical_accuracy", pred, d.labels),
              1e-12);
  EXPECT_NEAR(r.metrics[1].second, host_metric("sparse_categorical_accuracy", pred, d.labels),
              1e-12);
  // Keras fails on the shapes of a value-by-value metric with class indices: refused.
  EXPECT_NE(error_of([&] {
              model.compile(Adam(), "sparse_categorical_crossentropy", {"mae"});
            }).find("targets are class indices"),
            std::string::npos);

  // Regression: Dense(1) with mse; the metrics read the output as it is.
  Tensor y{Shape{70, 1}};
  for (int64_t k = 0; k < 70; ++k) y[k] = d.x[k * 6] * 2.0f - d.x[k * 6 + 1];
  Sequential reg({Input({6}), Dense(1)});
  reg.compile(Adam(), "mse", {"mae", "RootMeanSquaredError"}, {.threads = 1});
  const Tensor out = reg.predict(d.x, 32);
  const EvaluateResult rr = reg.evaluate(d.x, y, {.batch_size = 32, .verbose = 0});
  EXPECT_NEAR(rr.metrics[0].second, host_metric("mae", out, y), 1e-6);
  EXPECT_NEAR(rr.metrics[1].second, host_metric("root_mean_squared_error", out, y), 1e-6);
  EXPECT_NEAR(rr.metrics[1].second * rr.metrics[1].second, rr.loss, 1e-5);
}

TEST(Metrics, FromLogitsMetricsReadTheLogitsAsKerasDoes) {
  const Data d;
  Sequential model({Input({6}), Dense(4)});
  model.compile(SGD(SGDOptions{.learning_rate = 1e-30}), LossSpec{"categorical_crossentropy", true},
                {"mse"}, {.threads = 1});
  const Tensor logits = model.predict(d.x, 32);
  const EvaluateResult r = model.evaluate(d.x, d.onehot, {.batch_size = 32, .verbose = 0});
  EXPECT_NEAR(r.metrics[0].second, host_metric("mse", logits, d.onehot), 1e-6);
}

TEST(Metrics, OnlyAModelWithThemMakesTheirCalls) {
  auto metric_calls = [](std::vector<std::string> metrics) {
    Sequential model({Input({6}), Dense(5, "relu"), Dense(4, "softmax")});
    perf::RecordingBackend* recorder = nullptr;
    model.compile(Adam(), "categorical_crossentropy", std::move(metrics),
                  {.make_backend =
                       [&recorder] {
                         auto r = std::make_unique<perf::RecordingBackend>("cpu", true);
                         recorder = r.get();
                         return r;
                       },
                   .initialize_weights = false});
    model.trace_training_step(16);
    int n = 0;
    for (const perf::BackendCall& c : recorder->calls())
      if (c.call == perf::Call::metric_sum) {
        ++n;
        EXPECT_EQ(c.scope, "metrics");
        EXPECT_EQ(c.m, 16);
        EXPECT_EQ(c.n, 4);
      }
    return n;
  };
  EXPECT_EQ(metric_calls({"accuracy"}), 0);
  EXPECT_EQ(metric_calls({}), 0);
  EXPECT_EQ(metric_calls({"accuracy", "mae", "mse"}), 2);
}

TEST(Metrics, NamesAreKerasAndTheRestAreRefusedInOneLine) {
  EXPECT_EQ(metric_spec("mae").kind, MetricKind::mean_absolute_error);
  EXPECT_EQ(metric_spec("MAE").kind, MetricKind::mean_absolute_error);
  EXPECT_EQ(metric_spec("MeanSquaredError").kind, MetricKind::mean_squared_error);
  EXPECT_TRUE(metric_spec("root_mean_squared_error").root);
  EXPECT_TRUE(metric_spec("ACC").loss_accuracy);
  EXPECT_EQ(metric_spec("top_k_categorical_accuracy").parameter, 5.0f);
  EXPECT_FALSE(metric_spec("mse").higher_is_better);
  const std::string e = error_of([] { metric_spec("precision"); });
  EXPECT_NE(e.find("compile: metric 'precision' is not supported (yet)"), std::string::npos) << e;
  EXPECT_NE(e.find("not Precision, Recall, AUC"), std::string::npos) << e;

  Sequential model({Input({6}), Dense(4, "softmax")});
  EXPECT_EQ(error_of([&] {
              model.compile(Adam(), "categorical_crossentropy", {"mae", "mae"});
            }),
            "compile: metric 'mae' is given twice (its History key 'mae' would be the same): "
            "give each metric once");
  EXPECT_NE(error_of([&] {
              model.compile(Adam(), "categorical_crossentropy", {"sparse_categorical_accuracy"});
            }).find("reads class indices"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              model.compile(Adam(), "sparse_categorical_crossentropy", {"categorical_accuracy"});
            }).find("use sparse_categorical_accuracy"),
            std::string::npos);
}

}  // namespace
}  // namespace crossover
