// On-demand calibration (issue 9): which CPU profile a prediction uses, when crossover calibrates
// this CPU itself, what it saves, and what compare and explain say about it. Every test points
// CROSSOVER_PROFILE_DIR at a temporary folder: nothing is written into the real HOME. Nothing here
// asserts on a timing.
#include "perf/calibrate.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "perf/cost_model.h"
#include "perf/profile.h"
#include "perf/threads.h"
#include "test_util.h"

namespace crossover {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_util::run_crossover;

// A small model, quick to calibrate and to train.
const perf::ModelDesc kTiny = perf::mlp(36, {16}, 3, 0.25);
const char* kTinySpec = "dense:16:relu,dropout:0.2,dense:10:softmax";

// A valid CPU profile of another CPU (or, with this_cpu, of this one), its rates made up.
perf::Profile made_up_profile(bool this_cpu) {
  perf::Profile p;
  if (this_cpu) {
    perf::set_this_cpu(p, 0);
  } else {
    p.name = "Test CPU 3x faster";
    p.threads = 64;
    p.cores = 64;
    p.isa = {"avx2", "fma", "avx512f"};
    p.cpuid_family = 6;
    p.cpuid_model = 999;
    p.cpuid_stepping = 0;
  }
  p.memory_bytes_per_second = 1e12;
  p.memory_levels = {{"L2", 1 << 20, 4e12}, {"DRAM", 0, 1e12}};
  p.call_seconds = 1e-9;
  p.gemm.push_back({"", 64, 64, 64, 1e13});
  return p;
}

class OnDemand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_util::temp_folder("on-demand");
    env_.emplace("CROSSOVER_PROFILE_DIR", profiles().c_str());
    ::unsetenv("CROSSOVER_PROFILES");
  }
  void TearDown() override {
    env_.reset();
    fs::remove_all(dir_);
  }
  std::optional<testing_util::ScopedEnv> env_;
  std::string profiles() const { return dir_ + "/profiles"; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // This CPU's profile at `threads` (0: all cores) in the test's folder.
  std::string saved_path(int threads = 0) const {
    perf::Profile me;
    perf::set_this_cpu(me, threads);
    return perf::default_profile_path(me);
  }
  // Whether any CPU profile was saved (at any thread count).
  bool any_cpu_profile_saved() const {
    for (const std::string& f : files_in_profiles())
      if (fs::path(f).filename().string().rfind("cpu-", 0) == 0) return true;
    return false;
  }
  std::vector<std::string> files_in_profiles() const {
    std::vector<std::string> v;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(profiles(), ec))
      if (e.path().extension() == ".json") v.push_back(e.path().string());
    return v;
  }
  static perf::CpuProfileRequest request(const perf::ModelDesc& m, int64_t batch) {
    perf::CpuProfileRequest r;
    r.workloads = {{m, {batch}}};
    r.what = "a test model";
    return r;
  }
  std::string dir_;
};

json read_json(const std::string& p) {
  std::ifstream f(p);
  return json::parse(f);
}

// ---- identity ---------------------------------------------------------------------------------
TEST(CpuIdentity, ThisCpusProfileMatchesIt) {
  perf::Profile p = made_up_profile(true);
  EXPECT_EQ(perf::cpu_mismatch(p, 0), "");
}

TEST(CpuIdentity, AnotherModelNameCpuidIsaCacheThreadCountOrSchemaDoesNot) {
  const perf::Profile me = made_up_profile(true);
  auto differs = [&](auto change, const std::string& needle) {
    perf::Profile p = me;
    change(p);
    const std::string why = perf::cpu_mismatch(p, 0);
    EXPECT_NE(why.find(needle), std::string::npos) << why;
  };
  differs([](perf::Profile& p) { p.name = "Another CPU"; }, "measured on Another CPU");
  differs([](perf::Profile& p) { p.cpuid_model += 1; }, "model");
  differs([](perf::Profile& p) { p.isa.push_back("amx_tile"); }, "AMX");
  differs([](perf::Profile& p) { p.l2_bytes += 1024; }, "caches");
  differs([](perf::Profile& p) { p.threads += 1; }, "threads");
  differs([](perf::Profile& p) { p.schema = perf::kProfileSchema - 1; }, "schema");
  differs([](perf::Profile& p) { p.shipped = true; }, "shipped");
}

