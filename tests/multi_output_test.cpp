// Functional models of several outputs (LayerGraph::output_layers, compile_outputs): one loss
// head per output, the targets and predictions packed output by output, the model's loss the
// weighted sum of the outputs' losses. Their agreement with Keras 3 from the same weights is
// tests/python/test_multi_output.py's.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

// Input(6) -> Dense(8, relu) "shared" -> Dense(1) "value" and Dense(3, softmax) "kind".
LayerGraph two_heads() {
  GraphBuilder g;
  const int x = g.input({6}, "x");
  Layer shared = Dense(8, "relu");
  shared.name = "shared";
  const int h = g.add(shared, x);
  Layer value = Dense(1);
  value.name = "value";
  Layer kind = Dense(3, "softmax");
  kind.name = "kind";
  const int v = g.add(value, h);
  const int k = g.add(kind, h);
  return g.graph({v, k}, {});
}

// y packed: the value's target, then the class index.
Tensor packed_targets(int64_t n) {
  Tensor y({n, 2});
  for (int64_t i = 0; i < n; ++i) {
    y[i * 2] = static_cast<float>(i % 5) * 0.25f;
    y[i * 2 + 1] = static_cast<float>((i * 7) % 3);
  }
  return y;
}

std::vector<OutputLoss> losses(double value_weight, double kind_weight) {
  std::vector<OutputLoss> out(2);
  out[0].loss.name = "mean_squared_error";
  out[0].weight = value_weight;
  out[0].metrics.push_back(metric_spec("mae"));
  out[1].loss.name = "sparse_categorical_crossentropy";
  out[1].weight = kind_weight;
  out[1].metrics.push_back(metric_spec("accuracy"));
  return out;
}

TEST(MultiOutput, TheGraphListsItsOutputsInOrder) {
  Sequential model(two_heads());
  EXPECT_EQ(model.output_layers(), (std::vector<int>{2, 3}));
  EXPECT_EQ(model.layers()[2].name, "value");
}

// The loss of a step is the weighted sum of the outputs' losses, each reported unweighted under
// "<output>_loss"; evaluate's agree with the outputs predict gives.
TEST(MultiOutput, EvaluateReportsEachOutputsLossAndTheirWeightedSum) {
  Sequential model(two_heads());
  auto outs = losses(2.0, 0.5);
  outs[0].metrics[0].name = "value_mae";
  outs[1].metrics[0].name = "kind_accuracy";
  model.compile_outputs(Adam(), outs, {.threads = 1, .seed = 3});
  const Tensor x = random_tensor({40, 6}, 5);
  const Tensor y = packed_targets(40);
  const EvaluateResult r = model.evaluate(x, y, {.batch_size = 16, .verbose = 0});
  ASSERT_EQ(r.metrics.size(), 4u);
  EXPECT_EQ(r.metrics[0].first, "value_loss");
  EXPECT_EQ(r.metrics[1].first, "kind_loss");
  EXPECT_EQ(r.metrics[2].first, "value_mae");
  EXPECT_EQ(r.metrics[3].first, "kind_accuracy");
  const Tensor p = model.predict(x);
  ASSERT_EQ(p.shape(), (Shape{40, 4}));  // the value, then the 3 probabilities
  double mse = 0, mae = 0, ce = 0, correct = 0;
  for (int64_t i = 0; i < 40; ++i) {
    const double d = p[i * 4] - y[i * 2];
    mse += d * d;
    mae += std::abs(d);
    const auto label = static_cast<int64_t>(y[i * 2 + 1]);
    ce -= std::log(static_cast<double>(p[i * 4 + 1 + label]));
    int64_t best = 0;
    for (int64_t c = 1; c < 3; ++c)
      if (p[i * 4 + 1 + c] > p[i * 4 + 1 + best]) best = c;
    correct += best == label ? 1 : 0;
  }
  EXPECT_NEAR(r.metrics[0].second, mse / 40, 1e-5);
  EXPECT_NEAR(r.metrics[1].second, ce / 40, 1e-5);
  EXPECT_NEAR(r.metrics[2].second, mae / 40, 1e-5);
  EXPECT_NEAR(r.metrics[3].second, correct / 40, 1e-12);
  EXPECT_NEAR(r.loss, 2.0 * r.metrics[0].second + 0.5 * r.metrics[1].second, 1e-9);

  const History h = model.fit(x, y, {.epochs = 2, .batch_size = 16, .verbose = 0});
  for (const char* key : {"loss", "value_loss", "kind_loss", "value_mae", "kind_accuracy"})
    EXPECT_EQ(h.history.at(key).size(), 2u) << key;
  EXPECT_NEAR(h.history.at("loss")[1],
              2.0 * h.history.at("value_loss")[1] + 0.5 * h.history.at("kind_loss")[1], 1e-9);
}

