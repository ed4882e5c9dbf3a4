// The cost model over ranks (issue 13, "the question, one level up"): the allreduce is an op of
// the step's own list, a profile holds the ranks' allreduce fit, and predict() prices it as
// latency + bytes / bandwidth. Exact arithmetic; nothing here times anything. The end-to-end
// runs under mpirun (calibrate, explain --ranks) are in mpi_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/collective.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/calibrate.h"
#include "perf/cost_model.h"
#include "perf/profile.h"
#include "test_util.h"

namespace crossover {
namespace {

using perf::DeviceKind;
using perf::Mode;
using perf::Op;
using perf::Phase;

const perf::ModelDesc kSmall = perf::mlp(784, {128}, 10, 0.2);

std::vector<const Op*> ops_in(const std::vector<Op>& ops, Phase phase) {
  std::vector<const Op*> r;
  for (const Op& o : ops)
    if (o.phase == phase) r.push_back(&o);
  return r;
}

// A collective of `ranks` ranks that sums nothing and remembers what the real step asked of it.
class CountingCollective final : public Collective {
 public:
  explicit CountingCollective(int ranks) : ranks_(ranks) {}
  int rank() const override { return 0; }
  int size() const override { return ranks_; }
  void allreduce_sum(float*, int64_t n) override { floats.push_back(n); }
  void allreduce_sum(double*, int64_t) override {}
  void broadcast(void*, std::size_t, int) override {}
  void barrier() override {}
  std::string description() const override { return "counting"; }
  std::vector<int64_t> floats;

 private:
  int ranks_;
};

// The floats the real CPU step of rank 0 of 2 sums across the ranks.
int64_t real_allreduce_floats(const perf::ModelDesc& model, int64_t rows) {
  auto ranks = std::make_shared<CountingCollective>(2);
  Sequential s(model.layers);
  s.compile(Adam(), "sparse_categorical_crossentropy", {},
            {.device = "cpu", .threads = 1, .collective = ranks});
  s.trace_training_step(rows, {model.input_width});
  EXPECT_EQ(ranks->floats.size(), 1u);
  return ranks->floats.empty() ? 0 : ranks->floats.front();
}

TEST(RanksCost, TheStepOfARankHoldsTheAllreduceOfItsGradientBytes) {
  const std::vector<Op> ops = perf::step_ops(kSmall, 16, DeviceKind::cpu, Mode::resident, 2);
  const std::vector<const Op*> allreduce = ops_in(ops, Phase::allreduce);
  ASSERT_EQ(allreduce.size(), 1u);
  const Op& a = *allreduce.front();
  EXPECT_EQ(a.call, "allreduce");
  EXPECT_EQ(a.ranks, 2);
  // As many floats as the real step sums: the whole gradient section of the parameter arena.
  EXPECT_EQ(a.elements, real_allreduce_floats(kSmall, 16));
  EXPECT_GE(a.elements, kSmall.parameters());
  EXPECT_EQ(a.bytes_read, 4 * a.elements);
  EXPECT_EQ(a.name, "allreduce gradients over 2 ranks (0.41 MB)");
}

TEST(RanksCost, TheAllreduceComesAfterTheBackwardPassAndBeforeTheOptimizer) {
  const std::vector<Op> ops = perf::step_ops(kSmall, 16, DeviceKind::cpu, Mode::resident, 2);
  std::size_t allreduce = ops.size(), last_gemm = 0, optimizer = ops.size();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].phase == Phase::allreduce) allreduce = i;
    if (ops[i].phase == Phase::gemm) last_gemm = i;
    if (ops[i].phase == Phase::optimizer) optimizer = i;
  }
  ASSERT_LT(allreduce, ops.size());
  EXPECT_LT(last_gemm, allreduce);
  EXPECT_EQ(optimizer, allreduce + 1);
}

// Over ranks every rank updates every parameter after the sum: no update fused into a weight
// gradient, one optimizer op over all of them.
TEST(RanksCost, OverRanksTheOptimizerUpdatesEveryParameterUnfused) {
  const std::vector<Op> one = perf::step_ops(kSmall, 32, DeviceKind::cpu, Mode::resident, 1);
  const std::vector<Op> two = perf::step_ops(kSmall, 16, DeviceKind::cpu, Mode::resident, 2);
  EXPECT_TRUE(ops_in(one, Phase::allreduce).empty());
  for (const Op& o : two) EXPECT_TRUE(o.update.empty()) << o.name;
  const std::vector<const Op*> opt = ops_in(two, Phase::optimizer);
  ASSERT_EQ(opt.size(), 1u);
  EXPECT_EQ(opt.front()->elements, kSmall.parameters());
}

