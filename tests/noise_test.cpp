// GaussianNoise, GaussianDropout and SpatialDropout2D: the statistics of their training draws
// (Backend::noise_forward on the CPU), whole channels for SpatialDropout2D, the identity outside
// training, the same draws for a row wherever it sits (data parallelism's first_row), and the
// layers' argument checks. Their gradients are in gradient_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "core/philox.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::error_of;
using testing_util::random_tensor;

struct Moments {
  double mean = 0, variance = 0;
};
Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double d : v) m.mean += d;
  m.mean /= static_cast<double>(v.size());
  for (double d : v) m.variance += (d - m.mean) * (d - m.mean);
  m.variance /= static_cast<double>(v.size());
  return m;
}

TEST(Noise, GaussianNoiseAddsZeroMeanNoiseOfItsStddev) {
  auto be = make_cpu_backend(2);
  const int64_t m = 64, n = 1000;
  std::vector<float> x(static_cast<std::size_t>(m * n)), y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  StepCounters c;
  be->noise_forward(NoiseKind::gaussian_noise, x.data(), y.data(), nullptr, m, n, 1, 0.3f, 42, 3,
                    &c, 0);
  std::vector<double> noise(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) noise[i] = double{y[i]} - double{x[i]};
  const Moments mo = moments(noise);
  // 64,000 draws of N(0, 0.09): the mean's standard error 0.0012, the variance's 0.0005.
  EXPECT_NEAR(mo.mean, 0.0, 0.006);
  EXPECT_NEAR(mo.variance, 0.09, 0.003);
  // Normal, not uniform: about 68.3% within one stddev (uniform of that variance: 57.7%).
  int64_t within = 0;
  for (double d : noise) within += std::abs(d) < 0.3;
  EXPECT_NEAR(static_cast<double>(within) / static_cast<double>(noise.size()), 0.683, 0.01);
  // The same step draws the same noise; another step other noise.
  std::vector<float> again(x.size());
  be->noise_forward(NoiseKind::gaussian_noise, x.data(), again.data(), nullptr, m, n, 1, 0.3f, 42,
                    3, &c, 0);
  EXPECT_EQ(again, y);
  c.step = 1;
  be->noise_forward(NoiseKind::gaussian_noise, x.data(), again.data(), nullptr, m, n, 1, 0.3f, 42,
                    3, &c, 0);
  EXPECT_NE(again, y);
}

TEST(Noise, GaussianDropoutMultipliesByOneCenteredNoiseAndKeepsItsFactors) {
  auto be = make_cpu_backend(2);
  const int64_t m = 64, n = 1000;
  const float rate = 0.2f;
  const auto stddev = static_cast<float>(std::sqrt(0.2 / 0.8));  // 0.5
  std::vector<float> x(static_cast<std::size_t>(m * n), 2.0f), y(x.size()), factor(x.size());
  StepCounters c;
  be->noise_forward(NoiseKind::gaussian_dropout, x.data(), y.data(), factor.data(), m, n, 1, stddev,
                    7, 1, &c, 0);
  std::vector<double> f(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(y[i], 2.0f * factor[i]);
    f[i] = factor[i];
  }
  const Moments mo = moments(f);
  EXPECT_NEAR(mo.mean, 1.0, 0.01);
  EXPECT_NEAR(mo.variance, rate / (1 - rate), 0.01);
}

TEST(Noise, SpatialDropoutDropsWholeChannelsAndScalesTheKeptOnes) {
  auto be = make_cpu_backend(2);
  const int64_t m = 200, positions = 6, channels = 50, n = positions * channels;
  const float rate = 0.3f;
  std::vector<float> x(static_cast<std::size_t>(m * n)), y(x.size()), factor(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i % 5);
  StepCounters c;
  c.step = 4;
  be->noise_forward(NoiseKind::spatial_dropout, x.data(), y.data(), factor.data(), m, n, channels,
                    rate, 9, 2, &c, 0);
  int64_t dropped = 0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t ch = 0; ch < channels; ++ch) {
      const float f = factor[static_cast<std::size_t>(r * n + ch)];
      ASSERT_TRUE(f == 0.0f || f == 1.0f / (1.0f - rate)) << f;
      dropped += f == 0.0f;
      for (int64_t p = 0; p < positions; ++p) {  // the whole channel alike
        const auto i = static_cast<std::size_t>(r * n + p * channels + ch);
        ASSERT_EQ(factor[i], f) << "row " << r << " channel " << ch << " position " << p;
        EXPECT_EQ(y[i], x[i] * f);
      }
    }
  // 10,000 Bernoulli(0.3) draws: standard deviation 0.0046 of the fraction.
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(m * channels), 0.3, 0.025);
}

