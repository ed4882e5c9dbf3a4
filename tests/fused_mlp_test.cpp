// The fused training step (backends/fused_mlp.h): its eligibility rules and launch shape on the
// host (FusedMlp*), and on a GPU (CudaFusedMlp*) SMALL trained fused against the resident path
// and against the CPU, within the Parity tests' tolerance (1e-3 relative on every weight after
// 100 steps, the epoch losses to 0.5%). The GPU tests skip where there is no GPU.
#include "backends/fused_mlp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "data/dataset.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

using Kind = FusedLayerView::Kind;

// SMALL as the rules see it: Flatten, Dense(128, relu), Dropout(0.2), Dense(10, softmax).
struct SmallView {
  ParamSlot k1{nullptr, nullptr, nullptr, nullptr, 784 * 128, true};
  ParamSlot b1{nullptr, nullptr, nullptr, nullptr, 128, false};
  ParamSlot k2{nullptr, nullptr, nullptr, nullptr, 128 * 10, true};
  ParamSlot b2{nullptr, nullptr, nullptr, nullptr, 10, false};
  FusedModelView view() const {
    FusedModelView v;
    v.layers = {
        {Kind::reshape, "flatten", ActivationKind::linear, 0.0f, true, 784, 784, nullptr, nullptr},
        {Kind::dense, "dense", ActivationKind::relu, 0.0f, true, 784, 128, &k1, &b1},
        {Kind::dropout, "dropout", ActivationKind::linear, 0.2f, true, 128, 128, nullptr, nullptr},
        {Kind::dense, "dense_1", ActivationKind::softmax, 0.0f, true, 128, 10, &k2, &b2}};
    return v;
  }
};

std::string why_not(const FusedModelView& v) {
  FusedMlpStep step;
  return fused_mlp_chain(v, step);
}

TEST(FusedMlpRules, SmallIsEligibleAsTwoDenseLayersWithItsDropout) {
  SmallView s;
  FusedMlpStep step;
  ASSERT_EQ(fused_mlp_chain(s.view(), step), "");
  ASSERT_EQ(step.layers.size(), 2u);
  EXPECT_EQ(step.layers[0].in, 784);
  EXPECT_EQ(step.layers[0].out, 128);
  EXPECT_EQ(step.layers[0].activation, ActivationKind::relu);
  EXPECT_FLOAT_EQ(step.layers[0].dropout, 0.2f);
  EXPECT_EQ(step.layers[0].dropout_layer, 2u);  // the Dropout's index: its Philox stream
  EXPECT_EQ(step.layers[0].kernel.n, 784 * 128);
  EXPECT_EQ(step.layers[0].bias.n, 128);
  EXPECT_EQ(step.layers[1].activation, ActivationKind::softmax);
  EXPECT_FLOAT_EQ(step.layers[1].dropout, 0.0f);
  // Parameters, gradients and two optimizer slots: 101,770 floats, 4 times.
  EXPECT_EQ(fused_mlp_state_bytes(step), 101770 * 16);
  // Adam's amsgrad is fused too (update_one reads its third slot), which takes a fifth float.
  FusedModelView amsgrad = s.view();
  amsgrad.optimizer = Adam({.amsgrad = true});
  ASSERT_EQ(fused_mlp_chain(amsgrad, step), "");
  EXPECT_TRUE(step.optimizer.args.adam.amsgrad);
  EXPECT_EQ(fused_mlp_state_bytes(step), 101770 * 20);
}