TEST(CpuIdentity, SurvivesTheJsonRoundTrip) {
  perf::Profile p = made_up_profile(true);
  p.coverage = "shapes";
  const json j = perf::profile_to_json(p);
  EXPECT_EQ(j["schema"], perf::kProfileSchema);
  EXPECT_TRUE(j["device"].contains("cpuid"));
  EXPECT_TRUE(j["device"].contains("cache_bytes"));
  const perf::Profile q = perf::profile_from_json(j);
  EXPECT_EQ(perf::cpu_mismatch(q, 0), "");
  EXPECT_EQ(q.coverage, "shapes");
  json old = j;
  old.erase("schema");  // a profile from before schemas: schema 0, never this machine's
  EXPECT_EQ(perf::profile_from_json(old).schema, 0);
}

// ---- shapes -----------------------------------------------------------------------------------
TEST(ShapeNeeds, AreTheStepsGemmShapesAndKernelSizes) {
  const perf::ShapeNeeds n =
      perf::cpu_shape_needs({{perf::mlp(784, {128}, 10, 0.2), perf::epoch_step_rows(60000, 32)}});
  EXPECT_EQ(n.gemms, (std::set<perf::GemmNeed>{{"forward", 32, 784, 128},
                                               {"backward_weights", 32, 784, 128},
                                               {"forward", 32, 128, 10},
                                               {"backward_weights", 32, 128, 10},
                                               {"backward_input", 32, 128, 10}}));
  EXPECT_TRUE(n.kernels.count({"dropout_forward", 32 * 128}));
  EXPECT_TRUE(n.kernels.count({"gather_rows", 32 * 784}));
  EXPECT_EQ(n.kernels.at({"gather_rows", 32 * 784}), 32);  // rows of 784
  EXPECT_TRUE(n.kernels.count({"adam", 784 * 128}));       // one per parameter tensor
  EXPECT_TRUE(n.kernels.count({"adam", 10}));
  // The CPU updates each layer with its gradient, never every parameter in one stream.
  EXPECT_FALSE(n.kernels.count({"adam", 101770}));
  EXPECT_EQ(perf::epoch_step_rows(10000, 32), (std::vector<int64_t>{32, 16}));
}

TEST(ShapeNeeds, MissingAreThoseAShapesProfileHasNoMeasurementOf) {
  const perf::ShapeNeeds n = perf::cpu_shape_needs({{kTiny, {8}}});
  perf::Profile p = made_up_profile(true);
  p.coverage = "shapes";
  EXPECT_TRUE(n.memory_levels);  // the roofline's bandwidths, which p has
  EXPECT_EQ(perf::missing_shapes(p, n).size(), n.size() - 1);
  p.memory_levels.clear();
  EXPECT_EQ(perf::missing_shapes(p, n).size(), n.size());
  p.gemm.push_back({"forward", 8, 16, 36, 1e9});  // forward 36 -> 16 at 8 rows
  p.kernels["relu_dropout_backward"] = {{8 * 16, 1e-6}};
  const perf::ShapeNeeds m = perf::missing_shapes(p, n);
  EXPECT_EQ(m.size(), n.size() - 2);
  EXPECT_FALSE(m.gemms.count({"forward", 8, 36, 16}));
  p.coverage = "grid";  // a full grid interpolates every shape, but not the levels
  EXPECT_TRUE(perf::missing_shapes(p, n).memory_levels);
  p.memory_levels = {{"DRAM", 0, 1e12}};
  EXPECT_TRUE(perf::missing_shapes(p, n).empty());
}

