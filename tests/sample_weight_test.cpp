// Keras's sample_weight and class_weight in fit and evaluate (FitOptions, EvaluateOptions): each
// sample's loss and gradient times its weight, the batch's sum divided by the batch's size
// (Keras's "sum_over_batch_size"), the reported loss the mean over samples of the weighted losses,
// and the metrics unweighted. Checked against a float64 reference of the same steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::random_tensor;

constexpr int64_t kRows = 7, kIn = 4, kClasses = 3;

struct Data {
  Tensor x = random_tensor({kRows, kIn}, 21);
  Tensor y = Tensor(Shape{kRows});
  Tensor w = Tensor(Shape{kRows});
  Data() {
    const float weights[kRows] = {0.5f, 2.0f, 1.0f, 0.0f, 3.0f, 1.5f, 0.25f};
    for (int64_t i = 0; i < kRows; ++i) {
      y[i] = static_cast<float>((i * 2 + 1) % kClasses);
      w[i] = weights[i];
    }
  }
};

Sequential linear_softmax() {
  Sequential model({Input({kIn}), Dense(kClasses, "softmax")});
  model.compile(SGD({.learning_rate = 0.5}), "sparse_categorical_crossentropy", {"accuracy"},
                {.threads = 1, .seed = 3});
  return model;
}

// The same training in double: batches of `batch` rows in order (the last one partial).
struct Reference {
  std::vector<double> kernel, bias;  // (kIn, kClasses), (kClasses)
  std::vector<double> losses, accuracies;
};

Reference reference_fit(const std::vector<NamedTensor>& initial, const Data& d, int64_t batch,
                        int epochs, double lr) {
  Reference r;
  r.kernel.assign(initial[0].value.data(), initial[0].value.data() + kIn * kClasses);
  r.bias.assign(initial[1].value.data(), initial[1].value.data() + kClasses);
  for (int e = 0; e < epochs; ++e) {
    double loss_sum = 0, correct = 0;
    for (int64_t start = 0; start < kRows; start += batch) {
      const int64_t m = std::min(batch, kRows - start);
      std::vector<double> dk(r.kernel.size(), 0.0), db(kClasses, 0.0);
      for (int64_t i = start; i < start + m; ++i) {
        double z[kClasses], mx = -1e300, sum = 0;
        for (int64_t c = 0; c < kClasses; ++c) {
          z[c] = r.bias[c];
          for (int64_t k = 0; k < kIn; ++k) z[c] += d.x[i * kIn + k] * r.kernel[k * kClasses + c];
          mx = std::max(mx, z[c]);
        }
        for (double v : z) sum += std::exp(v - mx);
        const auto label = static_cast<int64_t>(d.y[i]);
        loss_sum += d.w[i] * (mx + std::log(sum) - z[label]);
        correct += std::max_element(z, z + kClasses) - z == label ? 1 : 0;
        for (int64_t c = 0; c < kClasses; ++c) {
          const double dz = d.w[i] * (std::exp(z[c] - mx) / sum - (c == label)) / m;
          db[c] += dz;
          for (int64_t k = 0; k < kIn; ++k) dk[k * kClasses + c] += d.x[i * kIn + k] * dz;
        }
      }
      for (std::size_t j = 0; j < dk.size(); ++j) r.kernel[j] -= lr * dk[j];
      for (int64_t c = 0; c < kClasses; ++c) r.bias[c] -= lr * db[c];
    }
    r.losses.push_back(loss_sum / kRows);
    r.accuracies.push_back(correct / kRows);
  }
  return r;
}

TEST(SampleWeight, FitMatchesAFloat64ReferenceWithAPartialLastBatch) {
  const Data d;
  Sequential model = linear_softmax();
  model.evaluate(d.x, d.y, {.verbose = 0});  // builds the model: its initial weights
  const Reference ref = reference_fit(model.get_weights(), d, 3, 2, 0.5);
  const History h = model.fit(
      d.x, d.y,
      {.epochs = 2, .batch_size = 3, .shuffle = false, .verbose = 0, .sample_weight = &d.w});
  ASSERT_EQ(h.epochs.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_NEAR(h.epochs[e].loss, ref.losses[e], 1e-6) << "epoch " << e + 1;
    EXPECT_DOUBLE_EQ(h.epochs[e].accuracy, ref.accuracies[e]) << "epoch " << e + 1;  // unweighted
  }
  const std::vector<NamedTensor> w = model.get_weights();
  for (int64_t j = 0; j < kIn * kClasses; ++j) EXPECT_NEAR(w[0].value[j], ref.kernel[j], 1e-6);
  for (int64_t c = 0; c < kClasses; ++c) EXPECT_NEAR(w[1].value[c], ref.bias[c], 1e-6);
}