TEST(FusedMlpRules, RefusesWhatItCannotComputeExactlyWithOneReason) {
  SmallView s;
  auto with = [&](auto change) {
    FusedModelView v = s.view();
    change(v);
    return why_not(v);
  };
  EXPECT_NE(with([](FusedModelView& v) { v.ranks = 2; }).find("2 ranks"), std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.sample_weights = true; }).find("weights"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.extra_metrics = 1; }).find("metrics"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.fp32 = false; }).find("fp32"), std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.from_logits = true; }).find("from_logits"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.loss = LossKind::mean_squared_error; }).find("loss"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.optimizer.clipnorm = 1.0f; }).find("clips"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.optimizer.tensor_clipnorm = 1.0f; }).find("clips"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.chain = false; }).find("chain"), std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) {
              v.layers[1].activation = ActivationKind::sigmoid;
            }).find("hidden Dense layer's activation"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) {
              v.layers[3].activation = ActivationKind::sigmoid;
            }).find("softmax only"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.layers[1].trainable = false; }).find("frozen"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) {
              v.layers[1].shared = true;
            }).find("layer 'dense' is called more than once (shared weights)"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) {
              v.layers[2].kind = Kind::other;
            }).find("'dropout' is neither Dense nor Dropout"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) {
              std::swap(v.layers[1], v.layers[2]);
            }).find("does not follow a Dense layer"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) {
              v.layers.push_back(v.layers[2]);
            }).find("last layer is not Dense"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) { v.layers[3].in_width = 64; }).find("does not read"),
            std::string::npos);
  EXPECT_NE(with([](FusedModelView& v) {
              v.layers.insert(v.layers.begin() + 2, v.layers[0]);
            }).find("reshapes between Dense layers"),
            std::string::npos);
  // A Dropout of rate 0 is no Dropout; a linear hidden layer is taken.
  FusedModelView v = s.view();
  v.layers[2].rate = 0.0f;
  v.layers[1].activation = ActivationKind::linear;
  FusedMlpStep step;
  ASSERT_EQ(fused_mlp_chain(v, step), "");
  EXPECT_FLOAT_EQ(step.layers[0].dropout, 0.0f);
  EXPECT_EQ(step.layers[0].activation, ActivationKind::linear);
}

TEST(FusedMlpRules, TakesAtMostEightDenseLayers) {
  ParamSlot k{nullptr, nullptr, nullptr, nullptr, 16, true};
  FusedModelView v;
  for (int i = 0; i < kFusedMaxLayers + 1; ++i)
    v.layers.push_back({Kind::dense, std::to_string(i),
                        i == kFusedMaxLayers ? ActivationKind::softmax : ActivationKind::relu, 0.0f,
                        true, 4, 4, &k, nullptr});
  EXPECT_NE(why_not(v).find("more than 8 Dense layers"), std::string::npos);
  v.layers.erase(v.layers.begin());
  FusedMlpStep step;
  EXPECT_EQ(fused_mlp_chain(v, step), "");
  EXPECT_EQ(step.layers.size(), 8u);
  EXPECT_EQ(step.layers[0].bias.n, 0);  // no bias (use_bias=False)
}

TEST(FusedMlpLaunch, EveryBlockResidentAndNoMoreThanTheWork) {
  SmallView s;
  FusedMlpStep step;
  ASSERT_EQ(fused_mlp_chain(s.view(), step), "");
  step.rows = 32;
  // The update's groups of 256 parameters are the most: ceil(101770 / 256) = 398; the largest
  // product is the first layer's weight gradient, 25 x 4 tiles.
  EXPECT_EQ(fused_mlp_work_items(step), 398);
  // An H200: 132 multiprocessors.
  EXPECT_EQ(fused_mlp_launch_shape(132, 2, 398).blocks, 264);
  EXPECT_EQ(fused_mlp_launch_shape(132, 4, 398).blocks, 398);
  EXPECT_EQ(fused_mlp_launch_shape(132, 4, 398).threads, kFusedThreads);
  EXPECT_EQ(fused_mlp_launch_shape(132, 2, 0).blocks, 1);
  EXPECT_EQ(fused_mlp_launch_shape(132, 0, 398).blocks, 0);
  EXPECT_EQ(fused_mlp_launch_shape(0, 2, 398).blocks, 0);
}

TEST(FusedMlpLaunch, SplitsADeepProductUntilEveryBlockHasAnItem) {
  // SMALL's first layer forward on 264 blocks: 4 tiles, 784 deep (25 chunks of 32): all 25.
  EXPECT_EQ(fused_mlp_slices(784, 4, 264), 25);
  // On 40 blocks: 10 slices of at most 3 chunks.
  EXPECT_EQ(fused_mlp_slices(784, 4, 40), 10);
  // Enough tiles already, or a shallow product: one slice.
  EXPECT_EQ(fused_mlp_slices(784, 400, 264), 1);
  EXPECT_EQ(fused_mlp_slices(10, 4, 264), 1);
  EXPECT_EQ(fused_mlp_slices(0, 4, 264), 1);
  EXPECT_EQ(fused_mlp_slices(784, 0, 264), 1);
}

