// Keras's activations elu, selu, leaky_relu, gelu, softplus, swish (silu) and exponential: their
// values against Keras 3.15 at a set of points, their derivatives (kernel_math.h, shared by the
// CPU and CUDA) against float64 central differences, and the names, layers and JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "backends/kernel_math.h"
#include "core/error.h"
#include "formats/model_config.h"
#include "nn/layers.h"
#include "nn/layers/kind.h"
#include "nn/sequential.h"

namespace crossover {
namespace {

using json = nlohmann::json;

const std::vector<float> kPoints{-6.0f, -3.0f, -1.0f, -0.5f, -1e-3f, 0.0f,
                                 1e-3f, 0.5f,  1.0f,  3.0f,  6.0f};

struct Reference {
  const char* name;
  ActivationKind kind;
  float alpha;
  std::vector<float> keras;  // keras.activations.<name>(kPoints) (or the layer) in float32
};

// Printed by Keras 3.15.1 (TensorFlow 2.21 backend, bench/peers) from float32 inputs:
// activations.elu, selu, leaky_relu, gelu, softplus, silu, exponential, layers.LeakyReLU(),
// layers.ELU(alpha=0.5).
const std::vector<Reference> kKeras{
    {"elu",
     ActivationKind::elu,
     1.0f,
     {-9.975212216e-01f, -9.502129555e-01f, -6.321205497e-01f, -3.934693336e-01f, -9.995102882e-04f,
      0.0f, 1.000000047e-03f, 0.5f, 1.0f, 3.0f, 6.0f}},
    {"selu",
     ActivationKind::selu,
     0.0f,
     {-1.753741384e+00f, -1.670568705e+00f, -1.111330748e+00f, -6.917581558e-01f, -1.757238409e-03f,
      0.0f, 1.050701016e-03f, 5.253505111e-01f, 1.050701022e+00f, 3.152102947e+00f,
      6.304205894e+00f}},
    {"leaky_relu",
     ActivationKind::leaky_relu,
     0.2f,
     {-1.200000048e+00f, -6.000000238e-01f, -2.000000030e-01f, -1.000000015e-01f, -2.000000095e-04f,
      0.0f, 1.000000047e-03f, 0.5f, 1.0f, 3.0f, 6.0f}},
    {"gelu",
     ActivationKind::gelu,
     0.0f,
     {-5.919535084e-09f, -4.049696494e-03f, -1.586552560e-01f, -1.542687714e-01f, -4.996010684e-04f,
      0.0f, 5.003989791e-04f, 3.457312286e-01f, 8.413447142e-01f, 2.995950222e+00f, 6.0f}},
    {"softplus",
     ActivationKind::softplus,
     0.0f,
     {2.475685440e-03f, 4.858735576e-02f, 3.132616878e-01f, 4.740769863e-01f, 6.926472783e-01f,
      6.931471825e-01f, 6.936473250e-01f, 9.740769267e-01f, 1.313261628e+00f, 3.048587322e+00f,
      6.002475739e+00f}},
    {"silu",
     ActivationKind::swish,
     0.0f,
     {-1.483573765e-02f, -1.422775984e-01f, -2.689414024e-01f, -1.887703389e-01f, -4.997500218e-04f,
      0.0f, 5.002500257e-04f, 3.112296760e-01f, 7.310585976e-01f, 2.857722282e+00f,
      5.985164165e+00f}},
    {"exponential",
     ActivationKind::exponential,
     0.0f,
     {2.478752285e-03f, 4.978707060e-02f, 3.678794503e-01f, 6.065306664e-01f, 9.990004897e-01f,
      1.0f, 1.001000524e+00f, 1.648721218e+00f, 2.718281746e+00f, 2.008553696e+01f,
      4.034288025e+02f}},
    {"LeakyReLU()",
     ActivationKind::leaky_relu,
     0.3f,
     {-1.800000072e+00f, -9.000000358e-01f, -3.000000119e-01f, -1.500000060e-01f, -3.000000142e-04f,
      0.0f, 1.000000047e-03f, 0.5f, 1.0f, 3.0f, 6.0f}},
    {"ELU(alpha=0.5)",
     ActivationKind::elu,
     0.5f,
     {-4.987606108e-01f, -4.751064777e-01f, -3.160602748e-01f, -1.967346668e-01f, -4.997551441e-04f,
      0.0f, 1.000000047e-03f, 0.5f, 1.0f, 3.0f, 6.0f}},
};

TEST(Activations, ValuesMatchKeras) {
  for (const Reference& r : kKeras)
    for (std::size_t i = 0; i < kPoints.size(); ++i) {
      const float ours = activation_value(r.kind, kPoints[i], r.alpha);
      EXPECT_NEAR(ours, r.keras[i], 4e-7 * std::abs(r.keras[i]) + 1e-12)
          << r.name << " at " << kPoints[i];
    }
}

TEST(Activations, TheCpuBackendComputesThemAsKeras) {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  for (const Reference& r : kKeras) {
    std::vector<float> y(kPoints.size());
    be->activation_forward(r.kind, r.alpha, kPoints.data(), y.data(), 1,
                           static_cast<int64_t>(y.size()));
    for (std::size_t i = 0; i < y.size(); ++i)
      EXPECT_NEAR(y[i], r.keras[i], 4e-7 * std::abs(r.keras[i]) + 1e-12) << r.name;
  }
}

// The derivative in double against central differences of the value in double, away from the
// kinks (0 for relu, leaky_relu, elu and selu).
TEST(Activations, DerivativesMatchFloat64FiniteDifferences) {
  const ActivationKind kinds[] = {ActivationKind::sigmoid,     ActivationKind::tanh,
                                  ActivationKind::elu,         ActivationKind::selu,
                                  ActivationKind::leaky_relu,  ActivationKind::gelu,
                                  ActivationKind::softplus,    ActivationKind::swish,
                                  ActivationKind::exponential, ActivationKind::relu};
  for (ActivationKind k : kinds)
    for (double x : {-7.0, -3.0, -1.3, -0.4, -0.01, 0.02, 0.7, 1.9, 4.0, 8.0}) {
      const double alpha = 0.7, h = 1e-6;
      const double y = activation_value(k, x, alpha);
      const double fd =
          (activation_value(k, x + h, alpha) - activation_value(k, x - h, alpha)) / (2 * h);
      EXPECT_NEAR(activation_derivative(k, x, y, alpha), fd, 1e-7 * std::max(1.0, std::abs(fd)))
          << activation_name(k) << " at " << x;
    }
}

// A traced call()'s square root (not a Keras activation): its value and its derivative from
// the output, against the float64 value and central differences, where it is defined.
TEST(Activations, SqrtAndItsDerivativeFromTheOutput) {
  for (double x : {1e-4, 0.02, 0.7, 1.9, 4.0, 80.0}) {
    const double h = 1e-3 * x, y = std::sqrt(x);
    EXPECT_NEAR(activation_value(ActivationKind::sqrt, x, 0.0), y, 1e-15 * y);
    const double fd = (std::sqrt(x + h) - std::sqrt(x - h)) / (2 * h);
    EXPECT_NEAR(activation_derivative(ActivationKind::sqrt, x, y, 0.0), fd, 1e-6 * fd) << x;
  }
  EXPECT_THROW(parse_activation("sqrt"), Error);  // not a Keras activation name
}

// The backend's backward pass: dx = dy * act'(x), from y (and x for gelu and swish).
TEST(Activations, TheCpuBackwardPassIsTheDerivativeTimesTheGradient) {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  for (const Reference& r : kKeras) {
    const auto n = static_cast<int64_t>(kPoints.size());
    std::vector<float> y(kPoints.size()), dy(kPoints.size()), dx(kPoints.size());
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 0.5f + static_cast<float>(i);
    be->activation_forward(r.kind, r.alpha, kPoints.data(), y.data(), 1, n);
    be->activation_backward(r.kind, r.alpha, kPoints.data(), y.data(), dy.data(), dx.data(), 1, n);
    for (std::size_t i = 0; i < dx.size(); ++i) {
      const double x = kPoints[i];
      if (x == 0.0) continue;  // a kink for some
      const double h = 1e-4 * std::max(1.0, std::abs(x));
      const double fd = (activation_value(r.kind, x + h, double(r.alpha)) -
                         activation_value(r.kind, x - h, double(r.alpha))) /
                        (2 * h);
      EXPECT_NEAR(dx[i], dy[i] * fd, 1e-4 * std::max(1.0, std::abs(dy[i] * fd)))
          << r.name << " at " << x;
    }
  }
}

TEST(Activations, NamesLayersAndKerasJson) {
  EXPECT_EQ(parse_activation("silu"), ActivationKind::swish);
  EXPECT_EQ(parse_activation("swish"), ActivationKind::swish);
  EXPECT_EQ(activation_name(ActivationKind::swish), "silu");  // as Keras 3 writes it
  EXPECT_EQ(Dense(3, "leaky_relu").args<DenseArgs>().activation.alpha,
            0.2f);  // keras.activations.leaky_relu's
  EXPECT_EQ(LeakyReLU().args<ActivationArgs>().activation.alpha, 0.3f);  // keras.layers.LeakyReLU's
  EXPECT_EQ(ELU().args<ActivationArgs>().activation.alpha, 1.0f);
  EXPECT_THROW(LeakyReLU(-0.1), Error);
  EXPECT_THROW(parse_activation("mish"), Error);

  Layer dense = Dense(4, "leaky_relu");
  dense.args<DenseArgs>().activation.alpha = 0.1f;  // Dense(activation=keras.layers.LeakyReLU(0.1))
  Sequential model(
      {Input({5}), dense, LeakyReLU(0.25), Dense(3, "gelu"), ELU(0.5), Dense(2, "selu")});
  const std::string text = model_to_json(model);
  const json j = json::parse(text);
  const json& layers = j["config"]["layers"];
  EXPECT_EQ(layers[1]["config"]["activation"]["class_name"], "LeakyReLU");
  EXPECT_NEAR(layers[1]["config"]["activation"]["config"]["negative_slope"].get<double>(), 0.1,
              1e-7);
  EXPECT_EQ(layers[2]["class_name"], "LeakyReLU");
  EXPECT_EQ(layers[2]["config"]["negative_slope"], 0.25);
  EXPECT_EQ(layers[3]["config"]["activation"], "gelu");
  EXPECT_EQ(layers[4]["class_name"], "ELU");
  EXPECT_EQ(layers[4]["config"]["alpha"], 0.5);
  const Sequential again = model_from_json(text, "round trip");
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    const Layer &a = again.layers()[i], &b = model.layers()[i];
    EXPECT_EQ(layer_kind(a).activation(a).kind, layer_kind(b).activation(b).kind) << i;
    EXPECT_EQ(layer_kind(a).activation(a).alpha, layer_kind(b).activation(b).alpha) << i;
  }
  // tf.keras 2 wrote LeakyReLU's slope as alpha.
  const Sequential keras2 = model_from_json(
      R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
          {"class_name": "InputLayer", "config": {"batch_input_shape": [null, 4], "name": "in"}},
          {"class_name": "LeakyReLU", "config": {"name": "l", "alpha": 0.1}}]}})",
      "keras2");
  EXPECT_EQ(keras2.layers().back().args<ActivationArgs>().activation.alpha, 0.1f);
}

}  // namespace
}  // namespace crossover
