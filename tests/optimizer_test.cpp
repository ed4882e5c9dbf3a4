// Two optimizer steps on w = (1, -2, 0.5) with the gradient (0.1, -0.2, 0.3) and lr 0.1, against
// what Keras 3.15.1 (TensorFlow backend) computes in float64 for the same two steps
// (optimizer.apply_gradients on a float64 keras.Variable), where not said otherwise; see the
// comment of each case for the formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/backend.h"
#include "backends/kernel_math.h"
#include "core/error.h"
#include "keras_adam_reference.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

std::vector<float> two_steps(OptimizerConfig config) {
  auto be = make_cpu_backend(1);
  std::vector<float> w{1.0f, -2.0f, 0.5f}, g{0.1f, -0.2f, 0.3f}, s1(3, 0.0f), s2(3, 0.0f);
  ParamSlot slot{w.data(), g.data(), s1.data(), s2.data(), 3, true};
  StepCounters c;
  be->optimizer_step(config, {&slot, 1}, &c);
  be->optimizer_step(config, {&slot, 1}, &c);
  EXPECT_EQ(c.step, 2);
  EXPECT_EQ(c.batch_index, 2);
  return w;
}

void expect_values(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 2e-6) << "w[" << i << "]";
}

TEST(Optimizers, AdamFollowsKerasEpsilonHatFormula) {
  // m += (g - m)(1 - 0.9); v += (g^2 - v)(1 - 0.999); alpha_t = lr sqrt(1 - 0.999^t) / (1 - 0.9^t)
  // (beta cast to float32 before the power, as Keras does in float64 too);
  // w -= alpha_t m / (sqrt(v) + 1e-7)
  expect_values(two_steps(Adam({.learning_rate = 0.1})),
                {0.8000067293096443, -1.8000040299877296, 0.3000031301970449});
}

TEST(Optimizers, AdamTakesOneMinusBetaInDoubleAsKerasDoes) {
  // Keras's 1 - beta_2 is Python arithmetic on the double beta, rounded to float32 once: 1e-4f for
  // beta_2 = 0.9999, where 1 - 0.9999f is 1.7e-4 relative smaller; its bias correction raises the
  // float32 beta. The expected values are Keras 3.15.1's own float32 result (float64 differs by
  // 2.5e-6, from alpha's float32 rounding, which crossover reproduces too); taking 1 - beta from
  // the float32 beta gives (0.8000171, -1.8000085, 0.3000057), 1.9e-5 away.
  const std::vector<float> got = two_steps(Adam({.learning_rate = 0.1, .beta_2 = 0.9999}));
  const double want[] = {0.7999979853630066, -1.7999894618988037, 0.29998666048049927};
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 3e-7) << "w[" << i << "]";
}

TEST(Optimizers, AdamWDecaysWeightsBeforeTheStep) {
  // w -= w * 0.1 * lr, then the Adam step.
  expect_values(two_steps(AdamW({.learning_rate = 0.1, .weight_decay = 0.1})),
                {0.7811066904669558, -1.7612040063654884, 0.29105311273022166});
}

TEST(Optimizers, ClipnormScalesTheGradientToTheGlobalNorm) {
  // |g| = sqrt(0.14); g *= 0.1 / |g| before Adam.
  expect_values(two_steps(Adam({.learning_rate = 0.1, .clipnorm = 0.1})),
                {0.8000215292088603, -1.8000114304248334, 0.30000806392999857});
}

// Two steps on two tensors a = (1, -2, 0.5), b = (0.3, -0.4) with gradients ga = (0.1, -0.2, 0.3)
// (norm 0.374) and gb = (0.01, 0.02) (norm 0.022), against a float64 reference of Keras's
// clipnorm (each tensor's gradient g * c / max(|g|, c)).
struct TwoTensors {
  std::vector<float> a, b;
};

TwoTensors two_tensor_steps(OptimizerConfig config) {
  auto be = make_cpu_backend(1);
  TwoTensors w{{1.0f, -2.0f, 0.5f}, {0.3f, -0.4f}};
  std::vector<float> ga{0.1f, -0.2f, 0.3f}, gb{0.01f, 0.02f};
  std::vector<float> a1(3, 0.0f), a2(3, 0.0f), b1(2, 0.0f), b2(2, 0.0f);
  const ParamSlot slots[2] = {{w.a.data(), ga.data(), a1.data(), a2.data(), 3, true},
                              {w.b.data(), gb.data(), b1.data(), b2.data(), 2, false}};
  StepCounters c;
  be->optimizer_step(config, slots, &c);
  be->optimizer_step(config, slots, &c);
  return w;
}

// Keras's SGD with momentum and weight decay in float64 after clipping each gradient to norm c.
std::vector<double> sgd_reference(std::vector<double> w, std::vector<double> g, double c,
                                  bool decay) {
  double sq = 0;
  for (double v : g) sq += v * v;
  const double norm = std::sqrt(sq);
  for (double& v : g) v = v * c / std::max(norm, c);
  std::vector<double> vel(w.size(), 0.0);
  for (int step = 0; step < 2; ++step)
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (decay) w[i] -= w[i] * 0.1 * 0.1;
      vel[i] = 0.9 * vel[i] - 0.1 * g[i];
      w[i] += vel[i];
    }
  return w;
}

