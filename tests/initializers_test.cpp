// Keras's initializers (nn/initializers.h): each distribution's moments and bounds over many
// draws, Keras's fans for Dense and Conv2D kernels, the Keras JSON in and out, and the default
// GlorotUniform draws unchanged from before the initializers were a field of the layer.
#include "nn/initializers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "formats/model_config.h"
#include "nn/layers/keras_config.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using json = nlohmann::json;

struct Moments {
  double mean = 0, variance = 0, min = 0, max = 0;
  std::size_t n = 0;
};

Moments moments(const std::vector<float>& v) {
  Moments m;
  m.n = v.size();
  double sum = 0;
  for (float x : v) sum += x;
  m.mean = sum / static_cast<double>(v.size());
  double sq = 0;
  for (float x : v) sq += (x - m.mean) * (x - m.mean);
  m.variance = sq / static_cast<double>(v.size());
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  return m;
}

std::vector<float> draw(const Initializer& init, const Shape& shape, DrawKey key = {7, 2, 0}) {
  std::vector<float> v(static_cast<std::size_t>(shape_size(shape)));
  initial_values(init, shape, key, v);
  return v;
}

// Mean within 6 standard errors of `mean`, variance within 3% of `variance` (over 200,000 draws
// the sample variance's relative standard error is at most about 0.4%, so 3% is past 7 of them,
// and a wrong scale by a factor as close as 1.06 fails).
void expect_moments(const Moments& m, double mean, double variance) {
  const double standard_error = std::sqrt(variance / static_cast<double>(m.n));
  EXPECT_NEAR(m.mean, mean, 6 * standard_error);
  EXPECT_NEAR(m.variance / variance, 1.0, 0.03);
}

const Shape kBig{400, 500};  // 200,000 values: fan_in 400, fan_out 500

// ---- the draws before this unit existed ----

// Recorded from crossover at bddc116 (before initializers were the layer's), seed 1234 and 77:
// the same Philox stream (init, owner = the layer's index, draw 0) and element order, so models
// whose layers keep Keras's defaults start exactly where they did.
TEST(Initializers, DefaultGlorotUniformDrawsAreBitIdenticalToBefore) {
  Sequential mlp({Flatten({6, 5}), Dense(7, "relu"), Dense(3, "softmax")});
  mlp.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 1234});
  const std::vector<NamedTensor> w = mlp.get_weights();
  const std::vector<std::size_t> at{0, 1, 2, 3, 5, 17};
  const std::vector<float> dense{-0x1.51c0a8p-2f, 0x1.8972fp-6f,   -0x1.576548p-3f,
                                 -0x1.5d10dcp-2f, 0x1.9d3058p-11f, 0x1.10224cp-2f};
  const std::vector<float> dense_1{0x1.6884e8p-1f,  0x1.f19c0ap-5f, -0x1.063e7cp-5f,
                                   -0x1.535f92p-1f, 0x1.2766a6p-1f, -0x1.305ca2p-2f};
  for (std::size_t i = 0; i < at.size(); ++i) {
    EXPECT_EQ(w[0].value.data()[at[i]], dense[i]) << "dense/kernel " << at[i];
    EXPECT_EQ(w[2].value.data()[at[i]], dense_1[i]) << "dense_1/kernel " << at[i];
  }
  for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(w[1].value.data()[i], 0.0f);

  Sequential cnn({Input({5, 5, 2}), Conv2D(4, 3, "relu"), Flatten(), Dense(2, "softmax")});
  cnn.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 77});
  const std::vector<NamedTensor> c = cnn.get_weights();
  const std::vector<float> conv{0x1.d53a16p-5f, 0x1.205656p-3f,  0x1.d2504p-4f,
                                0x1.9fc246p-3f, -0x1.bfc1aap-5f, 0x1.d1033ap-3f};
  const std::vector<float> head{-0x1.52029ap-2f, 0x1.3b46e2p-3f, 0x1.1f6e1ep-2f,
                                -0x1.689532p-4f, 0x1.5dc81ep-4f, 0x1.5bd882p-3f};
  for (std::size_t i = 0; i < at.size(); ++i) {
    EXPECT_EQ(c[0].value.data()[at[i]], conv[i]) << "conv2d/kernel " << at[i];
    EXPECT_EQ(c[2].value.data()[at[i]], head[i]) << "dense/kernel " << at[i];
  }
}

// ---- fans ----

