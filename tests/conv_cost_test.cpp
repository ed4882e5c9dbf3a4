// Convnets costed like the MLP (issue 12, item 5): the op list's convolution and pooling calls,
// their measurements in the profile (calibrated at exactly the shapes a model's step makes), the
// prediction from them, and the commands (sweep over Conv2D filters, the GPU refusing a convnet).
// Nothing here asserts on a timing: profiles are made up, or only their shapes are checked.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "backends/cuda_info.h"
#include "core/error.h"
#include "nn/layers.h"
#include "nn/sequential.h"
#include "perf/calibrate.h"
#include "perf/choose.h"
#include "perf/cost_model.h"
#include "perf/profile.h"
#include "test_util.h"

namespace crossover {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using perf::DeviceKind;
using perf::Mode;
using perf::Op;
using perf::Phase;

// Keras's "Simple MNIST convnet".
perf::ModelDesc convnet() {
  return perf::describe(
      Sequential({Input({28, 28, 1}), Conv2D(32, 3, "relu"), MaxPooling2D(2), Conv2D(64, 3, "relu"),
                  MaxPooling2D(2), Flatten(), Dropout(0.5), Dense(10, "softmax")}));
}

// A convnet small enough to calibrate in a moment.
perf::ModelDesc tiny_convnet() {
  return perf::describe(
      Sequential({Input({8, 8, 1}), Conv2D(4, 3, "relu"), MaxPooling2D(2), Conv2D(6, 2),
                  AveragePooling2D(2), Flatten(), Dense(3, "softmax")}));
}

// The profile's own entry for each convolution and pooling call of `needs`, each a different
// time: 1 ms, 2 ms, ... times `scale`.
void add_entries(perf::Profile& p, const perf::ShapeNeeds& needs, double scale) {
  double t = 1e-3;
  for (const perf::ConvNeed& c : needs.convs) {
    p.conv2d.push_back({c.op, c.shape, c.batch, c.bias, c.relu, t * scale});
    t += 1e-3;
  }
  for (const perf::PoolNeed& c : needs.pools) {
    p.pool2d.push_back({c.op, c.shape, c.batch, t * scale});
    t += 1e-3;
  }
}

bool is_conv_or_pool(const Op& o) {
  return o.call.rfind("conv2d_", 0) == 0 || o.call.rfind("pool2d_", 0) == 0;
}

const Op& find_op(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& o : ops)
    if (o.name == name) return o;
  throw std::runtime_error("no op named " + name);
}

// ---- the op list -------------------------------------------------------------------------------
TEST(ConvCost, TheOpListHasEachConvolutionAndPoolingCallWithItsShapeAndFlops) {
  const std::vector<Op> ops = perf::step_ops(convnet(), 128, DeviceKind::cpu, Mode::resident);
  const Op& first = find_op(ops, "conv2d conv forward 28x28x1->26x26x32");
  EXPECT_EQ(first.call, "conv2d_forward");
  EXPECT_EQ(first.phase, Phase::gemm);
  EXPECT_EQ(first.batch, 128);
  EXPECT_EQ(first.conv.kernel_h, 3);
  EXPECT_EQ(first.conv.out_c, 32);
  EXPECT_TRUE(first.bias);
  EXPECT_EQ(first.act, ActivationKind::relu);
  // 2 x 128 samples x 26 x 26 outputs x 32 filters x 3 x 3 x 1 taps.
  EXPECT_EQ(first.flops, 49840128);
  const Op& weights = find_op(ops, "conv2d_1 conv backward weights 13x13x32->11x11x64");
  // 2 x 128 x 11 x 11 x 64 x 3 x 3 x 32.
  EXPECT_EQ(weights.flops, 570949632);
  // The weight gradient reads x and dy, writes the kernel and the bias.
  EXPECT_EQ(weights.bytes_read, 4 * (128 * 13 * 13 * 32 + 128 * 11 * 11 * 64));
  EXPECT_EQ(weights.bytes_written, 4 * (3 * 3 * 32 * 64 + 64));
  const Op& pool = find_op(ops, "max_pooling2d max pool forward 26x26x32->13x13");
  EXPECT_EQ(pool.phase, Phase::elementwise);
  EXPECT_EQ(pool.elements, 128 * 13 * 13 * 32);
  EXPECT_EQ(pool.pool.window_h, 2);
  int convs = 0, pools = 0;
  for (const Op& o : ops) {
    convs += o.call.rfind("conv2d_", 0) == 0;
    pools += o.call.rfind("pool2d_", 0) == 0;
  }
  EXPECT_EQ(convs, 5);  // two forwards, two weight gradients, one input gradient
  EXPECT_EQ(pools, 4);
}