TEST(FusedMlpLaunch, DeviceProblems) {
  SmallView s;
  FusedMlpStep step;
  ASSERT_EQ(fused_mlp_chain(s.view(), step), "");
  const int64_t h200_l2 = 60 * 1024 * 1024;
  EXPECT_EQ(fused_mlp_device_problem(step, true, 2, h200_l2), "");
  EXPECT_NE(fused_mlp_device_problem(step, false, 2, h200_l2).find("cooperative"),
            std::string::npos);
  EXPECT_NE(fused_mlp_device_problem(step, true, 0, h200_l2).find("no block"), std::string::npos);
  EXPECT_NE(fused_mlp_device_problem(step, true, 2, 1000000).find("exceed the L2 cache"),
            std::string::npos);
}

Sequential small_model() {
  return Sequential({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
}

// On the CPU the switch is refused in one line and training goes on as usual.
TEST(FusedMlpModel, TheCpuSaysWhyNotAndTrainsAsUsual) {
  const testing_util::Mnist10k& d = testing_util::Mnist10k::get();
  const Tensor x = d.x_train.rows(0, 64), y = d.y_train.rows(0, 64);
  Sequential plain = small_model(), asked = small_model();
  plain.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.device = "cpu", .threads = 1, .seed = 3});
  asked.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.device = "cpu", .threads = 1, .seed = 3, .fused_step = true});
  plain.fit(x, y, {.epochs = 1, .verbose = 0});
  asked.fit(x, y, {.epochs = 1, .verbose = 0});
  EXPECT_EQ(plain.fused_step_note(), "");
  EXPECT_EQ(asked.fused_step_note(),
            "fused step not used: cpu has no fused training step (CUDA only)");
  const auto a = plain.get_weights(), b = asked.get_weights();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    for (int64_t j = 0; j < a[i].value.size(); ++j)
      ASSERT_EQ(a[i].value[j], b[i].value[j]) << a[i].name;
}

// ---- on a GPU ----

// `reference` (device, fused or not) against the fused GPU step: 100 steps (plus a ragged last
// batch of `extra` rows) with the same seed, then 3 epochs' losses.
void check_fused_against(const std::string& device, bool fused_reference, int64_t extra) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: the fused step needs a GPU";
  const testing_util::Mnist10k& d = testing_util::Mnist10k::get();
  const Tensor x = d.x_train.rows(0, 3200 + extra), y = d.y_train.rows(0, 3200 + extra);
  Sequential ref = small_model(), fused = small_model();
  ref.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
              {.device = device, .seed = 3, .fused_step = fused_reference});
  fused.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.device = "cuda", .seed = 3, .fused_step = true});
  ref.fit(x, y, {.epochs = 1, .verbose = 0});
  fused.fit(x, y, {.epochs = 1, .verbose = 0});
  ASSERT_EQ(fused.fused_step_note(), "");
  EXPECT_EQ(fused.optimizer_steps(), 100 + (extra > 0 ? 1 : 0));
  const auto wr = ref.get_weights(), wf = fused.get_weights();
  ASSERT_EQ(wr.size(), wf.size());
  for (std::size_t i = 0; i < wr.size(); ++i)
    EXPECT_LE(testing_util::relative_difference(wf[i].value, wr[i].value), 1e-3) << wr[i].name;

  Sequential ref3 = small_model(), fused3 = small_model();
  ref3.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
               {.device = device, .seed = 4});
  fused3.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                 {.device = "cuda", .seed = 4, .fused_step = true});
  const History hr = ref3.fit(d.x_train, d.y_train, {.epochs = 3, .verbose = 0});
  const History hf = fused3.fit(d.x_train, d.y_train, {.epochs = 3, .verbose = 0});
  for (int e = 0; e < 3; ++e) {
    EXPECT_NEAR(hf.epochs[e].loss, hr.epochs[e].loss, 0.005 * hr.epochs[e].loss)
        << "epoch " << e + 1;
    EXPECT_NEAR(hf.epochs[e].accuracy, hr.epochs[e].accuracy, 0.01) << "epoch " << e + 1;
  }
}