// An output of weight 0 adds nothing to the gradient: the shared layer and the other head train
// to the bit as the model of that one output, from the same weights.
TEST(MultiOutput, AnOutputOfWeightZeroLeavesTheOtherTrainingAsItsModelAlone) {
  for (int threads : {1, 2}) {
    Sequential two(two_heads());
    two.compile_outputs(Adam(), losses(0.0, 1.0), {.threads = threads, .seed = 3});
    GraphBuilder g;
    const int x = g.input({6}, "x");
    Layer shared = Dense(8, "relu");
    shared.name = "shared";
    Layer kind = Dense(3, "softmax");
    kind.name = "kind";
    Sequential one(g.graph(g.add(kind, g.add(shared, x))));
    one.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = threads, .seed = 3});
    std::vector<NamedTensor> w;
    for (const NamedTensor& t : two.get_weights())
      if (t.name.rfind("value/", 0) != 0) w.push_back(t);
    one.set_weights(w);
    const Tensor xs = random_tensor({48, 6}, 7);
    const Tensor y = packed_targets(48);
    Tensor labels({48});
    for (int64_t i = 0; i < 48; ++i) labels[i] = y[i * 2 + 1];
    two.fit(xs, y, {.epochs = 2, .batch_size = 16, .verbose = 0});
    one.fit(xs, labels, {.epochs = 2, .batch_size = 16, .verbose = 0});
    const auto a = one.get_weights();
    std::vector<NamedTensor> b;
    for (const NamedTensor& t : two.get_weights())
      if (t.name.rfind("value/", 0) != 0) b.push_back(t);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      for (int64_t e = 0; e < a[i].value.size(); ++e)
        ASSERT_EQ(a[i].value[e], b[i].value[e]) << a[i].name << "[" << e << "] threads " << threads;
  }
}

// The same loss for every output (compile on a model of several outputs): each output's
// metrics are named after it.
TEST(MultiOutput, OneLossForAllOutputsNamesEachOutputsMetrics) {
  GraphBuilder g;
  const int x = g.input({4}, "x");
  Layer a = Dense(2);
  a.name = "a";
  Layer b = Dense(3);
  b.name = "b";
  const int oa = g.add(a, x);
  const int ob = g.add(b, x);
  Sequential model(g.graph({oa, ob}, {}));
  model.compile(SGD(), "mse", {"mae"}, {.threads = 1});
  const EvaluateResult r =
      model.evaluate(random_tensor({8, 4}, 1), random_tensor({8, 5}, 2), {.verbose = 0});
  ASSERT_EQ(r.metrics.size(), 4u);
  EXPECT_EQ(r.metrics[2].first, "a_mae");
  EXPECT_EQ(r.metrics[3].first, "b_mae");
}

TEST(MultiOutput, WhatItDoesNotTakeIsRefusedNamingIt) {
  Sequential model(two_heads());
  EXPECT_NE(error_of([&] {
              model.compile_outputs(Adam(), {losses(1, 1)[0]});
            }).find("the model has 2 outputs, but 1 losses were given"),
            std::string::npos);
  model.compile_outputs(Adam(), losses(1, 1), {.threads = 1});
  const Tensor x = random_tensor({4, 6}, 1);
  EXPECT_NE(error_of([&] { model.fit(x, Tensor({4}), {.verbose = 0}); })
                .find("y must hold the targets of the model's 2 outputs side by side, shape (4, "
                      "2), got (4,)"),
            std::string::npos);
  Tensor y = packed_targets(4);
  y[3] = 3;  // sample 1's class
  EXPECT_NE(error_of([&] {
              model.fit(x, y, {.verbose = 0});
            }).find("label 3 at index 1 of output 'kind' is not a class index in 0..2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { model.gradients(x, packed_targets(4)); }).find("has 2"),
            std::string::npos);
  // An output that another layer reads.
  GraphBuilder g;
  const int in = g.input({3});
  const int d = g.add(Dense(2), in);
  const int e = g.add(Dense(2), d);
  EXPECT_NE(error_of([&] {
              Sequential m(g.graph({d, e}, {}));
            }).find("is one of the model's outputs and read by another layer"),
            std::string::npos);
}

}  // namespace
}  // namespace crossover
