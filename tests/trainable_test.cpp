// Frozen layers (Keras's layer.trainable = False), as transfer-learning scripts use them: a frozen
// layer's weights stay bit-identical over fit while the others train along a float64 reference of
// the same steps; a frozen BatchNormalization normalizes by its moving statistics in fit and keeps
// them; the change counts at the next compile; the step makes no weight gradient for a frozen
// layer and no backward pass below the first trainable one; the Keras JSON carries the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/model_config.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/cost_model.h"
#include "perf/recording.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

Layer frozen(Layer l) {
  l.trainable = false;
  return l;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.size() == b.size() && std::equal(a.data(), a.data() + a.size(), b.data());
}

Tensor labels(int64_t n, int64_t classes) {
  Tensor y({n});
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>((i * 7 + 3) % classes);
  return y;
}

// ---- the float64 reference: Dense (relu, linear or the final softmax) and a frozen
// BatchNormalization, sparse categorical cross-entropy over the batch, plain SGD ----
struct RefLayer {
  bool dense = true;
  bool trainable = true;
  int64_t in = 0, out = 0;
  ActivationKind act = ActivationKind::linear;
  std::vector<double> w, b;                 // dense: (in, out), (out)
  std::vector<double> gamma, beta, mm, mv;  // frozen batch normalization
  double epsilon = 1e-3;
};

std::vector<double> doubles(const Tensor& t) { return {t.data(), t.data() + t.size()}; }

// One SGD step of the reference on (x, y); returns the batch's mean loss before the update.
double reference_step(std::vector<RefLayer>& net, const Tensor& x, const Tensor& y, double lr) {
  const int64_t n = x.dim(0);
  std::vector<std::vector<double>> acts{doubles(x)}, pre;
  for (const RefLayer& l : net) {
    const std::vector<double>& a = acts.back();
    std::vector<double> z(static_cast<std::size_t>(n * l.out));
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < l.out; ++j) {
        double v = 0;
        if (l.dense) {
          v = l.b[j];
          for (int64_t k = 0; k < l.in; ++k) v += a[r * l.in + k] * l.w[k * l.out + j];
        } else {
          v = l.gamma[j] * (a[r * l.in + j] - l.mm[j]) / std::sqrt(l.mv[j] + l.epsilon) + l.beta[j];
        }
        z[r * l.out + j] = v;
      }
    pre.push_back(z);
    std::vector<double> h = z;
    if (l.act == ActivationKind::relu)
      for (double& v : h) v = std::max(v, 0.0);
    if (l.act == ActivationKind::softmax)
      for (int64_t r = 0; r < n; ++r) {
        double mx = -1e300, s = 0;
        for (int64_t j = 0; j < l.out; ++j) mx = std::max(mx, h[r * l.out + j]);
        for (int64_t j = 0; j < l.out; ++j) s += std::exp(h[r * l.out + j] - mx);
        for (int64_t j = 0; j < l.out; ++j) h[r * l.out + j] = std::exp(h[r * l.out + j] - mx) / s;
      }
    acts.push_back(h);
  }
  const int64_t c = net.back().out;
  double loss = 0;
  std::vector<double> g(static_cast<std::size_t>(n * c));  // d loss / d the final z
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < c; ++j) {
      const double p = acts.back()[r * c + j];
      const bool hit = static_cast<int64_t>(y[r]) == j;
      if (hit) loss -= std::log(p) / static_cast<double>(n);
      g[r * c + j] = (p - (hit ? 1.0 : 0.0)) / static_cast<double>(n);
    }
  for (std::size_t i = net.size(); i-- > 0;) {
    RefLayer& l = net[i];
    if (l.act == ActivationKind::relu)
      for (std::size_t e = 0; e < g.size(); ++e)
        if (pre[i][e] <= 0) g[e] = 0;
    const std::vector<double>& a = acts[i];
    std::vector<double> dx(static_cast<std::size_t>(n * l.in), 0.0);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < l.out; ++j) {
        const double gj = g[r * l.out + j];
        if (l.dense) {
          for (int64_t k = 0; k < l.in; ++k) dx[r * l.in + k] += gj * l.w[k * l.out + j];
        } else {
          dx[r * l.in + j] = gj * l.gamma[j] / std::sqrt(l.mv[j] + l.epsilon);
        }
      }
    if (l.trainable && l.dense) {
      for (int64_t k = 0; k < l.in; ++k)
        for (int64_t j = 0; j < l.out; ++j) {
          double s = 0;
          for (int64_t r = 0; r < n; ++r) s += a[r * l.in + k] * g[r * l.out + j];
          l.w[k * l.out + j] -= lr * s;
        }
      for (int64_t j = 0; j < l.out; ++j) {
        double s = 0;
        for (int64_t r = 0; r < n; ++r) s += g[r * l.out + j];
        l.b[j] -= lr * s;
      }
    }
    g = std::move(dx);
  }
  return loss;
}

