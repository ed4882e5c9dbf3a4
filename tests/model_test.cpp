// The behaviour of Sequential a Keras user relies on.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "core/philox.h"
#include "data/dataset.h"
#include "formats/model_checkpoint.h"
#include "nn/interrupt.h"
#include "nn/sequential.h"
#include "test_util.h"

// Counts every operator new in this process, to show that fit's step loop allocates nothing.
// Atomic: oneDNN's worker threads allocate too (the convnet's steps), and a plain counter loses
// increments when two threads allocate at once, which made the convnet's count flaky under load.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
std::atomic<std::size_t> g_allocations{0};
}
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow form too (std::stable_sort's temporary buffer uses it): left to the sanitizer's
// own, its memory would come back through the free() below, which AddressSanitizer reports as
// an alloc-dealloc mismatch.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace crossover {
namespace {

using testing_util::random_tensor;
using testing_util::with_dtype_policy;

Sequential small_model() {
  return Sequential({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
}

using testing_util::Mnist10k;

// The seed's two models, trained as fit trains them (Adam, batch 32, dropout on), give the
// per-epoch losses they gave when the CPU engine's arithmetic was last changed on purpose
// (2026-12-01: Adam's 1 - beta from the double beta and Keras's order of operations, which moved
// BIG's first epoch by 1.3e-4 and the others by up to 8.7e-5; 2026-11-30 before that, with the
// separate optimizer pass). Work that only reorders the step (fusion, blocking, threads) must keep
// them within 1e-4 relative; the same thread count gives the same bits every run.
std::vector<double> seed_model_losses(bool big, int threads) {
  const Mnist10k& d = Mnist10k::get();
  const int64_t n = big ? 1024 : 4096;
  std::vector<Layer> layers{Flatten({28, 28})};
  for (int w : big ? std::vector<int>{1000, 1000} : std::vector<int>{128}) {
    layers.push_back(Dense(w, "relu"));
    layers.push_back(Dropout(0.2));
  }
  layers.push_back(Dense(10, "softmax"));
  Sequential model(layers);
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.threads = threads, .seed = 7});
  const History h = model.fit(d.x_train.rows(0, n), d.y_train.rows(0, n),
                              {.epochs = 3, .batch_size = 32, .verbose = 0});
  return h.history.at("loss");
}

TEST(Model, SeedModelsKeepTheirPinnedLossesAtOneAndTwoThreads) {
  const std::vector<double> pinned_small{0.841945866, 0.361411961, 0.279738332};
  const std::vector<double> pinned_big{1.06604470, 0.333186657, 0.139053942};
  for (int threads : {1, 2}) {
    for (bool big : {false, true}) {
      const std::vector<double> got = seed_model_losses(big, threads);
      const std::vector<double>& want = big ? pinned_big : pinned_small;
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t e = 0; e < got.size(); ++e)
        EXPECT_NEAR(got[e], want[e], 1e-4 * want[e])
            << (big ? "BIG" : "SMALL") << " epoch " << e + 1 << " at " << threads << " threads";
    }
  }
}

TEST(Model, TrainingIsBitIdenticalFromRunToRunAtTwoThreads) {
  for (bool big : {false, true}) EXPECT_EQ(seed_model_losses(big, 2), seed_model_losses(big, 2));
}

TEST(Philox, MatchesRandom123KnownAnswers) {
  Philox4x32 a = philox4x32_10(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(a.v[0], 0x6627e8d5u);
  EXPECT_EQ(a.v[1], 0xe169c58du);
  EXPECT_EQ(a.v[2], 0xbc57ac4cu);
  EXPECT_EQ(a.v[3], 0x9b00dbd8u);
  Philox4x32 b = philox4x32_10(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(b.v[0], 0x408f276du);
  EXPECT_EQ(b.v[1], 0x41c83b0eu);
  EXPECT_EQ(b.v[2], 0xa20bc7c6u);
  EXPECT_EQ(b.v[3], 0x6d5451fdu);
  Philox4x32 c =
      philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(c.v[0], 0xd16cfe09u);
  EXPECT_EQ(c.v[1], 0x94fdccebu);
  EXPECT_EQ(c.v[2], 0x5001e420u);
  EXPECT_EQ(c.v[3], 0x24126ea1u);
}

TEST(Model, SummaryOfTheSeedModelCounts101770Parameters) {
  Sequential model = small_model();
  EXPECT_EQ(model.count_params(), 101770);
  const std::string s = model.summary();
  EXPECT_NE(s.find("dense (Dense)"), std::string::npos);
  EXPECT_NE(s.find("(None, 128)"), std::string::npos);
  EXPECT_NE(s.find("100480"), std::string::npos);
  EXPECT_NE(s.find("Total params: 101770"), std::string::npos);
}

TEST(Model, KernelsAreGlorotUniformAndBiasesZero) {
  Sequential model({Input({300}), Dense(200, "relu")});
  model.compile(Adam(), "mse", {}, {.threads = 1});
  const auto w = model.get_weights();
  ASSERT_EQ(w.size(), 2u);
  const double limit = std::sqrt(6.0 / (300 + 200));
  double sum = 0, sum_sq = 0, max_abs = 0;
  for (float v : w[0].value.values()) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
    max_abs = std::max(max_abs, static_cast<double>(std::abs(v)));
  }
  const double n = static_cast<double>(w[0].value.size());
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.99 * limit);
  EXPECT_NEAR(sum / n, 0.0, 0.01 * limit);
  EXPECT_NEAR(sum_sq / n, limit * limit / 3.0, 0.02 * limit * limit);  // variance of U(-l, l)
  for (float v : w[1].value.values()) EXPECT_EQ(v, 0.0f);
}

TEST(Dropout, KeepsAboutOneMinusRateAndScalesKeptUnits) {
  auto be = make_cpu_backend(1);
  const int64_t m = 64, n = 1000;
  std::vector<float> x(static_cast<std::size_t>(m * n), 1.5f), y(x.size());
  std::vector<uint8_t> mask(x.size());
  StepCounters c;
  be->dropout_forward(x.data(), y.data(), mask.data(), m, n, 0.2f, 42, 3, &c, 0);
  int64_t kept = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (mask[i]) {
      ++kept;
      EXPECT_FLOAT_EQ(y[i], 1.5f / 0.8f);
    } else {
      EXPECT_EQ(y[i], 0.0f);
    }
  }
  // 64,000 Bernoulli(0.8) draws: mean 51,200, standard deviation 101.
  EXPECT_NEAR(static_cast<double>(kept), 51200.0, 600.0);
  // Another step draws another mask.
  std::vector<uint8_t> mask2(x.size());
  c.step = 1;
  be->dropout_forward(x.data(), y.data(), mask2.data(), m, n, 0.2f, 42, 3, &c, 0);
  EXPECT_NE(mask, mask2);
}