TEST(Initializers, FansAreKerasComputeFans) {
  EXPECT_EQ(compute_fans({30, 7}).in, 30);  // Dense (inputs, units)
  EXPECT_EQ(compute_fans({30, 7}).out, 7);
  EXPECT_EQ(compute_fans({3, 5, 2, 4}).in, 3 * 5 * 2);  // Conv2D (kh, kw, in, filters)
  EXPECT_EQ(compute_fans({3, 5, 2, 4}).out, 3 * 5 * 4);
  EXPECT_EQ(compute_fans({9}).in, 9);  // a bias: its length both ways
  EXPECT_EQ(compute_fans({9}).out, 9);
  EXPECT_EQ(compute_fans({}).in, 1);
}

// ---- each distribution ----

TEST(Initializers, UniformVarianceScalingHasLimitSqrtThreeScaleOverFan) {
  struct Case {
    Initializer init;
    double fan;
  };
  const std::vector<Case> cases{
      {GlorotUniform(), (400 + 500) / 2.0 / 1.0},
      {HeUniform(), 400 / 2.0},
      {LecunUniform(), 400},
      {VarianceScaling(3.0, FanMode::fan_out, Distribution::uniform), 500 / 3.0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(initializer_class_name(c.init.kind)));
    const double limit = std::sqrt(3.0 / c.fan);
    const Moments m = moments(draw(c.init, kBig));
    EXPECT_GE(m.min, -limit);
    EXPECT_LE(m.max, limit);
    EXPECT_LT(m.min, -0.999 * limit);
    EXPECT_GT(m.max, 0.999 * limit);
    expect_moments(m, 0.0, limit * limit / 3.0);
  }
}

TEST(Initializers, TruncatedNormalVarianceScalingKeepsTheVarianceAndCutsAtTwoStddev) {
  struct Case {
    Initializer init;
    double variance;
  };
  const std::vector<Case> cases{
      {GlorotNormal(), 2.0 / 900},
      {HeNormal(), 2.0 / 400},
      {LecunNormal(), 1.0 / 400},
      {VarianceScaling(2.0, FanMode::fan_avg, Distribution::truncated_normal), 2.0 / 450},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(initializer_class_name(c.init.kind)));
    // The normal before the cut: variance / 0.8796...^2; the cut at two of its deviations.
    const double bound = 2.0 * std::sqrt(c.variance) / kTruncatedNormalStddev;
    const Moments m = moments(draw(c.init, kBig));
    EXPECT_GE(m.min, -bound * (1 + 1e-6));
    EXPECT_LE(m.max, bound * (1 + 1e-6));
    EXPECT_LT(m.min, -0.99 * bound);
    EXPECT_GT(m.max, 0.99 * bound);
    expect_moments(m, 0.0, c.variance);
  }
}

TEST(Initializers, UntruncatedNormalIsNotCut) {
  const Initializer init = VarianceScaling(2.0, FanMode::fan_in, Distribution::untruncated_normal);
  const Moments m = moments(draw(init, kBig));
  const double stddev = std::sqrt(2.0 / 400);
  expect_moments(m, 0.0, stddev * stddev);
  // 200,000 normals reach past 4 deviations (a truncated draw would stop at 2.27).
  EXPECT_GT(std::max(m.max, -m.min), 4.0 * stddev);
}

TEST(Initializers, RandomNormalUniformAndTruncatedNormalTakeTheirArguments) {
  {
    const Moments m = moments(draw(RandomNormal(0.5, 0.2), kBig));
    expect_moments(m, 0.5, 0.04);
    EXPECT_GT(m.max, 0.5 + 4 * 0.2);
  }
  {
    const Moments m = moments(draw(RandomUniform(-0.3, 0.1), kBig));
    expect_moments(m, -0.1, 0.4 * 0.4 / 12);
    EXPECT_GE(m.min, -0.3);
    EXPECT_LE(m.max, 0.1);
    EXPECT_LT(m.min, -0.2995);
    EXPECT_GT(m.max, 0.0995);
  }
  {
    // Cut at mean +- 2 stddev; the variance of a standard normal cut at +-2 is 0.87962566^2.
    const Moments m = moments(draw(TruncatedNormal(1.0, 0.1), kBig));
    expect_moments(m, 1.0, 0.01 * kTruncatedNormalStddev * kTruncatedNormalStddev);
    EXPECT_GE(m.min, 0.8 - 1e-6);
    EXPECT_LE(m.max, 1.2 + 1e-6);
    EXPECT_LT(m.min, 0.802);
    EXPECT_GT(m.max, 1.198);
  }
  // Keras's defaults: stddev 0.05, limits +-0.05.
  EXPECT_EQ(RandomNormal().stddev, 0.05);
  EXPECT_EQ(RandomUniform().minval, -0.05);
  EXPECT_EQ(TruncatedNormal().mean, 0.0);
}

