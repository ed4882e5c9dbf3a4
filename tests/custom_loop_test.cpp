// A custom training loop's step (Sequential::training_forward, training_backward,
// apply_gradients: Keras's model(x, training=True) under a GradientTape, tape.gradient and
// optimizer.apply_gradients) is fit's step split in three: the same weights after it, bit for bit
// on one thread with the same batch; dropout's masks the ones fit draws; gradients those of
// gradients() (which gradient_test.cpp checks against float64 finite differences).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::equal(a.data(), a.data() + a.size(), b.data());
}

void expect_same_weights(const Sequential& a, const Sequential& b) {
  const auto wa = a.get_weights(), wb = b.get_weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (std::size_t i = 0; i < wa.size(); ++i)
    EXPECT_TRUE(same_bits(wa[i].value, wb[i].value)) << wa[i].name;
}

Tensor labels(int64_t n, int64_t classes) {
  Tensor y({n});
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>((i * 7 + 3) % classes);
  return y;
}

std::vector<Layer> mlp(double dropout = 0) {
  std::vector<Layer> layers = {Input({5}), Dense(8, "relu")};
  if (dropout > 0) layers.push_back(Dropout(dropout));
  layers.push_back(Dense(3, "softmax"));
  return layers;
}

const CompileOptions kOneThread{.threads = 1, .seed = 11};

FitOptions one_batch_epochs(int epochs, int64_t batch) {
  FitOptions o;
  o.epochs = epochs;
  o.batch_size = batch;
  o.shuffle = false;
  o.verbose = 0;
  return o;
}

// `steps` split steps on (x, y) with the compiled loss.
void split_steps(Sequential& model, const Tensor& x, const Tensor& y, int steps,
                 const LossSpec& loss = {"sparse_categorical_crossentropy", false}) {
  for (int s = 0; s < steps; ++s) {
    model.training_forward(x);
    model.apply_gradients(model.training_backward(y, loss).gradients);
  }
}

TEST(CustomLoop, ApplyGradientsOfGradientsIsOneFitStep) {
  const Tensor x = random_tensor({6, 5}, 1), y = labels(6, 3);
  for (const OptimizerConfig& opt : {Adam(), Adam({.clipnorm = 0.05}), SGD({.momentum = 0.9})}) {
    Sequential fitted(mlp()), stepped(mlp());
    fitted.compile(opt, "sparse_categorical_crossentropy", {}, kOneThread);
    stepped.compile(opt, "sparse_categorical_crossentropy", {}, kOneThread);
    fitted.fit(x, y, one_batch_epochs(3, 6));
    for (int s = 0; s < 3; ++s) stepped.apply_gradients(stepped.gradients(x, y));
    expect_same_weights(fitted, stepped);
    EXPECT_EQ(stepped.optimizer_steps(), 3);
  }
}

TEST(CustomLoop, SplitStepWithDropoutIsFitsStepWithFitsMasks) {
  const Tensor x = random_tensor({7, 5}, 2), y = labels(7, 3);
  Sequential fitted(mlp(0.5)), stepped(mlp(0.5));
  fitted.compile(Adam(), "sparse_categorical_crossentropy", {}, kOneThread);
  stepped.compile(Adam(), "sparse_categorical_crossentropy", {}, kOneThread);
  fitted.fit(x, y, one_batch_epochs(4, 7));
  split_steps(stepped, x, y, 4);
  expect_same_weights(fitted, stepped);
}

TEST(CustomLoop, OutputsAreWhatTheUserSeesAndDropoutChangesThem) {
  const Tensor x = random_tensor({4, 5}, 3);
  Sequential plain(mlp()), dropped(mlp(0.5));
  plain.compile(Adam(), "sparse_categorical_crossentropy", {}, kOneThread);
  dropped.compile(Adam(), "sparse_categorical_crossentropy", {}, kOneThread);
  // The final softmax applied, as predict applies it.
  EXPECT_TRUE(same_bits(plain.training_forward(x), plain.predict(x)));
  const Tensor trained = dropped.training_forward(x), inferred = dropped.predict(x);
  EXPECT_FALSE(same_bits(trained, inferred));
  for (int64_t r = 0; r < 4; ++r) {
    float sum = 0;
    for (int64_t j = 0; j < 3; ++j) sum += trained[r * 3 + j];
    EXPECT_NEAR(sum, 1.0f, 1e-5f);
  }
}

