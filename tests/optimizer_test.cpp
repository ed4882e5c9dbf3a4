// Two optimizer steps on w = (1, -2, 0.5) with the gradient (0.1, -0.2, 0.3) and lr 0.1, against
// what Keras 3.15.1 (TensorFlow backend) computes in float64 for the same two steps
// (optimizer.apply_gradients on a float64 keras.Variable), where not said otherwise; see the
// comment of each case for the formula.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "nn/optimizers.h"
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
  EXPECT_THROW(optimizer_from_name("adagrad"), Error);
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
      {"adamw clipvalue", AdamW({.learning_rate = 0.01, .weight_decay = 0.1, .clipvalue = 0.02})},
      {"sgd nesterov", SGD({.learning_rate = 0.1, .momentum = 0.9, .nesterov = true})},
      {"rmsprop momentum", RMSprop({.learning_rate = 0.01, .momentum = 0.5})},
      {"adam decayed lr", with_exponential_decay(Adam(), 2, 0.5)}};
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
          std::vector<float> w, g, m, v, b, gb, bm, bv;
        };
        auto fresh = [&] {
          const Tensor w = testing_util::random_tensor({kn}, 3);
          const Tensor m =
              testing_util::random_tensor({kn}, 4, 0.0f, 0.01f);  // RMSprop: a mean square
          const Tensor v = testing_util::random_tensor({kn}, 5, 0.0f, 0.01f);
          State st{{w.values().begin(), w.values().end()},
                   std::vector<float>(static_cast<std::size_t>(kn)),
                   {m.values().begin(), m.values().end()},
                   {v.values().begin(), v.values().end()},
                   std::vector<float>(static_cast<std::size_t>(s.n), 0.5f),
                   std::vector<float>(static_cast<std::size_t>(s.n)),
                   std::vector<float>(static_cast<std::size_t>(s.n), 0.001f),
                   std::vector<float>(static_cast<std::size_t>(s.n), 0.002f)};
          return st;
        };
        State a = fresh(), b = fresh();
        auto slots = [&](State& st) {
          return std::vector<ParamSlot>{
              {st.w.data(), st.g.data(), st.m.data(), st.v.data(), kn, true},
              {st.b.data(), st.gb.data(), st.bm.data(), st.bv.data(), s.n, false}};
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