TEST(Initializers, ConstantsIdentityAndOrthogonal) {
  for (float v : draw(Zeros(), {3, 4})) EXPECT_EQ(v, 0.0f);
  for (float v : draw(Ones(), {5})) EXPECT_EQ(v, 1.0f);
  for (float v : draw(Constant(-0.25), {2, 2, 2})) EXPECT_EQ(v, -0.25f);
  const std::vector<float> eye = draw(Identity(2.0), {3, 4});
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(eye[static_cast<std::size_t>(r * 4 + c)], r == c ? 2 : 0);
  EXPECT_THROW(draw(Identity(), {3, 3, 2, 4}), Error);
  EXPECT_THROW(draw(Orthogonal(), {6}), Error);
  // Orthonormal columns (rows >= cols) or rows (rows < cols), times the gain; a conv kernel is
  // (kh * kw * in, filters).
  for (const Shape& s : {Shape{30, 7}, Shape{7, 30}, Shape{3, 3, 4, 8}}) {
    SCOPED_TRACE(shape_to_string(s));
    const std::vector<float> q = draw(Orthogonal(1.5), s);
    const int64_t cols = s.back(), rows = shape_size(s) / cols;
    const bool tall = rows >= cols;
    const int64_t count = tall ? cols : rows, length = tall ? rows : cols;
    auto at = [&](int64_t vec, int64_t i) {
      return static_cast<double>(
          q[static_cast<std::size_t>(tall ? i * cols + vec : vec * cols + i)]);
    };
    for (int64_t a = 0; a < count; ++a)
      for (int64_t b = 0; b < count; ++b) {
        double dot = 0;
        for (int64_t i = 0; i < length; ++i) dot += at(a, i) * at(b, i);
        EXPECT_NEAR(dot, a == b ? 2.25 : 0.0, 1e-5);
      }
  }
}

TEST(Initializers, ParametersOfOneLayerDrawDifferentNumbers) {
  const std::vector<float> kernel = draw(RandomNormal(), {64}, {3, 1, 0});
  const std::vector<float> bias = draw(RandomNormal(), {64}, {3, 1, 1});
  const std::vector<float> other_layer = draw(RandomNormal(), {64}, {3, 2, 0});
  EXPECT_NE(kernel, bias);
  EXPECT_NE(kernel, other_layer);
  EXPECT_EQ(kernel, draw(RandomNormal(), {64}, {3, 1, 0}));  // a pure function of the key
}

// ---- in a model ----

// Dense's kernel (inputs, units) and Conv2D's (kh, kw, in, filters) get Keras's fans; the bias
// its own initializer.
TEST(Initializers, DenseAndConv2DKernelsUseKerasFans) {
  Layer conv = Conv2D(64, 5, "relu");
  conv.args<ConvArgs>().kernel_initializer = HeUniform();
  conv.args<ConvArgs>().bias_initializer = Constant(0.5);
  Layer dense = Dense(300, "relu");
  dense.args<DenseArgs>().kernel_initializer = HeNormal();
  dense.args<DenseArgs>().bias_initializer = RandomUniform(0.1, 0.2);
  Sequential model({Input({9, 9, 32}), conv, Flatten(), dense, Dense(10)});
  model.compile(Adam(), "mse", {}, {.threads = 1, .seed = 3});
  const std::vector<NamedTensor> w = model.get_weights();
  auto values = [](const Tensor& t) { return std::vector<float>(t.data(), t.data() + t.size()); };
  {
    // fan_in = 5 * 5 * 32 = 800: limit sqrt(6 / 800).
    const Moments m = moments(values(w[0].value));
    const double limit = std::sqrt(6.0 / 800);
    EXPECT_LE(m.max, limit);
    EXPECT_GT(m.max, 0.99 * limit);
    expect_moments(m, 0.0, limit * limit / 3);
  }
  for (float b : values(w[1].value)) EXPECT_EQ(b, 0.5f);
  {
    // fan_in = 5 * 5 * 64 = 1600 (the flattened 5x5x64 output).
    const Moments m = moments(values(w[2].value));
    expect_moments(m, 0.0, 2.0 / 1600);
    EXPECT_LE(m.max, 2 * std::sqrt(2.0 / 1600) / kTruncatedNormalStddev * (1 + 1e-6));
  }
  const Moments bias = moments(values(w[3].value));
  EXPECT_GE(bias.min, 0.1f);
  EXPECT_LE(bias.max, 0.2f);
}

