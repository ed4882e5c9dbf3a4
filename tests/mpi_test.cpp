// `mpirun -np N crossover train` (src/ranks, docs/DISTRIBUTED.md): N ranks train the model one
// process trains at the same global batch. Skipped where the binary was built without MPI or
// mpirun is not on the PATH. Open MPI's shared-memory transport needs ptrace rights containers
// often lack, so the tests set OMPI_MCA_btl_vader_single_copy_mechanism=none.
#include "ranks/mpi.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda_info.h"
#include "formats/weights_io.h"
#include "nn/sequential.h"
#include "ranks/nccl.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::run_crossover;
using testing_util::ScopedEnv;
using testing_util::temp_folder;

bool have_mpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

std::string launcher(int ranks) {
  return "mpirun --oversubscribe --allow-run-as-root -np " + std::to_string(ranks);
}

// One training run: its JSON record and the saved weights.
struct Trained {
  nlohmann::json json;
  std::vector<NamedTensor> weights;
};

// SMALL on mnist-10k, one epoch, 1 thread per rank, started by `how` ("": one process without
// mpirun). A run that fails has no JSON.
struct RunResult {
  Trained trained;
  int exit_code = 0;
  std::string err;
};
RunResult run_training(const std::string& how, int64_t batch, const std::string& tag) {
  const std::string dir = temp_folder("mpi-" + tag);
  const std::string args =
      "train --model small --data mnist-10k --epochs 1 --threads 1 --seed 5 "
      "--quiet --batch-size " +
      std::to_string(batch) + " --json " + dir + "/r.json --save " + dir + "/w.safetensors";
  const auto r = run_crossover(args, how);
  RunResult run{{}, r.exit_code, r.err};
  if (r.exit_code != 0) return run;
  std::ifstream f(dir + "/r.json");
  run.trained.json = nlohmann::json::parse(f);
  run.trained.weights = load_model(dir + "/w.safetensors").get_weights();
  return run;
}

// The same, with `ranks` ranks on this host (0: one process without mpirun).
Trained train(int ranks, int64_t batch, const std::string& tag) {
  RunResult r = run_training(ranks > 0 ? launcher(ranks) : "", batch, tag);
  EXPECT_EQ(r.exit_code, 0) << tag << ": " << r.err;
  return r.trained;
}

double relative(double a, double b) { return std::fabs(a - b) / std::max(std::fabs(b), 1e-30); }

// The largest, over the tensors, of max |a - b| / max |b|.
double weights_difference(const Trained& a, const Trained& b) {
  double worst = 0;
  for (std::size_t i = 0; i < b.weights.size(); ++i) {
    const Tensor& ta = a.weights[i].value;
    const Tensor& tb = b.weights[i].value;
    double diff = 0, scale = 0;
    for (int64_t e = 0; e < tb.size(); ++e) {
      diff = std::max(diff, static_cast<double>(std::fabs(ta[e] - tb[e])));
      scale = std::max(scale, static_cast<double>(std::fabs(tb[e])));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30));
  }
  return worst;
}

class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!dist::built_with_mpi()) GTEST_SKIP() << "built without MPI";
    if (!have_mpirun()) GTEST_SKIP() << "mpirun is not on the PATH";
  }
  ScopedEnv vader_{"OMPI_MCA_btl_vader_single_copy_mechanism", "none"};
};

void expect_as_one_process(const Trained& many, const Trained& one, int ranks) {
  ASSERT_FALSE(many.weights.empty());
  ASSERT_FALSE(one.weights.empty());
  EXPECT_EQ(many.json["ranks"], ranks);
  EXPECT_EQ(one.json["ranks"], 1);
  const double loss = many.json["history"][0]["loss"], loss1 = one.json["history"][0]["loss"];
  EXPECT_LT(relative(loss, loss1), 2e-4) << loss << " against " << loss1;
  EXPECT_EQ(many.json["history"][0]["steps"], one.json["history"][0]["steps"]);
  EXPECT_LT(weights_difference(many, one), 1e-4);
  const double test = many.json["test"]["loss"], test1 = one.json["test"]["loss"];
  EXPECT_LT(relative(test, test1), 2e-4) << test << " against " << test1;
  EXPECT_EQ(many.json["test"]["samples"], one.json["test"]["samples"]);
}

TEST_F(Mpi, TwoRanksTrainTheModelOneProcessTrains) {
  expect_as_one_process(train(2, 32, "np2"), train(0, 32, "one"), 2);
}