TEST(Dropout, TheCpuMaskIsDropoutKeepOfEveryElementAtAnyShapeAndThreadCount) {
  // The CPU draws eight Philox blocks at a time; every element must still be the one
  // dropout_keep (the definition every device shares) gives, up to a ragged end.
  struct Case {
    int64_t m, n;
    uint64_t seed, step;
    uint32_t layer;
  };
  for (const Case c :
       {Case{32, 128, 7, 0, 1}, Case{3, 37, 0xDEADBEEF12345678ull, (1ull << 33) + 5, 9},
        Case{64, 1000, 42, 123456, 2}, Case{1, 5, 1, 1, 0}})
    for (int threads : {1, 2}) {
      auto be = make_cpu_backend(threads);
      const int64_t total = c.m * c.n;
      const Tensor x = testing_util::random_tensor({total}, 11);
      std::vector<float> y(static_cast<std::size_t>(total));
      std::vector<uint8_t> mask(static_cast<std::size_t>(total), 7);
      StepCounters counters;
      counters.step = static_cast<int64_t>(c.step);
      be->dropout_forward(x.data(), y.data(), mask.data(), c.m, c.n, 0.3f, c.seed, c.layer,
                          &counters, 0);
      int64_t wrong = 0;
      for (int64_t i = 0; i < total; ++i) {
        const bool keep = dropout_keep(c.seed, c.layer, c.step, static_cast<uint64_t>(i), 0.3f);
        const float want = keep ? x[i] * (1.0f / 0.7f) : 0.0f;
        if (mask[static_cast<std::size_t>(i)] != (keep ? 1 : 0) ||
            y[static_cast<std::size_t>(i)] != want)
          ++wrong;
      }
      EXPECT_EQ(wrong, 0) << c.m << "x" << c.n << " threads " << threads;
    }
}

TEST(Dropout, ReluBackwardPassesTheGradientExactlyWhereTheOutputIsPositive) {
  // Both CPU loops, at a length that is not a multiple of the vector width, with zeros of both
  // signs and tiny and negative outputs: dz = dy * scale where y > 0, +0 elsewhere.
  auto be = make_cpu_backend(1);
  const std::vector<float> y = {0.5f, -0.5f, 0.0f,  -0.0f, 1e-30f, -1e-30f, 3.0f,
                                2.0f, -7.0f, 0.25f, 0.0f,  4.0f,   -1.0f};
  const Tensor dy = testing_util::random_tensor({static_cast<int64_t>(y.size())}, 5);
  const auto n = static_cast<int64_t>(y.size());
  std::vector<float> dz(y.size(), 9.0f), dx(y.size(), 9.0f);
  std::vector<uint8_t> mask(y.size(), 1);
  be->relu_dropout_backward(y.data(), mask.data(), dy.data(), dz.data(), 1, n, 0.2f);
  be->activation_backward(ActivationKind::relu, 0.0f, nullptr, y.data(), dy.data(), dx.data(), 1,
                          n);
  for (std::size_t i = 0; i < y.size(); ++i) {
    const bool pass = y[i] > 0.0f;
    EXPECT_EQ(dz[i], pass ? dy[static_cast<int64_t>(i)] * (1.0f / 0.8f) : 0.0f) << i;
    EXPECT_EQ(dx[i], pass ? dy[static_cast<int64_t>(i)] : 0.0f) << i;
    if (!pass) {
      EXPECT_FALSE(std::signbit(dz[i]) || std::signbit(dx[i])) << i;  // +0
    }
  }
}

