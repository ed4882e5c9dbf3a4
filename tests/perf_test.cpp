// perf/: the cost model's arithmetic (exact), profiles (round trip, validation), the backend
// wrappers, and calibrate / explain / compare / sweep end to end through the binary. Nothing
// here asserts on a timing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "backends/backend.h"
#include "core/error.h"
#include "core/philox.h"
#include "nn/optimizers.h"
#include "nn/sequential.h"
#include "perf/backend_wrappers.h"
#include "perf/calibrate.h"
#include "perf/choose.h"
#include "perf/cost_model.h"
#include "perf/explain.h"
#include "perf/measure.h"
#include "perf/plot.h"
#include "perf/profile.h"
#include "perf/threads.h"
#include "test_util.h"

namespace crossover {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using perf::DeviceKind;
using perf::Mode;
using perf::Op;
using perf::Phase;

const perf::ModelDesc kSmall = perf::mlp(784, {128}, 10, 0.2);
const perf::ModelDesc kBig = perf::mlp(784, {1000, 1000}, 10, 0.2);

const Op& find_op(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& o : ops)
    if (o.name == name) return o;
  ADD_FAILURE() << "no op named '" << name << "'";
  static const Op none;
  return none;
}

bool has_op(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& o : ops)
    if (o.name == name) return true;
  return false;
}

// ---- the cost model's arithmetic ------------------------------------------------------------
TEST(CostModel, SmallAtBatch32OpByOp) {
  const std::vector<Op> ops = perf::step_ops(kSmall, 32, DeviceKind::cpu, Mode::resident);
  std::vector<std::string> names;
  for (const Op& o : ops) names.push_back(o.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "host: step dispatch (11 backend calls)", "gather batch x", "gather batch y",
                       "dense forward 784->128", "dropout forward", "dense_1 forward 128->10",
                       "loss forward+backward", "dense_1 backward input 128->10",
                       "dense_1 backward weights 128->10 + adam update", "dropout + relu backward",
                       "dense backward weights 784->128 + adam update",
                       "end of step (learning rate, counters)"}));

  const Op& x = find_op(ops, "gather batch x");
  EXPECT_EQ(x.elements, 32 * 784);
  EXPECT_EQ(x.bytes_read, 32 * 784 * 4 + 32 * 4);
  EXPECT_EQ(x.bytes_written, 32 * 784 * 4);
  EXPECT_EQ(x.phase, Phase::elementwise);

  const Op& f1 = find_op(ops, "dense forward 784->128");
  EXPECT_EQ(f1.flops, 2 * 32 * 784 * 128);
  EXPECT_EQ(f1.bytes_read, 4 * (32 * 784 + 784 * 128 + 128));
  EXPECT_EQ(f1.bytes_written, 4 * 32 * 128);
  EXPECT_EQ(f1.phase, Phase::gemm);
  EXPECT_EQ(f1.launches, 0);  // the CPU launches nothing

  const Op& d = find_op(ops, "dropout forward");
  EXPECT_EQ(d.elements, 32 * 128);
  EXPECT_EQ(d.bytes_read, 4 * 32 * 128);
  EXPECT_EQ(d.bytes_written, 4 * 32 * 128 + 32 * 128);  // output and the mask

  EXPECT_EQ(find_op(ops, "dense_1 forward 128->10").flops, 2 * 32 * 128 * 10);
  const Op& loss = find_op(ops, "loss forward+backward");
  EXPECT_EQ(loss.elements, 32 * 10);
  EXPECT_EQ(loss.bytes_read, 4 * (32 * 10 + 32));
  EXPECT_EQ(loss.bytes_written, 4 * 32 * 10);

  // The CPU updates each layer with its weight gradient: the GEMM reads x and dy, the update
  // reads the value and Adam's m and v and writes them back; the gradient stays in cache.
  const Op& w2 = find_op(ops, "dense_1 backward weights 128->10 + adam update");
  EXPECT_EQ(w2.flops, 2 * 128 * 10 * 32);
  EXPECT_EQ(w2.bytes_read, 4 * (32 * 128 + 32 * 10) + 12 * (128 * 10 + 10));
  EXPECT_EQ(w2.bytes_written, 12 * (128 * 10 + 10));
  EXPECT_EQ(w2.update, "adam");
  EXPECT_EQ(w2.segments, (std::vector<int64_t>{128 * 10, 10}));
  EXPECT_EQ(w2.phase, Phase::gemm);
  const Op& i2 = find_op(ops, "dense_1 backward input 128->10");
  EXPECT_EQ(i2.flops, 2 * 32 * 128 * 10);
  EXPECT_EQ(i2.bytes_read, 4 * (32 * 10 + 128 * 10));
  EXPECT_EQ(i2.bytes_written, 4 * 32 * 128);

  const Op& rd = find_op(ops, "dropout + relu backward");
  EXPECT_EQ(rd.bytes_read, 2 * 4 * 32 * 128);
  EXPECT_EQ(rd.bytes_written, 4 * 32 * 128);

  const Op& w1 = find_op(ops, "dense backward weights 784->128 + adam update");
  EXPECT_EQ(w1.flops, 2 * 784 * 128 * 32);
  EXPECT_EQ(w1.bytes_read, 4 * (32 * 784 + 32 * 128) + 12 * (784 * 128 + 128));
  EXPECT_EQ(w1.bytes_written, 12 * (784 * 128 + 128));
  EXPECT_EQ(w1.segments, (std::vector<int64_t>{784 * 128, 128}));
  // The first layer needs no input gradient.
  EXPECT_FALSE(has_op(ops, "dense backward input 784->128"));

  const Op& end = find_op(ops, "end of step (learning rate, counters)");
  EXPECT_EQ(end.phase, Phase::optimizer);
  EXPECT_TRUE(end.segments.empty());
  EXPECT_EQ(kSmall.parameters(), 101770);
}

TEST(CostModel, TheGpuUpdatesEveryParameterInOneCallAfterTheGradients) {
  const std::vector<Op> ops = perf::step_ops(kSmall, 32, DeviceKind::gpu, Mode::resident);
  const Op& w1 = find_op(ops, "dense backward weights 784->128");
  EXPECT_EQ(w1.bytes_read, 4 * (32 * 784 + 32 * 128));
  EXPECT_EQ(w1.bytes_written, 4 * (784 * 128 + 128));
  EXPECT_TRUE(w1.update.empty());
  const Op& adam = find_op(ops, "adam update");
  EXPECT_EQ(&adam, &ops.back());
  EXPECT_EQ(adam.elements, 101770);  // SMALL's parameters
  EXPECT_EQ(adam.segments, (std::vector<int64_t>{784 * 128, 128, 128 * 10, 10}));
  EXPECT_EQ(adam.bytes_read, 16 * 101770);  // value, gradient, m, v
  EXPECT_EQ(adam.bytes_written, 12 * 101770);
  EXPECT_EQ(adam.phase, Phase::optimizer);
}

TEST(CostModel, EpochGemmFlopsOfSmallAndBig) {
  // Per step: forward and weight gradient of every layer, input gradient of all but the first.
  const int64_t small_step = 2 * 32 * (784 * 128 + 128 * 10) * 2 + 2 * 32 * 128 * 10;
  EXPECT_EQ(small_step, 13090816);
  EXPECT_EQ(perf::epoch_gemm_flops(kSmall, 60000, 32), 1875 * small_step);
  EXPECT_EQ(perf::epoch_gemm_flops(kSmall, 60000, 32), 24545280000);  // 24.5 GFLOP
  const int64_t big_step =
      2 * 32 * (784 * 1000 + 1000 * 1000 + 1000 * 10) * 2 + 2 * 32 * (1000 * 1000 + 1000 * 10);
  EXPECT_EQ(perf::epoch_gemm_flops(kBig, 60000, 32), 1875 * big_step);
  EXPECT_EQ(perf::epoch_gemm_flops(kBig, 60000, 32), 551760000000);  // 552 GFLOP
  EXPECT_EQ(kBig.parameters(), 784 * 1000 + 1000 + 1000 * 1000 + 1000 + 1000 * 10 + 10);
  // A ragged last batch: 100 samples at batch 32 is 3 full steps and one of 4 rows.
  const int64_t step4 = 2 * 4 * (784 * 128 + 128 * 10) * 2 + 2 * 4 * 128 * 10;
  EXPECT_EQ(perf::epoch_gemm_flops(kSmall, 100, 32), 3 * small_step + step4);
}

