// The loss terms of a layer's output: Keras's activity_regularizer (every layer's, divided by the
// batch's size as Keras 3 divides it), its ActivityRegularization layer, and the add_loss term of
// a traced call() (AddLoss: a scale times the mean or the sum of a tensor's values). Their
// gradients against central finite differences of a float64 reference of the same model, the
// loss fit and evaluate report against that reference, a step against its gradient, and the
// Keras JSON forms. Against Keras 3.15 itself: tests/python/test_regularizers_peers.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "formats/model_config.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::random_tensor;
using Vec = std::vector<double>;

TEST(ActivityRegularizers, TheBackendsLinearTermAndAGradientWithoutALoss) {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  const Tensor v = random_tensor({300}, 3);
  Tensor g({300});
  StepCounters ctr;
  be->regularize(v.data(), g.data(), v.size(), 0.0f, 0.0f, 0.25f, &ctr, 4);
  double sum = 0;
  for (int64_t i = 0; i < v.size(); ++i) {
    sum += v[i];
    EXPECT_EQ(g[i], 0.25f) << i;
  }
  EXPECT_NEAR(ctr.loss_sum, 4 * 0.25 * sum, 1e-5);
  // No counters: the gradient only, and nothing else touched.
  be->regularize(v.data(), g.data(), v.size(), 0.5f, 0.0f, 0.0f, nullptr, 4);
  for (int64_t i = 0; i < v.size(); ++i)
    EXPECT_FLOAT_EQ(g[i], 0.25f + (v[i] > 0 ? 0.5f : (v[i] < 0 ? -0.5f : 0.0f))) << i;
}

// The float64 reference: Input(5) -> Dense(4, tanh) -> [terms on its output h] -> Dense(3,
// softmax) -> sparse categorical cross-entropy, and the terms each variant adds.
struct Weights {
  Vec w1, b1, w2, b2;
};
enum class Terms { activity, add_loss };

double reference_loss(const Weights& w, const Tensor& x, const Tensor& y, Terms terms) {
  const int64_t n = x.dim(0);
  double ce = 0, penalty = 0;
  for (int64_t r = 0; r < n; ++r) {
    Vec h(4), z(3);
    for (int j = 0; j < 4; ++j) {
      double s = w.b1[j];
      for (int i = 0; i < 5; ++i) s += x[r * 5 + i] * w.w1[i * 4 + j];
      h[j] = std::tanh(s);
    }
    for (int k = 0; k < 3; ++k) {
      z[k] = w.b2[k];
      for (int j = 0; j < 4; ++j) z[k] += h[j] * w.w2[j * 3 + k];
    }
    double mx = std::max({z[0], z[1], z[2]}), sum = 0;
    for (double& v : z) sum += (v = std::exp(v - mx));
    for (double& v : z) v /= sum;
    ce -= std::log(z[static_cast<std::size_t>(y[r])]);
    for (int j = 0; j < 4; ++j) {
      if (terms == Terms::activity)  // Dense's L1L2(0.01, 0.05), then ActivityRegularization's
        penalty +=
            0.01 * std::abs(h[j]) + 0.05 * h[j] * h[j] + 0.02 * std::abs(h[j]) + 0.1 * h[j] * h[j];
      else  // 0.5 * mean(h) and -0.2 * sum(h), each times n (the sum below is divided by n)
        penalty += 0.5 * h[j] / 4.0 - 0.2 * h[j] * static_cast<double>(n);
    }
    if (terms == Terms::activity)  // the output layer's L2(0.03)
      for (double p : z) penalty += 0.03 * p * p;
  }
  // Keras: the activity penalties divided by the batch's size; the add_loss terms as they are.
  return ce / static_cast<double>(n) + penalty / static_cast<double>(n);
}

Sequential model_with(Terms terms) {
  GraphBuilder g;
  int h = g.input({5});
  Layer hidden = Dense(4, "tanh");
  if (terms == Terms::activity) hidden.activity = {Regularizer::Kind::l1_l2, 0.01, 0.05};
  h = g.add(hidden, h);
  if (terms == Terms::activity) {
    h = g.add(ActivityRegularization(0.02, 0.1), h);
  } else {
    g.add(AddLoss(0.5, true), h);  // read by no layer
    g.add(AddLoss(-0.2, false), h);
  }
  Layer out = Dense(3, "softmax");
  if (terms == Terms::activity) out.activity = {Regularizer::Kind::l2, 0.0, 0.03};
  Sequential model(g.graph(g.add(out, h)));
  model.compile(SGD({.learning_rate = 0.1}), "sparse_categorical_crossentropy", {}, {.threads = 1});
  return model;
}

Weights weights_of(const std::vector<NamedTensor>& t) {
  auto vec = [](const Tensor& a) { return Vec(a.data(), a.data() + a.size()); };
  return {vec(t[0].value), vec(t[1].value), vec(t[2].value), vec(t[3].value)};
}

