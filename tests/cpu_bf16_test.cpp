// --precision bf16 on the CPU: oneDNN's bf16 matmul for the dense GEMMs where the CPU has
// AVX512_BF16 (or AMX-BF16), refused with one line elsewhere. The tests that run bf16 arithmetic
// skip, saying why, on a CPU without it; the refusal is tested everywhere (the ISA is injected).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/dnnl_matmul.h"
#include "core/error.h"
#include "data/dataset.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

#define SKIP_WITHOUT_BF16()                                                         \
  do {                                                                              \
    if (const std::string why = cpu_bf16_problem(cpu_bf16_support()); !why.empty()) \
      GTEST_SKIP() << "bf16 on the CPU " << why;                                    \
  } while (0)

using testing_util::error_of;
using testing_util::with_dtype_policy;

// The largest |got - want| / (1 + |want|) over the elements.
double worst_relative(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]) /
                                (1.0 + std::fabs(static_cast<double>(want[i]))));
  return worst;
}

TEST(CpuBf16, IsRefusedWithOneLineNamingTheMissingInstructionSets) {
  const std::string none = error_of([] { make_cpu_backend(1, Precision::bf16, CpuBf16Support{}); });
  EXPECT_NE(none.find("precision bf16"), std::string::npos) << none;
  EXPECT_NE(none.find("AVX512_BF16 or AMX-BF16"), std::string::npos) << none;
  EXPECT_NE(none.find("neither"), std::string::npos) << none;
  EXPECT_EQ(none.find('\n'), std::string::npos) << none;
  const std::string amx_only =
      error_of([] { make_cpu_backend(1, Precision::bf16, CpuBf16Support{.amx_bf16 = true}); });
  EXPECT_NE(amx_only.find("AVX512_BF16"), std::string::npos) << amx_only;
  // tf32 is a GPU precision whatever the CPU has; fp32 needs nothing.
  const std::string tf32 =
      error_of([] { make_cpu_backend(1, Precision::tf32, CpuBf16Support{.avx512_bf16 = true}); });
  EXPECT_NE(tf32.find("GPU precision"), std::string::npos) << tf32;
  EXPECT_NE(make_cpu_backend(1, Precision::fp32, CpuBf16Support{}), nullptr);
  EXPECT_EQ(cpu_bf16_problem(CpuBf16Support{.avx512_bf16 = true}), "");
}

TEST(CpuBf16, CompileOnThisCpuAcceptsOrRefusesAsItsIsaSays) {
  Sequential model(with_dtype_policy({Input({4}), Dense(3, "softmax")}));
  const std::string why = cpu_bf16_problem(cpu_bf16_support());
  const std::string got = error_of(
      [&] { model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.precision = "bf16"}); });
  if (why.empty())
    EXPECT_EQ(got, "");
  else
    EXPECT_NE(got.find(why), std::string::npos) << got;
}

// compile's default precision is the layers' dtype policies' (as Keras trains a mixed_bfloat16
// model it loads in bfloat16): bf16 where this CPU has it, else the CPU's one-line refusal, never
// a silent fp32.
TEST(CpuBf16, CompileTakesThePrecisionFromTheLayersDtypePolicies) {
  const std::vector<Layer> layers = with_dtype_policy({Input({4}), Dense(8, "relu"), Dense(3)});
  EXPECT_EQ(model_precision(layers, ""), Precision::bf16);
  EXPECT_EQ(model_precision(with_dtype_policy(layers, DTypePolicy::float32), ""), Precision::fp32);
  Sequential float32(with_dtype_policy(layers, DTypePolicy::float32));
  float32.compile(Adam(), "mse", {}, {.threads = 1});
  EXPECT_EQ(float32.precision(), "fp32");
  // What compile derived, with a backend of the caller's (which does not look at it).
  Sequential recorded(layers);
  recorded.compile(Adam(), "mse", {}, {.make_backend = [] { return make_cpu_backend(1); }});
  EXPECT_EQ(recorded.precision(), "bf16");

  Sequential model(layers);
  const std::string why = cpu_bf16_problem(cpu_bf16_support());
  const std::string got = error_of([&] { model.compile(Adam(), "mse", {}, {.threads = 1}); });
  if (!why.empty()) {
    EXPECT_EQ(got, "precision bf16: " + why);
    EXPECT_FALSE(model.compiled());
    return;
  }
  ASSERT_EQ(got, "");
  EXPECT_EQ(model.precision(), "bf16");
  const Tensor x = testing_util::random_tensor({16, 4}, 3),
               y = testing_util::random_tensor({16, 3}, 4);
  Sequential explicit_bf16(layers);
  explicit_bf16.compile(Adam(), "mse", {}, {.threads = 1, .precision = "bf16"});
  explicit_bf16.set_weights(model.get_weights());
  model.fit(x, y, {.epochs = 1, .shuffle = false, .verbose = 0});
  explicit_bf16.fit(x, y, {.epochs = 1, .shuffle = false, .verbose = 0});
  const Tensor a = model.predict(x), b = explicit_bf16.predict(x);
  EXPECT_EQ(std::vector<float>(a.data(), a.data() + a.size()),
            std::vector<float>(b.data(), b.data() + b.size()));
}