TEST(CostModel, BigAtBatch32Shapes) {
  const std::vector<Op> ops = perf::step_ops(kBig, 32, DeviceKind::cpu, Mode::resident);
  EXPECT_EQ(find_op(ops, "dense forward 784->1000").flops, 2 * 32 * 784 * 1000);
  EXPECT_EQ(find_op(ops, "dense_1 forward 1000->1000").flops, 2 * 32 * 1000 * 1000);
  EXPECT_EQ(find_op(ops, "dense_2 forward 1000->10").flops, 2 * 32 * 1000 * 10);
  EXPECT_EQ(find_op(ops, "dense_1 backward input 1000->1000").flops, 2 * 32 * 1000 * 1000);
  EXPECT_EQ(find_op(ops, "dense_1 backward input 1000->1000").bytes_written, 4 * 32 * 1000);
  EXPECT_FALSE(has_op(ops, "dense backward input 784->1000"));
  EXPECT_EQ(find_op(ops, "dropout_1 forward").elements, 32 * 1000);
  const Op& w2 = find_op(ops, "dense_1 backward weights 1000->1000 + adam update");
  EXPECT_EQ(w2.flops, 2 * 32 * 1000 * 1000);
  EXPECT_EQ(w2.segments, (std::vector<int64_t>{1000 * 1000, 1000}));
  int64_t updated = 0;
  for (const Op& o : ops)
    for (int64_t s : o.segments) updated += s;
  EXPECT_EQ(updated, kBig.parameters());  // each parameter once, with its layer's gradient
  int64_t calls = 0;
  for (const Op& o : ops)
    if (o.phase != Phase::host_overhead) calls += o.calls;
  EXPECT_EQ(calls, 16);
}

std::vector<std::string> op_names(const std::vector<Op>& ops) {
  std::vector<std::string> names;
  for (const Op& o : ops) names.push_back(o.name);
  return names;
}

perf::ModelDesc desc_of(std::vector<Layer> layers, int64_t input_width, OptimizerConfig optimizer,
                        std::string loss) {
  perf::ModelDesc d;
  d.input_width = input_width;
  d.layers = std::move(layers);
  d.optimizer = optimizer;
  d.loss = std::move(loss);
  return d;
}

TEST(CostModel, OpListFollowsSigmoidTanhLayersCategoricalLossAndSgd) {
  const perf::ModelDesc m =
      desc_of({Flatten({20}), Dense(16, "sigmoid"), Dense(8, "tanh"), Dense(4, "softmax")}, 20,
              SGD({.momentum = 0.9}), "categorical_crossentropy");
  const std::vector<Op> ops = perf::step_ops(m, 5, DeviceKind::cpu, Mode::resident);
  EXPECT_EQ(
      op_names(ops),
      (std::vector<std::string>{
          "host: step dispatch (16 backend calls)", "gather batch x", "gather batch y",
          "dense forward 20->16", "dense sigmoid forward", "dense_1 forward 16->8",
          "dense_1 tanh forward", "dense_2 forward 8->4", "loss forward+backward",
          "dense_2 backward input 8->4", "dense_2 backward weights 8->4 + sgd update",
          "dense_1 tanh backward", "dense_1 backward input 16->8",
          "dense_1 backward weights 16->8 + sgd update", "dense sigmoid backward",
          "dense backward weights 20->16 + sgd update", "end of step (learning rate, counters)"}));
  const Op& y = find_op(ops, "gather batch y");  // one-hot targets: rows of 4
  EXPECT_EQ(y.kernel, "gather_rows");
  EXPECT_EQ(y.elements, 5 * 4);
  EXPECT_EQ(find_op(ops, "dense sigmoid forward").kernel, "sigmoid_forward");
  EXPECT_EQ(find_op(ops, "dense_1 tanh backward").kernel, "tanh_backward");
  EXPECT_EQ(find_op(ops, "dense_1 tanh backward").bytes_read, 2 * 4 * 5 * 8);
  const Op& loss = find_op(ops, "loss forward+backward");
  EXPECT_EQ(loss.kernel, "loss");
  EXPECT_EQ(loss.bytes_read, 4 * (5 * 4 + 5 * 4));  // the logits and the one-hot targets
  const Op& sgd = find_op(ops, "dense backward weights 20->16 + sgd update");
  const int64_t params = 20 * 16 + 16;
  EXPECT_EQ(sgd.segments, (std::vector<int64_t>{20 * 16, 16}));
  EXPECT_EQ(m.parameters(), params + 16 * 8 + 8 + 8 * 4 + 4);
  // x and dy; then the value and the velocity, read and written (the gradient stays in cache).
  EXPECT_EQ(sgd.bytes_read, 4 * (5 * 20 + 5 * 16) + 4 * params * 2);
  EXPECT_EQ(sgd.bytes_written, 4 * params * 2);
}

TEST(CostModel, OpListFollowsABinaryOutputAndRmsprop) {
  const perf::ModelDesc m = desc_of({Flatten({10}), Dense(6, "relu"), Dense(1, "sigmoid")}, 10,
                                    RMSprop(), "binary_crossentropy");
  const std::vector<Op> ops = perf::step_ops(m, 7, DeviceKind::cpu, Mode::resident);
  EXPECT_EQ(op_names(ops),
            (std::vector<std::string>{
                "host: step dispatch (10 backend calls)", "gather batch x", "gather batch y",
                "dense forward 10->6", "dense_1 forward 6->1", "loss forward+backward",
                "dense_1 backward input 6->1", "dense_1 backward weights 6->1 + rmsprop update",
                "dense relu backward", "dense backward weights 10->6 + rmsprop update",
                "end of step (learning rate, counters)"}));
  EXPECT_EQ(find_op(ops, "gather batch y").kernel, "gather_labels");
  EXPECT_EQ(find_op(ops, "dense relu backward").kernel, "relu_backward");
  const int64_t params = 10 * 6 + 6;  // the value and the mean square; x(7, 10) and dy(7, 6)
  EXPECT_EQ(find_op(ops, "dense backward weights 10->6 + rmsprop update").bytes_read,
            4 * (7 * 10 + 7 * 6) + 4 * params * 2);
}

TEST(CostModel, OpListFollowsActivationLayersLinearDenseAndMse) {
  const perf::ModelDesc m = desc_of({Flatten({12}), Dense(8), Activation("tanh"), Dense(2)}, 12,
                                    Adam(), "mean_squared_error");
  const std::vector<Op> ops = perf::step_ops(m, 4, DeviceKind::cpu, Mode::resident);
  EXPECT_EQ(op_names(ops),
            (std::vector<std::string>{
                "host: step dispatch (12 backend calls)", "gather batch x", "gather batch y",
                "dense forward 12->8", "activation tanh forward", "dense_1 forward 8->2",
                "loss forward+backward", "dense_1 backward input 8->2",
                "dense_1 backward weights 8->2 + adam update", "activation tanh backward",
                "dense linear backward", "dense backward weights 12->8 + adam update",
                "end of step (learning rate, counters)"}));
  // The model calls the linear Dense's activation backward in place: a call that does nothing.
  const Op& id = find_op(ops, "dense linear backward");
  EXPECT_EQ(id.kernel, "identity");
  EXPECT_EQ(id.bytes_read + id.bytes_written, 0);
  EXPECT_EQ(find_op(ops, "activation tanh forward").layer, "activation");
  EXPECT_EQ(find_op(ops, "loss forward+backward").bytes_read, 4 * (4 * 2 + 4 * 2));
}

TEST(CostModel, AnUncompiledModelIsDescribedWithAdamAndSparseLabels) {
  // compare and sweep describe a model before compiling it.
  const Sequential probe({Flatten({6, 6}), Dense(4, "relu"), Dense(3, "softmax")});
  const std::vector<Op> ops =
      perf::step_ops(perf::describe(probe), 2, DeviceKind::cpu, Mode::resident);
  EXPECT_EQ(find_op(ops, "gather batch y").kernel, "gather_labels");
  EXPECT_EQ(find_op(ops, "loss forward+backward").kernel, "loss_sparse_softmax");
  EXPECT_EQ(find_op(ops, "dense backward weights 36->4 + adam update").update, "adam");
}

TEST(CostModel, RecordsAWideStepWithoutItsMemory) {
  // 285 million parameters (4.6 GB with gradients and Adam's state): recorded in address space.
  const perf::ModelDesc wide = perf::mlp(784, {16384, 16384}, 10, 0.2);
  const std::vector<Op> ops = perf::step_ops(wide, 1024, DeviceKind::gpu, Mode::resident);
  EXPECT_EQ(find_op(ops, "dense_1 forward 16384->16384").flops, 2 * 1024 * 16384LL * 16384);
  EXPECT_EQ(find_op(ops, "adam update").elements,
            784 * 16384 + 16384 + 16384LL * 16384 + 16384 + 16384 * 10 + 10);
}

TEST(CostModel, GpuModesAddLaunchesCopiesAndSyncs) {
  const auto resident = perf::step_ops(kSmall, 32, DeviceKind::gpu, Mode::resident);
  const auto naive = perf::step_ops(kSmall, 32, DeviceKind::gpu, Mode::naive);
  int64_t lr = 0, ln = 0, tn = 0;
  for (const Op& o : resident) lr += o.launches;
  for (const Op& o : naive) ln += o.launches, tn += o.transfer_bytes;
  EXPECT_EQ(lr, 11);  // one graph node per backend call, epilogues fused
  // Naive: the batch is copied (no gather kernels: -2), the forward epilogues (bias+ReLU, bias)
  // and the bias gradients run as their own kernels (+4).
  EXPECT_EQ(ln, 11 - 2 + 4);
  EXPECT_EQ(tn, 32 * 784 * 4 + 32 * 4 + static_cast<int64_t>(sizeof(StepCounters)));
  EXPECT_EQ(find_op(resident, "host: graph launch").phase, Phase::host_overhead);
  EXPECT_EQ(find_op(naive, "copy batch x to device (pageable)").phase, Phase::h2d_copy);
  EXPECT_EQ(find_op(naive, "synchronize (each step)").phase, Phase::sync_wait);
  EXPECT_THROW(perf::step_ops(kSmall, 32, DeviceKind::cpu, Mode::naive), Error);
}

