// Keras's weight regularizers (nn/regularizers.h): the backend's penalty and gradient against a
// float64 reference, a training step against the same step without them, evaluate's loss, a
// frozen layer's, and the Keras JSON reader's forms and refusals. Against Keras 3.15 itself:
// tests/python/test_regularizers_peers.py.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "formats/model_config.h"
#include "nn/layers.h"
#include "nn/layers/keras_config.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::random_tensor;

double sign(double w) { return w > 0 ? 1.0 : (w < 0 ? -1.0 : 0.0); }

TEST(Regularizers, TheCpuBackendsPenaltyAndGradientAreTheFloat64References) {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  Tensor w = random_tensor({257}, 4);
  w[3] = 0.0f;  // sign(0) = 0, as TensorFlow's
  Tensor g = random_tensor({257}, 5);
  const std::vector<float> g0(g.data(), g.data() + g.size());
  StepCounters ctr;
  const float l1 = 0.03f, l2 = 0.2f;
  be->regularize(w.data(), g.data(), w.size(), l1, l2, 0.0f, &ctr, 8);
  double penalty = 0;
  for (int64_t i = 0; i < w.size(); ++i) {
    penalty += l1 * std::abs(w[i]) + l2 * static_cast<double>(w[i]) * w[i];
    EXPECT_NEAR(g[i], g0[static_cast<std::size_t>(i)] + l1 * sign(w[i]) + 2.0 * l2 * w[i], 1e-6)
        << i;
  }
  EXPECT_NEAR(ctr.loss_sum, 8 * penalty, 1e-5 * penalty);
  // Without a gradient (evaluate): the penalty only.
  StepCounters eval;
  const std::vector<float> before(g.data(), g.data() + g.size());
  be->regularize(w.data(), nullptr, w.size(), l1, l2, 0.0f, &eval, 3);
  EXPECT_NEAR(eval.loss_sum, 3 * penalty, 1e-5 * penalty);
  for (int64_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], before[static_cast<std::size_t>(i)]);
}

Tensor labels(int64_t n) {
  Tensor y({n});
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(i % 3);
  return y;
}

Sequential dense_model(const Regularizer& kernel, const Regularizer& bias, bool frozen = false) {
  Layer hidden = Dense(4, "tanh");
  hidden.trainable = !frozen;
  hidden.args<DenseArgs>().kernel_regularizer = kernel;
  Layer out = Dense(3, "softmax");
  out.args<DenseArgs>().bias_regularizer = bias;
  Sequential model({Input({5}), hidden, out});
  model.compile(SGD({.learning_rate = 0.1}), "sparse_categorical_crossentropy", {}, {.threads = 1});
  return model;
}

double penalty(const Tensor& w, double l1, double l2) {
  double p = 0;
  for (int64_t i = 0; i < w.size(); ++i) p += l1 * std::abs(w[i]) + l2 * w[i] * w[i];
  return p;
}

// One SGD step with regularizers is the step without them plus their gradient, and its loss is
// the loss without them plus their penalty at the step's weights; evaluate's loss holds the
// penalty too. A frozen layer's regularizer adds nothing (Keras counts trainable weights only).
TEST(Regularizers, AStepAddsThePenaltyToTheLossAndItsGradientToTheWeights) {
  const Regularizer kernel{Regularizer::Kind::l1_l2, 0.01, 0.02};
  const Regularizer bias{Regularizer::Kind::l2, 0.0, 0.3};
  Sequential plain = dense_model({}, {});
  Sequential reg = dense_model(kernel, bias);
  const int64_t n = 6;
  const Tensor x = random_tensor({n, 5}, 7, -2.0f, 2.0f);
  const Tensor y = labels(n);
  std::vector<NamedTensor> start = plain.get_weights();
  for (std::size_t i = 0; i < start.size(); ++i)
    start[i].value = random_tensor(start[i].value.shape(), 20 + i, -0.6f, 0.6f);
  plain.set_weights(start);
  reg.set_weights(start);
  const FitOptions one{.epochs = 1, .batch_size = n, .shuffle = false, .verbose = 0};
  const double expected_penalty =
      penalty(start[0].value, 0.01, 0.02) + penalty(start[3].value, 0.0, 0.3);
  const double plain_loss = plain.fit(x, y, one).history.at("loss")[0];
  const double reg_loss = reg.fit(x, y, one).history.at("loss")[0];
  EXPECT_NEAR(reg_loss - plain_loss, expected_penalty, 1e-5);
  const std::vector<NamedTensor> a = plain.get_weights(), b = reg.get_weights();
  for (int64_t i = 0; i < a[0].value.size(); ++i) {
    const double w = start[0].value[i];
    EXPECT_NEAR(b[0].value[i], a[0].value[i] - 0.1 * (0.01 * sign(w) + 2 * 0.02 * w), 1e-6);
  }
  for (int64_t i = 0; i < a[3].value.size(); ++i)
    EXPECT_NEAR(b[3].value[i], a[3].value[i] - 0.1 * (2 * 0.3 * start[3].value[i]), 1e-6);
  for (std::size_t t : {std::size_t{1}, std::size_t{2}})  // the unregularized weights: the same
    for (int64_t i = 0; i < a[t].value.size(); ++i) EXPECT_EQ(a[t].value[i], b[t].value[i]);
  const double now = penalty(b[0].value, 0.01, 0.02) + penalty(b[3].value, 0.0, 0.3);
  const double plain_eval = plain.evaluate(x, y, {.batch_size = n, .verbose = 0}).loss;
  reg.set_weights(a);  // the same weights as `plain`: the losses differ by the penalty alone
  const double reg_eval = reg.evaluate(x, y, {.batch_size = n, .verbose = 0}).loss;
  EXPECT_NEAR(reg_eval - plain_eval,
              penalty(a[0].value, 0.01, 0.02) + penalty(a[3].value, 0.0, 0.3), 1e-5);
  EXPECT_GT(now, 0.0);

  Sequential frozen = dense_model(kernel, {}, true);
  Sequential frozen_plain = dense_model({}, {}, true);
  frozen.set_weights(start);
  frozen_plain.set_weights(start);
  EXPECT_EQ(frozen.fit(x, y, one).history.at("loss")[0],
            frozen_plain.fit(x, y, one).history.at("loss")[0]);
}