// A precision given that disagrees with the layers' policy is refused in one line naming both;
// tf32 is float32's arithmetic on a GPU (then the CPU refuses it as a GPU precision).
TEST(CpuBf16, AnExplicitPrecisionMustAgreeWithTheLayersPolicy) {
  const std::vector<Layer> mixed = with_dtype_policy({Input({4}), Dense(3)});
  const std::vector<Layer> float32 = with_dtype_policy(mixed, DTypePolicy::float32);
  EXPECT_EQ(model_precision(float32, "tf32"), Precision::tf32);
  EXPECT_EQ(model_precision(mixed, "bf16"), Precision::bf16);
  EXPECT_EQ(error_of([&] { model_precision(float32, "bf16"); }),
            "precision bf16: the model's Dense and Conv2D layers have the dtype policy 'float32', "
            "which trains in fp32: leave precision out, or give those layers the policy "
            "\"mixed_bfloat16\" (their \"dtype\" in a model file; in Keras, set_global_policy "
            "before making the model)");
  for (const std::string asked : {"fp32", "tf32"}) {
    Sequential model(mixed);
    const std::string got =
        error_of([&] { model.compile(Adam(), "mse", {}, {.threads = 1, .precision = asked}); });
    EXPECT_EQ(got.rfind("precision " + asked +
                            ": the model's Dense and Conv2D layers have the dtype policy "
                            "'mixed_bfloat16', which trains in bf16: leave precision out",
                        0),
              0u)
        << got;
    EXPECT_FALSE(model.compiled());
  }
  Sequential tf32(float32);
  EXPECT_EQ(error_of([&] { tf32.compile(Adam(), "mse", {}, {.threads = 1, .precision = "tf32"}); }),
            "precision tf32: tf32 is a GPU precision; the CPU trains in fp32 or bf16");
  EXPECT_EQ(error_of([&] { model_precision(float32, "fp16"); }),
            "precision: unknown precision 'fp16' (expected fp32, tf32 or bf16)");
}

TEST(CpuBf16, ConversionRoundsToNearestEvenAsTheInstructionDoes) {
  SKIP_WITHOUT_BF16();
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even (1). 1 + 3 * 2^-8: up to 1 + 2^-6.
  std::vector<float> x{1.0f,           1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -2.5f, 0.0f,
                       1.0f + 0x1p-9f, 3.0e38f,        -1.0e-40f /* denormal: -0 */};
  for (int i = 0; i < 40; ++i) x.push_back(static_cast<float>(i) * 0.337f - 5.0f);  // a vector
  std::vector<uint16_t> got(x.size());
  cpu::to_bf16(x.data(), got.data(), static_cast<int64_t>(x.size()));
  const uint16_t want_head[] = {0x3F80, 0x3F80, 0x3F82, 0xC020, 0x0000, 0x3F80, 0x7F62, 0x8000};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], want_head[i]) << "element " << i;
  for (std::size_t i = 8; i < x.size(); ++i) {  // within half a bf16 unit, by value
    const float back = std::bit_cast<float>(static_cast<uint32_t>(got[i]) << 16);
    EXPECT_LE(std::fabs(back - x[i]), std::fabs(x[i]) * 0x1p-8f) << "element " << i;
  }
}