TEST(Dropout, IsTheIdentityInEvaluateAndPredict) {
  Sequential with({Input({20}), Dense(16, "relu"), Dropout(0.5), Dense(4, "softmax")});
  Sequential without({Input({20}), Dense(16, "relu"), Dense(4, "softmax")});
  with.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1, .seed = 5});
  without.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                  {.threads = 1, .seed = 5});
  without.set_weights(with.get_weights());
  const Tensor x = random_tensor({10, 20}, 9);
  const Tensor a = with.predict(x), b = without.predict(x);
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]);
  Tensor y({10});
  EXPECT_EQ(with.evaluate(x, y, {.verbose = 0}).loss, without.evaluate(x, y, {.verbose = 0}).loss);
}

History train_small(uint64_t seed, int threads, Sequential& model, int64_t samples = 2000) {
  const Mnist10k& d = Mnist10k::get();
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.threads = threads, .seed = seed});
  return model.fit(d.x_train.rows(0, samples), d.y_train.rows(0, samples),
                   {.epochs = 1, .verbose = 0});
}

TEST(Determinism, SameSeedAndThreadsGiveBitIdenticalWeights) {
  Sequential a = small_model(), b = small_model(), c = small_model();
  train_small(1, 2, a);
  train_small(1, 2, b);
  train_small(2, 2, c);
  const auto wa = a.get_weights(), wb = b.get_weights(), wc = c.get_weights();
  bool differs = false;
  for (std::size_t t = 0; t < wa.size(); ++t)
    for (int64_t i = 0; i < wa[t].value.size(); ++i) {
      ASSERT_EQ(wa[t].value[i], wb[t].value[i]) << wa[t].name << "[" << i << "]";
      differs = differs || wa[t].value[i] != wc[t].value[i];
    }
  EXPECT_TRUE(differs) << "another seed must give other weights";
}

TEST(Training, SmallModelReachesKerasAccuracyOnTenThousandRealDigits) {
  // PyTorch, same model and optimizer: 92.5% after 5 epochs, 94.4% after 10.
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.seed = 0});
  History h = model.fit(d.x_train, d.y_train, {.epochs = 10, .verbose = 0});
  ASSERT_EQ(h.epochs.size(), 10u);
  EXPECT_EQ(h.epochs[0].steps, 250);
  EXPECT_LT(h.epochs[9].loss, h.epochs[0].loss);
  EvaluateResult r = model.evaluate(d.x_test, d.y_test, {.verbose = 0});
  EXPECT_GE(r.accuracy, 0.935);
  EXPECT_EQ(r.samples, 2000);
}

TEST(Training, StepLoopMakesNoHeapAllocation) {
  // Allocations happen while planning, never per step: ten times the steps, the same count.
  const Mnist10k& d = Mnist10k::get();
  auto count = [&](int64_t samples) {
    Sequential model = small_model();
    model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 2});
    const Tensor x = d.x_train.rows(0, samples), y = d.y_train.rows(0, samples);
    const std::size_t before = g_allocations;
    model.fit(x, y, {.epochs = 2, .verbose = 0});
    return g_allocations - before;
  };
  count(320);  // warm up one-time library state
  EXPECT_EQ(count(320), count(3200));
}

Sequential mnist_convnet() {  // Keras's "Simple MNIST convnet"
  return Sequential({Input({28, 28, 1}), Conv2D(32, 3, "relu"), MaxPooling2D(2),
                     Conv2D(64, 3, "relu"), MaxPooling2D(2), Flatten(), Dropout(0.5),
                     Dense(10, "softmax")});
}

// Allocations of a fit of 2 epochs on the first `samples` training digits, after one warm-up fit
// (one-time library state); for the models whose steps allocate inside oneDNN only.
template <class MakeModel>
int64_t allocations_of_two_epochs(MakeModel make_model, int64_t samples,
                                  const std::string& precision = "fp32") {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = make_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.threads = 2, .precision = precision});
  const Tensor x = d.x_train.rows(0, samples), y = d.y_train.rows(0, samples);
  const std::size_t before = g_allocations;
  model.fit(x, y, {.epochs = 2, .verbose = 0});
  return static_cast<int64_t>(g_allocations - before);
}

TEST(Training, ConvnetStepLoopAllocatesAFixedCountPerStepInsideOneDnnOnly) {
  // Everything crossover needs is planned, as for the MLP; but oneDNN 2.6's
  // dnnl_primitive_execute builds its argument map on the heap at every call (a few small
  // allocations; nothing in its API avoids it). So a convnet's step allocates a fixed number,
  // bounded by its oneDNN calls: 2 epochs of 10, 20 and 100 steps differ by exactly that.
  auto count = [](int64_t samples) { return allocations_of_two_epochs(mnist_convnet, samples); };
  count(320);  // warm up one-time library state
  const int64_t steps20 = count(320), steps40 = count(640), steps200 = count(3200);
  const int64_t per_20_steps = steps40 - steps20;
  EXPECT_EQ(steps200 - steps20, 9 * per_20_steps);
  // At most 14 oneDNN calls a step (5 convolution calls and their kernel reorders; pooling is
  // the CPU backend's own loops), at most 8 allocations each.
  EXPECT_LE(per_20_steps, 20 * 14 * 8);
}