TEST(MergeProfile, AddsWhatIsMissingAndKeepsWhatIsThere) {
  perf::Profile a = made_up_profile(true), b = made_up_profile(true);
  a.kernels["adam"] = {{10, 1e-6}, {1000, 1e-5}};
  b.kernels["adam"] = {{10, 9.0}, {100, 2e-6}};
  b.gemm = {{"", 64, 64, 64, 5.0}, {"forward", 8, 16, 36, 1e9}};
  perf::merge_profile(a, b);
  ASSERT_EQ(a.kernels["adam"].size(), 3u);
  EXPECT_EQ(a.kernels["adam"][1].elements, 100);  // kept ascending
  EXPECT_EQ(a.kernels["adam"][0].seconds, 1e-6);  // what both had keeps a's number
  ASSERT_EQ(a.gemm.size(), 2u);
  EXPECT_EQ(a.gemm[0].flops_per_second, 1e13);
}

// Two writers merging into one file at once, many times: the lock and the re-read under it keep
// every writer's shapes (without them, one writer's read-modify-write loses the other's).
TEST_F(OnDemand, ConcurrentMergesKeepBothSetsOfShapes) {
  const std::string file = saved_path();
  const int per_thread = 40;
  auto writer = [&](int t) {
    for (int i = 0; i < per_thread; ++i) {
      perf::Profile p = made_up_profile(true);
      p.coverage = "shapes";
      p.gemm = {{"forward", 1 + t, 1 + i, 7, 1e9}};
      perf::merge_and_save_profile(p, file);
    }
  };
  std::thread a(writer, 0), b(writer, 1);
  a.join();
  b.join();
  const perf::Profile saved = perf::load_profile(file);  // valid
  std::set<std::pair<int64_t, int64_t>> shapes;
  for (const perf::GemmSample& g : saved.gemm) shapes.insert({g.m, g.n});
  EXPECT_EQ(shapes.size(), 2u * per_thread);
  EXPECT_TRUE(fs::exists(file + ".lock"));
}

// The same with two processes calibrating for real, each for its own model.
TEST_F(OnDemand, TwoProcessesCalibratingAtOnceLeaveAValidFileWithBothShapes) {
  const std::string a = path("a.json"), b = path("b.json");
  // One thread count for both (each would otherwise measure its own, and save its own profile).
  const std::string common =
      " --data mnist-10k --steps 2 --max-seconds 1 --batch-size 8 --threads 1 --quiet ";
  const std::string cmd = "'" + crossover::testing_util::binary_path() +
                          "' explain --model dense:24:relu," + "dense:10:softmax" + common +
                          "--json '" + a + "' & '" + crossover::testing_util::binary_path() +
                          "' explain --model dense:40:relu,dense:10:softmax" + common + "--json '" +
                          b + "'; wait";
  ASSERT_EQ(std::system(("bash -c \"" + cmd + "\" >/dev/null 2>&1").c_str()), 0);
  const perf::Profile saved = perf::load_profile(saved_path(1));
  std::set<int64_t> widths;
  for (const perf::GemmSample& g : saved.gemm)
    if (g.op == "forward" && g.k == 784) widths.insert(g.n);
  EXPECT_EQ(widths, (std::set<int64_t>{24, 40}));
  EXPECT_EQ(files_in_profiles().size(), 1u);
}

// ---- choosing the profile ---------------------------------------------------------------------
TEST_F(OnDemand, FirstRequestCalibratesAndSavesTheSecondReusesIt) {
  std::vector<std::string> lines;
  perf::CpuProfileRequest r = request(kTiny, 8);
  r.say = [&](const std::string& l) { lines.push_back(l); };
  const perf::CpuProfileChoice first = perf::cpu_profile_for(r);
  ASSERT_TRUE(first.profile);
  EXPECT_TRUE(first.calibrated_now);
  EXPECT_TRUE(first.this_machine);
  EXPECT_EQ(first.profile->source, saved_path());
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.front().find("calibrating this CPU for a test model"), std::string::npos);
  EXPECT_NE(lines.front().find("no profile of this machine"), std::string::npos) << lines.front();
  const perf::Profile saved = perf::load_profile(saved_path());
  EXPECT_EQ(saved.coverage, "shapes");
  EXPECT_EQ(perf::cpu_mismatch(saved, 0), "");
  EXPECT_TRUE(perf::missing_shapes(saved, perf::cpu_shape_needs(r.workloads)).empty());

  lines.clear();
  const perf::CpuProfileChoice second = perf::cpu_profile_for(r);
  EXPECT_FALSE(second.calibrated_now);
  EXPECT_EQ(second.profile->source, saved_path());
  EXPECT_TRUE(lines.empty());
}