// The three dense GEMMs of a bf16 backend against the fp32 backend's: close (bf16 operands carry
// 8 significant bits, so about 2^-9 relative per product), and not equal (the bf16 path ran).
TEST(CpuBf16, DenseProductsStayNearFloat32ButAreNotFloat32) {
  SKIP_WITHOUT_BF16();
  auto fp32 = make_cpu_backend(2, Precision::fp32), bf16 = make_cpu_backend(2, Precision::bf16);
  struct Shape {
    int64_t m, k, n;
  };
  for (Shape s : {Shape{32, 784, 128}, Shape{33, 65, 47}, Shape{32, 1000, 1000}, Shape{1, 7, 3}}) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n));
    const Tensor x = testing_util::random_tensor({s.m, s.k}, 1);
    const Tensor w = testing_util::random_tensor({s.k, s.n}, 2);
    const Tensor b = testing_util::random_tensor({s.n}, 3);
    const Tensor dy = testing_util::random_tensor({s.m, s.n}, 4);
    // With AMX, a weight gradient narrower than 64 columns is a float32 product (cpu_dense.cpp).
    const bool fp32_gradient = cpu_bf16_support().amx_bf16 && s.n < 64;
    auto compare = [&](auto run, int64_t size, const char* what, bool bf16_product = true) {
      std::vector<float> want(static_cast<std::size_t>(size)), got(want.size());
      run(*fp32, want.data());
      run(*bf16, got.data());
      double err = 0, norm = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        err += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
        norm += static_cast<double>(want[i]) * want[i];
      }
      EXPECT_LT(std::sqrt(err / norm), 1e-2) << what;
      if (bf16_product) {
        EXPECT_GT(err, 0.0) << what << ": bit-identical to fp32, so not bf16";
      }
    };
    compare(
        [&](Backend& be, float* y) {
          be.dense_forward(x.data(), w.data(), b.data(), y, s.m, s.k, s.n, ActivationKind::linear);
        },
        s.m * s.n, "forward");
    compare(
        [&](Backend& be, float* y) {
          be.dense_forward(x.data(), w.data(), b.data(), y, s.m, s.k, s.n, ActivationKind::relu);
        },
        s.m * s.n, "forward with ReLU");
    compare([&](Backend& be,
                float* dx) { be.dense_backward_input(dy.data(), w.data(), dx, s.m, s.k, s.n); },
            s.m * s.k, "backward input");
    std::vector<float> db(static_cast<std::size_t>(s.n));
    compare(
        [&](Backend& be, float* dw) {
          be.dense_backward_weights(x.data(), dy.data(), dw, db.data(), s.m, s.k, s.n);
        },
        s.k * s.n, "backward weights", !fp32_gradient);
  }
}