TEST(Training, Bf16StepLoopAllocatesAFixedCountPerStepInsideOneDnnOnly) {
  // In bf16 the CPU's dense products are oneDNN matmul primitives: the plans and the weights' bf16
  // copies are made at the first step (and at the first partial batch), so a step allocates only
  // oneDNN's per-call argument maps, the same number every step: 5 matmul calls for SMALL
  // (forward x 2, input gradient, weight gradient x 2), a fixed few allocations each.
  if (const std::string why = cpu_bf16_problem(cpu_bf16_support()); !why.empty())
    GTEST_SKIP() << "bf16 on the CPU " << why;
  auto count = [](int64_t samples) {
    auto bf16_small = [] { return Sequential(with_dtype_policy(small_model().layers())); };
    return allocations_of_two_epochs(bf16_small, samples, "bf16");
  };
  count(320);  // warm up one-time library state
  const int64_t steps20 = count(320), steps40 = count(640), steps200 = count(3200);
  const int64_t per_20_steps = steps40 - steps20;
  EXPECT_EQ(steps200 - steps20, 9 * per_20_steps);
  EXPECT_LE(per_20_steps, 20 * 5 * 8);  // 33 a step with oneDNN 2.6.3
}

TEST(Training, BatchNormStepLoopAllocatesAFixedCountPerStepInsideOneDnnOnly) {
  // The same for batch normalization after Dense and after Conv2D: its primitives, scratchpads and
  // batch statistics are planned; only oneDNN's argument map is allocated per call.
  auto make = [] {
    return Sequential({Input({28, 28, 1}), Conv2D(8, 3, "relu"), BatchNormalization(),
                       MaxPooling2D(2), Flatten(), Dense(32), BatchNormalization(),
                       Activation("relu"), Dense(10, "softmax")});
  };
  auto count = [&](int64_t samples) { return allocations_of_two_epochs(make, samples); };
  count(320);  // warm up one-time library state
  const int64_t steps20 = count(320), steps40 = count(640), steps200 = count(3200);
  const int64_t per_20_steps = steps40 - steps20;
  EXPECT_EQ(steps200 - steps20, 9 * per_20_steps);
  // At most 10 oneDNN calls a step (2 convolution, 4 batch-norm calls and up to 2 kernel
  // reorders; pooling is the CPU backend's own loops), at most 8 allocations each.
  EXPECT_LE(per_20_steps, 20 * 10 * 8);
}

TEST(Training, TheKerasConvnetLearnsMnist) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = mnist_convnet();
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 2, .seed = 1});
  // Grey (N, 28, 28) images, as Keras's load_data gives them after scaling.
  const History h = model.fit(d.x_train.rows(0, 4000), d.y_train.rows(0, 4000),
                              {.epochs = 2, .batch_size = 64, .verbose = 0});
  EXPECT_LT(h.epochs.back().loss, h.epochs.front().loss);
  const EvaluateResult r =
      model.evaluate(d.x_test.rows(0, 1000), d.y_test.rows(0, 1000), {.verbose = 0});
  EXPECT_GT(r.accuracy, 0.9);
}

TEST(Training, ValidationSplitHoldsOutTheLastSamples) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1});
  History h = model.fit(d.x_train.rows(0, 1000), d.y_train.rows(0, 1000),
                        {.epochs = 2, .validation_split = 0.2, .verbose = 0});
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(h.epochs[0].steps, 25);  // 800 / 32
  ASSERT_TRUE(h.epochs[0].val_loss.has_value());
  EXPECT_EQ(h.history.at("val_accuracy").size(), 2u);
}

TEST(Training, AcceptsCallerBuffersOfAnyFeatureShapeAndOneHotTargets) {
  // 3 features, 2 classes, one-hot: a linearly separable problem.
  std::vector<float> x, y;
  for (int i = 0; i < 256; ++i) {
    const float a = static_cast<float>(i % 16) / 8.0f - 1.0f,
                b = static_cast<float>(i / 16) / 8.0f - 1.0f;
    x.insert(x.end(), {a, b, 0.5f});
    const bool positive = a + b > 0;
    y.insert(y.end(), {positive ? 0.0f : 1.0f, positive ? 1.0f : 0.0f});
  }
  Sequential model({Dense(8, "tanh"), Dense(2, "softmax")});
  model.compile(Adam({.learning_rate = 0.05}), "categorical_crossentropy", {"accuracy"},
                {.threads = 1});
  History h = model.fit(x, {256, 3}, y, {256, 2}, {.epochs = 30, .batch_size = 16, .verbose = 0});
  EXPECT_GT(h.epochs.back().accuracy, 0.95);
  EXPECT_EQ(model.input_shape(), (Shape{3}));
}