perf::Profile flat_profile(const std::string& kind, double gemm_rate, double bandwidth) {
  perf::Profile p;
  p.kind = kind;
  p.name = kind == "cpu" ? "test cpu" : "test gpu";
  p.id = kind == "cpu" ? "cpu" : "cuda:0";
  p.memory_bytes_per_second = bandwidth;
  p.gemm.push_back({"", 64, 64, 64, gemm_rate});
  if (kind == "gpu") {
    p.launch_seconds = 5e-6;
    p.graph_launch_seconds = 4e-6;
    p.graph_node_seconds = 1e-6;
    p.sync_seconds = 10e-6;
    p.h2d_latency_seconds = 8e-6;
    p.d2h_latency_seconds = 6e-6;
    p.h2d_bytes_per_second = {2e9, 2e10};
    p.d2h_bytes_per_second = {3e9, 2e10};
  }
  return p;
}

TEST(CostModel, PredictionFromAFlatProfileIsTheArithmetic) {
  const perf::Profile p = flat_profile("cpu", 1e11, 1e10);
  const auto ops = perf::step_ops(kSmall, 32, DeviceKind::cpu, Mode::resident);
  const perf::Prediction r = perf::predict(ops, p, Mode::resident);
  double flops = 0, bytes_ew = 0, bytes_opt = 0, bytes_fused = 0;
  for (const Op& o : ops) {
    flops += double(o.flops);
    if (o.phase == Phase::elementwise) bytes_ew += double(o.bytes_read + o.bytes_written);
    if (o.phase == Phase::optimizer) bytes_opt += double(o.bytes_read + o.bytes_written);
    // An update fused into a weight gradient streams its bytes beyond the GEMM's x and dy.
    if (!o.update.empty())
      bytes_fused += double(o.bytes_read + o.bytes_written - 4 * (o.m * o.k + o.m * o.n));
  }
  EXPECT_GT(bytes_fused, 0);
  const double gemm = flops / 1e11 + bytes_fused / 1e10;
  EXPECT_NEAR(r.phase_seconds[size_t(Phase::gemm)], gemm, 1e-12 * gemm);
  EXPECT_NEAR(r.phase_seconds[size_t(Phase::elementwise)], bytes_ew / 1e10, 1e-15);
  EXPECT_NEAR(r.phase_seconds[size_t(Phase::optimizer)], bytes_opt / 1e10, 1e-15);
  double sum = 0;
  for (double s : r.op_seconds) sum += s;
  EXPECT_NEAR(sum, r.step_seconds, 1e-15);
}

TEST(CostModel, GpuNaiveIsLaunchBoundAndResidentIsNot) {
  const perf::Profile g = flat_profile("gpu", 1e13, 1e12);
  const auto naive =
      perf::predict(perf::step_ops(kSmall, 32, DeviceKind::gpu, Mode::naive), g, Mode::naive);
  const auto resident =
      perf::predict(perf::step_ops(kSmall, 32, DeviceKind::gpu, Mode::resident), g, Mode::resident);
  // Naive: 13 launches at 5 us dominate tiny kernels; the copy is 8 us + bytes / 2 GB/s; a sync.
  EXPECT_NEAR(naive.phase_seconds[size_t(Phase::sync_wait)], 10e-6, 1e-12);
  EXPECT_NEAR(naive.phase_seconds[size_t(Phase::h2d_copy)],
              2 * 8e-6 + (32 * 784 * 4 + 32 * 4) / 2e9, 1e-12);
  EXPECT_GT(naive.phase_seconds[size_t(Phase::host_overhead)], 40e-6);
  EXPECT_NEAR(resident.phase_seconds[size_t(Phase::host_overhead)], 4e-6, 1e-12);
  EXPECT_LT(resident.step_seconds, naive.step_seconds);
}

TEST(CostModel, GemmRateInterpolatesInLogSpaceOnAGrid) {
  perf::Profile p = flat_profile("cpu", 1, 1e10);
  p.gemm.clear();
  // rate = 1e9 * batch: varies with batch only.
  for (int64_t b : {16, 64})
    for (int64_t i : {32, 128})
      for (int64_t o : {10, 100}) p.gemm.push_back({"forward", b, o, i, 1e9 * double(b)});
  EXPECT_NEAR(perf::gemm_rate(p, "forward", 16, 32, 10), 16e9, 1e-3);
  EXPECT_NEAR(perf::gemm_rate(p, "forward", 64, 128, 100), 64e9, 1e-3);
  EXPECT_NEAR(perf::gemm_rate(p, "forward", 32, 50, 30), 32e9,
              1e-2);  // geometric midpoint of 16 and 64
  EXPECT_NEAR(perf::gemm_rate(p, "forward", 4096, 50, 30), 64e9, 1e-3);  // clamped at the edge
  // No samples for this op: the others serve.
  EXPECT_NEAR(perf::gemm_rate(p, "backward_input", 16, 32, 10), 16e9, 1e-3);
}

TEST(CostModel, Bf16GemmsArePricedAtTheProfilesBf16Rates) {
  perf::Profile p = flat_profile("cpu", 1e11, 1e10);
  p.gemm_bf16.push_back({"", 64, 64, 64, 4e11});
  EXPECT_NEAR(perf::gemm_rate(p, "forward", 32, 784, 128, Precision::bf16), 4e11, 1.0);
  EXPECT_NEAR(perf::gemm_rate(p, "forward", 32, 784, 128, Precision::fp32), 1e11, 1.0);
  EXPECT_NEAR(perf::gemm_rate(p, "forward", 32, 784, 128, Precision::tf32), 1e11, 1.0);
  // Only the dense GEMMs change: the GEMM phase by exactly flops x (1/1e11 - 1/4e11), the rest not.
  const std::vector<Op> ops = perf::step_ops(kSmall, 32, DeviceKind::cpu, Mode::resident);
  double flops = 0;
  for (const Op& o : ops)
    if (o.phase == Phase::gemm) flops += static_cast<double>(o.flops);
  const perf::Prediction fp32 = perf::predict(ops, p, Mode::resident);
  const perf::Prediction bf16 = perf::predict(ops, p, Mode::resident, Precision::bf16);
  const auto g = static_cast<std::size_t>(Phase::gemm);
  EXPECT_NEAR(fp32.phase_seconds[g] - bf16.phase_seconds[g], flops * (1 / 1e11 - 1 / 4e11), 1e-15);
  EXPECT_GT(flops, 0);
  for (std::size_t i = 0; i < fp32.phase_seconds.size(); ++i) {
    if (i == g) continue;
    EXPECT_DOUBLE_EQ(bf16.phase_seconds[i], fp32.phase_seconds[i]) << i;
  }
  // A profile without bf16 rates cannot price bf16, and says so.
  p.gemm_bf16.clear();
  p.source = "p.json";
  try {
    perf::gemm_rate(p, "forward", 32, 784, 128, Precision::bf16);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no bf16 GEMM rates"), std::string::npos) << e.what();
  }
}

TEST(CostModel, Bf16GemmRatesRoundTripAndAreCalibratedOnDemand) {
  perf::Profile p = flat_profile("cpu", 1e11, 1e10);
  p.gemm_bf16.push_back({"forward", 32, 128, 784, 3e11});
  const perf::Profile back = perf::profile_from_json(perf::profile_to_json(p));
  ASSERT_EQ(back.gemm_bf16.size(), 1u);
  EXPECT_EQ(back.gemm_bf16[0].op, "forward");
  EXPECT_EQ(back.gemm_bf16[0].k, 784);
  EXPECT_EQ(back.gemm_bf16[0].flops_per_second, 3e11);
  json old = perf::profile_to_json(p);
  old.erase("gemm_bf16");  // a profile from before them
  EXPECT_TRUE(perf::profile_from_json(old).gemm_bf16.empty());
  // A bf16 workload needs bf16 GEMMs (and no fp32 ones); a grid without bf16 lacks them all, a
  // grid with some interpolates; a shapes profile lacks those it has not measured.
  const perf::ShapeNeeds fp32 = perf::cpu_shape_needs({{kSmall, {32}}});
  const perf::ShapeNeeds bf16 = perf::cpu_shape_needs({{kSmall, {32}, Precision::bf16}});
  EXPECT_EQ(bf16.gemms_bf16, fp32.gemms);
  EXPECT_TRUE(bf16.gemms.empty());
  EXPECT_EQ(fp32.gemms.size(), 5u);  // 2 forward, 2 weight gradients, 1 input gradient
  perf::Profile grid = flat_profile("cpu", 1e11, 1e10);
  grid.coverage = "grid";
  EXPECT_EQ(perf::missing_shapes(grid, bf16).gemms_bf16, bf16.gemms_bf16);
  grid.gemm_bf16.push_back({"", 64, 64, 64, 4e11});
  EXPECT_TRUE(perf::missing_shapes(grid, bf16).gemms_bf16.empty());
  perf::Profile shapes = grid;
  shapes.coverage = "shapes";
  shapes.gemm_bf16 = {{"forward", 32, 128, 784, 3e11}};  // SMALL's first layer, forward
  const perf::ShapeNeeds lack = perf::missing_shapes(shapes, bf16);
  EXPECT_EQ(lack.gemms_bf16.size(), 4u);
  EXPECT_FALSE(lack.gemms_bf16.count({"forward", 32, 784, 128}));
}

