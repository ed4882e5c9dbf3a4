// A process that mpirun (or another parallel launcher) started as one of several: recognised from
// the launcher's variables, and refused at compile rather than training one copy per process.
#include "core/launcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>

#include "core/error.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "ranks/mpi.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::run_crossover;
using testing_util::ScopedEnv;

// Every launcher variable unset for the scope, so that the test's own environment cannot leak in.
struct NoLauncher {
  ScopedEnv a{"OMPI_COMM_WORLD_SIZE", nullptr}, b{"OMPI_COMM_WORLD_RANK", nullptr},
      c{"PMI_SIZE", nullptr}, d{"PMI_RANK", nullptr}, e{"MV2_COMM_WORLD_SIZE", nullptr},
      f{"MV2_COMM_WORLD_RANK", nullptr};
};

TEST(Launcher, AProcessStartedAloneIsOneRank) {
  NoLauncher clean;
  const LaunchedRanks r = launched_ranks();
  EXPECT_EQ(r.size, 1);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.source, "");
}

TEST(Launcher, ReadsOpenMpiAndPmiVariables) {
  NoLauncher clean;
  {
    ScopedEnv size("OMPI_COMM_WORLD_SIZE", "3"), rank("OMPI_COMM_WORLD_RANK", "2");
    const LaunchedRanks r = launched_ranks();
    EXPECT_EQ(r.size, 3);
    EXPECT_EQ(r.rank, 2);
    EXPECT_EQ(r.source, "OMPI_COMM_WORLD_SIZE=3");
  }
  {
    ScopedEnv size("PMI_SIZE", "4"), rank("PMI_RANK", "1");
    const LaunchedRanks r = launched_ranks();
    EXPECT_EQ(r.size, 4);
    EXPECT_EQ(r.rank, 1);
  }
}

TEST(Launcher, OneRankOrAValueThatIsNotACountIsNotParallel) {
  NoLauncher clean;
  for (const char* v : {"1", "x", "2x", "-3", ""}) {
    ScopedEnv size("OMPI_COMM_WORLD_SIZE", v);
    EXPECT_EQ(launched_ranks().size, 1) << v;
    EXPECT_EQ(launched_ranks().source, "") << v;
  }
}

TEST(Launcher, CompileRefusesToTrainOneCopyPerLaunchedProcess) {
  NoLauncher clean;
  ScopedEnv size("OMPI_COMM_WORLD_SIZE", "2"), rank("OMPI_COMM_WORLD_RANK", "1");
  Sequential model({Flatten({4}), Dense(3, "softmax")});
  try {
    model.compile(Adam(), "sparse_categorical_crossentropy");
    FAIL() << "compile accepted rank 1 of 2";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 1 of 2"), std::string::npos) << m;
    EXPECT_NE(m.find("OMPI_COMM_WORLD_SIZE=2"), std::string::npos) << m;
    EXPECT_NE(m.find("run a single process"), std::string::npos) << m;
  }
  EXPECT_FALSE(model.compiled());
}

TEST(Launcher, CompileAcceptsASingleLaunchedProcess) {
  NoLauncher clean;
  ScopedEnv size("OMPI_COMM_WORLD_SIZE", "1"), rank("OMPI_COMM_WORLD_RANK", "0");
  Sequential model({Flatten({4}), Dense(3, "softmax")});
  model.compile(Adam(), "sparse_categorical_crossentropy");
  EXPECT_TRUE(model.compiled());
}

// The launcher's variables without the launcher: a binary without MPI says it cannot train over
// ranks; one with MPI finds that MPI sees one process, not the two the variables claim.
TEST(Launcher, TheCommandExitsTwoWithOneLineUnderALauncherItCannotJoin) {
  NoLauncher clean;
  ScopedEnv size("OMPI_COMM_WORLD_SIZE", "2"), rank("OMPI_COMM_WORLD_RANK", "0");
  const auto r = run_crossover("train --data mnist-10k --epochs 1 --quiet");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("OMPI_COMM_WORLD_SIZE=2"), std::string::npos) << r.err;
  if (dist::built_with_mpi())
    EXPECT_NE(r.err.find("but MPI sees 1"), std::string::npos) << r.err;
  else
    EXPECT_NE(r.err.find("started by mpirun with 2 ranks (OMPI_COMM_WORLD_SIZE=2) but built "
                         "without MPI"),
              std::string::npos)
        << r.err;
}

// Commands that do not run over ranks yet refuse a launched process instead of running N times.
TEST(Launcher, CommandsWithoutRanksRefuseALaunchedProcess) {
  NoLauncher clean;
  ScopedEnv size("OMPI_COMM_WORLD_SIZE", "2"), rank("OMPI_COMM_WORLD_RANK", "1");
  for (const char* command : {"compare --data mnist-10k", "sweep --data mnist-10k",
                              "predict --load m.safetensors --image d.png"}) {
    const auto r = run_crossover(command);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_NE(r.err.find("does not run over ranks yet (started as rank 1 of 2"), std::string::npos)
        << command << ": " << r.err;
  }
}

// explain --ranks N started as one process runs itself under mpirun; without one on the PATH (or
// without MPI in the build) that is one line and exit 2, before any work.
TEST(Launcher, ExplainOverRanksWithoutMpirunIsOneLineAndExitTwo) {
  NoLauncher clean;
  ScopedEnv path("PATH", "/nonexistent");
  const auto r = run_crossover("explain --ranks 2 --data mnist-10k");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  if (dist::built_with_mpi())
    EXPECT_NE(r.err.find("--ranks 2: needs mpirun on PATH"), std::string::npos) << r.err;
  else
    EXPECT_NE(r.err.find("--ranks 2: this crossover was built without MPI"), std::string::npos)
        << r.err;
}

// compare --ranks and sweep --ranks measure each count up to the cores with explain under mpirun:
// without mpirun on the PATH (or without MPI in the build) that is one line and exit 2 before
// any work, not a first row measured and then a failure.
TEST(Launcher, CompareAndSweepOverRanksWithoutMpirunAreOneLineAndExitTwo) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "2 ranks would only be predicted";
  NoLauncher clean;
  ScopedEnv path("PATH", "/nonexistent");
  for (const char* command : {"compare --ranks 1,2 --data mnist-10k",
                              "sweep --ranks 1,2,4 --data mnist-10k --model big"}) {
    const auto r = run_crossover(command);
    EXPECT_EQ(r.exit_code, 2) << command << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << command << ": " << r.err;
    EXPECT_EQ(r.out.find("measuring"), std::string::npos) << command << ": " << r.out;
    if (dist::built_with_mpi())
      EXPECT_NE(r.err.find("--ranks 2: needs mpirun on PATH"), std::string::npos) << r.err;
    else
      EXPECT_NE(r.err.find("--ranks 2: this crossover was built without MPI"), std::string::npos)
          << r.err;
  }
}

}  // namespace
}  // namespace crossover
