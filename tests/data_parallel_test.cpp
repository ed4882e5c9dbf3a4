// Data parallelism in the engine (nn/collective.h), without MPI: N "ranks" as N threads of this
// process, each with its own model, joined by a Collective over shared memory. Every rank must
// train the model one process trains at the same global batch: the same weights but for the order
// of the gradient sums, and the same loss and accuracy.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda_info.h"
#include "core/error.h"
#include "core/launcher.h"
#include "nn/collective.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "ranks/nccl.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::random_tensor;

// ---- the row split ----

TEST(RankRows, EveryRowBelongsToOneRankInOrder) {
  for (int64_t rows : {0, 1, 2, 5, 31, 32, 33, 1000})
    for (int size : {1, 2, 3, 4, 7}) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const RowRange s = rank_rows(rows, r, size);
        EXPECT_EQ(s.begin, next) << rows << " rows, rank " << r << " of " << size;
        EXPECT_GE(s.count(), rows / size);
        EXPECT_LE(s.count(), rows / size + 1);
        next = s.end;
      }
      EXPECT_EQ(next, rows) << rows << " rows over " << size;
    }
}

TEST(RankRows, ThreeRanksSplitABatchOf32As10_11_11) {
  EXPECT_EQ(rank_rows(32, 0, 3).begin, 0);
  EXPECT_EQ(rank_rows(32, 0, 3).end, 10);
  EXPECT_EQ(rank_rows(32, 1, 3).end, 21);
  EXPECT_EQ(rank_rows(32, 2, 3).end, 32);
}

TEST(RankRows, ARankMayHaveNoRowsOfABatchSmallerThanTheRanks) {
  EXPECT_EQ(rank_rows(1, 0, 2).count(), 0);
  EXPECT_EQ(rank_rows(1, 1, 2).count(), 1);
}

// ---- dropout by the global row ----

// The mask of rows [k, m) drawn with first_row k is the tail of the mask of all m rows drawn from
// row 0, and so are the outputs: what one rank draws for its rows is what one process draws for
// them. n = 5 puts most row starts off Philox's blocks of four elements.
TEST(DropoutFirstRow, TheMaskOfRowsFromKIsTheTailOfTheWholeMask) {
  auto be = make_cpu_backend(1);
  for (int64_t n : {5, 7, 8, 128}) {
    const int64_t m = 40;
    const Tensor x = random_tensor({m, n}, 11);
    StepCounters c;
    c.step = 17;
    std::vector<float> y(static_cast<std::size_t>(m * n));
    std::vector<uint8_t> mask(static_cast<std::size_t>(m * n));
    be->dropout_forward(x.data(), y.data(), mask.data(), m, n, 0.3f, 42, 2, &c, 0);
    for (int64_t k : {1, 2, 3, 5, 13, 39}) {
      const int64_t rows = m - k;
      std::vector<float> yk(static_cast<std::size_t>(rows * n));
      std::vector<uint8_t> mk(static_cast<std::size_t>(rows * n));
      be->dropout_forward(x.data() + k * n, yk.data(), mk.data(), rows, n, 0.3f, 42, 2, &c, k);
      EXPECT_TRUE(std::equal(mk.begin(), mk.end(), mask.begin() + k * n))
          << "n " << n << " k " << k;
      EXPECT_TRUE(std::equal(yk.begin(), yk.end(), y.begin() + k * n)) << "n " << n << " k " << k;
    }
  }
}

// ---- N ranks as N threads ----

// A Collective over shared memory: every rank's buffer is summed in rank order (so that a run is
// the same from run to run), each rank waiting for all at each call.
class ThreadCollective : public Collective {
 public:
  struct Shared {
    explicit Shared(int n) : size(n), sync(n), buffers(static_cast<std::size_t>(n)) {}
    int size;
    std::barrier<> sync;
    std::vector<void*> buffers;
  };
  ThreadCollective(std::shared_ptr<Shared> s, int rank) : s_(std::move(s)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return s_->size; }
  void allreduce_sum(float* data, int64_t n) override { sum(data, n); }
  void allreduce_sum(double* data, int64_t n) override { sum(data, n); }
  void broadcast(void* data, std::size_t bytes, int root) override {
    s_->buffers[static_cast<std::size_t>(rank_)] = data;
    s_->sync.arrive_and_wait();
    if (rank_ != root) std::memcpy(data, s_->buffers[static_cast<std::size_t>(root)], bytes);
    s_->sync.arrive_and_wait();
  }
  void barrier() override { s_->sync.arrive_and_wait(); }
  std::string description() const override { return "threads"; }