// A few steps with a ragged last batch (3 of 32 rows and one of 4), short enough for
// compute-sanitizer's memcheck and racecheck (scripts/gpu-check).
TEST(CudaFusedMlp, ShortRaggedRunMatchesTheResidentPath) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: the fused step needs a GPU";
  const testing_util::Mnist10k& d = testing_util::Mnist10k::get();
  const Tensor x = d.x_train.rows(0, 100), y = d.y_train.rows(0, 100);
  Sequential ref = small_model(), fused = small_model();
  ref.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
              {.device = "cuda", .seed = 5});
  fused.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.device = "cuda", .seed = 5, .fused_step = true});
  const History hr = ref.fit(x, y, {.epochs = 1, .verbose = 0});
  const History hf = fused.fit(x, y, {.epochs = 1, .verbose = 0});
  ASSERT_EQ(fused.fused_step_note(), "");
  EXPECT_EQ(fused.optimizer_steps(), 4);
  EXPECT_NEAR(hf.epochs[0].loss, hr.epochs[0].loss, 1e-3 * hr.epochs[0].loss);
  EXPECT_NEAR(hf.epochs[0].accuracy, hr.epochs[0].accuracy, 0.02);
  const auto wr = ref.get_weights(), wf = fused.get_weights();
  ASSERT_EQ(wr.size(), wf.size());
  for (std::size_t i = 0; i < wr.size(); ++i)
    EXPECT_LE(testing_util::relative_difference(wf[i].value, wr[i].value), 1e-3) << wr[i].name;
}

// Adam with amsgrad: the fused kernel updates the third slot as the resident path's optimizer
// kernel does (both update_one), from the same weights, batches and dropout.
TEST(CudaFusedMlp, AmsgradFollowsTheResidentGpuPath) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: the fused step needs a GPU";
  const testing_util::Mnist10k& d = testing_util::Mnist10k::get();
  const Tensor x = d.x_train.rows(0, 640), y = d.y_train.rows(0, 640);
  const OptimizerConfig amsgrad = Adam({.amsgrad = true});
  Sequential ref = small_model(), fused = small_model();
  ref.compile(amsgrad, "sparse_categorical_crossentropy", {"accuracy"},
              {.device = "cuda", .seed = 6});
  fused.compile(amsgrad, "sparse_categorical_crossentropy", {"accuracy"},
                {.device = "cuda", .seed = 6, .fused_step = true});
  ref.fit(x, y, {.epochs = 2, .verbose = 0});
  fused.fit(x, y, {.epochs = 2, .verbose = 0});
  ASSERT_EQ(fused.fused_step_note(), "");
  EXPECT_EQ(fused.optimizer_steps(), 40);
  const auto wr = ref.get_weights(), wf = fused.get_weights();
  ASSERT_EQ(wr.size(), wf.size());
  for (std::size_t i = 0; i < wr.size(); ++i)
    EXPECT_LE(testing_util::relative_difference(wf[i].value, wr[i].value), 1e-3) << wr[i].name;
  const auto sr = ref.get_optimizer_state(), sf = fused.get_optimizer_state();
  ASSERT_EQ(sr.size(), sf.size());
  ASSERT_EQ(sr.size(), 4 * 3 + 1u);  // slot3 too
  for (std::size_t i = 0; i + 1 < sr.size(); ++i)
    EXPECT_LE(testing_util::relative_difference(sf[i].value, sr[i].value), 1e-3) << sr[i].name;
}

TEST(CudaFusedMlp, SmallFollowsTheResidentGpuPath) { check_fused_against("cuda", false, 0); }
TEST(CudaFusedMlp, SmallFollowsTheCpu) { check_fused_against("cpu", false, 0); }
TEST(CudaFusedMlp, RaggedLastBatchFollowsTheResidentGpuPath) {
  check_fused_against("cuda", false, 13);
}

}  // namespace
}  // namespace crossover