TEST(Optimizers, TensorClipnormClipsEachTensorToItsOwnNorm) {
  const OptimizerConfig sgd =
      with_tensor_clipnorm(SGD({.learning_rate = 0.1, .momentum = 0.9, .weight_decay = 0.1}), 0.1);
  const TwoTensors got = two_tensor_steps(sgd);
  // a's gradient is clipped to norm 0.1; b's (norm 0.022) is not; b is a bias: no decay.
  expect_values(got.a, sgd_reference({1.0, -2.0, 0.5}, {0.1, -0.2, 0.3}, 0.1, true));
  expect_values(got.b, sgd_reference({0.3, -0.4}, {0.01, 0.02}, 0.1, false));
  // The global norm (0.375) would scale b's gradient too.
  const TwoTensors global = two_tensor_steps(
      SGD({.learning_rate = 0.1, .momentum = 0.9, .weight_decay = 0.1, .clipnorm = 0.1}));
  EXPECT_GT(std::fabs(global.b[0] - got.b[0]), 1e-4);
}

TEST(Optimizers, TensorClipnormWithAdamMatchesAFloat64Reference) {
  // A large epsilon, so that Adam's step depends on the gradient's scale (m / (sqrt(v) + eps)).
  const TwoTensors got =
      two_tensor_steps(with_tensor_clipnorm(Adam({.learning_rate = 0.1, .epsilon = 0.1}), 0.1));
  auto adam = [](std::vector<double> w, std::vector<double> g, double c) {
    double sq = 0;
    for (double v : g) sq += v * v;
    for (double& v : g) v = v * c / std::max(std::sqrt(sq), c);
    std::vector<double> m(w.size(), 0.0), v(w.size(), 0.0);
    for (int t = 1; t <= 2; ++t) {
      const double alpha =
          0.1 * std::sqrt(1 - std::pow(double(0.999f), t)) / (1 - std::pow(double(0.9f), t));
      for (std::size_t i = 0; i < w.size(); ++i) {
        m[i] += (g[i] - m[i]) * 0.1;
        v[i] += (g[i] * g[i] - v[i]) * 0.001;
        w[i] -= m[i] * alpha / (std::sqrt(v[i]) + double(0.1f));
      }
    }
    return w;
  };
  expect_values(got.a, adam({1.0, -2.0, 0.5}, {0.1, -0.2, 0.3}, 0.1));
  expect_values(got.b, adam({0.3, -0.4}, {0.01, 0.02}, 0.1));
}

TEST(Optimizers, TensorClipnormIsOneOfTheThreeClippings) {
  EXPECT_THROW(with_tensor_clipnorm(SGD({.clipnorm = 1.0}), 0.5), Error);
  EXPECT_THROW(with_tensor_clipnorm(SGD({.clipvalue = 1.0}), 0.5), Error);
  EXPECT_THROW(with_tensor_clipnorm(SGD(), -1.0), Error);
  EXPECT_EQ(with_tensor_clipnorm(SGD(), 0.5).tensor_clipnorm, 0.5f);
}

TEST(Optimizers, ClipvalueClampsEachElement) {
  // g = (0.1, -0.15, 0.15) after clipping; SGD: w -= 2 * 0.1 * g.
  expect_values(two_steps(SGD({.learning_rate = 0.1, .clipvalue = 0.15})), {0.98, -1.97, 0.47});
}

TEST(Optimizers, PlainSgdStepsAgainstTheGradient) {
  expect_values(two_steps(SGD({.learning_rate = 0.1})), {0.98, -1.96, 0.44});
}

TEST(Optimizers, SgdMomentumAccumulatesVelocity) {
  // v = 0.9 v - lr g; w += v
  expect_values(two_steps(SGD({.learning_rate = 0.1, .momentum = 0.9})), {0.971, -1.942, 0.413});
}

TEST(Optimizers, SgdNesterovLooksAhead) {
  // v = 0.9 v - lr g; w += 0.9 v - lr g
  expect_values(two_steps(SGD({.learning_rate = 0.1, .momentum = 0.9, .nesterov = true})),
                {0.9539, -1.9078, 0.3617});
}

TEST(Optimizers, RmspropDividesByTheRootMeanSquare) {
  // ms = 0.9 ms + 0.1 g^2; w -= lr g / sqrt(ms + 1e-7) (Keras 3: epsilon inside the root)
  expect_values(two_steps(RMSprop({.learning_rate = 0.1})),
                {0.4543783392019507, -1.4543619540539021, -0.045641080408698714});
}

TEST(Optimizers, RmspropWithMomentum) {
  // mom = 0.5 mom + lr g / sqrt(ms + 1e-7); w -= mom
  expect_values(two_steps(RMSprop({.learning_rate = 0.1, .momentum = 0.5})),
                {0.29627235893860626, -1.2962500450758536, -0.20375408737011375});
}