 private:
  template <class T>
  void sum(T* data, int64_t n) {
    s_->buffers[static_cast<std::size_t>(rank_)] = data;
    s_->sync.arrive_and_wait();
    std::vector<T> total(static_cast<std::size_t>(n), T(0));
    for (void* b : s_->buffers)
      for (int64_t i = 0; i < n; ++i) total[static_cast<std::size_t>(i)] += static_cast<T*>(b)[i];
    s_->sync.arrive_and_wait();  // every rank has read every buffer
    std::copy(total.begin(), total.end(), data);
  }
  std::shared_ptr<Shared> s_;
  int rank_;
};

struct RankRun {
  std::vector<NamedTensor> weights;
  History history;
  EvaluateResult test;
};

Sequential small_model() {
  return Sequential({Flatten({12}), Dense(16, "relu"), Dropout(0.25f), Dense(4, "softmax")});
}

// On "cpu" the ranks are joined by the ThreadCollective; on "cuda", rank r trains on cuda:r and
// the gradients go between the GPUs over NCCL (bootstrapped over the ThreadCollective).
// weighted: with Keras's sample_weight in fit (its validation rows too) and evaluate.
RankRun train_on(int ranks, int64_t batch, int epochs = 2, const std::string& device = "cpu",
                 bool weighted = false) {
  const int64_t rows = 150;
  const Tensor x = random_tensor({rows, 12}, 5);
  Tensor y({rows});
  for (int64_t i = 0; i < rows; ++i) y[i] = static_cast<float>((i * 7) % 4);
  const Tensor xt = random_tensor({37, 12}, 6);
  Tensor yt({37});
  for (int64_t i = 0; i < 37; ++i) yt[i] = static_cast<float>(i % 4);
  Tensor w({rows}), wt({37});
  for (int64_t i = 0; i < rows; ++i) w[i] = 0.25f + static_cast<float>(i % 5) * 0.5f;
  for (int64_t i = 0; i < 37; ++i) wt[i] = 2.0f - static_cast<float>(i % 3) * 0.75f;
  auto shared = std::make_shared<ThreadCollective::Shared>(ranks);
  std::vector<RankRun> runs(static_cast<std::size_t>(ranks));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  auto rank_main = [&](int r) {
    try {
      Sequential model = small_model();
      const bool gpu = device == "cuda";
      CompileOptions o{
          .device = gpu ? "cuda:" + std::to_string(r) : device, .threads = 1, .seed = 9};
      if (ranks > 1) {
        auto host = std::make_shared<ThreadCollective>(shared, r);
        o.collective = gpu ? dist::nccl_collective(host, r) : host;
      }
      // The accuracy again as a metric of its own: its device sums go over the ranks too.
      model.compile(Adam(), "sparse_categorical_crossentropy",
                    {"accuracy", "sparse_categorical_accuracy"}, o);
      RankRun& run = runs[static_cast<std::size_t>(r)];
      run.history = model.fit(x, y,
                              {.epochs = epochs,
                               .batch_size = batch,
                               .validation_split = 0.2,
                               .verbose = 0,
                               .stop_on_interrupt = false,
                               .sample_weight = weighted ? &w : nullptr});
      run.test = model.evaluate(
          xt, yt, {.batch_size = 8, .verbose = 0, .sample_weight = weighted ? &wt : nullptr});
      run.weights = model.get_weights();
    } catch (...) {
      errors[static_cast<std::size_t>(r)] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  // Every rank ends with the same model and the same figures.
  for (int r = 1; r < ranks; ++r) {
    EXPECT_EQ(runs[static_cast<std::size_t>(r)].history.history, runs[0].history.history);
    for (std::size_t i = 0; i < runs[0].weights.size(); ++i)
      EXPECT_TRUE(std::equal(runs[0].weights[i].value.data(),
                             runs[0].weights[i].value.data() + runs[0].weights[i].value.size(),
                             runs[static_cast<std::size_t>(r)].weights[i].value.data()))
          << "rank " << r << " " << runs[0].weights[i].name;
  }
  return runs[0];
}

// max |a - b| over max |a|, per tensor, the largest of them.
double weights_difference(const RankRun& a, const RankRun& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.weights.size(); ++i) {
    const Tensor& ta = a.weights[i].value;
    const Tensor& tb = b.weights[i].value;
    double diff = 0, scale = 0;
    for (int64_t e = 0; e < ta.size(); ++e) {
      diff = std::max(diff, static_cast<double>(std::fabs(ta[e] - tb[e])));
      scale = std::max(scale, static_cast<double>(std::fabs(ta[e])));
    }
    worst = std::max(worst, diff / std::max(scale, 1e-30));
  }
  return worst;
}

void expect_same_training(const RankRun& one, const RankRun& many, const std::string& what) {
  EXPECT_LT(weights_difference(one, many), 1e-5) << what;
  ASSERT_EQ(one.history.epochs.size(), many.history.epochs.size()) << what;
  for (std::size_t e = 0; e < one.history.epochs.size(); ++e) {
    const EpochRecord& a = one.history.epochs[e];
    const EpochRecord& b = many.history.epochs[e];
    EXPECT_NEAR(b.loss, a.loss, 1e-5 * a.loss) << what << " epoch " << e + 1;
    EXPECT_NEAR(b.accuracy, a.accuracy, 1e-12) << what << " epoch " << e + 1;
    EXPECT_NEAR(b.metrics.at(0).second, a.accuracy, 1e-12) << what << " epoch " << e + 1;
    EXPECT_NEAR(b.val_metrics.at(0).second, *a.val_accuracy, 1e-12) << what;
    EXPECT_NEAR(*b.val_loss, *a.val_loss, 1e-5 * *a.val_loss) << what << " epoch " << e + 1;
    EXPECT_EQ(b.steps, a.steps) << what;
  }
  EXPECT_NEAR(many.test.loss, one.test.loss, 1e-5 * one.test.loss) << what;
  EXPECT_EQ(many.test.samples, one.test.samples) << what;
  EXPECT_NEAR(many.test.metrics.at(0).second, one.test.accuracy, 1e-12) << what;
}

struct NoLauncher {
  testing_util::ScopedEnv a{"OMPI_COMM_WORLD_SIZE", nullptr}, b{"PMI_SIZE", nullptr},
      c{"MV2_COMM_WORLD_SIZE", nullptr};
};

TEST(DataParallel, TwoRanksTrainTheModelOneProcessTrains) {
  NoLauncher clean;
  const RankRun one = train_on(1, 16);
  expect_same_training(one, train_on(2, 16), "2 ranks, batch 16");
}

// 120 training rows at batch 32: full batches of 10 + 11 + 11 rows and a last one of 24 (8 each).
TEST(DataParallel, ThreeRanksOfARaggedBatchTrainTheSameModel) {
  NoLauncher clean;
  const RankRun one = train_on(1, 32);
  expect_same_training(one, train_on(3, 32), "3 ranks, batch 32");
}

// Batch 2 over 3 ranks: one rank has no row in any batch and adds a zero gradient.
// Sample weights travel with each rank's rows: the weighted loss sums over the ranks as the
// unweighted one does.
TEST(DataParallel, ThreeRanksWithSampleWeightsTrainTheSameModel) {
  NoLauncher clean;
  const RankRun one = train_on(1, 32, 2, "cpu", true);
  expect_same_training(one, train_on(3, 32, 2, "cpu", true), "3 ranks, batch 32, weighted");
  EXPECT_GT(std::fabs(one.test.loss - train_on(1, 32).test.loss), 1e-4);  // the weights count
}

TEST(DataParallel, ARankWithoutRowsInABatchAddsNothing) {
  NoLauncher clean;
  const RankRun one = train_on(1, 2, 1);
  expect_same_training(one, train_on(3, 2, 1), "3 ranks, batch 2");
}

TEST(DataParallel, ARunIsTheSameFromRunToRun) {
  NoLauncher clean;
  const RankRun a = train_on(2, 32), b = train_on(2, 32);
  EXPECT_EQ(weights_difference(a, b), 0.0);
  EXPECT_EQ(a.history.history, b.history.history);
}

TEST(DataParallel, CompileRefusesRanksOnAGpu) {
  NoLauncher clean;
  auto shared = std::make_shared<ThreadCollective::Shared>(2);
  Sequential model = small_model();
  CompileOptions o{.device = "cuda"};
  o.collective = std::make_shared<ThreadCollective>(shared, 0);
  try {
    model.compile(Adam(), "sparse_categorical_crossentropy", {}, o);
    FAIL() << "compiled for 2 ranks on a GPU";
  } catch (const Error& e) {
    // Without a GPU the device itself is refused first; with one, the ranks (no NCCL here).
    const std::string m = e.what();
    EXPECT_TRUE(m.find("needs a collective that sums GPU memory (NCCL)") != std::string::npos ||
                m.find("cuda") != std::string::npos)
        << m;
  }
}

TEST(DataParallel, CompileRefusesBatchNormalizationOverRanks) {
  NoLauncher clean;
  auto shared = std::make_shared<ThreadCollective::Shared>(2);
  Sequential model({Input({8}), Dense(4, "relu"), BatchNormalization(), Dense(3, "softmax")});
  CompileOptions o{.threads = 1};
  o.collective = std::make_shared<ThreadCollective>(shared, 0);
  try {
    model.compile(Adam(), "sparse_categorical_crossentropy", {}, o);
    FAIL() << "compiled a BatchNormalization for 2 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BatchNormalization over 2 ranks is not supported yet"),
              std::string::npos)
        << e.what();
  }
}