// Every weight's gradient (gradients(), which holds the terms as fit's step does) against central
// differences of the reference; evaluate's and fit's losses against the reference's; one SGD
// step is the weights minus the learning rate times that gradient.
void check_terms(Terms terms) {
  Sequential model = model_with(terms);
  const int64_t n = 6;
  const Tensor x = random_tensor({n, 5}, 11, -1.5f, 1.5f);
  Tensor y({n});
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(i % 3);
  std::vector<NamedTensor> start = model.get_weights();
  for (std::size_t i = 0; i < start.size(); ++i)
    start[i].value = random_tensor(start[i].value.shape(), 30 + i, -0.8f, 0.8f);
  model.set_weights(start);
  const Weights w0 = weights_of(start);
  const std::vector<NamedTensor> grads = model.gradients(x, y);
  ASSERT_EQ(grads.size(), 4u);
  const std::vector<Vec Weights::*> members = {&Weights::w1, &Weights::b1, &Weights::w2,
                                               &Weights::b2};
  for (std::size_t t = 0; t < members.size(); ++t) {
    for (std::size_t i = 0; i < (w0.*members[t]).size(); ++i) {
      Weights up = w0, down = w0;
      const double h = 1e-5;
      (up.*members[t])[i] += h;
      (down.*members[t])[i] -= h;
      const double fd =
          (reference_loss(up, x, y, terms) - reference_loss(down, x, y, terms)) / (2 * h);
      EXPECT_NEAR(grads[t].value[static_cast<int64_t>(i)], fd, 2e-5 + 1e-4 * std::abs(fd))
          << grads[t].name << "[" << i << "]";
    }
  }
  const double expected = reference_loss(w0, x, y, terms);
  EXPECT_NEAR(model.evaluate(x, y, {.batch_size = n, .verbose = 0}).loss, expected,
              1e-5 * std::abs(expected) + 1e-6);
  const FitOptions one{.epochs = 1, .batch_size = n, .shuffle = false, .verbose = 0};
  EXPECT_NEAR(model.fit(x, y, one).history.at("loss")[0], expected,
              1e-5 * std::abs(expected) + 1e-6);
  const std::vector<NamedTensor> after = model.get_weights();
  for (std::size_t t = 0; t < after.size(); ++t)
    for (int64_t i = 0; i < after[t].value.size(); ++i)
      EXPECT_NEAR(after[t].value[i], start[t].value[i] - 0.1f * grads[t].value[i], 1e-6)
          << after[t].name << "[" << i << "]";
}

TEST(ActivityRegularizers, ActivityRegularizersMatchFiniteDifferencesOfAFloat64Reference) {
  check_terms(Terms::activity);
}

TEST(ActivityRegularizers, AddLossTermsMatchFiniteDifferencesOfAFloat64Reference) {
  check_terms(Terms::add_loss);
}

// The terms are fit's and evaluate's: predict gives the same outputs with or without them.
TEST(ActivityRegularizers, PredictIsUnchangedByTheTerms) {
  for (Terms terms : {Terms::activity, Terms::add_loss}) {
    Sequential with = model_with(terms);
    GraphBuilder g;
    const int in = g.input({5});
    Sequential plain(g.graph(g.add(Dense(3, "softmax"), g.add(Dense(4, "tanh"), in))));
    plain.compile(SGD(), "sparse_categorical_crossentropy", {}, {.threads = 1});
    plain.set_weights(with.get_weights());
    const Tensor x = random_tensor({7, 5}, 2);
    const Tensor a = with.predict(x), b = plain.predict(x);
    for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << i;
  }
}