TEST(Optimizers, ExponentialDecayIsEvaluatedPerStep) {
  // lr(step) = 0.1 * 0.5^(step / 1): steps of 0.1 then 0.05.
  auto config = with_exponential_decay(SGD({.learning_rate = 0.1}), 1, 0.5);
  expect_values(two_steps(config), {1.0 - 0.15 * 0.1, -2.0 + 0.15 * 0.2, 0.5 - 0.15 * 0.3});
}

TEST(Optimizers, InvalidSettingsAreRefusedByName) {
  EXPECT_THROW(Adam({.learning_rate = -1}), Error);
  EXPECT_THROW(SGD({.momentum = 1.5}), Error);
  EXPECT_THROW(optimizer_from_name("ftrl"), Error);
  EXPECT_THROW(Adagrad({.initial_accumulator_value = -1}), Error);
  EXPECT_THROW(Adadelta({.rho = 1.0}), Error);
  EXPECT_THROW(Nadam({.beta_1 = 1.0}), Error);
  EXPECT_THROW(Adamax({.epsilon = 0}), Error);
}

// Several steps of Adagrad, Adadelta, Nadam and Adamax against a float64 evaluation of Keras
// 3.15's formulas (keras/src/optimizers/{adagrad,adadelta,nadam,adamax}.py, update_step), with
// a gradient that changes size and sign from step to step. The float32 engine stays within
// float32 rounding of it.
constexpr int kSteps = 6;
const double kW0[] = {1.0, -2.0, 0.5, 0.0};
const double kG0[] = {0.1, -0.2, 0.3, 1e-3};

double gradient_at(int i, int t) {  // t = 1, 2, ...
  return kG0[i] * (1.0 + 0.3 * t) * (t % 3 == 2 ? -1.0 : 1.0);
}

// The engine's weights after kSteps steps from kW0; slot1 starts at `slot1_start` (Adagrad's
// initial accumulator). `counters` carries the step count (and Nadam's state) across calls.
struct EngineRun {
  std::vector<float> w, s1, s2;
  StepCounters counters;
};
void run_steps(const OptimizerConfig& config, EngineRun& r, int from, int to) {
  auto be = make_cpu_backend(1);
  std::vector<float> g(4);
  ParamSlot slot{r.w.data(), g.data(), r.s1.data(), r.s2.data(), 4, true};
  for (int t = from; t <= to; ++t) {
    for (int i = 0; i < 4; ++i) g[i] = static_cast<float>(gradient_at(i, t));
    be->optimizer_step(config, {&slot, 1}, &r.counters);
  }
}
EngineRun engine_steps(const OptimizerConfig& config, float slot1_start = 0.0f) {
  EngineRun r{{1.0f, -2.0f, 0.5f, 0.0f},
              std::vector<float>(4, slot1_start),
              std::vector<float>(4, 0.0f),
              {}};
  run_steps(config, r, 1, kSteps);
  EXPECT_EQ(r.counters.step, kSteps);
  return r;
}

// Keras's formulas in float64; `update(i, t, w, s1, s2, g)` is one update_step.
template <class Update>
std::vector<double> reference_steps(double slot1_start, Update update) {
  std::vector<double> w(kW0, kW0 + 4), s1(4, slot1_start), s2(4, 0.0);
  for (int t = 1; t <= kSteps; ++t)
    for (int i = 0; i < 4; ++i) update(t, w[i], s1[i], s2[i], gradient_at(i, t));
  return w;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol) << "w[" << i << "]";
    EXPECT_GT(std::fabs(want[i] - kW0[i]), 100 * tol) << "w[" << i << "] barely moved";
  }
}

TEST(Optimizers, AdagradFollowsKerasOverSeveralSteps) {
  for (const double eps : {1e-7, 0.05}) {
    SCOPED_TRACE(eps);
    const double lr = 0.1, init = 0.1;
    const EngineRun r =
        engine_steps(Adagrad({.learning_rate = lr, .epsilon = eps}), static_cast<float>(init));
    // accumulator += g^2; w -= lr g / sqrt(accumulator + epsilon)
    const auto want = reference_steps(init, [&](int, double& w, double& acc, double&, double g) {
      acc += g * g;
      w -= lr * g / std::sqrt(acc + eps);
    });
    expect_close(r.w, want, 2e-6);
  }
}

TEST(Optimizers, AdadeltaFollowsKerasOverSeveralSteps) {
  for (const double eps : {1e-7, 1e-2}) {
    SCOPED_TRACE(eps);
    const double lr = 1.0, rho = 0.95;
    const EngineRun r = engine_steps(Adadelta({.learning_rate = lr, .epsilon = eps}));
    // ag = rho ag + (1 - rho) g^2; d = -sqrt(ad + eps) g / sqrt(ag + eps);
    // ad = rho ad + (1 - rho) d^2; w += lr d
    const auto want = reference_steps(0.0, [&](int, double& w, double& ag, double& ad, double g) {
      ag = rho * ag + (1 - rho) * g * g;
      const double d = -std::sqrt(ad + eps) * g / std::sqrt(ag + eps);
      ad = rho * ad + (1 - rho) * d * d;
      w += lr * d;
    });
    // The small epsilon moves the weights by ~1e-3 only: a tolerance relative to that.
    expect_close(r.w, want, eps < 1e-3 ? 5e-7 : 2e-6);
  }
}