// ---- between GPUs, over NCCL ----

// Skips unless this build has NCCL and the machine `gpus` CUDA devices.
#define REQUIRE_NCCL_AND_GPUS(gpus)                                                      \
  do {                                                                                   \
    if (!dist::built_with_nccl()) GTEST_SKIP() << "built without NCCL (CROSSOVER_NCCL)"; \
    if (cuda_devices().size() < (gpus))                                                  \
      GTEST_SKIP() << "needs " << (gpus) << " CUDA device(s), this machine has "         \
                   << cuda_devices().size();                                             \
  } while (0)

// One rank: the communicator bootstraps over the host collective, and its sum and broadcast run
// in the backend's stream order inside a captured step graph (after the fill before them).
TEST(Nccl, OneRankSumsAndBroadcastsInsideAStepGraph) {
  REQUIRE_NCCL_AND_GPUS(1u);
  auto host = std::make_shared<ThreadCollective>(std::make_shared<ThreadCollective::Shared>(1), 0);
  const std::shared_ptr<Collective> nccl = dist::nccl_collective(host, 0);
  ASSERT_NE(nccl->on_device(), nullptr);
  EXPECT_EQ(nccl->size(), 1);
  EXPECT_NE(nccl->description().find("NCCL 2."), std::string::npos) << nccl->description();
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  const int64_t n = 1000003;  // not a multiple of anything NCCL splits by
  auto* data = static_cast<float*>(gpu->allocate(static_cast<std::size_t>(n) * sizeof(float)));
  auto graph = gpu->capture(
      [&] {
        gpu->fill(data, 0.5f, n);
        gpu->allreduce_sum(data, n, *nccl->on_device());
        gpu->broadcast(data, static_cast<std::size_t>(n) * sizeof(float), 0, *nccl->on_device());
      },
      true);
  graph->replay();
  graph->replay();
  std::vector<float> out(static_cast<std::size_t>(n), -1.0f);
  gpu->download(out.data(), data, out.size() * sizeof(float));
  EXPECT_EQ(std::count(out.begin(), out.end(), 0.5f), n);
  gpu->release(data);
}

// Two ranks as two threads, each on its own GPU: the model one GPU trains at the same batch.
TEST(Nccl, TwoGpusTrainTheModelOneGpuTrains) {
  NoLauncher clean;
  REQUIRE_NCCL_AND_GPUS(2u);
  const RankRun one = train_on(1, 16, 2, "cuda");
  expect_same_training(one, train_on(2, 16, 2, "cuda"), "2 GPUs, batch 16");
}

// 3 ranks of a ragged batch over 3 GPUs (10, 11 and 11 rows of 32).
TEST(Nccl, ThreeGpusOfARaggedBatchTrainTheSameModel) {
  NoLauncher clean;
  REQUIRE_NCCL_AND_GPUS(3u);
  const RankRun one = train_on(1, 32, 2, "cuda");
  expect_same_training(one, train_on(3, 32, 2, "cuda"), "3 GPUs, batch 32");
}

}  // namespace
}  // namespace crossover