double max_diff(const Tensor& t, const std::vector<double>& ref) {
  double d = 0;
  for (int64_t i = 0; i < t.size(); ++i) d = std::max(d, std::abs(t[i] - ref[i]));
  return d;
}

// Input(5) -> Dense(6, relu) -> Dense(6, relu) frozen -> BatchNormalization frozen -> Dense(3,
// softmax): the gradient flows through the two frozen layers to the first one.
std::vector<Layer> frozen_middle_layers() {
  return {Input({5}), Dense(6, "relu"), frozen(Dense(6, "relu")), frozen(BatchNormalization()),
          Dense(3, "softmax")};
}

// Every weight random (the moving variance in [0.5, 1.5]), as the model's and the reference's.
std::vector<NamedTensor> random_weights(const Sequential& model) {
  std::vector<NamedTensor> w = model.get_weights();
  uint64_t seed = 11;
  for (NamedTensor& t : w) {
    const bool variance = t.name.find("moving_variance") != std::string::npos;
    t.value =
        random_tensor(t.value.shape(), seed++, variance ? 0.5f : -0.8f, variance ? 1.5f : 0.8f);
  }
  return w;
}

TEST(Trainable, FrozenLayersKeepTheirWeightsAndTheOthersFollowAFloat64Reference) {
  Sequential model(frozen_middle_layers());
  model.compile(SGD({.learning_rate = 0.1}), "sparse_categorical_crossentropy", {}, {.threads = 1});
  // Keras's counts: dense 36 and dense_2 21 trainable; dense_1 42 and batch_normalization 24
  // not.
  EXPECT_EQ(model.count_params(), 36 + 42 + 24 + 21);
  EXPECT_EQ(model.trainable_params(), 36 + 21);
  const std::string summary = model.summary();
  EXPECT_NE(summary.find("Trainable params: 57"), std::string::npos) << summary;
  EXPECT_NE(summary.find("Non-trainable params: 66"), std::string::npos) << summary;

  const std::vector<NamedTensor> start = random_weights(model);
  model.set_weights(start);
  // The reference from the same values.
  auto w = [&](const std::string& name) {
    for (const NamedTensor& t : start)
      if (t.name == name) return doubles(t.value);
    ADD_FAILURE() << "no weight " << name;
    return std::vector<double>{};
  };
  std::vector<RefLayer> net(4);
  net[0] = {true, true, 5, 6, ActivationKind::relu, w("dense/kernel"), w("dense/bias")};
  net[1] = {true, false, 6, 6, ActivationKind::relu, w("dense_1/kernel"), w("dense_1/bias")};
  net[2] = {false,
            false,
            6,
            6,
            ActivationKind::linear,
            {},
            {},
            w("batch_normalization/gamma"),
            w("batch_normalization/beta"),
            w("batch_normalization/moving_mean"),
            w("batch_normalization/moving_variance")};
  net[3] = {true, true, 6, 3, ActivationKind::softmax, w("dense_2/kernel"), w("dense_2/bias")};

  const int64_t n = 8;
  const Tensor x = random_tensor({n, 5}, 3, -2.0f, 2.0f);
  const Tensor y = labels(n, 3);
  const History h = model.fit(x, y, {.epochs = 3, .batch_size = n, .shuffle = false, .verbose = 0});
  for (int step = 0; step < 3; ++step)
    EXPECT_NEAR(h.history.at("loss")[static_cast<std::size_t>(step)],
                reference_step(net, x, y, 0.1), 1e-5)
        << "step " << step;
  const std::vector<NamedTensor> end = model.get_weights();
  ASSERT_EQ(end.size(), start.size());
  for (std::size_t i = 0; i < end.size(); ++i) {
    const std::string& name = end[i].name;
    const bool is_frozen = name.rfind("dense_1/", 0) == 0 || name.rfind("batch_norm", 0) == 0;
    if (is_frozen) {
      EXPECT_TRUE(same_bits(end[i].value, start[i].value)) << name << " changed";
    } else {
      EXPECT_FALSE(same_bits(end[i].value, start[i].value)) << name << " did not train";
    }
  }
  EXPECT_LT(max_diff(end[0].value, net[0].w), 1e-5);
  EXPECT_LT(max_diff(end[1].value, net[0].b), 1e-5);
  EXPECT_LT(max_diff(end[end.size() - 2].value, net[3].w), 1e-5);
  EXPECT_LT(max_diff(end.back().value, net[3].b), 1e-5);
}