TEST(Regularizers, KerasJsonFormsAreReadWrittenAndRefusedByName) {
  const auto kernel_of = [](const std::string& value) {
    const Layer l =
        layer_from_config("Dense", R"({"units": 2, "kernel_regularizer": )" + value + "}");
    return l.args<DenseArgs>().kernel_regularizer;
  };
  EXPECT_EQ(kernel_of(R"("l2")").l2, 0.01);
  EXPECT_EQ(kernel_of(R"("l1")").l1, 0.01);
  EXPECT_FALSE(kernel_of(R"("l1_l2")").any());  // Keras's L1L2() has both factors 0
  const Regularizer r = kernel_of(
      R"({"module": "keras.regularizers", "class_name": "L1L2", "config": {"l1": 0.5, "l2": 0.25},
          "registered_name": null})");
  EXPECT_EQ(r.kind, Regularizer::Kind::l1_l2);
  EXPECT_EQ(r.l1, 0.5);
  EXPECT_EQ(r.l2, 0.25);
  EXPECT_FALSE(kernel_of("null").any());
  // Written back as Keras 3.15 writes it.
  Layer d = layer_from_config("Dense", R"({"units": 2, "bias_regularizer": {"class_name": "L2",
                                           "config": {"l2": 0.125}}})");
  const nlohmann::json written = nlohmann::json::parse(layer_config_to_json(d));
  EXPECT_EQ(written["bias_regularizer"]["class_name"], "L2");
  EXPECT_EQ(written["bias_regularizer"]["config"]["l2"], 0.125);
  EXPECT_EQ(written["bias_regularizer"]["module"], "keras.regularizers");
  EXPECT_TRUE(written["kernel_regularizer"].is_null());
  for (const auto& [value, why] : std::vector<std::pair<std::string, std::string>>{
           {R"({"class_name": "OrthogonalRegularizer", "config": {"factor": 0.1}})",
            "L1, L2 and L1L2"},
           {R"({"class_name": "L2", "config": {"l2": -1}})", "must be a number >= 0"},
           {R"({"class_name": "L2", "config": {"l1": 1}})", "unexpected field l1"},
           {R"("my_regularizer")", "is not supported"},
           {"3", "expected a regularizer"}}) {
    const std::string message = testing_util::error_of([&] { kernel_of(value); });
    EXPECT_NE(message.find("argument kernel_regularizer: "), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << message;
  }
  // A custom layer's add_weight(regularizer=...), as Python hands it over.
  EXPECT_EQ(keras_config::regularizer_from_keras_json(R"("l2")", "add_weight").l2, 0.01);
  EXPECT_FALSE(keras_config::regularizer_from_keras_json("null", "add_weight").any());
  const std::string custom = testing_util::error_of(
      [] { keras_config::regularizer_from_keras_json(R"("my_regularizer")", "add_weight"); });
  EXPECT_EQ(custom.rfind("add_weight: argument regularizer: ", 0), 0u) << custom;
  // (activity_regularizer: activity_regularizer_test.cpp.)
}

}  // namespace
}  // namespace crossover