TEST(Training, BadLabelsAndShapesAreRefusedWithOneClearLine) {
  Sequential model = small_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1});
  Tensor x({4, 28, 28}), y({4}, {0, 1, 12, 3});
  try {
    model.fit(x, y, {.verbose = 0});
    FAIL() << "label 12 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 12 at index 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(model.fit(Tensor({4, 10, 10}), Tensor({4}), {.verbose = 0}), Error);
  EXPECT_THROW(model.fit(x, Tensor({3}), {.verbose = 0}), Error);
  Sequential uncompiled = small_model();
  EXPECT_THROW(uncompiled.fit(x, Tensor({4}), {.verbose = 0}), Error);
  EXPECT_THROW(Dense(0), Error);
  EXPECT_THROW(Dropout(1.0), Error);
  EXPECT_THROW(Dense(3, "mish"), Error);
}

TEST(Compile, RefusesMoreThreadsThanTheLimitWithAnErrorNotACrash) {
  // 100,000 threads overflowed the stack in libgomp's fork (a segmentation fault).
  for (const int threads : {max_cpu_threads() + 1, 100000}) {
    Sequential model = small_model();
    try {
      model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = threads});
      FAIL() << threads << " threads accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("threads: " + std::to_string(threads) +
                                           " is more than " + std::to_string(max_cpu_threads())),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(make_cpu_backend(-1), Error);
}

TEST(Compile, TakesTheThreadLimitItself) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.threads = max_cpu_threads()});
  const EvaluateResult r =
      model.evaluate(d.x_test.rows(0, 256), d.y_test.rows(0, 256), {.verbose = 0});
  EXPECT_EQ(r.samples, 256);
}

TEST(Memory, AModelLargerThanTheDeviceIsRefusedInBytesBeforeAllocating) {
  Sequential model({Flatten({28, 28}), Dense(1000000000, "relu"), Dense(10, "softmax")}, "huge");
  try {
    model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1});
    FAIL() << "a 12.7 TB model compiled";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("huge: the parameters, their gradients and the optimizer's state", 0), 0u)
        << m;
    EXPECT_NE(m.find("need 12720000000256 bytes (11.6 TiB) of cpu memory, but "), std::string::npos)
        << m;
    EXPECT_NE(m.find("are available ("), std::string::npos) << m;
  }
}

TEST(Memory, ABatchLargerThanTheDeviceIsRefusedNamingTheBatch) {
  // Few parameters (2^20 units on one input), but a batch of 2^20 samples of 2^20 activations:
  // 12 TiB of activations and gradients.
  constexpr int64_t kWide = int64_t{1} << 20;
  Sequential model({Flatten({1}), Dense(kWide, "relu"), Dense(2, "softmax")});
  model.compile(SGD(), "sparse_categorical_crossentropy", {}, {.threads = 1});
  try {
    model.evaluate(Tensor({kWide, 1}), Tensor({kWide}), {.batch_size = kWide, .verbose = 0});
    FAIL() << "a 12 TiB batch was planned";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("a batch of 1048576 samples: its activations and gradients need"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("use a smaller batch size"), std::string::npos) << m;
  }
}

TEST(Memory, AFailedAllocationSaysHowManyBytesWereAskedForAndAreAvailable) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on a failed allocation instead of returning null";
#else
  auto be = make_cpu_backend(1);
  try {
    be->allocate(std::size_t{1} << 62);  // 4 EiB: refused by the kernel at once, nothing touched
    FAIL() << "4 EiB allocated";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cpu: out of memory: cannot allocate 4611686018427387904 bytes (4.0 EiB); "),
              std::string::npos)
        << m;
    EXPECT_NE(m.find(" available ("), std::string::npos) << m;
  }
#endif
}

TEST(Training, WithoutInitialWeightsTheParametersStartAtZero) {
  Sequential model = small_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {},
                {.threads = 1, .initialize_weights = false});
  for (const NamedTensor& w : model.get_weights())
    for (int64_t i = 0; i < w.value.size(); ++i) ASSERT_EQ(w.value[i], 0.0f) << w.name;
}

TEST(Training, TraceTrainingStepTakesOneStepAsFitDoes) {
  // A model whose input shape is known only from the sample shape given.
  Sequential model({Dense(8, "relu"), Dense(3, "softmax")});
  model.compile(SGD(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 2});
  EXPECT_THROW(model.trace_training_step(4), Error);  // no input shape known yet
  model.trace_training_step(4, {5});
  EXPECT_EQ(model.input_shape(), (Shape{5}));
  EXPECT_EQ(model.optimizer_steps(), 1);
  model.trace_training_step(2);
  EXPECT_EQ(model.optimizer_steps(), 2);
  EXPECT_THROW(model.trace_training_step(0), Error);
  EXPECT_THROW(model.trace_training_step(4, {6}), Error);  // not the shape it was built for
}

TEST(Training, CtrlCStopsAfterTheCurrentStepAndKeepsTheModel) {
  struct Interrupter : Callback {
    void on_epoch_begin(Sequential&, int epoch) override {
      if (epoch == 1) InterruptGuard::request();
    }
  };
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1});
  History h =
      model.fit(d.x_train.rows(0, 640), d.y_train.rows(0, 640),
                {.epochs = 5, .verbose = 0, .callbacks = {std::make_shared<Interrupter>()}});
  EXPECT_TRUE(h.interrupted);
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(h.epochs[1].steps, 1);
  EXPECT_EQ(model.optimizer_steps(), 21);
  EXPECT_GT(model.evaluate(d.x_test, d.y_test, {.verbose = 0}).accuracy, 0.5);
}