// Keras's Nadam in float64: u(s) = beta_1 (1 - 0.5 * 0.96^s); u_product is the product of
// u(1..t); m_hat = u(t+1) m / (1 - u_product u(t+1)) + (1 - u(t)) g / (1 - u_product);
// v_hat = v / (1 - beta_2^t); w -= lr m_hat / (sqrt(v_hat) + epsilon).
std::vector<double> nadam_reference(double lr, double b1, double b2, double eps) {
  double u_product = 1.0;
  int product_step = 0;
  return reference_steps(0.0, [&](int t, double& w, double& m, double& v, double g) {
    auto u = [&](int s) { return b1 * (1.0 - 0.5 * std::pow(0.96, s)); };
    if (product_step < t) u_product *= u(t), product_step = t;  // once per step
    m += (g - m) * (1 - b1);
    v += (g * g - v) * (1 - b2);
    const double m_hat =
        u(t + 1) * m / (1 - u_product * u(t + 1)) + (1 - u(t)) * g / (1 - u_product);
    const double v_hat = v / (1 - std::pow(b2, t));
    w -= m_hat * lr / (std::sqrt(v_hat) + eps);
  });
}

TEST(Optimizers, NadamFollowsKerasOverSeveralSteps) {
  for (const double eps : {1e-7, 0.1}) {
    SCOPED_TRACE(eps);
    const EngineRun r = engine_steps(Nadam({.learning_rate = 0.1, .epsilon = eps}));
    expect_close(r.w, nadam_reference(0.1, 0.9, 0.999, eps), 3e-6);
    EXPECT_EQ(r.counters.carried.step, kSteps);
  }
  const EngineRun r = engine_steps(Nadam({.learning_rate = 0.1, .beta_1 = 0.5, .beta_2 = 0.9}));
  expect_close(r.w, nadam_reference(0.1, 0.5, 0.9, 1e-7), 3e-6);
}

TEST(Optimizers, NadamRecomputesItsProductAfterARestoredStepCount) {
  // A checkpoint restores the step count only: the u_product it resumes from is recomputed from
  // the step, to the bits the uninterrupted run carried.
  const OptimizerConfig config = Nadam({.learning_rate = 0.1});
  const EngineRun whole = engine_steps(config);
  EngineRun resumed{{1.0f, -2.0f, 0.5f, 0.0f}, std::vector<float>(4), std::vector<float>(4), {}};
  run_steps(config, resumed, 1, 3);
  resumed.counters = StepCounters{};
  resumed.counters.step = 3;
  run_steps(config, resumed, 4, kSteps);
  EXPECT_EQ(resumed.w, whole.w);
  EXPECT_EQ(resumed.counters.carried.value, whole.counters.carried.value);
  EXPECT_EQ(whole.counters.carried.value, optimizers::Nadam::u_product_after(0.9, kSteps));
}

TEST(Optimizers, AdamaxFollowsKerasOverSeveralSteps) {
  for (const double eps : {1e-7, 0.1}) {
    SCOPED_TRACE(eps);
    const double lr = 0.1, b1 = 0.9, b2 = 0.999;
    const EngineRun r = engine_steps(Adamax({.learning_rate = lr, .epsilon = eps}));
    // m += (g - m)(1 - b1); norm = max(b2 norm, |g|); w -= lr m / ((1 - b1^t)(norm + eps))
    const auto want = reference_steps(0.0, [&](int t, double& w, double& m, double& n, double g) {
      m += (g - m) * (1 - b1);
      n = std::max(b2 * n, std::fabs(g));
      w -= lr * m / ((1 - std::pow(b1, t)) * (n + eps));
    });
    expect_close(r.w, want, 2e-6);
  }
}

// Keras 3.15's Lion (keras/src/optimizers/lion.py), with decoupled weight decay as Keras's base
// optimizer applies it: w -= w wd lr; w -= lr sign(m b1 + g (1 - b1)); m = m b2 + g (1 - b2).
TEST(Optimizers, LionFollowsKerasOverSeveralSteps) {
  for (const double wd : {0.0, 0.5}) {
    SCOPED_TRACE(wd);
    const double lr = 0.1, b1 = 0.8, b2 = 0.95;
    const EngineRun r =
        engine_steps(Lion({.learning_rate = lr, .beta_1 = b1, .beta_2 = b2, .weight_decay = wd}));
    const auto want = reference_steps(0.0, [&](int, double& w, double& m, double&, double g) {
      w -= w * wd * lr;
      const double blend = m * b1 + g * (1 - b1);
      w -= lr * (blend > 0 ? 1.0 : (blend < 0 ? -1.0 : 0.0));
      m = m * b2 + g * (1 - b2);
    });
    expect_close(r.w, want, 2e-6);
    EXPECT_EQ(optimizer_slot_names(Lion())[0], "momentum");
    EXPECT_EQ(optimizer_slot_count(Lion()), 1);
  }
}