// ---- what a prediction needs, and what calibrate measures -------------------------------------
TEST(ConvCost, ShapeNeedsAreEveryConvolutionAndPoolingCallAtEachStepSize) {
  const perf::ShapeNeeds n = perf::cpu_shape_needs({{convnet(), {128, 16}}});
  EXPECT_EQ(n.convs.size(), 10u);  // 5 calls x 2 step sizes
  EXPECT_EQ(n.pools.size(), 8u);
  ConvShape second;
  second.in_h = second.in_w = 13, second.in_c = 32;
  second.out_h = second.out_w = 11, second.out_c = 64;
  second.kernel_h = second.kernel_w = 3;
  EXPECT_TRUE(n.convs.count({"forward", second, 16, true, true}));
  EXPECT_TRUE(n.convs.count({"backward_input", second, 128, false, false}));
  EXPECT_TRUE(n.convs.count({"backward_weights", second, 128, true, false}));
  // The Dense layer's GEMMs are still needed as GEMMs.
  EXPECT_TRUE(n.gemms.count({"forward", 128, 1600, 10}));
}

TEST(ConvCost, EvenAGridProfileLacksTheConvolutionsItHasNotMeasured) {
  const perf::ShapeNeeds n = perf::cpu_shape_needs({{convnet(), {128}}});
  perf::Profile p = testing_util::made_up_cpu_profile();
  p.coverage = "grid";  // interpolates GEMMs and kernels, but has no convolutions
  const perf::ShapeNeeds m = perf::missing_shapes(p, n);
  EXPECT_EQ(m.convs, n.convs);
  EXPECT_EQ(m.pools, n.pools);
  EXPECT_TRUE(m.gemms.empty());
  EXPECT_TRUE(m.kernels.empty());
  add_entries(p, n, 1.0);
  EXPECT_TRUE(perf::missing_shapes(p, n).empty());
}

TEST(ConvCost, CalibratingATinyConvnetStoresExactlyItsCalls) {
  const perf::ShapeNeeds needs = perf::cpu_shape_needs({{tiny_convnet(), {4}}});
  perf::ShapeNeeds convs_only;
  convs_only.convs = needs.convs;
  convs_only.pools = needs.pools;
  ASSERT_EQ(convs_only.convs.size(), 5u);  // the first layer has no input gradient
  ASSERT_EQ(convs_only.pools.size(), 4u);
  std::size_t left = 99;
  const perf::Profile p = perf::calibrate_cpu_shapes(convs_only, 1, false, 120, &left);
  EXPECT_EQ(left, 0u);
  std::set<perf::ConvNeed> convs;
  for (const perf::ConvSample& c : p.conv2d) {
    convs.insert({c.op, c.shape, c.batch, c.bias, c.relu});
    EXPECT_GT(c.seconds, 0);
  }
  std::set<perf::PoolNeed> pools;
  for (const perf::PoolSample& c : p.pool2d) {
    pools.insert({c.op, c.shape, c.batch});
    EXPECT_GT(c.seconds, 0);
  }
  EXPECT_EQ(convs, needs.convs);
  EXPECT_EQ(pools, needs.pools);
  EXPECT_EQ(p.conv2d.size(), needs.convs.size());  // one entry each
  EXPECT_TRUE(p.gemm.empty());                     // nothing else was asked for
  EXPECT_TRUE(p.kernels.empty());
}