// A frozen BatchNormalization in fit is its inference pass: the loss fit reports for the first
// step is evaluate's loss on the same batch (a trainable one normalizes by the batch's statistics
// instead, a different loss), and its moving statistics stay.
TEST(Trainable, AFrozenBatchNormalizationUsesItsMovingStatisticsInFit) {
  const int64_t n = 16;
  const Tensor x = random_tensor({n, 4}, 5, -3.0f, 3.0f);
  const Tensor y = labels(n, 3);
  for (bool freeze : {true, false}) {
    Layer bn = BatchNormalization();
    bn.trainable = !freeze;
    Sequential model({Input({4}), Dense(4), bn, Dense(3, "softmax")});
    model.compile(SGD({.learning_rate = 0.05}), "sparse_categorical_crossentropy", {},
                  {.threads = 1});
    std::vector<NamedTensor> start = random_weights(model);
    model.set_weights(start);
    const double evaluated = model.evaluate(x, y, {.batch_size = n, .verbose = 0}).loss;
    const History h =
        model.fit(x, y, {.epochs = 1, .batch_size = n, .shuffle = false, .verbose = 0});
    const double fitted = h.history.at("loss")[0];
    const std::vector<NamedTensor> end = model.get_weights();
    if (freeze) {
      EXPECT_NEAR(fitted, evaluated, 1e-6);
      for (std::size_t i = 2; i < 6; ++i)  // gamma, beta, moving_mean, moving_variance
        EXPECT_TRUE(same_bits(end[i].value, start[i].value)) << end[i].name;
      EXPECT_FALSE(same_bits(end[0].value, start[0].value)) << "the gradient reaches dense";
    } else {
      EXPECT_GT(std::abs(fitted - evaluated), 1e-3);
      EXPECT_FALSE(same_bits(end[4].value, start[4].value)) << "moving_mean is updated";
    }
  }
}

// Weight decay (AdamW) and the optimizer's slots touch only trainable weights: a frozen Conv2D and
// a frozen Dense keep their bits over two epochs of AdamW while the last Dense trains.
TEST(Trainable, AdamWDecaysOnlyTrainableWeights) {
  Sequential model({Input({6, 6, 1}), frozen(Conv2D(2, 3, "relu")), Flatten(),
                    frozen(Dense(5, "relu")), Dense(3, "softmax")});
  model.compile(AdamW({.learning_rate = 0.01, .weight_decay = 0.1}),
                "sparse_categorical_crossentropy", {}, {.threads = 1});
  const std::vector<NamedTensor> start = model.get_weights();
  const Tensor x = random_tensor({12, 6, 6, 1}, 9);
  model.fit(x, labels(12, 3), {.epochs = 2, .batch_size = 4, .verbose = 0});
  const std::vector<NamedTensor> end = model.get_weights();
  for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(same_bits(end[i].value, start[i].value));
  for (std::size_t i = 4; i < 6; ++i) EXPECT_FALSE(same_bits(end[i].value, start[i].value));
}