namespace {
std::atomic<int> g_previous_handler_calls{0};
extern "C" void count_sigint(int) { g_previous_handler_calls.fetch_add(1); }
}  // namespace

TEST(Training, CtrlCDuringAFitThatDoesNotStopIsPassedOnWhenItReturns) {
  // The thread measurement's trial fits run on through Ctrl-C; the press must reach the handler
  // that was there before (Python's, or the default that ends the process), not be lost.
  struct Interrupter : Callback {
    void on_epoch_begin(Sequential&, int epoch) override {
      if (epoch == 1) InterruptGuard::request();
    }
  };
  struct sigaction counting {
  }, previous{};
  counting.sa_handler = count_sigint;
  sigemptyset(&counting.sa_mask);
  ASSERT_EQ(sigaction(SIGINT, &counting, &previous), 0);
  g_previous_handler_calls = 0;
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1});
  History h = model.fit(d.x_train.rows(0, 320), d.y_train.rows(0, 320),
                        {.epochs = 3,
                         .verbose = 0,
                         .callbacks = {std::make_shared<Interrupter>()},
                         .stop_on_interrupt = false});
  sigaction(SIGINT, &previous, nullptr);
  EXPECT_FALSE(h.interrupted);
  EXPECT_EQ(h.epochs.size(), 3u);  // it ran on
  EXPECT_EQ(g_previous_handler_calls.load(), 1);
  EXPECT_FALSE(InterruptGuard::requested());
}

TEST(Callbacks, EarlyStoppingStopsWhenTheMonitorStalls) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  // A learning rate so small that nothing improves by min_delta.
  model.compile(SGD({.learning_rate = 1e-9}), "sparse_categorical_crossentropy", {"accuracy"},
                {.threads = 1});
  History h = model.fit(
      d.x_train.rows(0, 320), d.y_train.rows(0, 320),
      {.epochs = 20,
       .verbose = 0,
       .callbacks = {EarlyStopping({.monitor = "loss", .min_delta = 0.01, .patience = 2})}});
  EXPECT_TRUE(h.stopped_early);
  EXPECT_EQ(h.epochs.size(), 3u);  // as Keras: the first sets the best, then `patience` without
}

TEST(Callbacks, EarlyStoppingRestoresTheBestWeightsWhenTrainingEnds) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(SGD({.learning_rate = 0.1}), "sparse_categorical_crossentropy", {}, {.threads = 1});
  struct Remember : Callback {
    std::vector<std::vector<NamedTensor>> weights;
    void on_epoch_end(Sequential& m, int, const Logs&) override {
      weights.push_back(m.get_weights());
    }
  };
  auto remember = std::make_shared<Remember>();
  // mode max on the loss: the first epoch is the best, none after improves on it; patience keeps
  // training going for all three epochs.
  History h = model.fit(d.x_train.rows(0, 256), d.y_train.rows(0, 256),
                        {.epochs = 3,
                         .verbose = 0,
                         .callbacks = {remember, EarlyStopping({.monitor = "loss",
                                                                .patience = 5,
                                                                .mode = "max",
                                                                .restore_best_weights = true})}});
  ASSERT_EQ(h.epochs.size(), 3u);
  EXPECT_GT(h.history.at("loss")[0], h.history.at("loss")[2]);
  const auto values = [](const Tensor& t) {
    return std::vector<float>(t.values().begin(), t.values().end());
  };
  EXPECT_EQ(values(model.get_weights()[0].value), values(remember->weights[0][0].value));
  EXPECT_NE(values(model.get_weights()[0].value), values(remember->weights[2][0].value));
}

TEST(Callbacks, ModelCheckpointFillsTheEpochAndLogsIntoThePathAsKerasDoes) {
  const Logs logs{{"loss", 0.5}, {"val_loss", 0.12345}};
  EXPECT_EQ(checkpoint_path("w-{epoch:02d}-{val_loss:.2f}.safetensors", 2, logs),
            "w-03-0.12.safetensors");
  EXPECT_EQ(checkpoint_path("plain.safetensors", 0, logs), "plain.safetensors");
  EXPECT_THROW(checkpoint_path("w-{val_accuracy}.safetensors", 0, logs), Error);
}

TEST(Callbacks, ModelCheckpointSavesThroughTheGivenFunctionEachEpoch) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(SGD(), "sparse_categorical_crossentropy", {}, {.threads = 1});
  std::vector<std::string> saved;
  model.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64),
            {.epochs = 2,
             .verbose = 0,
             .callbacks = {ModelCheckpoint(
                 "m{epoch}.x", {.save = [&](const Sequential&, const std::string& path) {
                   saved.push_back(path);
                 }})}});
  EXPECT_EQ(saved, (std::vector<std::string>{"m1.x", "m2.x"}));
}