perf::AllreduceFit fit(int ranks, double latency, double bandwidth, int hosts = 1) {
  perf::AllreduceFit f;
  f.ranks = ranks;
  f.hosts = hosts;
  f.latency_seconds = latency;
  f.bytes_per_second = bandwidth;
  return f;
}

Op allreduce_op(int ranks, int64_t bytes) {
  Op o;
  o.name = "allreduce";
  o.call = "allreduce";
  o.phase = Phase::allreduce;
  o.kernel = "allreduce";
  o.ranks = ranks;
  o.elements = bytes / 4;
  o.bytes_read = o.bytes_written = bytes;
  return o;
}

TEST(RanksCost, PredictAddsLatencyPlusBytesOverBandwidth) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  p.allreduce.push_back(fit(2, 20e-6, 4e9));
  p.allreduce.push_back(fit(2, 90e-6, 1e9, 2));  // two hosts: not the one used
  const perf::Prediction r = perf::predict({allreduce_op(2, 8'000'000)}, p, Mode::resident);
  EXPECT_DOUBLE_EQ(r.phase_seconds[static_cast<std::size_t>(Phase::allreduce)], 20e-6 + 8e6 / 4e9);
  EXPECT_DOUBLE_EQ(r.step_seconds, 20e-6 + 8e6 / 4e9);
  EXPECT_TRUE(r.estimates.empty());
}

// The step of a rank: its compute at its rows, plus the allreduce, nothing overlapped.
TEST(RanksCost, AStepOverRanksIsItsComputePlusTheAllreduce) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  p.allreduce.push_back(fit(2, 20e-6, 4e9));
  const std::vector<Op> ops = perf::step_ops(kSmall, 16, DeviceKind::cpu, Mode::resident, 2);
  const perf::Prediction r = perf::predict(ops, p, Mode::resident);
  const Op& a = *ops_in(ops, Phase::allreduce).front();
  const double allreduce = 20e-6 + static_cast<double>(a.bytes_read) / 4e9;
  EXPECT_DOUBLE_EQ(r.phase_seconds[static_cast<std::size_t>(Phase::allreduce)], allreduce);
  double others = 0;
  for (int i = 0; i < perf::kPhaseCount; ++i)
    if (static_cast<Phase>(i) != Phase::allreduce) others += r.phase_seconds[std::size_t(i)];
  EXPECT_DOUBLE_EQ(r.step_seconds, others + allreduce);
}

// No fit at 4 ranks: the 2-rank fit scaled as a ring allreduce (latency by N - 1, the bytes each
// rank moves by (N - 1) / N), and said.
TEST(RanksCost, AnotherRankCountIsScaledFromTheNearestFitAndSaidSo) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  p.allreduce.push_back(fit(2, 20e-6, 4e9));
  std::string estimate;
  const double t = perf::allreduce_seconds(p, allreduce_op(4, 8'000'000), &estimate);
  EXPECT_DOUBLE_EQ(t, 20e-6 * 3 + 8e6 / 4e9 * (3.0 / 4) / (1.0 / 2));
  EXPECT_NE(estimate.find("not measured at 4 ranks; scaled from the profile's 2 ranks"),
            std::string::npos)
      << estimate;
  const perf::Prediction r = perf::predict({allreduce_op(4, 8'000'000)}, p, Mode::resident);
  EXPECT_EQ(r.estimates.size(), 1u);
}

// A fit with samples is read between them, not off its line: on shared memory a buffer that
// fits the caches moves several times faster than one that does not, and no one line holds both.
perf::AllreduceFit measured_fit() {
  perf::AllreduceFit f = fit(2, 1e-6, 3.5e9);  // the line the small sizes pulled up
  f.samples = {{4096, 2e-6}, {1 << 20, 3e-4}, {4 << 20, 4.5e-3}, {16 << 20, 19e-3}};
  return f;
}

