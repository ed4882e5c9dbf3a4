// Convolutions and pooling against what Keras itself computed (issue 12): the cases of
// tests/data/keras/conv_reference.safetensors, written by Keras 3.15.1 on TensorFlow 2.21 with
// tests/data/keras/make_conv.py (which names every tensor and how each case was made).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "formats/weights_io.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

const SafetensorsFile& reference() {
  return testing_util::keras_fixture("conv_reference.safetensors");
}
const Tensor& tensor(const std::string& name) {
  return testing_util::keras_fixture_tensor("conv_reference.safetensors", name);
}

Shape sample_shape(const Tensor& x) { return Shape(x.shape().begin() + 1, x.shape().end()); }

// The largest |a - b| over the elements, with a and b holding the same number of them.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (int64_t i = 0; i < std::min(a.size(), b.size()); ++i)
    d = std::max(d, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return d;
}

double max_abs(const Tensor& a) {
  double m = 0;
  for (int64_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i])));
  return m;
}

// A model of one layer (then Flatten, so the output is flat in Keras's channels-last order),
// with the case's weights, predicting the case's input.
Tensor predict_case(const std::string& name, Layer layer) {
  const Tensor& x = tensor(name + "/x");
  Sequential model({Input(sample_shape(x)), std::move(layer), Flatten()});
  model.compile(SGD(), "mean_squared_error");
  std::vector<NamedTensor> w;
  if (const Tensor* k = reference().find(name + "/kernel")) w.push_back({"conv2d/kernel", *k});
  if (const Tensor* b = reference().find(name + "/bias")) w.push_back({"conv2d/bias", *b});
  if (!w.empty()) model.set_weights(w);
  return model.predict(x);
}

struct Case {
  const char* name;
  Layer layer;
};

class KerasConvReference : public testing::TestWithParam<int> {};

std::vector<Case> cases() {
  return {
      {"conv_valid", Conv2D(4, 3, "relu")},
      {"conv_same_s2", Conv2D(3, 3, "linear", 2, "same")},
      {"conv_same_k4", Conv2D(2, 4, "linear", 1, "same", false)},
      {"conv_rect", Conv2D(5, {2, 3}, "relu", Size2{1, 2})},
      {"maxpool_2", MaxPooling2D(2)},
      {"maxpool_ties", MaxPooling2D(2)},
      {"maxpool_3s2_same", MaxPooling2D(3, Size2{2}, "same")},
      {"avgpool_2_same", AveragePooling2D(2, std::nullopt, "same")},
      {"conv_dilated_2", Conv2D(4, 3, "relu", 1, "valid", true, 2)},
      {"conv_dilated_same", Conv2D(3, {3, 2}, "linear", 1, "same", true, {2, 3})},
      {"conv_dilated_rect", Conv2D(2, {2, 3}, "linear", 1, "valid", false, {3, 2})},
  };
}

TEST_P(KerasConvReference, ForwardOutputIsKerasOwn) {
  const Case c = cases()[static_cast<std::size_t>(GetParam())];
  SCOPED_TRACE(c.name);
  const Tensor y = predict_case(c.name, c.layer);
  const Tensor& want = tensor(std::string(c.name) + "/y");
  ASSERT_EQ(y.size(), want.size());
  // float32 sums of at most 48 products of O(1) values: a few ulps of the largest.
  EXPECT_LE(max_abs_diff(y, want), 1e-5 * std::max(1.0, max_abs(want)));
}

INSTANTIATE_TEST_SUITE_P(Cases, KerasConvReference,
                         testing::Range(0, static_cast<int>(cases().size())),
                         [](const testing::TestParamInfo<int>& i) {
                           return std::string(cases()[static_cast<std::size_t>(i.param)].name);
                         });

// Keras's "Simple MNIST convnet", compiled, with crossover's initial weights.
Sequential convnet(double dropout) {
  Sequential model({Input({28, 28, 1}), Conv2D(32, 3, "relu"), MaxPooling2D(2),
                    Conv2D(64, 3, "relu"), MaxPooling2D(2), Flatten(), Dropout(dropout),
                    Dense(10, "softmax")});
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"});
  return model;
}

constexpr const char* kConvnetWeights[] = {"conv2d/kernel", "conv2d/bias",  "conv2d_1/kernel",
                                           "conv2d_1/bias", "dense/kernel", "dense/bias"};

// The convnet with the reference's weights, on eight MNIST digits. (gradients() needs a dropout
// rate of 0: Keras's gradients were taken with training=False, dropout off.)
Sequential reference_convnet(double dropout = 0.5) {
  Sequential model = convnet(dropout);
  std::vector<NamedTensor> w;
  for (const char* n : kConvnetWeights) w.push_back({n, tensor(std::string("convnet/") + n)});
  model.set_weights(w);
  return model;
}

TEST(KerasConvnetReference, LoadsTheWeightsKerasSavedInItsH5Layout) {
  Sequential model = convnet(0.5);
  load_weights(model,
               crossover::testing_util::source_dir() + "/tests/data/keras/convnet.weights.h5");
  const std::vector<NamedTensor> got = model.get_weights();
  ASSERT_EQ(got.size(), std::size(kConvnetWeights));
  for (const NamedTensor& t : got) {
    SCOPED_TRACE(t.name);
    const Tensor& want = tensor("convnet/" + t.name);
    ASSERT_EQ(t.value.shape(), want.shape());
    EXPECT_EQ(max_abs_diff(t.value, want), 0.0);  // the same float32 values, bit for bit
  }
}

TEST(KerasConvnetReference, HasKerasParameterCount) {
  EXPECT_EQ(reference_convnet().count_params(), 34826);
}

TEST(KerasConvnetReference, PredictsWhatKerasPredicts) {
  Sequential model = reference_convnet();
  const Tensor p = model.predict(tensor("convnet/x"));
  EXPECT_LE(max_abs_diff(p, tensor("convnet/y")), 1e-5);
}

TEST(KerasConvnetReference, EvaluatesKerasLoss) {
  Sequential model = reference_convnet();
  const EvaluateResult r =
      model.evaluate(tensor("convnet/x"), tensor("convnet/labels"), {.verbose = 0});
  const double want = tensor("convnet/loss")[0];
  EXPECT_NEAR(r.loss, want, 1e-5 * want);
}

TEST(KerasConvnetReference, GradientsAreKerasGradients) {
  Sequential model = reference_convnet(0.0);
  const std::vector<NamedTensor> g = model.gradients(tensor("convnet/x"), tensor("convnet/labels"));
  ASSERT_EQ(g.size(), 6u);
  for (const NamedTensor& t : g) {
    SCOPED_TRACE(t.name);
    const Tensor& want = tensor("convnet/grad/" + t.name);
    ASSERT_EQ(t.value.shape(), want.shape());
    // Sums over 8 samples x up to 676 positions in float32, in another order than TensorFlow's.
    EXPECT_LE(max_abs_diff(t.value, want), 1e-4 * max_abs(want));
  }
}

}  // namespace
}  // namespace crossover
