// The fused step's price (perf/cost_model.h, predict_fused_step), its profile fields
// (Profile::fused_step) and explain's line for it; no GPU needed. No timing thresholds: the price
// is checked for its arithmetic and its monotonicity, not against a measurement.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "backends/cuda_info.h"
#include "core/error.h"
#include "nn/layers.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/cost_model.h"
#include "perf/explain.h"
#include "perf/profile.h"
#include "test_util.h"

namespace {

using namespace crossover;
using nlohmann::json;
namespace fs = std::filesystem;

// The shipped H200 profile (measured 2026-11-30, before the fused step's rates existed).
perf::Profile h200() {
  return perf::load_profile(
      (fs::path(testing_util::source_dir()) / "profiles" / "gpu-nvidia-h200.json").string());
}

// The same with fused-step rates of a plausible size (not a measurement: the tests check the
// price's arithmetic, whatever the numbers).
perf::Profile h200_with_rates() {
  perf::Profile p = h200();
  p.fused_step = FusedStepRates{1.5e-6, 2e10, 2, 50 << 20};
  return p;
}

const perf::ModelDesc kSmall = perf::mlp(784, {128}, 10, 0.2);

TEST(FusedCost, TheShippedProfileLoadsWithoutRatesAndSaysUnpriced) {
  const perf::Profile p = h200();
  EXPECT_FALSE(p.fused_step.has_value());
  const perf::FusedPrediction f = perf::predict_fused_step(kSmall, 32, p);
  EXPECT_EQ(f.refusal, "");
  EXPECT_NE(f.unpriced.find("no fused-step rates"), std::string::npos) << f.unpriced;
  EXPECT_NE(f.unpriced.find("calibrate --device cuda:N"), std::string::npos) << f.unpriced;
  EXPECT_FALSE(f.priced());
  EXPECT_EQ(f.step_seconds, 0.0);
  const std::string line = perf::fused_step_sentence(f, 54e-6, p.name);
  EXPECT_NE(line.find("unpriced"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // Written back, a profile without the rates has no fused_step key: as before them.
  EXPECT_FALSE(perf::profile_to_json(p).contains("fused_step"));
}

TEST(FusedCost, SmallIsPricedStageByStageAsTheKernelRunsIt) {
  const perf::Profile p = h200_with_rates();
  const perf::FusedPrediction f = perf::predict_fused_step(kSmall, 32, p);
  ASSERT_TRUE(f.priced()) << f.refusal << f.unpriced;
  // forward x2, loss, backward x2, update
  ASSERT_EQ(f.stages.size(), 6u);
  EXPECT_EQ(f.stages[0].name, "forward dense 784->128");
  EXPECT_EQ(f.stages[2].name, "loss");
  EXPECT_EQ(f.stages[3].name, "backward dense 128->10");
  EXPECT_EQ(f.stages[5].name, "update");
  EXPECT_EQ(f.stages[5].barriers, 0);  // the kernel ends after it
  EXPECT_EQ(f.state_bytes, 101770 * 16);
  EXPECT_GT(f.blocks, 0);
  EXPECT_LE(f.blocks, 132 * 2);  // every block resident: SMs x blocks per SM
  int barriers = 0;
  double stages = 0;
  for (const perf::FusedStage& s : f.stages) {
    EXPECT_GT(s.seconds, 0.0) << s.name;
    barriers += s.barriers;
    stages += s.seconds;
  }
  // One barrier after each dependent stage (2 forward, the loss, 2 backward), and one more per
  // split product.
  EXPECT_GE(barriers, 5);
  EXPECT_EQ(f.barriers, barriers);
  EXPECT_DOUBLE_EQ(f.barrier_seconds, barriers * 1.5e-6);
  EXPECT_DOUBLE_EQ(f.launch_seconds, p.launch_seconds);
  EXPECT_NEAR(f.step_seconds, f.launch_seconds + stages + f.barrier_seconds, 1e-15);
  // The forward products' FLOPs cover the model's (whole 32 x 32 tiles: at least 2 m n k).
  EXPECT_GE(f.stages[0].flops, 2 * 32 * 784 * 128);
  const std::string line = perf::fused_step_sentence(f, 54e-6, p.name);
  EXPECT_NE(line.find("predicted at"), std::string::npos) << line;
  EXPECT_NE(line.find("NVIDIA H200"), std::string::npos) << line;
}

TEST(FusedCost, ThePriceGrowsWithLayersWidthAndBatch) {
  const perf::Profile p = h200_with_rates();
  auto price = [&](const perf::ModelDesc& m, int64_t rows) {
    const perf::FusedPrediction f = perf::predict_fused_step(m, rows, p);
    EXPECT_TRUE(f.priced()) << f.refusal << f.unpriced;
    return f.step_seconds;
  };
  const double small = price(kSmall, 32);
  EXPECT_GT(small, 0.0);
  EXPECT_GT(price(perf::mlp(784, {128, 128}, 10, 0.2), 32), small);
  EXPECT_GT(price(perf::mlp(784, {128, 128, 128}, 10, 0.2), 32),
            price(perf::mlp(784, {128, 128}, 10, 0.2), 32));
  EXPECT_GT(price(perf::mlp(784, {1024}, 10, 0.2), 32), small);
  EXPECT_GT(price(perf::mlp(784, {1000, 1000}, 10, 0.2), 32),
            price(perf::mlp(784, {1000}, 10, 0.2), 32));
  EXPECT_GE(price(kSmall, 1024), small);
  // More barriers with more layers.
  EXPECT_GT(perf::predict_fused_step(perf::mlp(784, {128, 128}, 10, 0.2), 32, p).barriers,
            perf::predict_fused_step(kSmall, 32, p).barriers);
}

TEST(FusedCost, RefusalsAreReportedWithTheRuleBroken) {
  const perf::Profile p = h200_with_rates();
  auto refusal = [&](const perf::ModelDesc& m, Precision precision = Precision::fp32,
                     int ranks = 1) {
    const perf::FusedPrediction f = perf::predict_fused_step(m, 32, p, precision, ranks);
    EXPECT_FALSE(f.priced());
    EXPECT_EQ(f.step_seconds, 0.0);
    return f.refusal;
  };
  EXPECT_NE(refusal(kSmall, Precision::bf16).find("fp32"), std::string::npos);
  EXPECT_NE(refusal(kSmall, Precision::fp32, 2).find("2 ranks"), std::string::npos);
  perf::ModelDesc mse = kSmall;
  mse.loss = "mean_squared_error";
  EXPECT_NE(refusal(mse).find("cross-entropy"), std::string::npos);
  perf::ModelDesc tanh = perf::mlp(784, {}, 10, 0);
  tanh.layers.insert(tanh.layers.begin() + 1, Dense(64, "tanh"));
  EXPECT_NE(refusal(tanh).find("relu or linear only"), std::string::npos) << refusal(tanh);
  perf::ModelDesc norm = kSmall;
  norm.layers.insert(norm.layers.begin() + 2, BatchNormalization());
  EXPECT_NE(refusal(norm).find("neither Dense nor Dropout"), std::string::npos) << refusal(norm);
  // A functional model's description keeps its graph: a Dense called twice (shared weights) is
  // refused as fit refuses it, and its step is the graph's (one kernel, two calls).
  GraphBuilder g;
  const int h = g.add(Dense(64, "relu"), g.add(Flatten(), g.input({28, 28})));
  const int block = g.add(Dense(64, "relu"), h);
  Sequential shared(g.graph(g.add(Dense(10, "softmax"), g.again(block, block))));
  const perf::ModelDesc desc = perf::describe(shared);
  ASSERT_TRUE(desc.graph.has_value());
  EXPECT_EQ(desc.model().count_params(), shared.count_params());
  EXPECT_EQ(desc.parameters(), 784 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10)
      << "the shared kernel counted once";
  EXPECT_NE(refusal(desc).find("layer 'dense_1' is called more than once (shared weights)"),
            std::string::npos)
      << refusal(desc);
  perf::ModelDesc clipped = kSmall;
  clipped.optimizer.clipnorm = 1.0f;
  EXPECT_NE(refusal(clipped).find("clips"), std::string::npos);
  // The device's rule: the state (16 bytes a parameter) must fit the L2 the profile records.
  const std::string l2 = refusal(perf::mlp(784, {2048, 2048}, 10, 0.2));
  EXPECT_NE(l2.find("exceed the L2 cache"), std::string::npos) << l2;
  const std::string line = perf::fused_step_sentence(
      perf::predict_fused_step(kSmall, 32, p, Precision::bf16), 54e-6, p.name);
  EXPECT_NE(line.find("cannot run this model"), std::string::npos) << line;
  // A CPU's profile prices no fused step.
  perf::Profile cpu = p;
  cpu.kind = "cpu";
  EXPECT_NE(perf::predict_fused_step(kSmall, 32, cpu).refusal.find("GPU"), std::string::npos);
  EXPECT_THROW(perf::predict_fused_step(kSmall, 0, p), Error);
}

TEST(FusedCost, ProfileFieldsRoundTripAndAreValidated) {
  const perf::Profile p = h200_with_rates();
  const json j = perf::profile_to_json(p);
  ASSERT_TRUE(j.contains("fused_step"));
  EXPECT_EQ(j["fused_step"]["blocks_per_sm"], 2);
  const perf::Profile q = perf::profile_from_json(j);
  ASSERT_TRUE(q.fused_step.has_value());
  EXPECT_DOUBLE_EQ(q.fused_step->grid_sync_seconds, 1.5e-6);
  EXPECT_DOUBLE_EQ(q.fused_step->block_flops_per_second, 2e10);
  EXPECT_EQ(q.fused_step->blocks_per_sm, 2);
  EXPECT_EQ(q.fused_step->l2_bytes, 50 << 20);
  EXPECT_EQ(perf::profile_to_json(q), j);
  auto error_of = [](const json& bad) -> std::string {
    try {
      perf::profile_from_json(bad, "p.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  json bad = j;
  bad["fused_step"]["grid_sync_seconds"] = -1;
  EXPECT_NE(error_of(bad).find("fused_step.grid_sync_seconds"), std::string::npos) << error_of(bad);
  bad = j;
  bad["fused_step"].erase("blocks_per_sm");
  EXPECT_NE(error_of(bad).find("fused_step.blocks_per_sm"), std::string::npos) << error_of(bad);
  bad = j;
  bad["fused_step"] = 3;
  EXPECT_NE(error_of(bad).find("fused_step"), std::string::npos) << error_of(bad);
  bad = j;
  bad["fused_step"] = nullptr;  // as absent
  EXPECT_FALSE(perf::profile_from_json(bad).fused_step.has_value());
  // Merged into a profile without them, the rates are kept; into one with them, not replaced.
  perf::Profile into = h200();
  perf::merge_profile(into, p);
  ASSERT_TRUE(into.fused_step.has_value());
  perf::Profile other = h200();
  other.fused_step = FusedStepRates{3e-6, 1e10, 1, 40 << 20};
  perf::merge_profile(into, other);
  EXPECT_DOUBLE_EQ(into.fused_step->grid_sync_seconds, 1.5e-6);
}

// calibrate's micro-kernels (measure_fused_step_rates, backends/cuda/fused_mlp.cu): without a
// device, one Error naming it; on a GPU (gpu-check's cuda-tests, and calibrate-gpu, which saves
// them), every rate measured and positive.
TEST(FusedCost, CalibrationWithoutAGpuSaysSoInOneError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: CudaFusedMlpRates measures it";
  try {
    (void)measure_fused_step_rates(0, true);
    FAIL() << "no error without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
  }
}

TEST(CudaFusedMlpRates, CalibrationMeasuresEveryRate) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: the micro-kernels need a GPU";
  const FusedStepRates r = measure_fused_step_rates(0, true);
  EXPECT_GT(r.grid_sync_seconds, 0.0);
  EXPECT_GT(r.block_flops_per_second, 0.0);
  EXPECT_GE(r.blocks_per_sm, 1);
  EXPECT_GT(r.l2_bytes, 0);
  RecordProperty("grid_sync_us", std::to_string(r.grid_sync_seconds * 1e6));
  RecordProperty("block_gflops", std::to_string(r.block_flops_per_second / 1e9));
  RecordProperty("blocks_per_sm", r.blocks_per_sm);
}

}  // namespace