TEST_F(Mpi, OneRankUnderMpirunIsOneProcess) {
  expect_as_one_process(train(1, 32, "np1"), train(0, 32, "one"), 1);
}

// 8,000 rows at batch 32 over 3 ranks: 10, 11 and 11 rows of every batch.
TEST_F(Mpi, ThreeRanksOfARaggedBatchTrainTheSameModel) {
  expect_as_one_process(train(3, 32, "np3"), train(0, 32, "one"), 3);
}

// 8,000 rows at batch 48 over 2 ranks: the last batch has 32 rows, 16 each.
TEST_F(Mpi, TwoRanksRunBitIdenticallyFromRunToRun) {
  const Trained a = train(2, 48, "np2a"), b = train(2, 48, "np2b");
  ASSERT_FALSE(a.weights.empty());
  ASSERT_FALSE(b.weights.empty());
  EXPECT_EQ(weights_difference(a, b), 0.0);
  EXPECT_EQ(a.json["history"][0]["loss"], b.json["history"][0]["loss"]);
  EXPECT_EQ(a.json["history"][0]["accuracy"], b.json["history"][0]["accuracy"]);
  EXPECT_EQ(a.json["test"]["loss"], b.json["test"]["loss"]);
}

// Two ranks on two "hosts": network namespaces joined by a veth pair (scripts/mpirun-two-hosts),
// so that Open MPI's TCP transport carries the allreduce, as between machines. Skipped where
// namespaces cannot be made (not root, no iproute2, no unshare).
TEST_F(Mpi, TwoRanksOnTwoHostsTalkOverTcp) {
  const std::string two_hosts = crossover::testing_util::source_dir() + "/scripts/mpirun-two-hosts";
  ScopedEnv limit("MPIRUN_TWO_HOSTS_TIMEOUT", "300");  // a hang ends; not a speed requirement
  const RunResult tcp = run_training(two_hosts, 32, "two-hosts");
  if (tcp.exit_code == 77) GTEST_SKIP() << tcp.err;
  ASSERT_EQ(tcp.exit_code, 0) << tcp.err;
  const Trained shared_memory = train(2, 32, "np2-shm");
  ASSERT_FALSE(shared_memory.weights.empty());
  const nlohmann::json& j = tcp.trained.json;
  EXPECT_EQ(j["ranks"], 2);
  const double loss = j["history"][0]["loss"], loss2 = shared_memory.json["history"][0]["loss"];
  EXPECT_LT(relative(loss, loss2), 2e-4) << loss << " against " << loss2;
  // Rank 0 must receive rank 1's whole gradient at every step: at least steps x parameters x 4
  // bytes over the veth (it cannot have gone another way).
  const std::string said = "10.213.0.1 received ";
  const auto at = tcp.err.find(said);
  ASSERT_NE(at, std::string::npos) << tcp.err;
  const double received = std::stod(tcp.err.substr(at + said.size()));
  const double gradients = 4.0 * static_cast<double>(j["history"][0]["steps"]) *
                           static_cast<double>(j["model"]["parameters"]);
  EXPECT_GE(received, gradients);
}