// Every argument is checked against its unit's range, by the C++ options and by Keras name alike.
TEST(Optimizers, ArgumentsOutsideTheirRangeAreRefusedWithTheirName) {
  const auto message = [](auto f) { return testing_util::error_of(f); };
  EXPECT_EQ(message([] { Lion({.beta_1 = 0.0}); }), "Lion: beta_1 must be in (0, 1], got 0");
  EXPECT_EQ(message([] {
              make_optimizer("lion", {{"beta_1", 1.5}});
            }),
            "Lion: beta_1 must be in (0, 1], got 1.5");
  EXPECT_NO_THROW(Lion({.beta_1 = 1.0}));  // Keras's range includes 1
  EXPECT_EQ(message([] { Adam({.beta_2 = 1.0}); }), "Adam: beta_2 must be in [0, 1), got 1");
  EXPECT_EQ(message([] { Adagrad({.initial_accumulator_value = -1}); }),
            "Adagrad: initial_accumulator_value must not be negative, got -1");
  EXPECT_EQ(message([] { SGD({.learning_rate = 0}); }),
            "SGD: learning_rate must be positive, got 0");
  EXPECT_EQ(message([] {
              make_optimizer("Lion", {{"epsilon", 1e-7}});
            }),
            "Lion: unknown argument 'epsilon'");
  EXPECT_EQ(message([] { make_optimizer("Ftrl"); }).rfind("optimizer: unknown optimizer 'Ftrl'", 0),
            0u);
  // By Keras name: AdamW's weight decay default, clipnorm per tensor, global_clipnorm as a whole.
  const OptimizerConfig w = make_optimizer("AdamW", {{"clipnorm", 0.5}});
  EXPECT_EQ(w.kind, OptimizerKind::adam);
  EXPECT_EQ(w.weight_decay, 0.004f);
  EXPECT_EQ(w.tensor_clipnorm, 0.5f);
  EXPECT_EQ(make_optimizer("sgd", {{"global_clipnorm", 2}}).clipnorm, 2.0f);
}

// Keras's AMSGrad (Adam(amsgrad=True), and AdamW's): eight steps against a float64 evaluation of
// keras/src/optimizers/adam.py (keras_adam_reference.h), with a gradient that falls a
// hundredfold after two steps, so that v decreases and v_hat, its running maximum, divides the
// step instead. With beta_2 = 0.9 v falls fast and the weights end 1e-3 away from plain Adam's;
// with Keras's default 0.999 only ~1e-5, but the update must be Keras's there too.
TEST(Optimizers, AdamAmsgradFollowsKerasOverSeveralStepsAsVFalls) {
  constexpr int kAmsgradSteps = 8;
  constexpr double kTol = 3e-6;
  const std::vector<double> w0{1.0, -2.0, 0.5, 0.0}, g0{0.1, -0.2, 0.3, 1e-3};
  struct Case {
    const char* name;
    double beta_2, epsilon, weight_decay;
  };
  for (const Case& k : {Case{"adam, beta_2 0.9", 0.9, 1e-7, 0.0}, Case{"adam", 0.999, 1e-7, 0.0},
                        Case{"adamw, beta_2 0.9, epsilon 0.01", 0.9, 0.01, 0.1}}) {
    SCOPED_TRACE(k.name);
    const AdamOptions o{.learning_rate = 0.1,
                        .beta_2 = k.beta_2,
                        .epsilon = k.epsilon,
                        .weight_decay = k.weight_decay,
                        .amsgrad = true};
    const OptimizerConfig config = k.weight_decay > 0 ? AdamW(o) : Adam(o);
    ASSERT_TRUE(config.args.adam.amsgrad);
    auto be = make_cpu_backend(1);
    std::vector<float> w(w0.begin(), w0.end()), g(4), m(4, 0.0f), v(4, 0.0f), v_hat(4, 0.0f);
    const ParamSlot slot{w.data(), g.data(), m.data(), v.data(), 4, true, v_hat.data()};
    testing_util::KerasAdamReference want{.lr = 0.1,
                                          .beta_2 = k.beta_2,
                                          .epsilon = k.epsilon,
                                          .weight_decay = k.weight_decay,
                                          .amsgrad = true,
                                          .w = w0};
    testing_util::KerasAdamReference plain = want;
    plain.amsgrad = false;
    StepCounters c;
    bool v_fell = false;
    for (int t = 1; t <= kAmsgradSteps; ++t) {
      std::vector<double> gt(4);
      for (std::size_t i = 0; i < 4; ++i)
        g[i] = static_cast<float>(gt[i] = testing_util::falling_gradient(g0[i], t));
      be->optimizer_step(config, {&slot, 1}, &c);
      want.step(t, gt);
      plain.step(t, gt);
      for (std::size_t i = 0; i < 4; ++i) {
        SCOPED_TRACE("step " + std::to_string(t) + ", element " + std::to_string(i));
        v_fell = v_fell || want.v[i] < want.v_hat[i];
        EXPECT_NEAR(w[i], want.w[i], kTol);
        EXPECT_NEAR(v[i], want.v[i], 1e-5 * want.v[i]);
        EXPECT_NEAR(v_hat[i], want.v_hat[i], 1e-5 * want.v_hat[i]);
        EXPECT_GE(v_hat[i], v[i]);
      }
    }
    EXPECT_TRUE(v_fell) << "v never fell below its maximum: the case tests nothing";
    if (k.beta_2 < 0.99) {
      double apart = 0;
      for (std::size_t i = 0; i < 4; ++i)
        apart = std::max(apart, std::fabs(want.w[i] - plain.w[i]));
      EXPECT_GT(apart, 100 * kTol) << "amsgrad barely changed the weights";
    }
  }
}