TEST(RanksCost, AMeasuredSizeIsItsOwnTimeAndOthersAreInterpolatedBetweenThem) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  p.allreduce.push_back(measured_fit());
  std::string estimate = "x";
  EXPECT_DOUBLE_EQ(perf::allreduce_seconds(p, allreduce_op(2, 4 << 20), &estimate), 4.5e-3);
  EXPECT_EQ(estimate, "");
  const double between =
      4.5e-3 + (7e6 - double(4 << 20)) / double((16 << 20) - (4 << 20)) * (19e-3 - 4.5e-3);
  EXPECT_DOUBLE_EQ(perf::allreduce_seconds(p, allreduce_op(2, 7'000'000)), between);
  // Past the largest at its rate; below the smallest its time.
  EXPECT_DOUBLE_EQ(perf::allreduce_seconds(p, allreduce_op(2, 32 << 20)), 2 * 19e-3);
  EXPECT_DOUBLE_EQ(perf::allreduce_seconds(p, allreduce_op(2, 1024)), 2e-6);
  const perf::Prediction r = perf::predict({allreduce_op(2, 7'000'000)}, p, Mode::resident);
  EXPECT_DOUBLE_EQ(r.phase_seconds[static_cast<std::size_t>(Phase::allreduce)], between);
}

TEST(RanksCost, AnotherRankCountScalesTheInterpolatedTimeAsARing) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  p.allreduce.push_back(measured_fit());
  const double t2 = 4.5e-3;  // 4 MB at 2 ranks, of which 1 us is the fit's latency
  EXPECT_DOUBLE_EQ(perf::allreduce_seconds(p, allreduce_op(4, 4 << 20)),
                   1e-6 * 3 + (t2 - 1e-6) * (3.0 / 4) / (1.0 / 2));
}

TEST(RanksCost, AFitIsDescribedByWhatItMeasured) {
  EXPECT_EQ(perf::describe_allreduce(measured_fit()),
            "2.0 us at 4 KB, 3.50 GB/s at 1 MB, 0.88 GB/s at 16 MB");
  EXPECT_EQ(perf::describe_allreduce(fit(2, 21e-6, 3.5e9)), "21.0 us latency, 3.50 GB/s");
}

TEST(RanksCost, WithoutAnyFitTheAllreduceIsPricedAtTheMemoryBandwidth) {
  const perf::Profile p = testing_util::made_up_cpu_profile();
  std::string estimate;
  const double t = perf::allreduce_seconds(p, allreduce_op(2, 8'000'000), &estimate);
  EXPECT_DOUBLE_EQ(t, 1e-7 + 2 * 0.5 * 2 * 8e6 / 1e10);
  EXPECT_NE(estimate.find("the profile has no allreduce"), std::string::npos) << estimate;
}

TEST(RanksCost, TheFitRecoversLatencyAndBandwidthFromExactSamples) {
  perf::AllreduceFit f;
  for (int64_t bytes : {4096, 65536, 1 << 20, 16 << 20})
    f.samples.push_back({bytes, 15e-6 + static_cast<double>(bytes) / 5e9});
  perf::fit_allreduce(f);
  EXPECT_NEAR(f.latency_seconds, 15e-6, 1e-12);
  EXPECT_NEAR(f.bytes_per_second, 5e9, 5e9 * 1e-9);
}

TEST(RanksCost, TheFitNeedsTwoSizes) {
  perf::AllreduceFit f;
  f.samples.push_back({4096, 1e-5});
  EXPECT_THROW(perf::fit_allreduce(f), Error);
}

TEST(RanksProfile, AllreduceFitsRoundTripThroughJson) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  perf::AllreduceFit a = fit(2, 21e-6, 3.5e9);
  a.samples = {{4096, 2.2e-5}, {32 << 20, 9.6e-3}};
  p.allreduce.push_back(a);
  p.allreduce.push_back(fit(4, 60e-6, 1.1e9, 2));
  const perf::Profile q = perf::profile_from_json(perf::profile_to_json(p));
  ASSERT_EQ(q.allreduce.size(), 2u);
  EXPECT_EQ(q.allreduce[0].transport, "mpi");
  EXPECT_EQ(q.allreduce[0].ranks, 2);
  EXPECT_EQ(q.allreduce[0].hosts, 1);
  EXPECT_EQ(q.allreduce[0].latency_seconds, 21e-6);
  EXPECT_EQ(q.allreduce[0].bytes_per_second, 3.5e9);
  ASSERT_EQ(q.allreduce[0].samples.size(), 2u);
  EXPECT_EQ(q.allreduce[0].samples[1].bytes, 32 << 20);
  EXPECT_EQ(q.allreduce[0].samples[1].seconds, 9.6e-3);
  EXPECT_EQ(q.allreduce[1].ranks, 4);
  EXPECT_EQ(q.allreduce[1].hosts, 2);
}