TEST(CostModel, KernelCurvesInterpolateLinearly) {
  perf::Profile p = flat_profile("cpu", 1e11, 1e10);
  p.kernels["relu_forward"] = {{100, 1e-6}, {200, 3e-6}, {400, 5e-6}};
  EXPECT_DOUBLE_EQ(perf::kernel_seconds(p, "relu_forward", 50), 1e-6);
  EXPECT_DOUBLE_EQ(perf::kernel_seconds(p, "relu_forward", 150), 2e-6);
  EXPECT_DOUBLE_EQ(perf::kernel_seconds(p, "relu_forward", 800), 10e-6);
  EXPECT_LT(perf::kernel_seconds(p, "tanh_forward", 100), 0);
}

TEST(CostModel, TheCpuUpdateCostsAtLeastTheWholeStateAsOneStream) {
  // Each tensor alone fits a cache that all of them together overflow: per-tensor samples are
  // fast, the sample at the total size is slow; the update is priced at the slower of the two.
  // (With clipnorm the CPU keeps one update of every parameter after the gradients.)
  perf::Profile p = flat_profile("cpu", 1e11, 1e10);
  perf::ModelDesc clipped = kBig;
  clipped.optimizer = Adam({.clipnorm = 1.0});
  const std::vector<Op> ops = perf::step_ops(clipped, 32, DeviceKind::cpu, Mode::resident);
  const Op& adam = find_op(ops, "adam update");
  const int64_t total = kBig.parameters();
  p.kernels["adam"] = {{10, 1e-9 * 10}, {total / 2, 1e-9 * (total / 2)}, {total, 1e-8 * total}};
  const perf::Prediction slow = perf::predict({adam}, p, Mode::resident);
  EXPECT_NEAR(slow.op_seconds[0], 1e-8 * total, 1e-12);
  // When the whole stream is no slower per element, the per-tensor sum stands.
  p.kernels["adam"] = {{10, 1e-9 * 10}, {total, 1e-9 * total}};
  const perf::Prediction even = perf::predict({adam}, p, Mode::resident);
  EXPECT_NEAR(even.op_seconds[0], 1e-9 * total, 1e-9 * total * 1e-6);
}

TEST(CostModel, AnUpdateFusedIntoTheGradientCostsItsGemmAndEachOfItsTensorsAlone) {
  perf::Profile p = flat_profile("cpu", 1e11, 1e10);
  p.kernels["adam"] = {{10, 1e-9 * 10}, {2000000, 3e-9 * 2000000}};
  const std::vector<Op> ops = perf::step_ops(kBig, 32, DeviceKind::cpu, Mode::resident);
  const Op& w2 = find_op(ops, "dense_1 backward weights 1000->1000 + adam update");
  const perf::Prediction r = perf::predict({w2}, p, Mode::resident);
  const double expected = double(w2.flops) / 1e11 + perf::kernel_seconds(p, "adam", 1000000) +
                          perf::kernel_seconds(p, "adam", 1000);
  EXPECT_NEAR(r.op_seconds[0], expected, 1e-12);
  EXPECT_NEAR(r.phase_seconds[size_t(Phase::gemm)], expected, 1e-12);
  EXPECT_NEAR(r.fused_update_seconds, expected - double(w2.flops) / 1e11, 1e-12);
}

// ---- profiles --------------------------------------------------------------------------------
// The roofline floor (issue 26): each op at the larger of its FLOPs at the peak rate and its bytes
// at the bandwidth of the smallest level that holds them; none for the host's share.
TEST(CostModel, RooflineFloorPricesEachOpAtItsComputeOrItsMemoryLevel) {
  perf::Profile p = flat_profile("cpu", 1e11, 1e10);
  p.gemm.push_back({"forward", 1024, 1024, 1024, 4e11});  // the peak: the best rate measured
  p.memory_levels = {{"L2", 1 << 20, 1e12}, {"L3", 32 << 20, 1e11}, {"DRAM", 0, 1e10}};
  std::vector<Op> ops(5);
  ops[0].phase = Phase::host_overhead;
  ops[0].bytes_read = 1 << 30;  // no floor, whatever it records
  ops[1].phase = Phase::gemm;   // compute-bound: 8e9 FLOPs over 1 MB
  ops[1].flops = 8'000'000'000;
  ops[1].bytes_read = 1'000'000;
  ops[2].phase = Phase::elementwise;  // 0.5 MB in, 0.5 MB out: L2
  ops[2].bytes_read = ops[2].bytes_written = 500'000;
  ops[3].phase = Phase::optimizer;  // 16 MB read, 12 MB written: L3
  ops[3].bytes_read = 16'000'000;
  ops[3].bytes_written = 12'000'000;
  ops[4].phase = Phase::elementwise;  // 100 MB: DRAM
  ops[4].bytes_read = 100'000'000;
  const perf::Floor f = perf::roofline_floor(ops, p);
  EXPECT_DOUBLE_EQ(f.peak_flops_per_second, 4e11);
  EXPECT_EQ(f.op_seconds[0], 0.0);
  EXPECT_DOUBLE_EQ(f.op_seconds[1], 8e9 / 4e11);
  EXPECT_DOUBLE_EQ(f.op_seconds[2], 1e6 / 1e12);
  EXPECT_DOUBLE_EQ(f.op_seconds[3], 28e6 / 1e11);
  EXPECT_DOUBLE_EQ(f.op_seconds[4], 100e6 / 1e10);
  EXPECT_DOUBLE_EQ(f.gemm_seconds, 8e9 / 4e11);  // the GEMM phase's FLOPs alone
  EXPECT_DOUBLE_EQ(f.phase_seconds[size_t(Phase::elementwise)], 1e6 / 1e12 + 100e6 / 1e10);
  EXPECT_DOUBLE_EQ(f.step_seconds, 8e9 / 4e11 + 1e6 / 1e12 + 28e6 / 1e11 + 100e6 / 1e10);
  EXPECT_EQ(f.level_bytes, (std::vector<int64_t>{2'000'000, 28'000'000, 100'000'000}));
  // A profile from before the levels: every byte at memory_bytes_per_second.
  p.memory_levels.clear();
  const perf::Floor g = perf::roofline_floor(ops, p);
  ASSERT_EQ(g.levels.size(), 1u);
  EXPECT_DOUBLE_EQ(g.op_seconds[2], 1e6 / 1e10);
  // Below the prediction of a real step, which runs at rates no better than the peak.
  const auto step = perf::step_ops(kSmall, 32, DeviceKind::cpu, Mode::resident);
  EXPECT_LE(perf::roofline_floor(step, p).step_seconds,
            perf::predict(step, p, Mode::resident).step_seconds);
}

// A step measured below its roofline floor says the profile is wrong (explain's text and JSON).
TEST(CostModel, AStepBelowItsFloorAsksForARecalibration) {
  perf::ExplainResult r;
  r.floor.step_seconds = 100e-6;
  r.floor.gemm_seconds = 80e-6;
  r.floor.peak_flops_per_second = 1e11;
  r.floor.levels = {{"DRAM", 0, 1e10}};
  r.floor.level_bytes = {1'000'000};
  r.step_measured = 150e-6;
  EXPECT_FALSE(perf::below_floor(r));
  EXPECT_EQ(perf::floor_sentence(r).find("recalibrate"), std::string::npos);
  r.step_measured = 96e-6;  // within the timing's noise of the floor
  EXPECT_FALSE(perf::below_floor(r));
  r.step_measured = 75e-6;
  EXPECT_TRUE(perf::below_floor(r));
  EXPECT_NE(perf::floor_sentence(r).find("0.75x its roofline floor"), std::string::npos);
  EXPECT_NE(perf::floor_sentence(r).find("recalibrate with `crossover calibrate` and"),
            std::string::npos);
  perf::Profile p = flat_profile("cpu", 1e11, 1e10);
  p.threads = 1;
  p.source = "/home/u/.local/share/crossover/profiles/cpu-1t.json";
  EXPECT_NE(perf::floor_sentence(r, &p).find("`crossover calibrate --threads 1` and"),
            std::string::npos);
  r.floor.step_seconds = 0;  // no floor priced: nothing to say
  EXPECT_FALSE(perf::below_floor(r));
}