TEST(Optimizers, AmsgradIsAdamsThirdSlotAndOnlyAdams) {
  EXPECT_EQ(optimizer_slot_count(Adam()), 2);
  EXPECT_EQ(optimizer_slot_count(Adam({.amsgrad = true})), 3);
  EXPECT_EQ(optimizer_slot_names(AdamW({.weight_decay = 0.004, .amsgrad = true}))[2],
            "velocity_hat");
  EXPECT_EQ(optimizer_slot_names(Adam())[2], "");
  EXPECT_FALSE(optimizer_from_name("adam").args.adam.amsgrad);
  // Nadam and Adamax have no amsgrad: their options have no such field, and by name it is refused.
  for (const char* cls : {"Nadam", "adamax"})
    EXPECT_NE(testing_util::error_of([&] {
                make_optimizer(cls, {{"amsgrad", 1}});
              }).find("unknown argument 'amsgrad'"),
              std::string::npos)
        << cls;
  // A caller that gives the update no third slot is refused, not run on a null pointer.
  auto be = make_cpu_backend(1);
  std::vector<float> w(2, 1.0f), g(2, 0.5f), m(2), v(2), x(4, 1.0f), dy(2, 1.0f);
  const ParamSlot two{w.data(), g.data(), m.data(), v.data(), 2, true};
  StepCounters c;
  EXPECT_THROW(be->optimizer_step(Adam({.amsgrad = true}), {&two, 1}, &c), Error);
  EXPECT_THROW(be->dense_backward_weights_update(x.data(), dy.data(), two, nullptr, 1, 2, 1,
                                                 Adam({.amsgrad = true}), &c),
               Error);
  EXPECT_EQ(c.step, 0);
}

// The model keeps amsgrad's third slot per weight in its parameter block: fit updates it (v_hat
// >= v everywhere), get/set_optimizer_state carry it (slot3), and a model given the state
// continues exactly as the one it came from. use_optimizer adds or drops the slot and keeps the
// weights.
TEST(Optimizers, AmsgradKeepsAThirdSlotInTheModel) {
  const OptimizerConfig amsgrad = Adam({.learning_rate = 0.01, .amsgrad = true});
  const Tensor x = testing_util::random_tensor({8, 3}, 1),
               y = testing_util::random_tensor({8, 2}, 2);
  auto model = [&](const OptimizerConfig& opt) {
    Sequential m({Input({3}), Dense(4, "relu"), Dense(2)});
    m.compile(opt, "mean_squared_error", {}, {.threads = 1, .seed = 7});
    return m;
  };
  auto values = [](const NamedTensor& t) {
    return std::vector<float>(t.value.values().begin(), t.value.values().end());
  };
  const FitOptions fit{.epochs = 2, .batch_size = 2, .shuffle = false, .verbose = 0};
  Sequential a = model(amsgrad);
  a.fit(x, y, fit);
  const std::vector<NamedTensor> state = a.get_optimizer_state();
  ASSERT_EQ(state.size(), 4 * 3 + 1u);  // two kernels, two biases: slot1..slot3 each; the step
  for (std::size_t p = 0; p < 4; ++p) {
    const NamedTensor &v = state[3 * p + 1], &v_hat = state[3 * p + 2];
    EXPECT_TRUE(v_hat.name.ends_with("/slot3")) << v_hat.name;
    bool moved = false;
    for (int64_t i = 0; i < v.value.size(); ++i) {
      EXPECT_GE(v_hat.value[i], v.value[i]) << v_hat.name << "[" << i << "]";
      moved = moved || v_hat.value[i] > 0.0f;
    }
    EXPECT_TRUE(moved) << v_hat.name;
  }
  // The state into a fresh model: the same next epoch, to the bit.
  Sequential b = model(amsgrad);
  b.fit(x, y, {.epochs = 0, .verbose = 0});  // builds it
  b.set_weights(a.get_weights());
  b.set_optimizer_state(state);
  b.set_optimizer_steps(a.optimizer_steps());
  a.fit(x, y, {.epochs = 1, .batch_size = 2, .shuffle = false, .verbose = 0});
  b.fit(x, y, {.epochs = 1, .batch_size = 2, .shuffle = false, .verbose = 0});
  const std::vector<NamedTensor> wa = a.get_weights(), wb = b.get_weights();
  for (std::size_t i = 0; i < wa.size(); ++i) EXPECT_EQ(values(wa[i]), values(wb[i])) << wa[i].name;
  // A two-slot state does not fit it, nor its state a plain Adam model.
  Sequential plain = model(Adam({.learning_rate = 0.01}));
  plain.fit(x, y, {.epochs = 0, .verbose = 0});
  EXPECT_EQ(plain.get_optimizer_state().size(), 4 * 2 + 1u);
  EXPECT_THROW(b.set_optimizer_state(plain.get_optimizer_state()), Error);
  EXPECT_THROW(plain.set_optimizer_state(state), Error);
  // use_optimizer to amsgrad and back: the weights stay, the state starts afresh with its slots.
  const std::vector<NamedTensor> before = plain.get_weights();
  plain.use_optimizer(amsgrad);
  const std::vector<NamedTensor> after = plain.get_weights();
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(values(before[i]), values(after[i])) << before[i].name;
  const std::vector<NamedTensor> fresh = plain.get_optimizer_state();
  ASSERT_EQ(fresh.size(), 4 * 3 + 1u);
  for (const NamedTensor& t : fresh)
    for (float v : t.value.values()) EXPECT_EQ(v, 0.0f) << t.name;
  plain.fit(x, y, fit);  // trains with it
  EXPECT_EQ(plain.optimizer_steps(), 8);
  const std::vector<NamedTensor> trained = plain.get_weights();
  EXPECT_NE(values(trained[0]), values(before[0]));
  plain.use_optimizer(SGD());
  EXPECT_EQ(plain.get_optimizer_state().size(), 4 * 2 + 1u);
  const std::vector<NamedTensor> kept = plain.get_weights();
  for (std::size_t i = 0; i < kept.size(); ++i)
    EXPECT_EQ(values(kept[i]), values(trained[i])) << kept[i].name;
}