TEST(SampleWeight, WeightsOfOneTrainAsNoWeights) {
  const Data d;
  Tensor ones({kRows});
  for (int64_t i = 0; i < kRows; ++i) ones[i] = 1.0f;
  Sequential a = linear_softmax(), b = linear_softmax();
  const History ha = a.fit(d.x, d.y, {.epochs = 2, .batch_size = 3, .verbose = 0});
  const History hb =
      b.fit(d.x, d.y, {.epochs = 2, .batch_size = 3, .verbose = 0, .sample_weight = &ones});
  EXPECT_EQ(ha.history, hb.history);
  const Tensor ka = a.get_weights()[0].value, kb = b.get_weights()[0].value;
  EXPECT_TRUE(std::equal(ka.data(), ka.data() + ka.size(), kb.data()));
}

TEST(SampleWeight, EvaluateWeightsTheLossNotTheAccuracy) {
  const Data d;
  Sequential model = linear_softmax();
  const EvaluateResult plain = model.evaluate(d.x, d.y, {.batch_size = 3, .verbose = 0});
  const EvaluateResult weighted =
      model.evaluate(d.x, d.y, {.batch_size = 3, .verbose = 0, .sample_weight = &d.w});
  const Reference ref = reference_fit(model.get_weights(), d, 3, 1, 0.0);  // lr 0: evaluates
  EXPECT_NEAR(weighted.loss, ref.losses[0], 1e-6);
  EXPECT_GT(std::fabs(weighted.loss - plain.loss), 1e-3);
  EXPECT_DOUBLE_EQ(weighted.accuracy, plain.accuracy);
}

TEST(SampleWeight, ValidationDataIsWeightedByItsOwnWeights) {
  const Data d;
  Sequential model = linear_softmax();
  const History h = model.fit(d.x, d.y,
                              {.epochs = 1,
                               .batch_size = 3,
                               .validation_x = &d.x,
                               .validation_y = &d.y,
                               .verbose = 0,
                               .validation_sample_weight = &d.w});
  const EvaluateResult e =
      model.evaluate(d.x, d.y, {.batch_size = 3, .verbose = 0, .sample_weight = &d.w});
  EXPECT_DOUBLE_EQ(*h.epochs[0].val_loss, e.loss);
}

TEST(ClassWeight, IsTheSampleWeightOfEachSamplesClass) {
  const Data d;
  const std::map<int64_t, double> cw = {{0, 2.0}, {2, 0.5}};  // class 1: 1
  Tensor w({kRows});
  for (int64_t i = 0; i < kRows; ++i) {
    const auto it = cw.find(static_cast<int64_t>(d.y[i]));
    w[i] = it == cw.end() ? 1.0f : static_cast<float>(it->second);
  }
  Sequential a = linear_softmax(), b = linear_softmax();
  const History ha =
      a.fit(d.x, d.y, {.epochs = 2, .batch_size = 3, .verbose = 0, .class_weight = cw});
  const History hb =
      b.fit(d.x, d.y, {.epochs = 2, .batch_size = 3, .verbose = 0, .sample_weight = &w});
  EXPECT_EQ(ha.history, hb.history);
  // One-hot targets: the class is the row's argmax.
  Tensor onehot({kRows, kClasses});
  for (int64_t i = 0; i < kRows; ++i) onehot[i * kClasses + static_cast<int64_t>(d.y[i])] = 1.0f;
  Sequential c({Input({kIn}), Dense(kClasses, "softmax")});
  c.compile(SGD({.learning_rate = 0.5}), "categorical_crossentropy", {"accuracy"},
            {.threads = 1, .seed = 3});
  const History hc =
      c.fit(d.x, onehot, {.epochs = 2, .batch_size = 3, .verbose = 0, .class_weight = cw});
  for (int e = 0; e < 2; ++e) EXPECT_NEAR(hc.epochs[e].loss, ha.epochs[e].loss, 1e-6);
}

TEST(SampleWeight, BadWeightsAreOneClearError) {
  const Data d;
  Sequential model = linear_softmax();
  Tensor short_w({kRows - 2});
  EXPECT_THROW(model.fit(d.x, d.y, {.epochs = 1, .verbose = 0, .sample_weight = &short_w}), Error);
  EXPECT_THROW(
      model.fit(d.x, d.y,
                {.epochs = 1, .verbose = 0, .sample_weight = &d.w, .class_weight = {{0, 2.0}}}),
      Error);
  Tensor not_finite = d.w.reshaped(d.w.shape());  // a copy
  not_finite[2] = std::nanf("");
  EXPECT_THROW(model.fit(d.x, d.y, {.epochs = 1, .verbose = 0, .sample_weight = &not_finite}),
               Error);
  EXPECT_THROW(model.evaluate(d.x, d.y, {.verbose = 0, .sample_weight = &short_w}), Error);
  try {
    model.fit(d.x, d.y, {.epochs = 1, .verbose = 0, .sample_weight = &short_w});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("one weight per sample"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crossover