TEST_F(OnDemand, ALaterModelAddsItsShapesToTheSavedProfile) {
  ASSERT_TRUE(perf::cpu_profile_for(request(kTiny, 8)).calibrated_now);
  const perf::ModelDesc other = perf::mlp(36, {20}, 3, 0.0);
  const perf::CpuProfileChoice c = perf::cpu_profile_for(request(other, 4));
  EXPECT_TRUE(c.calibrated_now);
  const perf::Profile saved = perf::load_profile(saved_path());
  EXPECT_TRUE(
      perf::missing_shapes(saved, perf::cpu_shape_needs({{kTiny, {8}}, {other, {4}}})).empty());
  EXPECT_FALSE(perf::cpu_profile_for(request(kTiny, 8)).calibrated_now);
}

TEST_F(OnDemand, AProfileOfAnotherCpuIsNotUsedSilently) {
  fs::create_directories(profiles());
  perf::save_profile(made_up_profile(false), profiles() + "/cpu-test-3x.json");
  // Calibrating: this machine's own profile, saying why the other one would not do.
  std::vector<std::string> lines;
  perf::CpuProfileRequest r = request(kTiny, 8);
  r.say = [&](const std::string& l) { lines.push_back(l); };
  const perf::CpuProfileChoice c = perf::cpu_profile_for(r);
  EXPECT_TRUE(c.calibrated_now);
  EXPECT_EQ(c.profile->source, saved_path());
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines.front().find("measured on Test CPU 3x faster"), std::string::npos)
      << lines.front();
  // Not calibrating: the closest profile, labelled as another machine's.
  fs::remove(saved_path());
  r.calibrate = false;
  const perf::CpuProfileChoice n = perf::cpu_profile_for(r);
  ASSERT_TRUE(n.profile);
  EXPECT_FALSE(n.calibrated_now);
  EXPECT_FALSE(n.this_machine);
  EXPECT_NE(n.note.find("not this machine"), std::string::npos) << n.note;
  EXPECT_FALSE(fs::exists(saved_path()));
}

TEST_F(OnDemand, AShippedProfileIsNeverThisMachines) {
  for (const perf::Profile& p : perf::find_profiles())
    if (p.source.rfind(crossover::testing_util::source_dir() + "/profiles", 0) == 0) {
      EXPECT_TRUE(p.shipped) << p.source;
      EXPECT_NE(perf::cpu_mismatch(p, 0), "") << p.source;
    }
}

TEST_F(OnDemand, AnOlderSchemaIsRecalibratedAndReplaced) {
  fs::create_directories(profiles());
  perf::Profile old = made_up_profile(true);
  old.schema = perf::kProfileSchema - 1;
  perf::save_profile(old, saved_path());
  const perf::CpuProfileChoice c = perf::cpu_profile_for(request(kTiny, 8));
  EXPECT_TRUE(c.calibrated_now);
  const perf::Profile saved = perf::load_profile(saved_path());
  EXPECT_EQ(saved.schema, perf::kProfileSchema);
  for (const perf::GemmSample& g : saved.gemm) EXPECT_NE(g.op, "");  // the old entry is gone
}