TEST(Optimizers, AdagradAccumulatorsStartAtTheInitialValueInAModel) {
  // Keras builds the accumulators with Constant(initial_accumulator_value); a recompile with
  // another optimizer starts from zeros again.
  Sequential m({Input({3}), Dense(2)});
  m.compile(Adagrad({.initial_accumulator_value = 0.25}), "mean_squared_error", {}, {.threads = 1});
  const Tensor x = testing_util::random_tensor({4, 3}, 1),
               y = testing_util::random_tensor({4, 2}, 2);
  m.fit(x, y, {.epochs = 0, .verbose = 0});  // builds the model
  std::vector<NamedTensor> state = m.get_optimizer_state();
  ASSERT_EQ(state.size(), 5u);  // kernel and bias, slot1 and slot2 each, the step
  for (std::size_t k = 0; k < 4; ++k)
    for (float v : state[k].value.values())
      EXPECT_EQ(v, k % 2 == 0 ? 0.25f : 0.0f) << state[k].name;
  m.compile(Adam(), "mean_squared_error", {}, {.threads = 1});
  m.fit(x, y, {.epochs = 0, .verbose = 0});
  state = m.get_optimizer_state();
  for (float v : state[0].value.values()) EXPECT_EQ(v, 0.0f);
}

TEST(Optimizers, NewOptimizersHaveKerasNamesAndSlots) {
  for (const char* name : {"adagrad", "adadelta", "nadam", "adamax"}) {
    const OptimizerConfig c = optimizer_from_name(name);
    EXPECT_EQ(optimizer_name(c.kind), name);
    EXPECT_EQ(c.schedule.base, 1e-3f) << name;
    for (const OptimizerArgumentValue& a : optimizer_arguments(c)) {
      if (a.name == "epsilon") {
        EXPECT_EQ(a.value, static_cast<double>(1e-7f)) << name;
      }
    }
  }
  EXPECT_EQ(initial_slot_value(optimizer_from_name("adagrad")), 0.1f);
  EXPECT_EQ(optimizer_from_name("adadelta").args.adadelta.rho, 0.95);
  EXPECT_EQ(optimizer_slot_count(Adagrad()), 1);
  EXPECT_EQ(optimizer_slot_count(Adadelta()), 2);
  EXPECT_EQ(optimizer_slot_count(SGD()), 0);
  EXPECT_EQ(optimizer_slot_count(RMSprop({.momentum = 0.5})), 2);
  EXPECT_EQ(optimizer_slot_names(Adamax())[1], "norm");
  EXPECT_EQ(optimizer_slot_names(Adadelta())[0], "accumulated_grad");
}

// The CPU's fused call (Backend::dense_backward_weights_update) must give the bits that the
// weight gradient followed by optimizer_step gives: the same arithmetic per element, each thread
// updating the rows it computed. A shape split across threads and a tiny one; each optimizer.
struct FusedCase {
  const char* name;
  OptimizerConfig config;
};