// The products by a layer's weights read a blocked bf16 copy of them, made by one reorder. It is
// remade exactly when the weights changed (weights_changed on a range overlapping them), and the
// product through it equals the plain path's (bf16 operands both ways, float32 accumulation).
TEST(CpuBf16, WeightsCopyIsRemadeOnlyWhenTheWeightsChange) {
  SKIP_WITHOUT_BF16();
  const int64_t m = 32, k = 200, n = 96;
  const Tensor a = testing_util::random_tensor({m, k}, 11);
  Tensor w = testing_util::random_tensor({k, n}, 12);
  cpu::DnnlMatmulBf16 mm;
  auto through_copy = [&] {
    std::vector<float> c(static_cast<std::size_t>(m * n));
    mm.gemm_weights(false, m, n, k, a.data(), w.data(), c.data(), 1);
    return c;
  };
  auto plain = [&] {
    std::vector<float> c(static_cast<std::size_t>(m * n));
    mm.gemm(false, false, m, n, k, a.data(), w.data(), c.data(), 1);
    return c;
  };
  const auto near = worst_relative;
  const std::vector<float> first = through_copy();
  EXPECT_EQ(mm.weight_copies(), 1);
  EXPECT_EQ(mm.weight_reorders(), 1);
  EXPECT_LT(near(first, plain()), 1e-5);
  EXPECT_EQ(through_copy(), first);
  EXPECT_EQ(mm.weight_reorders(), 1) << "an unchanged copy is not remade";

  w[5] += 3.0f;
  mm.weights_changed(w.data() + k * n, 64);  // memory just past w: not w
  EXPECT_EQ(through_copy(), first) << "a write elsewhere keeps the copy";
  EXPECT_EQ(mm.weight_reorders(), 1);
  mm.weights_changed(w.data() + 5, sizeof(float));
  const std::vector<float> second = through_copy();
  EXPECT_EQ(mm.weight_reorders(), 2);
  EXPECT_NE(second, first);
  EXPECT_LT(near(second, plain()), 1e-5);

  // The transposed use (the input gradient) is a copy of its own, in its own layout.
  std::vector<float> ct(static_cast<std::size_t>(m * k)), want(ct.size());
  const Tensor dy = testing_util::random_tensor({m, n}, 13);
  mm.gemm_weights(true, m, k, n, dy.data(), w.data(), ct.data(), 1);
  mm.gemm(false, true, m, k, n, dy.data(), w.data(), want.data(), 1);
  EXPECT_EQ(mm.weight_copies(), 2);
  EXPECT_LT(near(ct, want), 1e-5);

  // The fused optimizer update writes the copies as it writes the weights: rows in any order and
  // split (here 16 rows, then the rest), then weights_rewritten. No reorder follows.
  for (int64_t i = 0; i < k * n; ++i) w[i] = -0.5f * w[i] + 0.25f;
  mm.write_rows(w.data(), 16, k);
  mm.write_rows(w.data(), 0, 16);
  mm.weights_rewritten(w.data());
  const std::vector<float> rewritten = through_copy();
  mm.gemm_weights(true, m, k, n, dy.data(), w.data(), ct.data(), 1);
  EXPECT_EQ(mm.weight_reorders(), 3) << "the update's copies are fresh";
  EXPECT_LT(near(rewritten, plain()), 1e-5);
  mm.gemm(false, true, m, k, n, dy.data(), w.data(), want.data(), 1);
  EXPECT_LT(near(ct, want), 1e-5);

  // Memory handed out anew: its old copies go (none of another shape is taken for new weights).
  mm.forget(w.data() + 1, sizeof(float));
  EXPECT_EQ(mm.weight_copies(), 0);
}

// oneDNN picks the copy's block width by shape and CPU (with AMX-BF16, 48 columns for N = 96 and
// 32 for N = 48; 64 elsewhere): whatever it picks for these shapes, the fused update's rows reach
// the copy it reads (no reorder after weights_rewritten) and both products equal the plain path's.
TEST(CpuBf16, TheUpdateWritesTheCopyInEveryBlockWidthThePrimitivePicks) {
  SKIP_WITHOUT_BF16();
  struct Shape {
    int64_t m, k, n;
  };
  for (Shape s : {Shape{32, 200, 96}, Shape{32, 1000, 48}, Shape{32, 784, 128}, Shape{33, 65, 47},
                  Shape{32, 96, 200}, Shape{32, 1000, 10}, Shape{32, 30, 16}}) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n));
    cpu::DnnlMatmulBf16 mm;
    Tensor w = testing_util::random_tensor({s.k, s.n}, 31);
    const Tensor a = testing_util::random_tensor({s.m, s.k}, 32);
    const Tensor dy = testing_util::random_tensor({s.m, s.n}, 33);
    auto check_both = [&](const char* when) {
      SCOPED_TRACE(when);
      std::vector<float> y(static_cast<std::size_t>(s.m * s.n)), y_plain(y.size());
      mm.gemm_weights(false, s.m, s.n, s.k, a.data(), w.data(), y.data(), 2);
      mm.gemm(false, false, s.m, s.n, s.k, a.data(), w.data(), y_plain.data(), 2);
      EXPECT_LT(worst_relative(y, y_plain), 1e-5) << "forward";
      std::vector<float> dx(static_cast<std::size_t>(s.m * s.k)), dx_plain(dx.size());
      mm.gemm_weights(true, s.m, s.k, s.n, dy.data(), w.data(), dx.data(), 2);
      mm.gemm(false, true, s.m, s.k, s.n, dy.data(), w.data(), dx_plain.data(), 2);
      EXPECT_LT(worst_relative(dx, dx_plain), 1e-5) << "input gradient";
    };
    check_both("first use");
    EXPECT_EQ(mm.weight_reorders(), 2);
    for (int64_t i = 0; i < s.k * s.n; ++i) w[i] = 0.75f * w[i] - 0.125f;
    mm.write_rows(w.data(), 0, s.k);
    mm.weights_rewritten(w.data());
    check_both("after the update wrote the rows");
    EXPECT_EQ(mm.weight_reorders(), 2) << "a copy in a layout the update does not write";
  }
}