TEST(CustomLoop, GradientsAreThoseOfGradientsForAnyLossGiven) {
  const Tensor x = random_tensor({6, 5}, 4), y = labels(6, 3);
  // Compiled with mse and a linear output; differentiated with the logits' cross-entropy.
  std::vector<Layer> logits = {Input({5}), Dense(8, "tanh"), Dense(3)};
  Sequential split(logits), whole(logits);
  split.compile(SGD(), "mean_squared_error", {}, kOneThread);
  whole.compile(SGD(), LossSpec{"sparse_categorical_crossentropy", true}, {}, kOneThread);
  const Tensor out = split.training_forward(x);
  EXPECT_TRUE(same_bits(out, whole.predict(x)));  // the logits themselves
  const auto g = split.training_backward(y, {"sparse_categorical_crossentropy", true});
  const auto want = whole.gradients(x, y);
  ASSERT_EQ(g.gradients.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(g.gradients[i].name, want[i].name);
    EXPECT_TRUE(same_bits(g.gradients[i].value, want[i].value)) << want[i].name;
  }
  EXPECT_NEAR(g.loss, whole.evaluate(x, y, {.batch_size = 6, .verbose = 0}).loss, 1e-6);
}

TEST(CustomLoop, FrozenLayersAreNeitherDifferentiatedNorUpdated) {
  const Tensor x = random_tensor({6, 5}, 5), y = labels(6, 3);
  std::vector<Layer> layers = mlp();
  layers[1].trainable = false;
  Sequential model(layers);
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, kOneThread);
  EXPECT_EQ(model.trainable_gradient_names(),
            (std::vector<std::string>{"dense_1/kernel", "dense_1/bias"}));
  const auto before = model.get_weights();
  split_steps(model, x, y, 2);
  const auto after = model.get_weights();
  EXPECT_TRUE(same_bits(before[0].value, after[0].value));
  EXPECT_TRUE(same_bits(before[1].value, after[1].value));
  EXPECT_FALSE(same_bits(before[2].value, after[2].value));
}

TEST(CustomLoop, UseOptimizerTrainsAsAModelCompiledWithIt) {
  const Tensor x = random_tensor({6, 5}, 6), y = labels(6, 3);
  Sequential fitted(mlp()), stepped(mlp());
  fitted.compile(Adam({.learning_rate = 0.01}), "sparse_categorical_crossentropy", {}, kOneThread);
  stepped.compile(SGD(), "mean_squared_error", {}, kOneThread);
  stepped.fit(random_tensor({6, 5}, 7), random_tensor({6, 3}, 8), one_batch_epochs(1, 6));
  stepped.set_weights(fitted.get_weights());
  stepped.use_optimizer(Adam({.learning_rate = 0.01}));
  EXPECT_EQ(stepped.optimizer_steps(), 0);
  fitted.fit(x, y, one_batch_epochs(2, 6));
  split_steps(stepped, x, y, 2);
  expect_same_weights(fitted, stepped);
}

TEST(CustomLoop, RefusesWhatItCannotDifferentiate) {
  const Tensor x = random_tensor({6, 5}, 9), y = labels(6, 3);
  Sequential model(mlp());
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, kOneThread);
  const LossSpec sparse{"sparse_categorical_crossentropy", false};
  EXPECT_NE(error_of([&] { model.training_backward(y, sparse); }).find("no training pass"),
            std::string::npos);
  model.training_forward(x);
  model.predict(x);  // the pass's buffers are no longer the outputs the caller holds
  EXPECT_NE(error_of([&] { model.training_backward(y, sparse); }).find("no training pass"),
            std::string::npos);
  model.training_forward(x);
  model.training_backward(y, sparse);
  EXPECT_NE(error_of([&] { model.training_backward(y, sparse); }).find("no training pass"),
            std::string::npos);
  Sequential relu_out({Input({5}), Dense(8, "relu"), Dense(3, "relu")});
  relu_out.compile(Adam(), "sparse_categorical_crossentropy", {}, kOneThread);
  relu_out.training_forward(x);
  EXPECT_NE(error_of([&] {
              relu_out.training_backward(y, {"sparse_categorical_crossentropy", true});
            }).find("needs logits"),
            std::string::npos);
  relu_out.training_backward(y, sparse);  // a refused loss leaves the pass to differentiate
  // A final softmax under from_logits: its input taken back as the logits (fit's, Keras's).
  model.training_forward(x);
  const auto taken_back = model.training_backward(y, {"sparse_categorical_crossentropy", true});
  model.training_forward(x);
  const auto plain = model.training_backward(y, sparse);
  EXPECT_EQ(taken_back.loss, plain.loss);
  model.training_forward(x);
  model.training_forward(x);
  EXPECT_NE(error_of([&] { model.training_backward(labels(5, 3), sparse); }).find("y must hold"),
            std::string::npos);
  const auto g = model.gradients(x, y);
  EXPECT_NE(error_of([&] { model.apply_gradients({g[0]}); }).find("4 trainable weight tensors"),
            std::string::npos);
  std::vector<NamedTensor> swapped = {g[1], g[0], g[2], g[3]};
  EXPECT_NE(error_of([&] { model.apply_gradients(swapped); }).find("expected 'dense/kernel'"),
            std::string::npos);
}