TEST(Initializers, BatchNormalizationTakesItsFourInitializers) {
  Layer bn = BatchNormalization();
  BatchNormArgs& a = bn.args<BatchNormArgs>();
  a.gamma_initializer = Constant(2.0);
  a.beta_initializer = Constant(-1.0);
  a.moving_mean_initializer = Constant(0.25);
  a.moving_variance_initializer = Constant(4.0);
  Sequential model({Input({3}), bn});
  model.compile(Adam(), "mse", {}, {.threads = 1});
  const std::vector<NamedTensor> w = model.get_weights();
  ASSERT_EQ(w.size(), 4u);
  const float expected[] = {2.0f, -1.0f, 0.25f, 4.0f};
  for (std::size_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(w[i].value.data()[j], expected[i]) << w[i].name;
}

// ---- Keras JSON ----

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Initializers, KerasJsonRoundTripKeepsEveryField) {
  Layer conv = Conv2D(4, 3);
  conv.args<ConvArgs>().kernel_initializer = Orthogonal(1.5);
  conv.args<ConvArgs>().kernel_initializer.seed = 42;
  conv.args<ConvArgs>().bias_initializer = Constant(0.1);
  Layer dense = Dense(5);
  dense.args<DenseArgs>().kernel_initializer =
      VarianceScaling(2.0, FanMode::fan_avg, Distribution::untruncated_normal);
  dense.args<DenseArgs>().bias_initializer = TruncatedNormal(0.5, 0.01);
  Layer head = Dense(3);
  head.args<DenseArgs>().kernel_initializer = HeNormal();
  head.args<DenseArgs>().bias_initializer = RandomUniform(-1, 1);
  Layer bn = BatchNormalization();
  bn.args<BatchNormArgs>().gamma_initializer = RandomNormal(1.0, 0.02);
  Sequential model({Input({6, 6, 2}), conv, Flatten(), dense, bn, head});
  const std::string text = model_to_json(model);
  const json j = json::parse(text);
  const json& layers = j["config"]["layers"];
  EXPECT_EQ(layers[1]["config"]["kernel_initializer"],
            json::parse(R"({"module": "keras.initializers", "class_name": "Orthogonal",
                            "config": {"seed": 42, "gain": 1.5}, "registered_name": null})"));
  EXPECT_EQ(layers[1]["config"]["bias_initializer"]["config"], json::parse(R"({"value": 0.1})"));
  EXPECT_EQ(layers[3]["config"]["kernel_initializer"]["config"],
            json::parse(R"({"seed": null, "scale": 2.0, "mode": "fan_avg",
                            "distribution": "untruncated_normal", "input_axes": null,
                            "output_axes": null})"));
  EXPECT_EQ(layers[5]["config"]["kernel_initializer"]["class_name"], "HeNormal");
  EXPECT_EQ(layers[5]["config"]["kernel_initializer"]["config"],
            json::parse(R"({"seed": null, "input_axes": null, "output_axes": null})"));
  const Sequential again = model_from_json(text, "round trip");
  ASSERT_EQ(again.layers().size(), model.layers().size());
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& a = model.layers()[i];
    const Layer& b = again.layers()[i];
    if (const auto* c = a.find_args<ConvArgs>()) {
      EXPECT_EQ(c->kernel_initializer, b.args<ConvArgs>().kernel_initializer) << i;
      EXPECT_EQ(c->bias_initializer, b.args<ConvArgs>().bias_initializer) << i;
    }
    if (const auto* d = a.find_args<DenseArgs>()) {
      EXPECT_EQ(d->kernel_initializer, b.args<DenseArgs>().kernel_initializer) << i;
      EXPECT_EQ(d->bias_initializer, b.args<DenseArgs>().bias_initializer) << i;
    }
    if (const auto* n = a.find_args<BatchNormArgs>()) {
      EXPECT_EQ(n->gamma_initializer, b.args<BatchNormArgs>().gamma_initializer) << i;
      EXPECT_EQ(n->beta_initializer, b.args<BatchNormArgs>().beta_initializer) << i;
    }
  }
  EXPECT_EQ(model_to_json(again), text);
}