// A weight gradient with its optimizer update fused (the CPU's dense_backward_weights_update):
// the update's pass over weights and state comes after the GEMM, not hidden under its FLOPs.
TEST(CostModel, RooflineFloorAddsAFusedUpdateAfterItsGemm) {
  perf::Profile p = flat_profile("cpu", 1e11, 1e10);
  p.gemm.push_back({"forward", 1024, 1024, 1024, 1e11});
  p.memory_levels = {{"L2", 1 << 20, 1e12}, {"L3", 64 << 20, 1e11}, {"DRAM", 0, 1e10}};
  std::vector<Op> ops(1);
  Op& o = ops[0];
  o.phase = Phase::gemm;
  o.m = 32, o.k = 1000, o.n = 1000;
  o.flops = 2 * o.m * o.k * o.n;  // 64 MFLOP: 0.64 ms at the peak
  o.update = "adam";
  const int64_t gemm_read = 4 * (o.m * o.k + o.m * o.n);  // 256 kB: L2
  const int64_t params = o.k * o.n;                       // weights, m and v: 12 MB each way, L3
  o.bytes_read = gemm_read + 4 * params * 3;
  o.bytes_written = 4 * params * 3;
  const perf::Floor f = perf::roofline_floor(ops, p);
  const double update = 24e6 / 1e11;
  EXPECT_DOUBLE_EQ(f.update_seconds, update);
  EXPECT_DOUBLE_EQ(f.op_seconds[0], 64e6 / 1e11 + update);
  EXPECT_DOUBLE_EQ(f.gemm_seconds, 64e6 / 1e11);
  EXPECT_EQ(f.level_bytes, (std::vector<int64_t>{gemm_read, 24'000'000, 0}));
  // Without the update the same op is its GEMM alone, at the larger of compute and bytes.
  o.update.clear();
  EXPECT_DOUBLE_EQ(perf::roofline_floor(ops, p).op_seconds[0],
                   std::max(64e6 / 1e11, double(o.bytes_read + o.bytes_written) / 1e11));
}

TEST(Profile, JsonRoundTrip) {
  perf::Profile p = flat_profile("gpu", 5e13, 3e12);
  p.name = "NVIDIA H200";
  p.cores = 132;
  p.memory_bytes = int64_t{141} << 30;
  p.d2h_bytes_per_second.pinned.reset();
  p.gemm.push_back({"backward_weights", 784, 128, 32, 1.5e12});
  p.kernels["adam"] = {{1023, 2e-6}, {1024, 2.1e-6}};
  p.quick = true;
  p.created = "2025-01-01T00:00:00Z";
  p.memory_levels = {{"L2", 2 << 20, 4e11}, {"DRAM", 0, 2e10}};
  const json j = perf::profile_to_json(p);
  EXPECT_TRUE(j["d2h_bytes_per_second"]["pinned"].is_null());
  EXPECT_EQ(j["device"]["name"], "NVIDIA H200");
  const perf::Profile q = perf::profile_from_json(j);
  EXPECT_EQ(perf::profile_to_json(q), j);
  EXPECT_EQ(q.gemm.size(), 2u);
  EXPECT_EQ(q.gemm[1].op, "backward_weights");
  EXPECT_EQ(q.kernels.at("adam")[1].elements, 1024);
  EXPECT_FALSE(q.d2h_bytes_per_second.pinned.has_value());
  EXPECT_DOUBLE_EQ(*q.h2d_bytes_per_second.pinned, 2e10);
  ASSERT_EQ(q.memory_levels.size(), 2u);
  EXPECT_EQ(q.memory_levels[0].name, "L2");
  EXPECT_EQ(q.memory_levels[0].bytes, 2 << 20);
  EXPECT_DOUBLE_EQ(q.memory_levels[1].bytes_per_second, 2e10);
  json old = j;
  old.erase("memory_levels");  // a profile from before them
  EXPECT_TRUE(perf::profile_from_json(old).memory_levels.empty());
}

std::string error_of(const json& j) {
  try {
    perf::profile_from_json(j, "p.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Profile, ValidationNamesTheBadField) {
  const json good = perf::profile_to_json(flat_profile("cpu", 1e11, 1e10));
  EXPECT_EQ(error_of(good), "");
  json j = good;
  j["gemm"][0].erase("flops_per_second");
  EXPECT_NE(error_of(j).find("'gemm[0].flops_per_second' is missing"), std::string::npos)
      << error_of(j);
  j = good;
  j["gemm"][0]["flops_per_second"] = -3;
  EXPECT_NE(error_of(j).find("gemm[0].flops_per_second"), std::string::npos);
  j = good;
  j["memory_bytes_per_second"] = "fast";
  EXPECT_NE(error_of(j).find("'memory_bytes_per_second' must be a number"), std::string::npos);
  j = good;
  j["device"]["kind"] = "tpu";
  EXPECT_NE(error_of(j).find("device.kind"), std::string::npos);
  j = good;
  j.erase("device");
  EXPECT_NE(error_of(j).find("'device' is missing"), std::string::npos);
  j = good;
  j["h2d_bytes_per_second"] = 5;
  EXPECT_NE(error_of(j).find("h2d_bytes_per_second"), std::string::npos);
  j = good;
  j["gemm"] = json::array();
  EXPECT_NE(error_of(j).find("'gemm'"), std::string::npos);
  j = good;
  j["kernels"] = {
      {"adam", {{{"elements", 10}, {"seconds", 1e-6}}, {{"elements", 5}, {"seconds", 1e-6}}}}};
  EXPECT_NE(error_of(j).find("kernels.adam[1].elements"), std::string::npos);
  j = good;
  j["memory_levels"] = {{{"name", "L3"}, {"bytes", 1 << 25}, {"bytes_per_second", 1e11}},
                        {{"name", "L2"}, {"bytes", 1 << 20}, {"bytes_per_second", 4e11}}};
  EXPECT_NE(error_of(j).find("'memory_levels[1].bytes' must ascend"), std::string::npos)
      << error_of(j);
  j["memory_levels"] = {{{"name", "DRAM"}, {"bytes", 0}, {"bytes_per_second", 1e10}},
                        {{"name", "L9"}, {"bytes", 1 << 20}, {"bytes_per_second", 4e11}}};
  EXPECT_NE(error_of(j).find("memory_levels[1].bytes"), std::string::npos);
  j["memory_levels"] = {{{"name", "L2"}, {"bytes", 1 << 20}, {"bytes_per_second", 0}}};
  EXPECT_NE(error_of(j).find("memory_levels[0].bytes_per_second"), std::string::npos);
  // A GPU profile must have its latencies and copies.
  j = perf::profile_to_json(flat_profile("gpu", 1e13, 1e12));
  j["launch_seconds"] = 0;
  EXPECT_NE(error_of(j).find("launch_seconds"), std::string::npos);
  EXPECT_NE(error_of(j).find("p.json"), std::string::npos);
}

TEST(Profile, LoadAndSaveFiles) {
  const fs::path dir = fs::temp_directory_path() / ("crossover_perf_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "p.json").string();
  perf::save_profile(flat_profile("cpu", 1e11, 1e10), path);
  const perf::Profile q = perf::load_profile(path);
  EXPECT_EQ(q.source, path);
  EXPECT_EQ(q.name, "test cpu");
  std::ofstream(dir / "bad.json") << "{ not json";
  EXPECT_THROW(perf::load_profile((dir / "bad.json").string()), Error);
  EXPECT_THROW(perf::load_profile((dir / "missing.json").string()), Error);
  fs::remove_all(dir);
}

TEST(Profile, ShippedProfilesAreValid) {
  const fs::path dir = fs::path(crossover::testing_util::source_dir()) / "profiles";
  int count = 0;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json") {
        EXPECT_NO_THROW(perf::load_profile(e.path().string())) << e.path();
        ++count;
      }
  RecordProperty("shipped_profiles", count);
}

// ---- the wrappers, on the CPU -----------------------------------------------------------------
struct TinyData {
  Tensor x, y;
};
TinyData tiny_data(int64_t n) {
  TinyData d{Tensor({n, 6, 6}), Tensor({n})};
  for (int64_t i = 0; i < d.x.size(); ++i)
    d.x[i] = philox_uniform(7, RngStream::init, 1, 0, uint64_t(i));
  for (int64_t i = 0; i < n; ++i) d.y[i] = float(i % 3);
  return d;
}

Sequential tiny_model() {
  return Sequential({Flatten({6, 6}), Dense(16, "relu"), Dropout(0.25), Dense(3, "softmax")});
}

TEST(BackendWrappers, NaiveModeTrainsExactlyAsResidentOnTheCpu) {
  const TinyData d = tiny_data(100);  // 3 full batches of 32 and a ragged one of 4
  Sequential plain = tiny_model();
  plain.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
                {.device = "cpu", .threads = 1, .seed = 3});
  const History hp = plain.fit(d.x, d.y, {.epochs = 2, .batch_size = 32, .verbose = 0});

  perf::NaiveBackend* naive = nullptr;
  Sequential wrapped = tiny_model();
  CompileOptions o{.device = "cpu", .threads = 1, .seed = 3, .graphs = false};
  o.wrap_backend = [&](std::unique_ptr<Backend> b) -> std::unique_ptr<Backend> {
    auto n = std::make_unique<perf::NaiveBackend>(std::move(b));
    naive = n.get();
    return n;
  };
  wrapped.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, o);
  const History hn = wrapped.fit(d.x, d.y, {.epochs = 2, .batch_size = 32, .verbose = 0});
  ASSERT_NE(naive, nullptr);
  EXPECT_EQ(naive->host_batches(), 2 * 4 * 2);  // x and y, 4 steps, 2 epochs
  ASSERT_EQ(hp.epochs.size(), hn.epochs.size());
  for (std::size_t e = 0; e < hp.epochs.size(); ++e)
    EXPECT_EQ(hp.epochs[e].loss, hn.epochs[e].loss);
  EXPECT_EQ(perf::max_relative_weight_difference(plain.get_weights(), wrapped.get_weights()), 0.0);
  // Evaluation goes through the host too, and agrees.
  const EvaluateResult ep = plain.evaluate(d.x, d.y, {.batch_size = 32, .verbose = 0});
  const EvaluateResult en = wrapped.evaluate(d.x, d.y, {.batch_size = 32, .verbose = 0});
  EXPECT_EQ(ep.loss, en.loss);
  EXPECT_EQ(ep.accuracy, en.accuracy);
}