TEST(Noise, ARowDrawsTheSameWhereverItsBatchStarts) {
  // Data parallelism: rows 3.. of the global batch in a rank of their own (first_row 3) draw what
  // one process draws for them.
  auto be = make_cpu_backend(1);
  const int64_t m = 8, n = 30, channels = 5;
  const std::vector<float> x(static_cast<std::size_t>(m * n), 1.0f);
  StepCounters c;
  for (NoiseKind k :
       {NoiseKind::gaussian_noise, NoiseKind::gaussian_dropout, NoiseKind::spatial_dropout}) {
    std::vector<float> whole(x.size()), whole_f(x.size()), part(x.size()), part_f(x.size());
    be->noise_forward(k, x.data(), whole.data(), whole_f.data(), m, n, channels, 0.4f, 5, 6, &c, 0);
    be->noise_forward(k, x.data(), part.data(), part_f.data(), m - 3, n, channels, 0.4f, 5, 6, &c,
                      3);
    for (int64_t i = 0; i < (m - 3) * n; ++i)
      ASSERT_EQ(part[static_cast<std::size_t>(i)], whole[static_cast<std::size_t>(3 * n + i)])
          << static_cast<int>(k) << " at " << i;
  }
}

TEST(Noise, NormalDrawsAreFiniteAndBounded) {
  // Box-Muller's radius uniform is in (0, 1]: never log(0).
  for (uint64_t i = 0; i < 200000; ++i) {
    const float z = philox_normal(1, 1, 0, i);
    ASSERT_TRUE(std::isfinite(z));
    ASSERT_LT(std::abs(z), 5.8f);
  }
}

// A model of the three (no weights past a Dense at the end), compiled on one thread.
Sequential noisy_model(double stddev, double gaussian_rate, double spatial_rate) {
  Sequential model({Input({3, 4, 6}), GaussianNoise(stddev), GaussianDropout(gaussian_rate),
                    SpatialDropout2D(spatial_rate), Flatten(), Dense(5)});
  model.compile(SGD(), "mean_squared_error", {}, {.threads = 1, .seed = 3});
  return model;
}

TEST(Noise, TheLayersAreTheIdentityInPredictAndAtZeroInTraining) {
  const Tensor x = random_tensor({10, 3, 4, 6}, 2);
  Sequential noisy = noisy_model(0.5, 0.4, 0.5);
  Sequential quiet = noisy_model(0.0, 0.0, 0.0);
  quiet.set_weights(noisy.get_weights());
  const Tensor a = noisy.predict(x), b = quiet.predict(x);
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]);
  // At 0 a training pass is the identity too (a copy, nothing drawn).
  const Tensor t = quiet.training_forward(x);
  for (int64_t i = 0; i < t.size(); ++i) ASSERT_EQ(t[i], b[i]);
  // Nonzero: a training pass differs from predict.
  const Tensor u = noisy.training_forward(x);
  double differ = 0;
  for (int64_t i = 0; i < u.size(); ++i) differ += std::abs(u[i] - a[i]);
  EXPECT_GT(differ, 1.0);
  // No weights of their own.
  EXPECT_EQ(noisy.get_weights().size(), 2u);
}

TEST(Noise, BadArgumentsAndShapesAreOneClearError) {
  EXPECT_NE(error_of([] { GaussianNoise(-0.1); }).find("stddev must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([] { GaussianNoise(1.5); }).find("GaussianNoise"), std::string::npos);
  EXPECT_NE(error_of([] { GaussianDropout(1.0); }).find("rate must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([] { SpatialDropout2D(-1); }).find("SpatialDropout2D"), std::string::npos);
  EXPECT_NE(error_of([] { SpatialDropout2D(std::nan("")); }).find("rate"), std::string::npos);
  const std::string e = error_of([] {
    Sequential model({Input({12}), SpatialDropout2D(0.5), Dense(2)});
    model.compile(SGD(), "mse");
    model.predict(random_tensor({2, 12}, 1));
  });
  EXPECT_NE(e.find("SpatialDropout2D needs samples of shape (height, width, channels)"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace crossover