TEST(Training, FitAndEvaluateWriteTheirTextToTheGivenOutput) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(SGD(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1});
  std::string text;
  const TextSink sink = [&](std::string_view piece) { text += piece; };
  model.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64),
            {.epochs = 2, .verbose = 1, .output = sink, .redraw = false});
  EXPECT_NE(text.find("Epoch 1/2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Epoch 2/2\n2/2 [==============================] - "), std::string::npos)
      << text;
  EXPECT_NE(text.find(" - loss: "), std::string::npos);
  EXPECT_NE(text.find(" - accuracy: "), std::string::npos);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  text.clear();
  model.evaluate(d.x_test.rows(0, 64), d.y_test.rows(0, 64), {.output = sink});
  EXPECT_EQ(text.rfind("2/2 [==============================] - ", 0), 0u) << text;
}

TEST(Tensor, AViewReadsTheCallersValuesInPlace) {
  const std::vector<float> values{1, 2, 3, 4, 5, 6};
  const Tensor v = Tensor::view({2, 3}, values);
  EXPECT_EQ(v.data(), values.data());
  EXPECT_EQ(v.shape(), (Shape{2, 3}));
  EXPECT_EQ(v[5], 6.0f);
  EXPECT_THROW(Tensor::view({4, 2}, values), Error);
}

TEST(Training, FitOnCallerBuffersGivesTheSameBitsAsOnTensors) {
  const Mnist10k& d = Mnist10k::get();
  const Tensor x = d.x_train.rows(0, 256), y = d.y_train.rows(0, 256);
  auto train = [&](bool spans) {
    Sequential model = small_model();
    model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 3});
    const FitOptions o{.epochs = 2, .verbose = 0};
    const History h =
        spans ? model.fit(x.values(), x.shape(), y.values(), y.shape(), o) : model.fit(x, y, o);
    return h.history.at("loss");
  };
  EXPECT_EQ(train(true), train(false));
}

TEST(Training, CompileOrFitFromInsideFitIsRefused) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(SGD(), "sparse_categorical_crossentropy", {}, {.threads = 1});
  struct Recompile : Callback {
    void on_epoch_end(Sequential& m, int, const Logs&) override {
      m.compile(SGD(), "sparse_categorical_crossentropy");
    }
  };
  EXPECT_THROW(model.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64),
                         {.epochs = 1, .verbose = 0, .callbacks = {std::make_shared<Recompile>()}}),
               Error);
  EXPECT_NO_THROW(model.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64), {.verbose = 0}));
}

TEST(Callbacks, ReduceLROnPlateauAndStepDecayChangeTheLearningRate) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(SGD({.learning_rate = 1e-9}), "sparse_categorical_crossentropy", {},
                {.threads = 1});
  History h =
      model.fit(d.x_train.rows(0, 320), d.y_train.rows(0, 320),
                {.epochs = 3,
                 .verbose = 0,
                 .callbacks = {ReduceLROnPlateau(
                     {.monitor = "loss", .factor = 0.5, .patience = 1, .min_delta = 0.01})}});
  EXPECT_NEAR(model.learning_rate(), 1e-9 * 0.25, 1e-15);
  Sequential stepped = small_model();
  stepped.compile(SGD({.learning_rate = 0.1}), "sparse_categorical_crossentropy", {},
                  {.threads = 1});
  History s = stepped.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64),
                          {.epochs = 4, .verbose = 0, .callbacks = {StepDecay(0.1, 0.5, 2)}});
  ASSERT_EQ(s.history.at("lr").size(), 4u);
  EXPECT_NEAR(s.history.at("lr")[0], 0.1, 1e-7);
  EXPECT_NEAR(s.history.at("lr")[2], 0.05, 1e-7);
}

// Keras 3's mode 'auto' (MonitorCallback._set_monitor_op, at the first epoch's end): the loss is
// minimised, a compiled metric (the accuracy) maximised, with or without "val_"; any other monitor
// is refused rather than guessed (crossover minimised it).
TEST(Callbacks, ModeAutoKnowsTheLossAndTheCompiledMetricsOnly) {
  const Mnist10k& d = Mnist10k::get();
  auto fit_with = [&](const std::string& monitor, const std::string& mode,
                      std::vector<std::string> metrics) {
    Sequential model = small_model();
    model.compile(Adam(), "sparse_categorical_crossentropy", std::move(metrics), {.threads = 1});
    return testing_util::error_of([&] {
      model.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64),
                {.epochs = 1,
                 .validation_split = 0.5,
                 .verbose = 0,
                 .callbacks = {EarlyStopping({.monitor = monitor, .mode = mode}),
                               ReduceLROnPlateau({.monitor = monitor, .mode = mode})}});
    });
  };
  for (const std::string monitor : {"loss", "val_loss", "accuracy", "val_accuracy"})
    EXPECT_EQ(fit_with(monitor, "auto", {"accuracy"}), "") << monitor;
  EXPECT_EQ(fit_with("learning_rate", "min", {"accuracy"}), "");
  EXPECT_EQ(fit_with("learning_rate", "auto", {"accuracy"}),
            "EarlyStopping: monitor 'learning_rate': mode 'auto' cannot tell whether it should be "
            "maximized or minimized (it knows the loss and the compiled metrics: accuracy); pass "
            "mode 'max' or 'min'");
  EXPECT_NE(fit_with("val_accuracy", "auto", {}).find("compiled metrics: none"), std::string::npos);
  EXPECT_NE(fit_with("val_acc", "auto", {"accuracy"}).find("monitor 'val_acc'"), std::string::npos);
}