// The CPU backend drops a weights copy when the weights are written through upload, fill or
// host_wrote (as set_weights, initialisation and MPI's broadcast write them): the product after
// the write equals a fresh backend's on the new weights.
TEST(CpuBf16, BackendRemakesTheCopyAfterUploadFillAndHostWrites) {
  SKIP_WITHOUT_BF16();
  const int64_t m = 32, k = 300, n = 200;
  auto be = make_cpu_backend(2, Precision::bf16);
  auto* w = static_cast<float*>(be->allocate(static_cast<std::size_t>(k * n) * sizeof(float)));
  const Tensor x = testing_util::random_tensor({m, k}, 21);
  auto forward = [&](Backend& on, const float* weights) {
    std::vector<float> y(static_cast<std::size_t>(m * n));
    on.dense_forward(x.data(), weights, nullptr, y.data(), m, k, n, ActivationKind::linear);
    return y;
  };
  auto input_gradient = [&](Backend& on, const float* weights) {
    std::vector<float> dx(static_cast<std::size_t>(m * k));
    const Tensor dy = testing_util::random_tensor({m, n}, 22);
    on.dense_backward_input(dy.data(), weights, dx.data(), m, k, n);
    return dx;
  };
  auto as_fresh = [&](const float* host_weights, const char* after) {
    SCOPED_TRACE(after);
    auto fresh = make_cpu_backend(2, Precision::bf16);
    EXPECT_EQ(forward(*be, w), forward(*fresh, host_weights));
    EXPECT_EQ(input_gradient(*be, w), input_gradient(*fresh, host_weights));
  };
  const Tensor w1 = testing_util::random_tensor({k, n}, 23),
               w2 = testing_util::random_tensor({k, n}, 24);
  be->upload(w, w1.data(), static_cast<std::size_t>(w1.size()) * sizeof(float));
  as_fresh(w1.data(), "the first upload");
  be->upload(w, w2.data(), static_cast<std::size_t>(w2.size()) * sizeof(float));
  as_fresh(w2.data(), "a second upload");
  be->fill(w + n, 0.5f, n);  // one row
  Tensor filled = w2;
  for (int64_t j = 0; j < n; ++j) filled[n + j] = 0.5f;
  as_fresh(filled.data(), "a fill of one row");
  std::copy(w1.data(), w1.data() + w1.size(), w);  // as MPI writes it
  be->host_wrote(w, static_cast<std::size_t>(w1.size()) * sizeof(float));
  as_fresh(w1.data(), "a host write");
  be->release(w);
}

Sequential bf16_mlp(uint64_t seed) {
  Sequential model(
      with_dtype_policy({Input({64}), Dense(96, "relu"), Dense(80, "relu"), Dense(10, "softmax")}));
  model.compile(Adam(), "sparse_categorical_crossentropy", {},
                {.threads = 2, .seed = seed, .precision = "bf16"});
  return model;
}

std::vector<float> values_of(const Tensor& t) { return {t.data(), t.data() + t.size()}; }

// The weights copies are derived state: after set_weights (which model loading and Python's
// set_weights call) and after training (the fused update), a model predicts exactly what a fresh
// model given the same weights predicts.
TEST(CpuBf16, PredictionsFollowSetWeightsAndTraining) {
  SKIP_WITHOUT_BF16();
  const Tensor x = testing_util::random_tensor({48, 64}, 31);
  Sequential a = bf16_mlp(1), b = bf16_mlp(2);
  const std::vector<float> a_before = values_of(a.predict(x));  // copies of a's first weights
  a.set_weights(b.get_weights());
  const std::vector<float> a_after = values_of(a.predict(x));
  EXPECT_NE(a_after, a_before);
  EXPECT_EQ(a_after, values_of(b.predict(x)));

  Tensor labels({48});
  for (int64_t i = 0; i < 48; ++i) labels[i] = static_cast<float>(i % 10);
  a.fit(x, labels, {.epochs = 2, .verbose = 0});
  const std::vector<float> trained = values_of(a.predict(x));
  EXPECT_NE(trained, a_after);
  Sequential c = bf16_mlp(3);
  c.predict(x);  // c's own copies first
  c.set_weights(a.get_weights());
  EXPECT_EQ(values_of(c.predict(x)), trained);
}