TEST(Optimizers, TheCpuFusedUpdateGivesTheBitsOfTheGradientThenTheStep) {
  const std::vector<FusedCase> cases = {
      {"adam", Adam({.learning_rate = 0.01})},
      {"adam amsgrad", Adam({.learning_rate = 0.01, .amsgrad = true})},
      {"adamw clipvalue", AdamW({.learning_rate = 0.01, .weight_decay = 0.1, .clipvalue = 0.02})},
      {"adamw amsgrad clipvalue",
       AdamW({.learning_rate = 0.01, .weight_decay = 0.1, .clipvalue = 0.02, .amsgrad = true})},
      {"sgd nesterov", SGD({.learning_rate = 0.1, .momentum = 0.9, .nesterov = true})},
      {"rmsprop momentum", RMSprop({.learning_rate = 0.01, .momentum = 0.5})},
      {"adam decayed lr", with_exponential_decay(Adam(), 2, 0.5)},
      {"adagrad", Adagrad({.learning_rate = 0.01})},
      {"adadelta", Adadelta({.learning_rate = 1.0})},
      {"nadam", Nadam({.learning_rate = 0.01})},
      {"adamax clipvalue", Adamax({.learning_rate = 0.01, .clipvalue = 0.02})}};
  struct Shape3 {
    int64_t m, k, n;
    bool bias;
  };
  for (const Shape3 s : {Shape3{32, 784, 1000, true}, Shape3{5, 37, 3, false}})
    for (int threads : {1, 2})
      for (const FusedCase& c : cases) {
        SCOPED_TRACE(std::string(c.name) + " " + std::to_string(s.k) + "x" + std::to_string(s.n) +
                     " threads " + std::to_string(threads));
        auto be = make_cpu_backend(threads);
        const int64_t kn = s.k * s.n;
        const Tensor x = testing_util::random_tensor({s.m, s.k}, 1);
        const Tensor dy = testing_util::random_tensor({s.m, s.n}, 2, -0.1f, 0.1f);
        struct State {
          std::vector<float> w, g, m, v, b, gb, bm, bv, vh, bvh;  // vh: amsgrad's velocity_hat
        };
        auto fresh = [&] {
          const Tensor w = testing_util::random_tensor({kn}, 3);
          const Tensor m =
              testing_util::random_tensor({kn}, 4, 0.0f, 0.01f);  // RMSprop: a mean square
          const Tensor v = testing_util::random_tensor({kn}, 5, 0.0f, 0.01f);
          const Tensor vh = testing_util::random_tensor({kn}, 6, 0.0f, 0.01f);
          State st{{w.values().begin(), w.values().end()},
                   std::vector<float>(static_cast<std::size_t>(kn)),
                   {m.values().begin(), m.values().end()},
                   {v.values().begin(), v.values().end()},
                   std::vector<float>(static_cast<std::size_t>(s.n), 0.5f),
                   std::vector<float>(static_cast<std::size_t>(s.n)),
                   std::vector<float>(static_cast<std::size_t>(s.n), 0.001f),
                   std::vector<float>(static_cast<std::size_t>(s.n), 0.002f),
                   {vh.values().begin(), vh.values().end()},
                   std::vector<float>(static_cast<std::size_t>(s.n), 0.0015f)};
          return st;
        };
        State a = fresh(), b = fresh();
        auto slots = [&](State& st) {
          return std::vector<ParamSlot>{
              {st.w.data(), st.g.data(), st.m.data(), st.v.data(), kn, true, st.vh.data()},
              {st.b.data(), st.gb.data(), st.bm.data(), st.bv.data(), s.n, false, st.bvh.data()}};
        };
        StepCounters ca, cb;
        ca.step = cb.step = 3;
        const std::vector<ParamSlot> sa = slots(a), sb = slots(b);
        be->dense_backward_weights(x.data(), dy.data(), a.g.data(), s.bias ? a.gb.data() : nullptr,
                                   s.m, s.k, s.n);
        be->optimizer_step(c.config, std::span(sa.data(), s.bias ? 2 : 1), &ca);
        ASSERT_TRUE(be->fuses_weight_update());
        be->dense_backward_weights_update(x.data(), dy.data(), sb[0], s.bias ? &sb[1] : nullptr,
                                          s.m, s.k, s.n, c.config, &cb);
        EXPECT_EQ(cb.step, 3);  // read, not advanced: optimizer_step ends the step
        be->optimizer_step(c.config, {}, &cb);
        EXPECT_EQ(cb.step, 4);
        EXPECT_EQ(cb.batch_index, ca.batch_index);
        EXPECT_EQ(cb.learning_rate, ca.learning_rate);
        EXPECT_EQ(a.g, b.g);
        EXPECT_EQ(a.w, b.w);
        EXPECT_EQ(a.m, b.m);
        EXPECT_EQ(a.v, b.v);
        EXPECT_EQ(a.b, b.b);
        EXPECT_EQ(a.bm, b.bm);
        EXPECT_EQ(a.vh, b.vh);
        EXPECT_EQ(a.bvh, b.bvh);
      }
}

TEST(Optimizers, TheFusedUpdateRefusesClipnormWhichNeedsTheGlobalNorm) {
  auto be = make_cpu_backend(1);
  std::vector<float> x(4, 1.0f), dy(2, 1.0f), w(2), g(2), m(2), v(2);
  ParamSlot k{w.data(), g.data(), m.data(), v.data(), 2, true};
  StepCounters c;
  EXPECT_THROW(be->dense_backward_weights_update(x.data(), dy.data(), k, nullptr, 1, 2, 1,
                                                 Adam({.clipnorm = 1.0}), &c),
               Error);
}

}  // namespace
}  // namespace crossover