// A schedule's rate is not settable (Keras: TypeError): a callback that sets the rate stops the fit
// with one error, and the schedule stays as it was (silently replacing it by a constant was wrong).
TEST(Callbacks, ACallbackCannotReplaceAScheduledLearningRate) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model();
  model.compile(with_exponential_decay(SGD({.learning_rate = 0.1}), 10, 0.5),
                "sparse_categorical_crossentropy", {}, {.threads = 1});
  const std::string why = testing_util::error_of([&] {
    model.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64),
              {.epochs = 2, .verbose = 0, .callbacks = {LearningRateScheduler([](int, double lr) {
                                            return lr / 2;
                                          })}});
  });
  EXPECT_NE(why.find("is a schedule (ExponentialDecay), so it is not settable"), std::string::npos)
      << why;
  EXPECT_EQ(model.optimizer().schedule.base, 0.1f);
  EXPECT_EQ(model.optimizer().schedule.decay_steps, 10);
  // A callback that leaves the rate alone is fine with a schedule.
  EXPECT_NO_THROW(
      model.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64),
                {.epochs = 1, .verbose = 0, .callbacks = {LearningRateScheduler([](int, double lr) {
                                              return lr;
                                            })}}));
}

// Keras 3's ReduceLROnPlateau: at min_lr nothing is reduced, so no cooldown starts and the wait
// keeps counting; a rate raised afterwards is reduced at the next epoch without improvement.
TEST(Callbacks, ReduceLROnPlateauAtMinLrStartsNoCooldownAsKeras3) {
  Sequential model({Input({3}), Dense(2)});
  model.compile(SGD({.learning_rate = 0.1}), "mean_squared_error", {}, {.threads = 1});
  std::string said;
  auto cb = ReduceLROnPlateau({.monitor = "val_loss",
                               .factor = 0.5,
                               .patience = 1,
                               .cooldown = 2,
                               .min_lr = 0.02,
                               .say = [&](const std::string& line) { said += line + "\n"; }});
  cb->on_train_begin(model);
  std::vector<float> rates;
  int epoch = 0;
  for (double v : {1.0, 1.0, 1.0, 1.0, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6}) {
    cb->on_epoch_end(model, epoch++, {{"val_loss", v}});
    rates.push_back(static_cast<float>(model.learning_rate()));
  }
  EXPECT_EQ(rates, (std::vector<float>{0.1f, 0.05f, 0.05f, 0.025f, 0.025f, 0.02f, 0.02f, 0.02f,
                                       0.02f, 0.02f, 0.02f}));
  model.set_learning_rate(0.08);
  cb->on_epoch_end(model, epoch++, {{"val_loss", 0.6}});
  EXPECT_EQ(static_cast<float>(model.learning_rate()), 0.04f);
  EXPECT_EQ(said,
            "\nEpoch 2: ReduceLROnPlateau reducing learning rate to 0.05000000074505806.\n"
            "\nEpoch 4: ReduceLROnPlateau reducing learning rate to 0.02500000037252903.\n"
            "\nEpoch 6: ReduceLROnPlateau reducing learning rate to 0.02.\n"
            "\nEpoch 12: ReduceLROnPlateau reducing learning rate to 0.03999999910593033.\n");
}

// The CPU trains on the caller's rows where they are, not on a copy made when fit starts (so the
// caller keeps them alive and unchanged during fit): rows a callback zeroes after the first epoch
// are what the second epoch trains on.
TEST(Fit, TheCpuTrainsOnTheCallersRowsInPlace) {
  const Mnist10k& d = Mnist10k::get();
  const Tensor y = d.y_train.rows(0, 128);
  auto train = [&](bool zero_after_first_epoch) {
    std::vector<float> rows(d.x_train.data(), d.x_train.data() + 128 * 784);
    struct Zero final : Callback {
      std::vector<float>* rows = nullptr;
      void on_epoch_end(Sequential&, int, const Logs&) override {
        std::fill(rows->begin(), rows->end(), 0.0f);
      }
    };
    auto zero = std::make_shared<Zero>();
    zero->rows = &rows;
    Sequential m = small_model();
    m.compile(SGD({.learning_rate = 0.1}), "sparse_categorical_crossentropy", {},
              {.threads = 1, .seed = 3});
    FitOptions o{.epochs = 2, .shuffle = false, .verbose = 0};
    if (zero_after_first_epoch) o.callbacks = {zero};
    m.fit(rows, {128, 28, 28}, {y.data(), static_cast<std::size_t>(y.size())}, y.shape(), o);
    return m.get_weights();
  };
  const auto kept = train(false), zeroed = train(true);
  ASSERT_EQ(kept.size(), zeroed.size());
  bool differ = false;
  for (std::size_t i = 0; i < kept.size(); ++i)
    for (int64_t j = 0; j < kept[i].value.size(); ++j)
      differ = differ || kept[i].value[j] != zeroed[i].value[j];
  EXPECT_TRUE(differ);
}

}  // namespace
}  // namespace crossover