TEST(BackendWrappers, TimingCountsEveryCallOfTheCostModelsOpList) {
  const TinyData d = tiny_data(64);
  perf::TimingBackend* timing = nullptr;
  Sequential m = tiny_model();
  perf::compile_for(m, {.device = "cpu", .threads = 1, .seed = 1, .timing = &timing});
  ASSERT_NE(timing, nullptr);
  const perf::StepTiming t = perf::time_steps(m, d.x, d.y, 16, 8, 0, timing);
  EXPECT_EQ(t.steps, 8);
  const perf::PhaseTimes& pt = timing->times();
  EXPECT_EQ(pt.steps, 8);
  int64_t calls = 0;
  for (const Op& o : perf::step_ops(perf::describe(m), 16, DeviceKind::cpu, Mode::resident))
    if (o.phase != Phase::host_overhead) calls += o.calls;
  EXPECT_EQ(pt.calls, 8 * calls);
  double attributed = 0;
  for (double s : pt.seconds) attributed += s;
  EXPECT_LE(attributed, pt.step_wall_seconds * (1 + 1e-9));
  EXPECT_EQ(pt.seconds[size_t(Phase::h2d_copy)], 0.0);  // nothing copied inside a resident step
}

// Logs the calls a real step makes (inside each replay), with the shape the op list gives them.
class CallLog final : public perf::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  struct Entry {
    std::string call;
    int64_t m = 0, k = 0, n = 0;
    std::vector<int64_t> segments;
  };
  std::vector<std::vector<Entry>> steps;

  std::unique_ptr<StepGraph> capture(std::function<void()> enqueue, bool use_graph) override {
    struct Graph final : StepGraph {
      CallLog& log;
      std::unique_ptr<StepGraph> inner;
      Graph(CallLog& l, std::unique_ptr<StepGraph> g) : log(l), inner(std::move(g)) {}
      void replay() override {
        log.steps.emplace_back();
        log.in_step_ = true;
        inner->replay();
        log.in_step_ = false;
      }
    };
    return std::make_unique<Graph>(*this, inner().capture(std::move(enqueue), use_graph));
  }
  void gather_rows(const float* src, int64_t cols, const int32_t* idx, int64_t batch,
                   const StepCounters* c, int64_t m, float* dst) override {
    log("gather_rows", m, 0, cols);
    inner().gather_rows(src, cols, idx, batch, c, m, dst);
  }
  void dense_forward(const float* x, const float* w, const float* b, float* y, int64_t m, int64_t k,
                     int64_t n, ActivationKind act) override {
    log("dense_forward", m, k, n);
    inner().dense_forward(x, w, b, y, m, k, n, act);
  }
  void dense_backward_weights(const float* x, const float* dy, float* dw, float* db, int64_t m,
                              int64_t k, int64_t n) override {
    log("dense_backward_weights", m, k, n);
    inner().dense_backward_weights(x, dy, dw, db, m, k, n);
  }
  void dense_backward_weights_update(const float* x, const float* dy, const ParamSlot& kernel,
                                     const ParamSlot* bias, int64_t m, int64_t k, int64_t n,
                                     const OptimizerConfig& config,
                                     const StepCounters* counters) override {
    log("dense_backward_weights_update", m, k, n);
    if (in_step_) {
      steps.back().back().segments.push_back(kernel.n);
      if (bias) steps.back().back().segments.push_back(bias->n);
    }
    inner().dense_backward_weights_update(x, dy, kernel, bias, m, k, n, config, counters);
  }
  void dense_backward_input(const float* dy, const float* w, float* dx, int64_t m, int64_t k,
                            int64_t n) override {
    log("dense_backward_input", m, k, n);
    inner().dense_backward_input(dy, w, dx, m, k, n);
  }
  void activation_forward(ActivationKind a, float alpha, const float* x, float* y, int64_t m,
                          int64_t n) override {
    log("activation_forward", m, 0, n);
    inner().activation_forward(a, alpha, x, y, m, n);
  }
  void activation_backward(ActivationKind a, float alpha, const float* x, const float* y,
                           const float* dy, float* dx, int64_t m, int64_t n) override {
    log("activation_backward", m, 0, n);
    inner().activation_backward(a, alpha, x, y, dy, dx, m, n);
  }
  void dropout_forward(const float* x, float* y, uint8_t* mask, int64_t m, int64_t n, float rate,
                       uint64_t seed, uint32_t layer, const StepCounters* c,
                       int64_t first_row) override {
    log("dropout_forward", m, 0, n);
    inner().dropout_forward(x, y, mask, m, n, rate, seed, layer, c, first_row);
  }
  void dropout_backward(const float* dy, const uint8_t* mask, float* dx, int64_t m, int64_t n,
                        float rate) override {
    log("dropout_backward", m, 0, n);
    inner().dropout_backward(dy, mask, dx, m, n, rate);
  }
  void relu_dropout_backward(const float* y, const uint8_t* mask, const float* dy, float* dz,
                             int64_t m, int64_t n, float rate) override {
    log("relu_dropout_backward", m, 0, n);
    inner().relu_dropout_backward(y, mask, dy, dz, m, n, rate);
  }
  void loss_forward_backward(LossConfig loss, ActivationKind act, const float* out,
                             const float* targets, const float* weights, float* probs, float* d_out,
                             int64_t m, int64_t c, StepCounters* counters,
                             int64_t mean_rows) override {
    log("loss_forward_backward", m, 0, c);
    inner().loss_forward_backward(loss, act, out, targets, weights, probs, d_out, m, c, counters,
                                  mean_rows);
  }
  void optimizer_step(const OptimizerConfig& config, std::span<const ParamSlot> params,
                      StepCounters* counters) override {
    log("optimizer_step", 0, 0, 0);
    if (in_step_)
      for (const ParamSlot& p : params) steps.back().back().segments.push_back(p.n);
    inner().optimizer_step(config, params, counters);
  }

 private:
  void log(const char* call, int64_t m, int64_t k, int64_t n) {
    if (in_step_) steps.back().push_back({call, m, k, n, {}});
  }
  bool in_step_ = false;
};

TEST(CostModel, OpListIsTheCallsARealFitStepMakes) {
  // Every kind of layer, a one-hot loss, SGD with momentum; 70 samples at batch 16: four full
  // steps and a ragged one of 6 rows.
  auto make = [] {
    return Sequential({Flatten({6, 6}), Dense(16, "sigmoid"), Dense(12, "relu"), Dropout(0.25),
                       Dense(8), Activation("tanh"), Dropout(0.1), Dense(3, "softmax")});
  };
  const TinyData d = tiny_data(70);
  Tensor onehot({70, 3});
  for (int64_t i = 0; i < 70; ++i) onehot[i * 3 + int64_t(d.y[i])] = 1.0f;
  CallLog* log = nullptr;
  Sequential m = make();
  CompileOptions o{.device = "cpu", .threads = 1, .seed = 5};
  o.wrap_backend = [&](std::unique_ptr<Backend> b) -> std::unique_ptr<Backend> {
    auto l = std::make_unique<CallLog>(std::move(b));
    log = l.get();
    return l;
  };
  m.compile(SGD({.momentum = 0.9}), "categorical_crossentropy", {}, o);
  m.fit(d.x, onehot, {.epochs = 1, .batch_size = 16, .shuffle = false, .verbose = 0});
  ASSERT_NE(log, nullptr);
  ASSERT_EQ(log->steps.size(), 5u);
  const std::vector<std::pair<std::size_t, int64_t>> cases = {{0, 16}, {4, 6}};
  for (const auto& [step, rows] : cases) {
    const std::vector<Op> ops =
        perf::step_ops(perf::describe(m), rows, DeviceKind::cpu, Mode::resident);
    ASSERT_EQ(ops.front().phase, Phase::host_overhead);
    const auto& made = log->steps[step];
    ASSERT_EQ(ops.size() - 1, made.size()) << "rows " << rows;
    for (std::size_t i = 0; i < made.size(); ++i) {
      const Op& op = ops[i + 1];
      SCOPED_TRACE(op.name);
      EXPECT_EQ(op.call, made[i].call);
      EXPECT_EQ(op.m, made[i].m);
      EXPECT_EQ(op.k, made[i].k);
      EXPECT_EQ(op.n, made[i].n);
      EXPECT_EQ(op.segments, made[i].segments);
    }
  }
}