// Ranks on a GPU need NCCL and a GPU per rank: otherwise one line and exit 2 (from every rank),
// not a crash or N runs. Skipped where this host has the 2 GPUs to train on.
TEST_F(Mpi, RanksOnAGpuWithoutNcclOrAGpuEachAreRefusedInOneLine) {
  const std::size_t gpus = cuda_devices().size();
  if (dist::built_with_nccl() && gpus >= 2) GTEST_SKIP() << "this host can train 2 ranks on GPUs";
  const auto r = run_crossover(
      "train --model small --data mnist-10k --epochs 1 --threads 1 --quiet --device cuda",
      launcher(2));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string why = !dist::built_with_nccl() ? "built without it (CROSSOVER_NCCL"
                          : gpus == 0              ? "no CUDA device on this host"
                                                   : "2 ranks on this host but 1 CUDA device";
  // The first rank to fail ends the others (MPI_Abort), maybe before they print: either rank.
  EXPECT_NE(r.err.find("crossover: error: rank "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" of 2: --device cuda: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
}

// evaluate over 2 ranks: each its half of the test rows, the sums added.
TEST_F(Mpi, EvaluateOverTwoRanksGivesTheOneProcessResult) {
  const std::string dir = temp_folder("mpi-evaluate");
  ASSERT_EQ(run_crossover("train --model small --data mnist-10k --epochs 1 --threads 1 --quiet "
                          "--save " +
                          dir + "/w.safetensors")
                .exit_code,
            0);
  auto evaluate = [&](const std::string& json, const std::string& how) {
    const auto r = run_crossover("evaluate --load " + dir +
                                     "/w.safetensors --data mnist-10k "
                                     "--threads 1 --quiet --json " +
                                     dir + "/" + json,
                                 how);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::ifstream f(dir + "/" + json);
    return nlohmann::json::parse(f);
  };
  const nlohmann::json one = evaluate("one.json", ""), two = evaluate("two.json", launcher(2));
  EXPECT_EQ(two["ranks"], 2);
  EXPECT_EQ(two["test"]["samples"], one["test"]["samples"]);
  EXPECT_LT(relative(two["test"]["loss"], one["test"]["loss"]), 1e-6);
  EXPECT_EQ(two["test"]["accuracy"], one["test"]["accuracy"]);
}

TEST_F(Mpi, OnlyRankZeroSpeaks) {
  const auto r = run_crossover(
      "train --model small --data mnist-10k --epochs 1 --threads 1 --batch-size 256", launcher(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n') > 0, true);
  // One "Epoch 1/1" line, not one per rank.
  std::size_t epochs = 0;
  for (std::size_t p = r.out.find("Epoch 1/1"); p != std::string::npos;
       p = r.out.find("Epoch 1/1", p + 1))
    ++epochs;
  EXPECT_EQ(epochs, 1u) << r.out;
  EXPECT_NE(r.out.find("ranks: MPI"), std::string::npos) << r.out;
}

// --threads 0 over ranks: this host's cores divided among its ranks, not measured.
TEST_F(Mpi, ThreadsZeroDividesTheHostsCoresAmongItsRanks) {
  const std::string dir = temp_folder("mpi-threads");
  const auto r = run_crossover(
      "train --model small --data mnist-10k --epochs 1 --quiet --json " + dir + "/r.json",
      launcher(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(dir + "/r.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  const int cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));  // as cpu_info()
  EXPECT_EQ(j["threads"], std::max(1, cores / 2));
  EXPECT_EQ(j["threads_choice"]["chosen_by"], "cores divided among ranks");
}

// A rank that fails ends every rank: the run exits non-zero with the rank's line, not a hang.
TEST_F(Mpi, AnErrorOnOneRankEndsEveryRank) {
  const auto r =
      run_crossover("train --model small --data /nonexistent --epochs 1 --quiet", launcher(2));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("crossover: error: rank "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/nonexistent"), std::string::npos) << r.err;
}

// Every rank reads the data itself; a rank that read other data stops the run, naming itself.
TEST_F(Mpi, ARankWithOtherDataIsAnErrorNamingItAndTheFile) {
  const char* fashion = "/usr/share/datasets/fashion-mnist";
  if (!std::ifstream(std::string(fashion) + "/train-labels-idx1-ubyte.gz").good())
    GTEST_SKIP() << "no Fashion-MNIST at " << fashion << " (dataset-fashion-mnist)";
  // Open MPI's MPMD form: rank 0 and rank 1 each with their own arguments.
  const std::string args = "train --model small --epochs 1 --threads 1 --quiet --data ";
  const auto r = run_crossover(
      args + "mnist-10k : -np 1 " + crossover::testing_util::binary_path() + " " + args + fashion,
      launcher(1));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("error: rank 1 of 2: --data " + std::string(fashion)), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("differ from rank 0's"), std::string::npos) << r.err;
}

// A checkpoint written by 2 ranks, resumed by 2 ranks, continues the one-process trajectory.
TEST_F(Mpi, ResumingOverTwoRanksContinuesTheOneProcessRun) {
  const std::string dir = temp_folder("mpi-resume");
  const std::string common = " --data mnist-10k --threads 1 --quiet --epochs ";
  ASSERT_EQ(run_crossover("train --model small" + common + "1 --checkpoint " + dir + "/c.ckpt",
                          launcher(2))
                .exit_code,
            0);
  const auto resumed = run_crossover(
      "train --resume " + dir + "/c.ckpt" + common + "2 --json " + dir + "/two.json", launcher(2));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  ASSERT_EQ(
      run_crossover("train --model small" + common + "2 --json " + dir + "/one.json").exit_code, 0);
  std::ifstream f1(dir + "/one.json"), f2(dir + "/two.json");
  const nlohmann::json one = nlohmann::json::parse(f1), two = nlohmann::json::parse(f2);
  EXPECT_EQ(two["initial_epoch"], 1);
  EXPECT_LT(relative(two["history"][0]["loss"], one["history"][1]["loss"]), 2e-4);
  EXPECT_LT(relative(two["test"]["loss"], one["test"]["loss"]), 2e-4);
}

// Trains SMALL for (nearly) ever on 2 ranks with a checkpoint each epoch; once the first
// checkpoint is written (training is under way), sends `signal` ("-9", "-STOP") to rank 1's
// process, then waits up to 120 s for mpirun to end. That wait only tells a hang from an end (it
// is not a speed requirement). No run is left behind, even when the test fails.
struct SignalledRun {
  bool signalled = false;        // rank 1 was found and signalled
  std::optional<int> exit_code;  // mpirun's; none when it had not ended
  std::string err;
  bool model_saved = false;
};
SignalledRun signal_rank_one(const std::string& tag, const std::string& signal,
                             const std::string& options) {
  const std::string dir = temp_folder(tag);
  {
    std::ofstream script(dir + "/run.sh");
    script << "cd " << dir << "\n"
           << "(" << launcher(2) << " " << crossover::testing_util::binary_path()
           << " train --model small --data mnist-10k --epochs 1000 --threads 1 --quiet " << options
           << " --checkpoint c.ckpt --save w.safetensors >out 2>err & echo $! >pid; wait $!;"
              " echo $? >rc.tmp; mv rc.tmp rc) &\n"
           << "for i in $(seq 600); do [ -f c.ckpt ] && break; sleep 0.2; done\n"
           << "for p in $(pgrep -P $(cat pid)); do\n"
           << "  if tr '\\0' '\\n' </proc/$p/environ | grep -qx OMPI_COMM_WORLD_RANK=1; then\n"
           << "    kill " << signal << " $p; echo $p >signalled\n"
           << "  fi\n"
           << "done\n"
           << "for i in $(seq 600); do [ -f rc ] && break; sleep 0.2; done\n"
           // mpirun has ended the signalled rank when it ends; when it has not, both go.
           << "[ -f rc ] || { kill $(cat pid); kill -9 $(cat signalled) 2>/dev/null; }\n"
           << "true\n";
  }
  EXPECT_EQ(std::system(("bash " + dir + "/run.sh").c_str()), 0);
  auto slurp = [&](const std::string& name) {
    std::ifstream f(dir + "/" + name);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return s;
  };
  SignalledRun run;
  run.signalled = !slurp("signalled").empty();
  if (const std::string rc = slurp("rc"); !rc.empty()) run.exit_code = std::stoi(rc);
  run.err = slurp("err");
  run.model_saved = std::ifstream(dir + "/w.safetensors").good();
  return run;
}

// The run ended, mpirun non-zero, with no model saved, after rank 1 was `what` ("killed").
void expect_ended_without_a_model(const SignalledRun& r, const std::string& what) {
  ASSERT_TRUE(r.signalled) << "rank 1 was not found to signal";
  ASSERT_TRUE(r.exit_code) << "mpirun had not ended 120 s after rank 1 was " << what;
  EXPECT_NE(*r.exit_code, 0);
  EXPECT_FALSE(r.model_saved) << "a model was saved";
}

// Open MPI's default when a rank dies (orte_abort_on_non_zero_status): mpirun ends the other
// ranks and exits non-zero. Rank 1 is killed during training; the run must end, non-zero, with
// no model saved (it ends within a second or two here).
TEST_F(Mpi, KillingOneRankEndsTheRunWithoutAModel) {
  const SignalledRun r = signal_rank_one("mpi-kill", "-9", "");
  expect_ended_without_a_model(r, "killed");
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
}

// A rank that hangs rather than dies (SIGSTOP here; a slow file system or a deadlock elsewhere)
// would leave the others in their next collective forever: with --rank-timeout 3, rank 0 waits
// 3 s, names itself, the call and the wait in one line, and ends; mpirun ends the stopped rank.
TEST_F(Mpi, AStoppedRankEndsTheRunAfterTheRankTimeoutWithoutAModel) {
  const SignalledRun r = signal_rank_one("mpi-stop", "-STOP", "--rank-timeout 3");
  expect_ended_without_a_model(r, "stopped");
  EXPECT_NE(r.err.find("rank 0 of 2: waited"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(--rank-timeout 3)"), std::string::npos) << r.err;
}

// calibrate under mpirun: rank 0 measures the CPU alone, then the ranks their allreduce; the
// profile holds the fit for 2 ranks on this one host, with its sizes.
TEST_F(Mpi, CalibrateOverTwoRanksAddsTheirAllreduceFit) {
  const std::string dir = temp_folder("mpi-calibrate");
  ScopedEnv profiles("CROSSOVER_PROFILE_DIR", dir.c_str());
  const auto r =
      run_crossover("calibrate --quick --threads 1 --out " + dir + "/p.json", launcher(2));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(dir + "/p.json");
  const nlohmann::json p = nlohmann::json::parse(f);
  ASSERT_EQ(p["allreduce"].size(), 1u) << p["allreduce"];
  const nlohmann::json& a = p["allreduce"][0];
  EXPECT_EQ(a["transport"], "mpi");
  EXPECT_EQ(a["ranks"], 2);
  EXPECT_EQ(a["hosts"], 1);
  EXPECT_EQ(a["samples"].size(), 8u);
  EXPECT_EQ(a["samples"][0]["bytes"], 4096);
  EXPECT_EQ(a["samples"][7]["bytes"], 32 << 20);
  EXPECT_GT(a["bytes_per_second"].get<double>(), 0);
  // One voice: rank 0's lines only.
  EXPECT_EQ(r.out.find("profile saved to"), r.out.rfind("profile saved to")) << r.out;
}

// explain --ranks 2 started as one process: it runs itself under mpirun, says so in one line, and
// shows the allreduce phase measured and predicted; the profile it calibrated on demand (rank 0
// the compute, both ranks the allreduce) is saved with the 2 ranks' fit.
TEST_F(Mpi, ExplainOverTwoRanksShowsTheAllreducePhase) {
  const std::string dir = temp_folder("mpi-explain");
  ScopedEnv profiles("CROSSOVER_PROFILE_DIR", dir.c_str());
  const auto r = run_crossover(
      "explain --ranks 2 --model small --data mnist-10k --threads 1 "
      "--steps 16 --max-seconds 2 --json " +
      dir + "/e.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("explain: not started by mpirun: running 2 ranks as `"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nallreduce "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Over 2 ranks each rank computes 16 of the 32 rows"), std::string::npos)
      << r.out;
  std::ifstream f(dir + "/e.json");
  const nlohmann::json e = nlohmann::json::parse(f);
  EXPECT_EQ(e["ranks"], 2);
  bool phase = false;
  for (const nlohmann::json& p : e["phases"])
    if (p["name"] == "allreduce") {
      phase = true;
      EXPECT_GT(p["measured_seconds"].get<double>(), 0) << p;
      EXPECT_GT(p["predicted_seconds"].get<double>(), 0) << p;
    }
  EXPECT_TRUE(phase) << e["phases"];
  int allreduce_ops = 0;
  for (const nlohmann::json& o : e["ops"]) allreduce_ops += o["phase"] == "allreduce";
  EXPECT_EQ(allreduce_ops, 1);
  // The fit was measured for these ranks and saved with the compute.
  bool saved = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".json" && entry.path().filename() != "e.json") {
      std::ifstream pf(entry.path());
      const nlohmann::json p = nlohmann::json::parse(pf);
      for (const nlohmann::json& a : p["allreduce"]) saved |= a["ranks"] == 2;
    }
  EXPECT_TRUE(saved) << "no profile in " << dir << " holds a 2-rank allreduce fit";
}

// compare --ranks 1,2: both counts measured (by explain, the second under mpirun) and predicted.
TEST_F(Mpi, CompareOverRanksMeasuresEachCountUpToTheCores) {
  if (::sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "one core: 2 ranks are predicted only";
  const std::string dir = temp_folder("mpi-compare-ranks");
  ScopedEnv profiles("CROSSOVER_PROFILE_DIR", dir.c_str());
  const auto r = run_crossover(
      "compare --ranks 1,2 --model small --data mnist-10k --threads 1 "
      "--json " +
      dir + "/c.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(dir + "/c.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  ASSERT_EQ(j["rows"].size(), 2u);
  for (const nlohmann::json& row : j["rows"]) {
    EXPECT_EQ(row["measured"], true) << row;
    EXPECT_GT(row["epoch_seconds"]["measured"].get<double>(), 0) << row;
    EXPECT_GT(row["epoch_seconds"]["predicted"].get<double>(), 0) << row;
  }
  EXPECT_GT(j["rows"][1]["allreduce_share"]["measured"].get<double>(), 0);
}

}  // namespace
}  // namespace crossover