TEST(ActivityRegularizers, KerasJsonFormsAreReadWrittenAndRefusedByName) {
  const Layer conv = layer_from_config("Conv2D", R"({"filters": 2, "kernel_size": 3,
                                                     "activity_regularizer": "l2"})");
  EXPECT_EQ(conv.activity.kind, Regularizer::Kind::l2);
  EXPECT_EQ(conv.activity.l2, 0.01);
  const nlohmann::json c = nlohmann::json::parse(layer_config_to_json(conv));
  EXPECT_EQ(c["activity_regularizer"]["class_name"], "L2");
  EXPECT_EQ(c["activity_regularizer"]["config"]["l2"], 0.01);
  // Any layer takes one (Keras's base Layer); written only when set.
  const Layer bn =
      layer_from_config("BatchNormalization",
                        R"({"activity_regularizer": {"class_name": "L1", "config": {"l1": 0.5}}})");
  EXPECT_EQ(bn.activity.l1, 0.5);
  EXPECT_EQ(nlohmann::json::parse(layer_config_to_json(bn))["activity_regularizer"]["class_name"],
            "L1");
  EXPECT_FALSE(
      nlohmann::json::parse(layer_config_to_json(Dropout(0.5))).contains("activity_regularizer"));
  EXPECT_TRUE(
      nlohmann::json::parse(layer_config_to_json(Dense(2)))["activity_regularizer"].is_null());
  // ActivityRegularization: l1 and l2, as Keras 3.15 writes it (no activity_regularizer).
  const Layer ar = layer_from_config("ActivityRegularization", R"({"l1": 0.25, "l2": 0.5})");
  EXPECT_EQ(ar.activity.kind, Regularizer::Kind::l1_l2);
  EXPECT_EQ(ar.activity.l1, 0.25);
  EXPECT_EQ(ar.activity.l2, 0.5);
  const nlohmann::json a = nlohmann::json::parse(layer_config_to_json(ar));
  EXPECT_EQ(a["l1"], 0.25);
  EXPECT_EQ(a["l2"], 0.5);
  EXPECT_FALSE(a.contains("activity_regularizer"));
  for (const auto& [cls, config, why] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"Dense",
            R"({"units": 2, "activity_regularizer": {"class_name": "OrthogonalRegularizer"}})",
            "argument activity_regularizer: regularizer"},
           {"ActivityRegularization", R"({"l1": -1})", "argument l1: must be a finite number >= 0"},
           {"TimeDistributed", R"({"layer": {"class_name": "Dense", "config": {"units": 2,
              "activity_regularizer": "l2"}}})",
            "an inner layer's activity_regularizer is not supported (yet)"}}) {
    const std::string message = testing_util::error_of([&] { layer_from_config(cls, config); });
    EXPECT_NE(message.find(why), std::string::npos) << message;
  }
  // An add_loss term has no Keras class.
  EXPECT_NE(testing_util::error_of([] {
              layer_config_to_json(AddLoss(1.0, true));
            }).find("has no Keras layer class"),
            std::string::npos);
}

// With several outputs the reported loss is the outputs' weighted losses plus the terms (the
// model's own counters hold them): the loss of the same model without the terms, plus them.
TEST(ActivityRegularizers, AModelOfSeveralOutputsReportsItsTerms) {
  const auto model = [](double l2) {
    GraphBuilder g;
    const int x = g.input({5});
    Layer hidden = Dense(4, "tanh");
    hidden.activity = {Regularizer::Kind::l2, 0.0, l2};
    const int h = g.add(hidden, x);
    const int a = g.add(Dense(3, "softmax"), h), b = g.add(Dense(2), h);
    Sequential m(g.graph({a, b}, {}));
    m.compile_outputs(
        SGD(), {{{"sparse_categorical_crossentropy"}, 1.0, {}}, {{"mean_squared_error"}, 0.5, {}}},
        {.threads = 1});
    return m;
  };
  Sequential with = model(0.25), plain = model(0.0);
  plain.set_weights(with.get_weights());
  const int64_t n = 8;
  const Tensor x = random_tensor({n, 5}, 21, -1.0f, 1.0f);
  Tensor y({n, 3});  // the class index, then the second output's two targets
  for (int64_t i = 0; i < n; ++i) {
    y[i * 3] = static_cast<float>(i % 3);
    y[i * 3 + 1] = 0.5f;
    y[i * 3 + 2] = -0.5f;
  }
  const std::vector<NamedTensor> w = with.get_weights();
  double penalty = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < 4; ++j) {
      double s = w[1].value[j];
      for (int64_t i = 0; i < 5; ++i) s += x[r * 5 + i] * w[0].value[i * 4 + j];
      penalty += 0.25 * std::tanh(s) * std::tanh(s);
    }
  const EvaluateOptions all{.batch_size = n, .verbose = 0};
  EXPECT_NEAR(with.evaluate(x, y, all).loss - plain.evaluate(x, y, all).loss,
              penalty / static_cast<double>(n), 1e-5);
}

// from_logits takes a final softmax's input back as the logits; an activity regularizer on that
// layer reads its activated output, which the step would then not compute: refused by name.
TEST(ActivityRegularizers, FromLogitsUnderTheOutputsActivityRegularizerIsRefused) {
  Layer out = Dense(3, "softmax");
  out.name = "probabilities";
  out.activity = {Regularizer::Kind::l1, 0.01, 0.0};
  Sequential model({Input({4}), out});
  const std::string message = testing_util::error_of([&] {
    model.compile(SGD(), LossSpec{"sparse_categorical_crossentropy", true}, {}, {.threads = 1});
  });
  EXPECT_NE(message.find("from_logits=True on output 'probabilities'"), std::string::npos)
      << message;
  model.compile(SGD(), "sparse_categorical_crossentropy", {}, {.threads = 1});  // without: fine
}

}  // namespace
}  // namespace crossover