TEST(ChooseDevice, WithoutAGpuItIsTheCpuAndSaysWhy) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  const Sequential m = tiny_model();
  std::string why;
  EXPECT_EQ(perf::choose_device(m, 32, why), "cpu");
  EXPECT_NE(why.find("no GPU present"), std::string::npos) << why;
}

// ---- the thread count --------------------------------------------------------------------------

TEST(Threads, CandidatesArePowersOfTwoThenTheCores) {
  EXPECT_EQ(perf::thread_candidates(1), (std::vector<int>{1}));
  EXPECT_EQ(perf::thread_candidates(2), (std::vector<int>{1, 2}));
  EXPECT_EQ(perf::thread_candidates(6), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(perf::thread_candidates(16), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(perf::thread_candidates(0), (std::vector<int>{1}));
}

TEST(Threads, TheRuleOnTheH200HostsMeasurements) {
  // us per step measured there (bench/RESULTS.md, 2026-11-30), default wait policy.
  auto trials = [](std::vector<double> us) {
    std::vector<perf::ThreadsTrial> t;
    int n = 1;
    for (double u : us) t.push_back({n, u * 1e-6}), n *= 2;
    return t;
  };
  EXPECT_EQ(perf::pick_threads(trials({235.5, 261.8, 242.7, 163.2, 707.3})), 8);  // SMALL
  EXPECT_EQ(perf::pick_threads(trials({6334, 2721, 2672, 1959, 1629})), 16);      // BIG
  EXPECT_EQ(perf::pick_threads(trials({56.8, 104.0, 179.1, 536.0, 1683.7})), 1);  // width 32
  // Within 5%: the smaller count.
  EXPECT_EQ(perf::pick_threads(trials({100, 96, 120})), 1);
  EXPECT_EQ(perf::pick_threads(trials({100, 94, 92})), 2);
  EXPECT_EQ(perf::pick_threads({}), 1);
  // Trials stop once the last is 2.5x the best, not before.
  EXPECT_FALSE(perf::past_the_optimum(trials({56.8})));
  EXPECT_FALSE(perf::past_the_optimum(trials({56.8, 104.0})));
  EXPECT_TRUE(perf::past_the_optimum(trials({56.8, 104.0, 179.1})));
  EXPECT_FALSE(perf::past_the_optimum(trials({235.5, 261.8, 242.7, 163.2})));
}

TEST(Threads, FastestCountIsOneOfTheTrialsAndTheModelsTrainAtIt) {
  std::vector<int> made;
  const TinyData d = tiny_data(64);
  const perf::ThreadsChoice c = perf::fastest_cpu_threads(
      [&](int t) {
        made.push_back(t);
        Sequential m = tiny_model();
        perf::compile_for(m, {.device = "cpu", .threads = t});
        return m;
      },
      d.x, d.y, 16, 2, 4, 0.2);
  ASSERT_FALSE(c.trials.empty());
  EXPECT_EQ(c.trials.front().threads, 1);
  EXPECT_GE(made.size(), c.trials.size());      // one model a trial,
  EXPECT_LE(made.size(), c.trials.size() + 2);  // and the two fastest once more
  EXPECT_EQ(c.threads, perf::pick_threads(c.trials));
  for (const perf::ThreadsTrial& t : c.trials) EXPECT_GT(t.seconds_per_step, 0);
  EXPECT_NE(c.summary().find("a step"), std::string::npos) << c.summary();
}

TEST(Threads, ASavedCountIsRecheckedAgainstOneThread) {
  const TinyData d = tiny_data(64);
  std::vector<int> made;
  auto make = [&](int t) {
    made.push_back(t);
    Sequential m = tiny_model();
    perf::compile_for(m, {.device = "cpu", .threads = t});
    return m;
  };
  // One thread needs no second look.
  EXPECT_TRUE(perf::recheck_threads(make, d.x, d.y, 16, 1).holds);
  EXPECT_TRUE(made.empty());
  // Otherwise both are timed, the saved count first, and the verdict follows the 1.5x rule.
  const perf::ThreadsRecheck r = perf::recheck_threads(make, d.x, d.y, 16, 2, 4, 0.2);
  EXPECT_EQ(made, (std::vector<int>{2, 1}));
  EXPECT_EQ(r.saved.threads, 2);
  EXPECT_EQ(r.one.threads, 1);
  EXPECT_GT(r.saved.seconds_per_step, 0);
  EXPECT_GT(r.one.seconds_per_step, 0);
  EXPECT_EQ(r.holds, r.saved.seconds_per_step <= 1.5 * r.one.seconds_per_step);
}

TEST(Plot, SvgHasPanelsLinesAndTheCrossover) {
  perf::PlotSpec s;
  s.title = "t <&>";
  s.x_label = "width";
  s.y_label = "seconds";
  perf::PlotPanel p;
  p.title = "batch 32";
  p.series.push_back({"cpu (measured)", "#000", false, {{32, 1.0}, {64, 2.0}, {128, 4.0}}});
  p.series.push_back({"gpu (predicted)", "#f00", true, {{32, 3.0}, {64, 2.5}, {128, 2.0}}});
  p.marker_x = 64;
  p.marker_label = "crossover: width 64";
  s.panels.push_back(p);
  const std::string svg = perf::svg_plot(s);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("t &lt;&amp;&gt;"), std::string::npos);
  std::size_t polylines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1))
    ++polylines;
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find("crossover: width 64"), std::string::npos);
}

// ---- the commands, end to end -------------------------------------------------------------------
struct Result {
  int code = -1;
  std::string out, err;
};

Result run(const std::string& args) {
  const fs::path dir = fs::temp_directory_path();
  const std::string tag = std::to_string(::getpid());
  const std::string o = (dir / ("perf_out_" + tag)).string(),
                    e = (dir / ("perf_err_" + tag)).string();
  const std::string cmd = std::string("'") + crossover::testing_util::binary_path() + "' " + args +
                          " >'" + o + "' 2>'" + e + "'";
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream f(p);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };
  r.out = slurp(o);
  r.err = slurp(e);
  fs::remove(o);
  fs::remove(e);
  return r;
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

bool gpu_profile_shipped() {
  const fs::path dir = fs::path(crossover::testing_util::source_dir()) / "profiles";
  if (!fs::is_directory(dir)) return false;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") {
      try {
        if (perf::load_profile(e.path().string()).kind == "gpu") return true;
      } catch (const Error&) {
      }
    }
  return false;
}