TEST(ConvCost, DilatedConvolutionsAreMeasuredAndStoredWithTheirDilation) {
  const perf::ModelDesc model = perf::describe(
      Sequential({Input({9, 9, 1}), Conv2D(3, 3, "relu", 1, "same", true, 2),
                  Conv2D(2, {2, 3}, "linear", 1, "valid", true, {3, 2}), Flatten(), Dense(2)}));
  const perf::ShapeNeeds needs = perf::cpu_shape_needs({{model, {4}}});
  perf::ShapeNeeds convs_only;
  convs_only.convs = needs.convs;
  ASSERT_EQ(convs_only.convs.size(), 5u);
  std::size_t left = 99;
  perf::Profile p = testing_util::made_up_cpu_profile();
  p.conv2d = perf::calibrate_cpu_shapes(convs_only, 1, false, 120, &left).conv2d;
  EXPECT_EQ(left, 0u);
  ASSERT_EQ(p.conv2d.size(), 5u);
  const json j = perf::profile_to_json(p);
  for (const json& e : j["conv2d"]) {
    const bool first = e["input"] == json({9, 9, 1});
    EXPECT_EQ(e["dilation"], first ? json({2, 2}) : json({3, 2})) << e.dump();
    if (first) {
      EXPECT_EQ(e["padding"], json({2, 2, 2, 2})) << e.dump();
    }
  }
  const perf::Profile back = perf::profile_from_json(j);
  ASSERT_EQ(back.conv2d.size(), p.conv2d.size());
  for (std::size_t i = 0; i < p.conv2d.size(); ++i)
    EXPECT_EQ(back.conv2d[i].shape, p.conv2d[i].shape);
  EXPECT_TRUE(perf::missing_shapes(back, convs_only).convs.empty());
  // The same entry read as undilated no longer follows from its shapes.
  json undilated = j;
  undilated["conv2d"][0].erase("dilation");
  EXPECT_THROW(perf::profile_from_json(undilated), Error);
  json absurd = j;
  absurd["conv2d"][0]["dilation"] = {1, int64_t{1} << 50};
  std::string why = "(no error)";
  try {
    perf::profile_from_json(absurd, "p.json");
  } catch (const Error& e) {
    why = e.what();
  }
  EXPECT_EQ(why,
            "p.json: field 'conv2d[0].dilation' spans an absurdly large window with its kernel");
}

// ---- the prediction ----------------------------------------------------------------------------
TEST(ConvCost, EachCallCostsItsOwnMeasurementAndTheStepTheirSum) {
  const perf::ModelDesc model = convnet();
  const perf::ShapeNeeds needs = perf::cpu_shape_needs({{model, {128}}});
  perf::Profile once = testing_util::made_up_cpu_profile(),
                twice = testing_util::made_up_cpu_profile();
  add_entries(once, needs, 1.0);
  add_entries(twice, needs, 2.0);
  const std::vector<Op> ops = perf::step_ops(model, 128, DeviceKind::cpu, Mode::resident);
  const perf::Prediction a = perf::predict(ops, once, Mode::resident);
  const perf::Prediction b = perf::predict(ops, twice, Mode::resident);
  EXPECT_TRUE(a.estimates.empty());
  double measured = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (!is_conv_or_pool(ops[i])) continue;
    double expected = -1;
    for (const perf::ConvSample& c : once.conv2d)
      if (c.shape == ops[i].conv && c.batch == ops[i].batch && ops[i].call == "conv2d_" + c.op &&
          c.bias == ops[i].bias)
        expected = c.seconds;
    for (const perf::PoolSample& c : once.pool2d)
      if (c.shape == ops[i].pool && c.batch == ops[i].batch && ops[i].call == "pool2d_" + c.op)
        expected = c.seconds;
    EXPECT_DOUBLE_EQ(a.op_seconds[i], expected) << ops[i].name;
    measured += expected;
  }
  // 1 + 2 + ... + 9 ms: every convolution and pooling call counted once, nothing else changed.
  EXPECT_NEAR(measured, 45e-3, 1e-12);
  EXPECT_NEAR(b.step_seconds - a.step_seconds, measured, 1e-12);
}