TEST_F(OnDemand, AGivenProfileOverridesAndNothingIsCalibrated) {
  const std::string given = path("given.json");
  perf::save_profile(made_up_profile(false), given);
  perf::CpuProfileRequest r = request(kTiny, 8);
  r.explicit_path = given;
  const perf::CpuProfileChoice c = perf::cpu_profile_for(r);
  EXPECT_EQ(c.profile->source, given);
  EXPECT_FALSE(c.calibrated_now);
  EXPECT_FALSE(fs::exists(saved_path()));
}

// ---- through the commands ---------------------------------------------------------------------
TEST_F(OnDemand, CompareCalibratesOnceAndSaysWhichProfileEachRowUsed) {
  // At one thread count (the next test has the count measured and kept).
  const std::string args = std::string("compare --model ") + kTinySpec +
                           " --data mnist-10k --epochs 1 --batch-size 64 --threads 1 --json '";
  const auto first = run_crossover(args + path("1.json") + "'");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find("calibrating this CPU for " + std::string(kTinySpec) + " at batch 64"),
            std::string::npos)
      << first.err;
  const json j1 = read_json(path("1.json"));
  EXPECT_EQ(j1["runs"][0]["profile"]["source"], saved_path(1));
  EXPECT_EQ(j1["runs"][0]["profile"]["calibrated_now"], true);
  EXPECT_TRUE(j1["runs"][0]["predicted_seconds_per_epoch"].is_number());

  const auto second = run_crossover(args + path("2.json") + "' --quiet");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.err, "");
  const json j2 = read_json(path("2.json"));
  EXPECT_EQ(j2["runs"][0]["profile"]["source"], saved_path(1));
  EXPECT_EQ(j2["runs"][0]["profile"]["calibrated_now"], false);
}

TEST_F(OnDemand, ResumingWithThreadsZeroMeasuresTheCheckpointsModel) {
  const std::string ckpt = path("run.ckpt");
  const auto first = run_crossover(std::string("train --model ") + kTinySpec +
                                   " --data mnist-10k --epochs 1 --batch-size 64 --threads 1 "
                                   "--quiet --checkpoint '" +
                                   ckpt + "'");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto resumed = run_crossover("train --resume '" + ckpt +
                                     "' --data mnist-10k --epochs 2 --threads 0 --quiet --json '" +
                                     path("r.json") + "'");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const json j = read_json(path("r.json"));
  EXPECT_EQ(j["threads_choice"]["chosen_by"], "measurement");
  EXPECT_EQ(j["threads"], j["threads_choice"]["threads"]);
  EXPECT_EQ(j["history"].size(), 1u);  // epoch 2 only
}

TEST_F(OnDemand, CompareKeepsTheThreadCountItMeasuredAndItsProfile) {
  const std::string args = std::string("compare --model ") + kTinySpec +
                           " --data mnist-10k --epochs 1 --batch-size 64 --json '";
  const auto first = run_crossover(args + path("1.json") + "'");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const json j1 = read_json(path("1.json"));
  EXPECT_EQ(j1["runs"][0]["threads"]["chosen_by"], "measurement");
  const int threads = j1["runs"][0]["threads"]["threads"].get<int>();
  EXPECT_EQ(j1["runs"][0]["profile"]["source"], saved_path(threads));
  EXPECT_TRUE(fs::exists(perf::threads_choice_path()));

  const auto second = run_crossover(args + path("2.json") + "' --quiet");
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const json j2 = read_json(path("2.json"));
  const json& t2 = j2["runs"][0]["threads"];
  if (t2["chosen_by"] == "measurement")  // the kept count lost to one thread on a recheck
    GTEST_SKIP() << "the machine became busier between the two runs: " << t2.dump();
  EXPECT_EQ(t2["chosen_by"], "saved measurement");
  EXPECT_EQ(t2["threads"], threads);
  EXPECT_EQ(second.err, "");  // nothing calibrated: the profile at that count is there
  EXPECT_EQ(j2["runs"][0]["profile"]["source"], saved_path(threads));
  EXPECT_EQ(j2["runs"][0]["profile"]["calibrated_now"], false);
}