class PerfCommands : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("crossover_perf_cmd_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // What the commands calibrate on demand goes here, never into the real HOME.
    env_.emplace("CROSSOVER_PROFILE_DIR", path("profiles").c_str());
  }
  void TearDown() override {
    env_.reset();
    fs::remove_all(dir_);
  }
  std::optional<testing_util::ScopedEnv> env_;
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(PerfCommands, CalibrateQuickWritesAValidProfile) {
  const Result r = run("calibrate --quick --threads 1 --quiet --out '" + path("cpu.json") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = read_json(path("cpu.json"));
  for (const char* k :
       {"launch_seconds", "graph_node_seconds", "sync_seconds", "h2d_bytes_per_second",
        "d2h_bytes_per_second", "memory_bytes_per_second", "memory_levels", "gemm"})
    EXPECT_TRUE(j.contains(k)) << k;
  // DRAM at least, the unbounded level, last.
  ASSERT_FALSE(j["memory_levels"].empty());
  EXPECT_EQ(j["memory_levels"].back()["name"], "DRAM");
  EXPECT_EQ(j["memory_levels"].back()["bytes"], 0);
  EXPECT_EQ(j["device"]["kind"], "cpu");
  EXPECT_FALSE(j["device"]["name"].get<std::string>().empty());
  EXPECT_EQ(j["launch_seconds"], 0);
  EXPECT_TRUE(j["h2d_bytes_per_second"]["pageable"].is_null());
  EXPECT_TRUE(j["d2h_bytes_per_second"]["pinned"].is_null());
  ASSERT_FALSE(j["gemm"].empty());
  for (const char* k : {"m", "n", "k", "flops_per_second"})
    EXPECT_TRUE(j["gemm"][0].contains(k)) << k;
  EXPECT_NO_THROW(perf::load_profile(path("cpu.json")));
  EXPECT_EQ(run("calibrate --quick --device cuda:7 --out '" + path("g.json") + "'").code, 2);
  EXPECT_EQ(run("calibrate --quick --out /nonexistent-folder/p.json").code, 2);
}

TEST_F(PerfCommands, ExplainSplitsAStepIntoPhases) {
  const Result r = run("explain --model small --data mnist-10k --batch-size 32 --steps 6 --json '" +
                       path("e.json") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("dominates"), std::string::npos) << r.out;
  const json j = read_json(path("e.json"));
  ASSERT_EQ(j["phases"].size(), 8u);
  std::vector<std::string> names;
  double sum = 0;
  for (const json& p : j["phases"]) {
    names.push_back(p["name"]);
    EXPECT_TRUE(p.contains("measured_seconds"));
    EXPECT_TRUE(p.contains("predicted_seconds"));
    sum += p["measured_seconds"].get<double>();
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"host_overhead", "h2d_copy", "d2h_copy", "gemm",
                                      "elementwise", "optimizer", "sync_wait", "allreduce"}));
  EXPECT_EQ(j["phases"][7]["measured_seconds"], 0.0);  // one process: no allreduce
  EXPECT_EQ(j["ranks"], 1);
  const double step = j["step_seconds"]["measured"];
  EXPECT_GT(step, 0);
  EXPECT_NEAR(sum, step, 1e-9 * std::max(1.0, step));  // the phases add up to the step
  EXPECT_TRUE(j["step_seconds"].contains("predicted"));
  EXPECT_FALSE(j["ops"].empty());
  // The physical floor: below the measured step (a floor), the GEMM floor below it.
  ASSERT_TRUE(j["floor"].is_object()) << j.dump();
  EXPECT_GT(j["floor"]["step_seconds"].get<double>(), 0);
  EXPECT_LE(j["floor"]["gemm_seconds"].get<double>(), j["floor"]["step_seconds"].get<double>());
  EXPECT_GT(j["floor"]["x_roofline"].get<double>(), 0);
  EXPECT_FALSE(j["floor"]["levels"].empty());
  EXPECT_NE(r.out.find("roofline floor"), std::string::npos) << r.out;
  EXPECT_TRUE(j["fused_step"].is_null());  // without --fused-step
  EXPECT_EQ(run("explain --model small --data mnist-10k --device cpu --mode naive").code, 2);
  EXPECT_EQ(run("explain --model small --data mnist-10k --mode sideways").code, 2);
}

// --fused-step on the CPU: the fused step beside the unfused resident one on each GPU profile
// found: the shipped H200's (without the fused step's rates: unpriced, in one line) and a copy of
// it with rates, in the user's folder (priced).
TEST_F(PerfCommands, ExplainFusedStepPricesItOnEachGpuProfile) {
  const fs::path shipped =
      fs::path(crossover::testing_util::source_dir()) / "profiles" / "gpu-nvidia-h200.json";
  if (!fs::exists(shipped)) GTEST_SKIP() << "no shipped H200 profile";
  perf::Profile g = perf::load_profile(shipped.string());
  g.name = "NVIDIA H200 (with fused rates)";
  g.fused_step = FusedStepRates{1.5e-6, 2e10, 2, 50 << 20};
  fs::create_directories(path("profiles"));
  perf::save_profile(g, path("profiles") + "/gpu-test-fused.json");
  const Result r =
      run("explain --model small --data mnist-10k --batch-size 32 --steps 4 "
          "--fused-step --json '" +
          path("e.json") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("The fused step (--fused-step) on NVIDIA H200 is unpriced"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("The fused step (--fused-step) on NVIDIA H200 (with fused rates) is "
                       "predicted at"),
            std::string::npos)
      << r.out;
  const json j = read_json(path("e.json"));
  ASSERT_TRUE(j["fused_step"].is_array()) << j.dump();
  int priced = 0, unpriced = 0;
  for (const json& f : j["fused_step"]) {
    EXPECT_TRUE(f["eligible"].get<bool>()) << f.dump();
    if (f["priced"].get<bool>()) {
      ++priced;
      EXPECT_GT(f["step_seconds"].get<double>(), 0);
      EXPECT_GT(f["unfused_step_seconds"].get<double>(), 0);
      EXPECT_EQ(f["stages"].size(), 6u);
      EXPECT_GE(f["barriers"].get<int>(), 5);
    } else {
      ++unpriced;
      EXPECT_TRUE(f["step_seconds"].is_null());
      EXPECT_NE(f["unpriced"].get<std::string>().find("calibrate"), std::string::npos);
    }
  }
  EXPECT_EQ(priced, 1);
  EXPECT_GE(unpriced, 1);
}

TEST_F(PerfCommands, CompareRunsTheCpuAndSaysWhatIsMissing) {
  const Result r =
      run("compare --model small --data mnist-10k --epochs 1 --batch-size 128 --seed 1 --json '" +
          path("c.json") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = read_json(path("c.json"));
  ASSERT_GE(j["runs"].size(), 1u);
  const json& cpu = j["runs"][0];
  EXPECT_EQ(cpu["device"], "cpu");
  EXPECT_EQ(cpu["mode"], "resident");
  EXPECT_EQ(cpu["measured"], true);
  EXPECT_EQ(cpu["threads"]["chosen_by"], "measurement");  // no --threads: measured first
  EXPECT_GE(cpu["threads"]["threads"].get<int>(), 1);
  EXPECT_GT(cpu["seconds_per_epoch"].get<double>(), 0);
  EXPECT_GT(cpu["seconds_per_step"].get<double>(), 0);
  EXPECT_GT(cpu["test_accuracy"].get<double>(), 0.5);
  EXPECT_TRUE(j["notes"].is_array());
  // The winner is a row of the table: the measured CPU, or a GPU (measured, or predicted from a
  // shipped profile where none is present), and says which.
  bool winner_is_a_row = false;
  for (const json& run : j["runs"])
    winner_is_a_row |= run["device"] == j["winner"]["device"] &&
                       run["mode"] == j["winner"]["mode"] &&
                       run["measured"] == j["winner"]["measured"];
  EXPECT_TRUE(winner_is_a_row) << j["winner"].dump();
  if (cuda_device_count() == 0) {
    const std::string notes = j["notes"].dump();
    EXPECT_NE(notes.find("no GPU present"), std::string::npos);
    if (!gpu_profile_shipped()) {
      EXPECT_NE(notes.find("no GPU calibration profile is shipped yet: GPU rows omitted"),
                std::string::npos);
      EXPECT_EQ(j["runs"].size(), 1u);
      EXPECT_EQ(j["winner"]["device"], "cpu");
    } else {
      for (std::size_t i = 1; i < j["runs"].size(); ++i) EXPECT_EQ(j["runs"][i]["measured"], false);
    }
  }
}

TEST_F(PerfCommands, SweepWritesJsonCsvAndAPlot) {
  const Result r = run(
      "sweep --data mnist-10k --widths 32,64 --batch-sizes 64 --steps 4 --max-seconds 1 --json '" +
      path("s.json") + "' --csv '" + path("s.csv") + "' --plot '" + path("s.svg") + "'");
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = read_json(path("s.json"));
  int measured = 0;
  for (const json& p : j["points"]) {
    for (const char* k : {"width", "batch_size", "device", "mode", "seconds_per_epoch", "measured"})
      EXPECT_TRUE(p.contains(k)) << k;
    if (p["measured"] == true) ++measured;
    if (p["device"] == "cpu") {
      EXPECT_GE(p["threads"].get<int>(), 1) << p.dump();
    }
  }
  EXPECT_EQ(measured, 2);  // two widths on the CPU
  ASSERT_EQ(j["crossover"].size(), 1u);
  EXPECT_EQ(j["crossover"][0]["batch_size"], 64);
  EXPECT_TRUE(j["crossover"][0].contains("width"));
  std::ifstream csv(path("s.csv"));
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("width,batch_size,device,mode,measured,seconds_per_epoch", 0), 0u);
  EXPECT_EQ(header.substr(header.rfind(',') + 1), "threads") << header;
  std::ifstream svg_file(path("s.svg"));
  std::stringstream svg;
  svg << svg_file.rdbuf();
  EXPECT_EQ(svg.str().rfind("<svg", 0), 0u);
  EXPECT_NE(svg.str().find("<polyline"), std::string::npos);
  EXPECT_NE(svg.str().find("</svg>"), std::string::npos);
  EXPECT_EQ(run("sweep --data mnist-10k --widths 32,x --batch-sizes 64").code, 2);
  EXPECT_EQ(run("sweep --data mnist-10k --widths 32 --batch-sizes 64 --layers 3").code, 2);
  EXPECT_EQ(
      run("sweep --data mnist-10k --widths 32 --batch-sizes 64 --plot '" + path("p.png") + "'")
          .code,
      2);
}

}  // namespace
}  // namespace crossover