TEST(RanksProfile, AProfileWithoutAllreduceFitsHasNone) {
  nlohmann::json j = perf::profile_to_json(testing_util::made_up_cpu_profile());
  j.erase("allreduce");
  EXPECT_TRUE(perf::profile_from_json(j).allreduce.empty());
}

TEST(RanksProfile, ABadAllreduceFieldIsNamed) {
  nlohmann::json j = perf::profile_to_json(testing_util::made_up_cpu_profile());
  j["allreduce"] = {{{"transport", "mpi"},
                     {"ranks", 2},
                     {"hosts", 1},
                     {"latency_seconds", 1e-5},
                     {"bytes_per_second", -1}}};
  try {
    perf::profile_from_json(j, "p.json");
    FAIL() << "a negative bandwidth was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce[0].bytes_per_second"), std::string::npos)
        << e.what();
  }
}

TEST(RanksProfile, MergingAddsFitsOfOtherRanksAndKeepsItsOwn) {
  perf::Profile into = testing_util::made_up_cpu_profile(),
                from = testing_util::made_up_cpu_profile();
  into.allreduce.push_back(fit(2, 20e-6, 4e9));
  from.allreduce.push_back(fit(2, 99e-6, 1e9));
  from.allreduce.push_back(fit(3, 30e-6, 3e9));
  perf::merge_profile(into, from);
  ASSERT_EQ(into.allreduce.size(), 2u);
  EXPECT_EQ(into.allreduce[0].latency_seconds, 20e-6);
  EXPECT_EQ(into.allreduce[1].ranks, 3);
}

// The epoch over ranks: each step the largest share of the batch, with the allreduce.
TEST(RanksCost, AnEpochOverRanksIsItsStepsAtEachRanksShare) {
  perf::Profile p = testing_util::made_up_cpu_profile();
  p.allreduce.push_back(fit(2, 20e-6, 4e9));
  const perf::EpochPrediction e = perf::predict_epoch(kSmall, 1000, 64, p, Mode::resident, 2);
  const double full = perf::predict(perf::step_ops(kSmall, 32, DeviceKind::cpu, Mode::resident, 2),
                                    p, Mode::resident)
                          .step_seconds;
  // 15 full batches of 64 (32 rows each) and one of 40 (20 rows each).
  const double last = perf::predict(perf::step_ops(kSmall, 20, DeviceKind::cpu, Mode::resident, 2),
                                    p, Mode::resident)
                          .step_seconds;
  EXPECT_EQ(e.steps, 16);
  EXPECT_DOUBLE_EQ(e.seconds, 15 * full + last);
}

// sweep --ranks --predict-only: every count predicted, none measured (so no MPI is needed), each
// row with its allreduce share, and one sentence on where more ranks stop paying.
TEST(RanksTable, SweepPredictOnlyGivesEveryCountAndWhereMoreRanksStopPaying) {
  const std::string dir = testing_util::temp_folder("ranks-sweep");
  testing_util::ScopedEnv profiles("CROSSOVER_PROFILE_DIR", dir.c_str());
  const auto r = testing_util::run_crossover(
      "sweep --ranks 4,1,2 --predict-only --model big --data mnist-10k --threads 1 --json " + dir +
      "/s.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(dir + "/s.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["command"], "sweep");
  EXPECT_EQ(j["model"], "big");  // sweep's own --model, not the default small
  ASSERT_EQ(j["rows"].size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const nlohmann::json& row = j["rows"][i];
    EXPECT_EQ(row["ranks"], std::vector<int>({1, 2, 4})[i]);
    EXPECT_EQ(row["measured"], false);
    EXPECT_EQ(row["predicted_only_because"], "--predict-only");
    EXPECT_TRUE(row["epoch_seconds"]["measured"].is_null());
    EXPECT_GT(row["epoch_seconds"]["predicted"].get<double>(), 0);
  }
  EXPECT_EQ(j["rows"][0]["allreduce_share"]["predicted"], 0.0);
  EXPECT_GT(j["rows"][1]["allreduce_share"]["predicted"].get<double>(), 0);
  const std::string summary = j["summary"];
  EXPECT_NE(summary.find("More ranks"), std::string::npos) << summary;
  EXPECT_NE(summary.find("allreduce"), std::string::npos) << summary;
  EXPECT_NE(r.out.find(summary), std::string::npos) << r.out;
}

TEST(RanksTable, ABadRankListIsOneLineAndExitTwo) {
  const auto r = testing_util::run_crossover("compare --ranks 1,x --data mnist-10k");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--ranks: 'x' is not a rank count"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace crossover