TEST_F(OnDemand, AThreadChoiceIsSavedAndReadBackByItsKey) {
  const perf::ModelDesc small = perf::mlp(784, {128}, 10, 0.2);
  const std::string key = perf::threads_choice_key(small, 32);
  EXPECT_EQ(key, perf::threads_choice_key(small, 32));
  EXPECT_NE(key, perf::threads_choice_key(small, 64));
  EXPECT_NE(key, perf::threads_choice_key(perf::mlp(784, {1000, 1000}, 10, 0.2), 32));
  // A bf16 step is kept apart; fp32's key is the one saved before precisions were keyed.
  EXPECT_EQ(key, perf::threads_choice_key(small, 32, Precision::fp32));
  EXPECT_NE(key, perf::threads_choice_key(small, 32, Precision::bf16));
  EXPECT_FALSE(perf::saved_threads_choice(key));
  perf::ThreadsChoice c;
  c.threads = 2;
  c.trials = {{1, 3e-4}, {2, 2e-4}};
  perf::save_threads_choice(key, "SMALL at batch 32", c);
  const std::optional<perf::ThreadsChoice> back = perf::saved_threads_choice(key);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->threads, 2);
  ASSERT_EQ(back->trials.size(), 2u);
  EXPECT_EQ(back->trials[1].threads, 2);
  EXPECT_DOUBLE_EQ(back->trials[1].seconds_per_step, 2e-4);
  EXPECT_FALSE(perf::saved_threads_choice(perf::threads_choice_key(small, 64)));
  // Not among the profiles (every .json of the profile folder is read as one).
  EXPECT_TRUE(files_in_profiles().empty());
  // A damaged file is measured again, not an error.
  std::ofstream(perf::threads_choice_path()) << "{ not json";
  EXPECT_FALSE(perf::saved_threads_choice(key));
}

// Python's first fit measures a bf16 model's thread count on bf16 copies of it, kept under the
// bf16 key, and the copies it measures train as the model does.
TEST_F(OnDemand, AModelsThreadCountIsMeasuredAndKeptInItsPrecision) {
  if (const std::string why = cpu_bf16_problem(cpu_bf16_support()); !why.empty())
    GTEST_SKIP() << "bf16 on the CPU " << why;
  Sequential model(
      testing_util::with_dtype_policy({Input({12}), Dense(16, "relu"), Dense(4, "softmax")}));
  model.compile(Adam(), "sparse_categorical_crossentropy", {}, {.precision = "bf16"});
  ASSERT_EQ(model.precision(), "bf16");
  Tensor x({64, 12}), y({64});
  for (int64_t i = 0; i < 64; ++i) y.data()[i] = static_cast<float>(i % 4);
  const perf::ThreadsForRun r = perf::cpu_threads_for_model(model, x, y, 32, 0, {}, "pin");
  EXPECT_EQ(r.chosen_by, "measurement");
  const perf::ModelDesc desc = perf::describe(model);
  EXPECT_TRUE(perf::saved_threads_choice(perf::threads_choice_key(desc, 32, Precision::bf16)));
  EXPECT_FALSE(perf::saved_threads_choice(perf::threads_choice_key(desc, 32)));
}