// A layer called twice: its update comes after both calls (not fused into a backward pass), and
// the bf16 copy of its weights that each call's products read is remade after it.
TEST(CpuBf16, ASharedLayerPredictsWithFreshCopiesOfItsTrainedWeights) {
  SKIP_WITHOUT_BF16();
  const auto graph = [] {
    GraphBuilder g;
    const int a = g.add(Dense(64, "tanh"), g.input({64}));
    LayerGraph out = g.graph(g.add(Dense(10, "softmax"), g.again(a, a)));
    for (Layer& l : out.layers) l.dtype_policy = DTypePolicy::mixed_bfloat16;
    return out;
  };
  const Tensor x = testing_util::random_tensor({48, 64}, 33);
  Tensor labels({48});
  for (int64_t i = 0; i < 48; ++i) labels[i] = static_cast<float>(i % 10);
  Sequential a(graph()), c(graph());
  for (Sequential* m : {&a, &c})
    m->compile(Adam(), "sparse_categorical_crossentropy", {}, {.threads = 1, .seed = 5});
  ASSERT_EQ(a.precision(), "bf16");
  const std::vector<float> before = values_of(a.predict(x));
  a.fit(x, labels, {.epochs = 2, .verbose = 0});
  const std::vector<float> trained = values_of(a.predict(x));
  EXPECT_NE(trained, before);
  c.predict(x);  // c's own copies first
  c.set_weights(a.get_weights());
  EXPECT_EQ(values_of(c.predict(x)), trained);
}

using testing_util::Mnist10k;

// SMALL with the layers' policy that trains in `precision` (mixed_bfloat16 for bf16).
Sequential small_model(const std::string& precision) {
  return Sequential(
      with_dtype_policy({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")},
                        precision == "bf16" ? DTypePolicy::mixed_bfloat16 : DTypePolicy::float32));
}

// SMALL's per-epoch losses on the first 4096 digits, 3 epochs at 2 threads.
std::vector<double> small_losses(const std::string& precision) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = small_model(precision);
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.threads = 2, .seed = 7, .precision = precision});
  return model.fit(d.x_train.rows(0, 4096), d.y_train.rows(0, 4096), {.epochs = 3, .verbose = 0})
      .history.at("loss");
}

TEST(CpuBf16, TrainingFollowsFloat32LooselyAndIsBitIdenticalRunToRun) {
  SKIP_WITHOUT_BF16();
  const std::vector<double> fp32 = small_losses("fp32"), bf16 = small_losses("bf16");
  ASSERT_EQ(bf16.size(), fp32.size());
  for (std::size_t e = 0; e < fp32.size(); ++e)
    EXPECT_NEAR(bf16[e], fp32[e], 0.03 * fp32[e]) << "epoch " << e + 1;
  EXPECT_NE(bf16, fp32);
  EXPECT_EQ(small_losses("bf16"), bf16);
}

TEST(CpuBf16, SmallReachesFloat32sTestAccuracyWithinHalfAPoint) {
  SKIP_WITHOUT_BF16();
  const Mnist10k& d = Mnist10k::get();
  auto accuracy = [&](const std::string& precision) {
    Sequential model = small_model(precision);
    model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                  {.threads = 2, .seed = 0, .precision = precision});
    model.fit(d.x_train, d.y_train, {.epochs = 10, .verbose = 0});
    return model.evaluate(d.x_test, d.y_test, {.verbose = 0}).accuracy;
  };
  const double fp32 = accuracy("fp32"), bf16 = accuracy("bf16");
  EXPECT_NEAR(bf16, fp32, 0.005) << "fp32 " << fp32 << ", bf16 " << bf16;
}

}  // namespace
}  // namespace crossover