// As in Keras, a change of trainable takes effect at the next compile(): the counts follow at
// once, fit from the compile on.
TEST(Trainable, SetTrainableTakesEffectAtTheNextCompile) {
  Sequential model({Input({5}), Dense(4, "relu"), Dense(3, "softmax")});
  model.compile(SGD({.learning_rate = 0.1}), "sparse_categorical_crossentropy", {}, {.threads = 1});
  const Tensor x = random_tensor({8, 5}, 4);
  const Tensor y = labels(8, 3);
  model.set_trainable(1, false);
  EXPECT_EQ(model.trainable_params(), 15);
  EXPECT_FALSE(model.layers()[1].trainable);
  std::vector<NamedTensor> before = model.get_weights();
  model.fit(x, y, {.epochs = 1, .batch_size = 8, .verbose = 0});
  EXPECT_FALSE(same_bits(model.get_weights()[0].value, before[0].value))
      << "not compiled since: dense still trains";
  before = model.get_weights();
  model.compile(SGD({.learning_rate = 0.1}), "sparse_categorical_crossentropy", {}, {.threads = 1});
  model.set_weights(before);
  model.fit(x, y, {.epochs = 1, .batch_size = 8, .verbose = 0});
  const std::vector<NamedTensor> after = model.get_weights();
  EXPECT_TRUE(same_bits(after[0].value, before[0].value));
  EXPECT_TRUE(same_bits(after[1].value, before[1].value));
  EXPECT_FALSE(same_bits(after[2].value, before[2].value));
  EXPECT_EQ(error_of([&] { model.set_trainable(3, false); }),
            "set_trainable: layer index 3 is out of range: the model has 3");
}

// The calls of a training step: no weight gradient for a frozen layer, and no backward pass at
// all below the first trainable layer (the frozen convolution first: not even its input's
// gradient); a frozen Dense between trainable ones passes its input gradient on.
TEST(Trainable, TheStepMakesNoGradientCallsAFrozenLayerDoesNotNeed) {
  Sequential model({Input({6, 6, 1}), frozen(Conv2D(2, 3, "relu")), Flatten(), Dense(5, "relu"),
                    frozen(Dense(4, "relu")), Dense(3, "softmax")});
  perf::RecordingBackend* recorder = nullptr;
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.make_backend = [&] {
                  auto b = std::make_unique<perf::RecordingBackend>("cuda:0", false);
                  recorder = b.get();
                  return b;
                }});
  model.trace_training_step(4);
  ASSERT_NE(recorder, nullptr);
  std::vector<std::string> backward;
  for (const perf::BackendCall& c : recorder->calls()) {
    const std::string call(perf::call_name(c.call));
    if (call.find("backward") != std::string::npos && c.scope != "loss")
      backward.push_back(c.scope + " " + call);
  }
  // dense_2's softmax gradient is the loss op's; dense (the first trainable layer) needs no input
  // gradient; dense_1 (frozen) no weight gradient; flatten and conv2d nothing.
  const std::vector<std::string> expected = {
      "dense_2 dense_backward_input", "dense_2 dense_backward_weights",
      "dense_1 activation_backward",  "dense_1 dense_backward_input",
      "dense activation_backward",    "dense dense_backward_weights"};
  EXPECT_EQ(backward, expected);
  // The cost model prices that step (its op list comes from the same calls).
  int convolution_ops = 0;
  for (const perf::Op& o :
       perf::step_ops(perf::describe(model), 4, perf::DeviceKind::gpu, perf::Mode::resident)) {
    EXPECT_EQ(o.call.rfind("conv2d_backward", 0), std::string::npos) << o.name;
    convolution_ops += o.call == "conv2d_forward";
  }
  EXPECT_EQ(convolution_ops, 1);
}

// ---- the Keras JSON ----

TEST(Trainable, TheKerasJsonCarriesEachLayersFlag) {
  Sequential model({Input({4}), frozen(Dense(3, "relu")), Dense(2, "softmax")});
  const nlohmann::json doc = nlohmann::json::parse(model_to_json(model));
  const auto& layers = doc["config"]["layers"];
  EXPECT_EQ(layers[1]["config"]["trainable"], false);
  EXPECT_EQ(layers[2]["config"]["trainable"], true);
  Sequential back = model_from_json(model_to_json(model), "m.json");
  EXPECT_FALSE(back.layers()[1].trainable);
  EXPECT_TRUE(back.layers()[2].trainable);
  EXPECT_EQ(back.trainable_params(), 8);
  // Keras's model.trainable = False: every layer frozen.
  nlohmann::json whole = doc;
  whole["config"]["trainable"] = false;
  Sequential none = model_from_json(whole.dump(), "m.json");
  EXPECT_EQ(none.trainable_params(), 0);
  EXPECT_EQ(none.count_params(), 15 + 8);
  whole["config"]["trainable"] = "no";
  EXPECT_EQ(error_of([&] { model_from_json(whole.dump(), "m.json"); }),
            "m.json: model field trainable: expected true or false, got \"no\"");
}

}  // namespace
}  // namespace crossover