// compare and sweep --precision bf16: every run trains in bf16 (its thread count kept under the
// bf16 key) and is priced at the bf16 GEMM rates, which this CPU's profile is calibrated for.
TEST_F(OnDemand, CompareAndSweepTrainAndPredictInTheGivenPrecision) {
  if (const std::string why = cpu_bf16_problem(cpu_bf16_support()); !why.empty())
    GTEST_SKIP() << "bf16 on the CPU " << why;
  const auto c = run_crossover(std::string("compare --model ") + kTinySpec +
                               " --data mnist-10k --epochs 1 --batch-size 64 --quiet "
                               "--precision bf16 --json '" +
                               path("c.json") + "'");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const json jc = read_json(path("c.json"));
  EXPECT_EQ(jc["precision"], "bf16");
  EXPECT_EQ(jc["runs"][0]["threads"]["chosen_by"], "measurement");
  const perf::ModelDesc desc = perf::describe(
      Sequential({Flatten({28, 28}), Dense(16, "relu"), Dropout(0.2), Dense(10, "softmax")}));
  EXPECT_TRUE(perf::saved_threads_choice(perf::threads_choice_key(desc, 64, Precision::bf16)));
  EXPECT_FALSE(perf::saved_threads_choice(perf::threads_choice_key(desc, 64)));
  ASSERT_TRUE(jc["runs"][0]["predicted_seconds_per_epoch"].is_number()) << jc.dump();
  // Without a GPU, its rows are predicted from the shipped H200 profile, which has no bf16 rates.
  if (cuda_device_count() == 0) {
    EXPECT_NE(jc["notes"].dump().find("has no bf16 GEMM rates: its rows are priced at fp32 rates"),
              std::string::npos)
        << jc["notes"].dump();
  }
  const auto s = run_crossover(
      "sweep --data mnist-10k --widths 16 --batch-sizes 64 --steps 3 --max-seconds 1 --threads 1 "
      "--quiet --precision bf16 --json '" +
      path("s.json") + "'");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(read_json(path("s.json"))["precision"], "bf16");
}

TEST_F(OnDemand, CompareWithNoCalibrateLabelsAnotherCpusProfile) {
  fs::create_directories(profiles());
  perf::save_profile(made_up_profile(false), profiles() + "/cpu-test-3x.json");
  const auto r = run_crossover(std::string("compare --model ") + kTinySpec +
                               " --data mnist-10k --epochs 1 --batch-size 64 --no-calibrate "
                               "--json '" +
                               path("c.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(not this machine)"), std::string::npos) << r.out;
  const json j = read_json(path("c.json"));
  EXPECT_EQ(j["runs"][0]["profile"]["calibrated_now"], false);
  EXPECT_EQ(j["runs"][0]["profile"]["this_machine"], false);
  EXPECT_EQ(files_in_profiles().size(), 1u);  // the made-up one alone: nothing calibrated
}

TEST_F(OnDemand, CompareWithAGivenProfileUsesIt) {
  const std::string given = path("given.json");
  perf::save_profile(made_up_profile(false), given);
  const auto r = run_crossover(std::string("compare --model ") + kTinySpec +
                               " --data mnist-10k --epochs 1 --batch-size 64 --quiet --profile '" +
                               given + "' --json '" + path("c.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = read_json(path("c.json"));
  EXPECT_EQ(j["runs"][0]["profile"]["source"], given);
  EXPECT_EQ(j["runs"][0]["profile"]["calibrated_now"], false);
  EXPECT_FALSE(any_cpu_profile_saved());
}

TEST_F(OnDemand, CompareWithOneEpochSaysItMeasuredThatEpoch) {
  const auto r =
      run_crossover(std::string("compare --model ") + kTinySpec +
                    " --data mnist-10k --epochs 1 --batch-size 64 --json '" + path("c.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string notes = read_json(path("c.json"))["notes"].dump();
  EXPECT_EQ(notes.find("mean of epochs"), std::string::npos) << notes;
  EXPECT_NE(notes.find("the only epoch's time (--epochs 1)"), std::string::npos) << notes;
  EXPECT_NE(r.out.find("the only epoch's time"), std::string::npos) << r.out;
}

TEST_F(OnDemand, ExplainSaysWhichProfileItUsedAndQuietSilencesTheCalibration) {
  const auto r = run_crossover(std::string("explain --model ") + kTinySpec +
                               " --data mnist-10k --batch-size 16 --steps 3 --quiet --json '" +
                               path("e.json") + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const json j = read_json(path("e.json"));
  EXPECT_EQ(j["profile"]["source"], saved_path(j["threads"]["threads"].get<int>()));
  EXPECT_EQ(j["profile"]["calibrated_now"], true);
  EXPECT_TRUE(j["step_seconds"]["predicted"].is_number());
}

}  // namespace
}  // namespace crossover