// A Keras 3 model file (tests/data/keras/small_keras3.json, written by Keras) with its first
// Dense's kernel_initializer set to "he_normal" as a script's string: a (784, 128) kernel of
// variance 2 / 784 cut at two deviations.
TEST(Initializers, AKerasFileWithHeNormalLoadsAndDrawsIt) {
  json j = json::parse(
      slurp(crossover::testing_util::source_dir() + "/tests/data/keras/small_keras3.json"));
  for (json& l : j["config"]["layers"])
    if (l["config"]["name"] == "dense") l["config"]["kernel_initializer"] = "he_normal";
  Sequential model = model_from_json(j.dump(), "he.json");
  EXPECT_EQ(model.layers()[1].args<DenseArgs>().kernel_initializer, HeNormal());
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 11});
  const std::vector<NamedTensor> weights = model.get_weights();
  const Tensor& k = weights[0].value;
  ASSERT_EQ(k.shape(), (Shape{784, 128}));
  const Moments m = moments(std::vector<float>(k.data(), k.data() + k.size()));
  expect_moments(m, 0.0, 2.0 / 784);
  EXPECT_LE(m.max, 2 * std::sqrt(2.0 / 784) / kTruncatedNormalStddev * (1 + 1e-6));
  // Written back as Keras writes the string's class.
  const json out = json::parse(model_to_json(model));
  int written = 0;
  for (const json& l : out["config"]["layers"])
    if (l["config"]["name"] == "dense") {
      EXPECT_EQ(l["config"]["kernel_initializer"]["class_name"], "HeNormal");
      ++written;
    }
  EXPECT_EQ(written, 1);
}

TEST(Initializers, KerasNamesAndRefusals) {
  using keras_config::parse_initializer;
  EXPECT_EQ(parse_initializer(json("glorot_uniform")), GlorotUniform());
  EXPECT_EQ(parse_initializer(json("lecun_normal")), LecunNormal());
  EXPECT_EQ(parse_initializer(json("normal")), RandomNormal());
  EXPECT_EQ(parse_initializer(json("uniform")), RandomUniform());
  EXPECT_EQ(parse_initializer(json("zero")), Zeros());
  EXPECT_EQ(parse_initializer(json("Identity")), Identity());
  EXPECT_EQ(parse_initializer(json("IdentityInitializer")), Identity());
  // As Keras 3.15.1 serializes them (Dense(kernel_initializer="he_normal").get_config(), ...).
  EXPECT_EQ(parse_initializer(json::parse(
                R"({"module": "keras.initializers", "class_name": "HeNormal", "config": {"seed":
                    null, "input_axes": null, "output_axes": null}, "registered_name": null})")),
            HeNormal());
  EXPECT_EQ(parse_initializer(json::parse(
                R"({"module": "keras.initializers", "class_name": "Identity", "config": {},
                    "registered_name": null})")),
            Identity());
  Initializer seeded = Orthogonal();
  seeded.seed = 5;
  EXPECT_EQ(parse_initializer(json::parse(R"({"module": "keras.initializers", "class_name":
      "Orthogonal", "config": {"seed": 5, "gain": 1.0}, "registered_name": null})")),
            seeded);
  // GlorotUniform as its VarianceScaling: the same draws, though written as VarianceScaling.
  const Initializer vs = parse_initializer(json::parse(
      R"({"class_name": "VarianceScaling", "config": {"scale": 1.0, "mode": "fan_avg",
          "distribution": "uniform", "seed": null}})"));
  EXPECT_EQ(draw(vs, {20, 30}), draw(GlorotUniform(), {20, 30}));
  EXPECT_EQ(parse_initializer(json::parse(R"({"class_name": "VarianceScaling",
      "config": {"distribution": "normal"}})"))
                .distribution,
            Distribution::truncated_normal);
  auto why = [](const json& v) {
    try {
      parse_initializer(v);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(why(json("he")),
            "initializer he is not supported: crossover has Keras's GlorotUniform, GlorotNormal, "
            "HeNormal, HeUniform, LecunNormal, LecunUniform, VarianceScaling, RandomNormal, "
            "RandomUniform, TruncatedNormal, Zeros, Ones, Constant, Identity and Orthogonal");
  EXPECT_EQ(why(json::parse(R"({"class_name": "VarianceScaling", "config": {"mode": "fan"}})")),
            "VarianceScaling's mode must be fan_in, fan_out or fan_avg, got fan");
  EXPECT_EQ(why(json::parse(R"({"class_name": "VarianceScaling", "config": {"scale": 0}})")),
            "VarianceScaling's scale must be positive, got 0");
  EXPECT_EQ(why(json::parse(R"({"class_name": "HeNormal", "config": {"gain": 2}})")),
            "HeNormal has no field gain crossover knows (value 2)");
  EXPECT_EQ(why(json(3)), "unreadable initializer 3");
  EXPECT_EQ(why(json::parse(R"({"class_name": "HeNormal", "config": {"input_axes": [0]}})")),
            "input_axes [0] is not supported: crossover computes Keras's default fans (null)");
  EXPECT_THROW(VarianceScaling(-1.0), Error);
}

}  // namespace
}  // namespace crossover