// training_backward_outputs with the gradient of a loss with respect to the outputs gives that
// loss's training_backward gradients (up to rounding: the activation's gradient and the loss's
// are then two ops, not the fused one), for a deferred softmax, a deferred tanh (mse) and a
// linear output.
void expect_outputs_gradient_matches(const std::vector<Layer>& layers, const LossSpec& loss,
                                     const Tensor& y) {
  const Tensor x = random_tensor({6, 5}, 12);
  Sequential a(layers), b(layers);
  a.compile(SGD(), "mean_squared_error", {}, kOneThread);
  b.compile(SGD(), "mean_squared_error", {}, kOneThread);
  b.set_weights(a.get_weights());
  const Tensor out = a.training_forward(x);
  const auto want = a.training_backward(y, loss).gradients;
  ASSERT_TRUE(same_bits(out, b.training_forward(x)));
  const int64_t n = out.dim(0), c = out.size() / n;
  Tensor dy(out.shape());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const int64_t i = r * c + j;
      if (loss.name == "sparse_categorical_crossentropy")
        dy[i] = static_cast<int64_t>(y[r]) == j ? -1.0f / (static_cast<float>(n) * out[i]) : 0.0f;
      else
        dy[i] = 2.0f * (out[i] - y[i]) / static_cast<float>(n * c);
    }
  const auto got = b.training_backward_outputs(dy);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].name, want[k].name);
    for (int64_t i = 0; i < want[k].value.size(); ++i)
      EXPECT_NEAR(got[k].value[i], want[k].value[i], 1e-5f + 1e-4f * std::abs(want[k].value[i]))
          << want[k].name << " [" << i << "]";
  }
}

TEST(CustomLoop, OutputGradientsGiveTheLossGradients) {
  expect_outputs_gradient_matches(mlp(), {"sparse_categorical_crossentropy", false}, labels(6, 3));
  expect_outputs_gradient_matches({Input({5}), Dense(8, "relu"), Dense(3, "tanh")},
                                  {"mean_squared_error", false}, random_tensor({6, 3}, 13));
  expect_outputs_gradient_matches({Input({5}), Dense(8, "sigmoid"), Dense(3)},
                                  {"mean_squared_error", false}, random_tensor({6, 3}, 14));
}

TEST(CustomLoop, OutputGradientsOfAnotherShapeAreRefusedAndThePassKept) {
  const Tensor x = random_tensor({6, 5}, 15);
  Sequential model(mlp());
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, kOneThread);
  EXPECT_NE(error_of([&] {
              model.training_backward_outputs(Tensor({6, 3}));
            }).find("no training pass"),
            std::string::npos);
  model.training_forward(x);
  EXPECT_NE(error_of([&] {
              model.training_backward_outputs(Tensor({6, 4}));
            }).find("have shape (6, 3)"),
            std::string::npos);
  EXPECT_EQ(model.training_backward_outputs(Tensor({6, 3})).size(), 4u);
  EXPECT_NE(error_of([&] {
              model.training_backward_outputs(Tensor({6, 3}));
            }).find("no training pass"),
            std::string::npos);
}

}  // namespace
}  // namespace crossover