TEST(ConvCost, AShapeNotMeasuredIsScaledByFlopsFromTheNearestAndSaysSo) {
  const perf::ModelDesc model = convnet();
  perf::Profile p = testing_util::made_up_cpu_profile();
  add_entries(p, perf::cpu_shape_needs({{model, {128}}}), 1.0);
  // At 64 samples nothing is measured: half the FLOPs of the same call at 128.
  const std::vector<Op> at64 = perf::step_ops(model, 64, DeviceKind::cpu, Mode::resident);
  const std::vector<Op> at128 = perf::step_ops(model, 128, DeviceKind::cpu, Mode::resident);
  const perf::Prediction r64 = perf::predict(at64, p, Mode::resident);
  const perf::Prediction r128 = perf::predict(at128, p, Mode::resident);
  const std::string name = "conv2d_1 conv forward 13x13x32->11x11x64";
  std::size_t i64 = 0, i128 = 0;
  while (at64[i64].name != name) ++i64;
  while (at128[i128].name != name) ++i128;
  EXPECT_DOUBLE_EQ(r64.op_seconds[i64], r128.op_seconds[i128] / 2);
  ASSERT_EQ(r64.estimates.size(), 9u);  // every convolution and pooling call
  EXPECT_NE(r64.estimates.front().find("not measured; scaled by"), std::string::npos)
      << r64.estimates.front();
  // A profile without any convolution prices it at the GEMM rate of its im2col product.
  const perf::Prediction flat =
      perf::predict(at64, testing_util::made_up_cpu_profile(), Mode::resident);
  EXPECT_NEAR(flat.op_seconds[i64], double(at64[i64].flops) / 1e11,
              1e-9 * double(at64[i64].flops) / 1e11);
  EXPECT_NE(flat.estimates.front().find("the profile has no convolutions"), std::string::npos)
      << flat.estimates.front();
}

// ---- profiles ----------------------------------------------------------------------------------
TEST(ConvCost, EntriesSurviveTheJsonRoundTripAndOlderProfilesHaveNone) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  add_entries(p, perf::cpu_shape_needs({{tiny_convnet(), {4}}}), 1.0);
  const json j = perf::profile_to_json(p);
  ASSERT_EQ(j["conv2d"].size(), 5u);
  int first_layer = 0;
  for (const json& e : j["conv2d"])
    first_layer += e["op"] == "forward" && e["input"] == json({8, 8, 1}) &&
                   e["output"] == json({6, 6, 4}) && e["kernel"] == json({3, 3}) &&
                   e["padding"] == json({0, 0, 0, 0}) && e["activation"] == "relu";
  EXPECT_EQ(first_layer, 1);
  for (const json& e : j["conv2d"]) EXPECT_FALSE(e.contains("dilation")) << e.dump();
  const perf::Profile back = perf::profile_from_json(j);
  ASSERT_EQ(back.conv2d.size(), p.conv2d.size());
  ASSERT_EQ(back.pool2d.size(), p.pool2d.size());
  for (std::size_t i = 0; i < p.conv2d.size(); ++i) {
    EXPECT_EQ(back.conv2d[i].shape, p.conv2d[i].shape);
    EXPECT_EQ(std::tie(back.conv2d[i].op, back.conv2d[i].batch, back.conv2d[i].bias,
                       back.conv2d[i].relu, back.conv2d[i].seconds),
              std::tie(p.conv2d[i].op, p.conv2d[i].batch, p.conv2d[i].bias, p.conv2d[i].relu,
                       p.conv2d[i].seconds));
  }
  for (std::size_t i = 0; i < p.pool2d.size(); ++i)
    EXPECT_EQ(back.pool2d[i].shape, p.pool2d[i].shape);
  json old = j;
  old.erase("conv2d");
  old.erase("pool2d");
  EXPECT_TRUE(perf::profile_from_json(old).conv2d.empty());
}

TEST(ConvCost, ABadEntryIsRefusedNamingItsField) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  add_entries(p, perf::cpu_shape_needs({{tiny_convnet(), {4}}}), 1.0);
  auto message = [](const json& j) {
    try {
      perf::profile_from_json(j, "p.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  json j = perf::profile_to_json(p);
  j["conv2d"][0]["output"][0] = 7;
  EXPECT_EQ(message(j),
            "p.json: field 'conv2d[0].output' does not follow from its input, kernel, dilation, "
            "strides and padding");
  j = perf::profile_to_json(p);
  j["pool2d"][1]["kind"] = "min";
  EXPECT_EQ(message(j), "p.json: field 'pool2d[1].kind' must be max or average, got \"min\"");
}

TEST(ConvCost, MergingAddsOtherCallsAndKeepsWhatIsThere) {
  const perf::ShapeNeeds n = perf::cpu_shape_needs({{tiny_convnet(), {4}}});
  perf::Profile a = testing_util::made_up_cpu_profile(), b = testing_util::made_up_cpu_profile();
  add_entries(a, n, 1.0);
  add_entries(b, n, 5.0);
  b.conv2d.back().batch = 8;  // another call
  perf::merge_profile(a, b);
  EXPECT_EQ(a.conv2d.size(), n.convs.size() + 1);
  EXPECT_EQ(a.conv2d.front().seconds, 1e-3);  // a's own number
  EXPECT_EQ(a.pool2d.size(), n.pools.size());
}

// ---- devices -----------------------------------------------------------------------------------
TEST(ConvCost, BothDevicesTrainAConvnet) {
  EXPECT_EQ(perf::unsupported_on(convnet(), DeviceKind::gpu), "");
  EXPECT_EQ(perf::unsupported_on(convnet(), DeviceKind::cpu), "");
}

TEST(ConvCost, DeviceAutoChoosesForAConvnetAsForAnMlpAndSaysWhy) {
  Sequential model({Input({8, 8, 1}), Conv2D(4, 3, "relu"), Flatten(), Dense(3, "softmax")});
  std::string why;
  const std::string device = perf::choose_device(model, 32, why);
  if (cuda_device_count() == 0) {
    EXPECT_EQ(device, "cpu");
    EXPECT_EQ(why, "no GPU present: training on the CPU");
  } else {
    EXPECT_FALSE(why.empty());
  }
}

// ---- the commands ------------------------------------------------------------------------------
class ConvCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_util::temp_folder("conv-cost");
    env_.emplace("CROSSOVER_PROFILE_DIR", (dir_ + "/profiles").c_str());
    // A made-up profile to predict with: nothing is calibrated.
    perf::save_profile(testing_util::made_up_cpu_profile(), path("given.json"));
  }
  void TearDown() override {
    env_.reset();
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  static json read_json(const std::string& p) {
    std::ifstream f(p);
    return json::parse(f);
  }
  std::optional<testing_util::ScopedEnv> env_;
  std::string dir_;
};

TEST_F(ConvCommands, AGridProfileOfThisCpuGainsOnlyTheConvnetsCalls) {
  perf::Profile grid = testing_util::made_up_cpu_profile();
  perf::set_this_cpu(grid, 1);
  grid.coverage = "grid";  // as calibrate saves it: it interpolates GEMMs, has no convolutions
  const std::string file = perf::default_profile_path(grid);
  fs::create_directories(fs::path(file).parent_path());
  perf::save_profile(grid, file);
  perf::CpuProfileRequest r;
  r.threads = 1;
  r.workloads = {{tiny_convnet(), {4}}};
  r.what = "a tiny convnet";
  EXPECT_TRUE(perf::cpu_profile_for(r).calibrated_now);
  const perf::Profile saved = perf::load_profile(file);
  EXPECT_EQ(saved.coverage, "grid");
  ASSERT_EQ(saved.gemm.size(), 1u);  // its GEMMs and curves as they were
  EXPECT_EQ(saved.gemm[0].flops_per_second, 1e11);
  EXPECT_TRUE(saved.kernels.empty());
  EXPECT_EQ(saved.conv2d.size(), 5u);
  EXPECT_EQ(saved.pool2d.size(), 4u);
  EXPECT_FALSE(perf::cpu_profile_for(r).calibrated_now);  // nothing left to measure
}

TEST_F(ConvCommands, SweepVariesTheFiltersOfAConvolutionAsItVariesDenseWidths) {
  const auto r = testing_util::run_crossover(
      "sweep --model conv:W:3:relu,maxpool:2,conv:2W:3,flatten,dense:10:softmax --widths 4,8 "
      "--batch-sizes 16 --data mnist-10k --predict-only --threads 1 --quiet --profile '" +
      path("given.json") + "' --json '" + path("s.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = read_json(path("s.json"));
  ASSERT_EQ(j["models"].size(), 2u);
  EXPECT_EQ(j["models"][0]["spec"], "conv:4:3:relu,maxpool:2,conv:8:3,flatten,dense:10:softmax");
  EXPECT_EQ(j["models"][1]["spec"], "conv:8:3:relu,maxpool:2,conv:16:3,flatten,dense:10:softmax");
  // 28x28x1 -> 26x26xW -> 13x13xW -> 11x11x2W -> Dense(10).
  for (int i = 0; i < 2; ++i) {
    const int64_t w = i == 0 ? 4 : 8;
    EXPECT_EQ(j["models"][i]["parameters"],
              (9 * w + w) + (9 * w * 2 * w + 2 * w) + (11 * 11 * 2 * w * 10 + 10));
  }
  int cpu_points = 0, gpu_points = 0;
  for (const json& p : j["points"]) {
    EXPECT_GT(p["seconds_per_epoch"].get<double>(), 0) << p.dump();
    (p["device"] == "cpu" ? cpu_points : gpu_points) += 1;
  }
  EXPECT_EQ(cpu_points, 2);
  // The GPU rows (predicted from a shipped GPU profile, which has no convolutions) say that their
  // convolutions are estimated; the made-up CPU profile has none either.
  if (gpu_points > 0) {
    EXPECT_NE(j["notes"].dump().find("'s step at width 4 batch 16 have no measurement of their own "
                                     "shape in the profile and are estimated (its profile has no "
                                     "measurement of them)"),
              std::string::npos)
        << j["notes"].dump();
  }
  EXPECT_NE(j["notes"].dump().find("cpu's step at width 4 batch 16 have no measurement"),
            std::string::npos)
      << j["notes"].dump();
}

TEST_F(ConvCommands, SweepRefusesAModelWithoutWAndLayersWithAModel) {
  const std::string common = " --batch-sizes 16 --data mnist-10k --predict-only --widths 4";
  const auto named = testing_util::run_crossover("sweep --model convnet" + common);
  EXPECT_EQ(named.exit_code, 2);
  EXPECT_NE(named.err.find("give a layer list with W where it goes"), std::string::npos)
      << named.err;
  EXPECT_EQ(
      testing_util::run_crossover("sweep --model dense:W:relu,dense:10:softmax --layers 2" + common)
          .exit_code,
      2);
}

TEST_F(ConvCommands, ExplainSaysWhichOpsItEstimatedWithoutAMeasurement) {
  // The given profile has no convolutions: they are priced at its GEMM rate, and explain says so.
  const auto r = testing_util::run_crossover(
      "explain --model conv:4:3:relu,maxpool:2,flatten,dense:10:softmax --data mnist-10k "
      "--batch-size 16 --steps 2 --threads 1 --profile '" +
      path("given.json") + "' --json '" + path("e.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 ops of the step have no measurement of their own shape in the profile "
                       "and are estimated"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(read_json(path("e.json"))["step_seconds"]["predicted"].is_number());
}

TEST_F(ConvCommands, CompareTrainsAConvnetAndSaysWhichGpuOpsAreEstimated) {
  const auto r = testing_util::run_crossover(
      "compare --model conv:4:3:relu,maxpool:2,flatten,dense:10:softmax --data mnist-10k "
      "--epochs 1 --batch-size 128 --threads 1 --profile '" +
      path("given.json") + "' --json '" + path("c.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = read_json(path("c.json"));
  ASSERT_GE(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["device"], "cpu");
  EXPECT_GT(j["runs"][0]["predicted_seconds_per_epoch"].get<double>(), 0);
  const bool gpu_rows_predicted = j["runs"].size() > 1 && !j["runs"][1]["measured"].get<bool>();
  if (gpu_rows_predicted) {
    EXPECT_NE(r.out.find("'s step have no measurement of their own shape in the profile and are "
                         "estimated (its profile has no measurement of them)"),
              std::string::npos)
        << r.out;
  }
}

}  // namespace
}  // namespace crossover
