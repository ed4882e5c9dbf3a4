// The same seed trains the same model on the CPU and on a GPU: after 100 steps every layer's
// weights agree to 1e-3 (relative Frobenius norm), and the per-epoch losses of 3 epochs to 0.5%.
// Float32 with TF32 off on the GPU (the default). The MLPs of the seed and Keras's MNIST convnet
// (cuDNN's convolutions against oneDNN's; its Dropout draws the same masks on both devices, or
// the weights could not agree), and that convnet with BatchNormalization after each convolution.
// Skipped where no GPU is present.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/backend.h"
#include "data/dataset.h"
#include "nn/sequential.h"
#include "test_util.h"

namespace crossover {
namespace {

enum class Model { small, big, convnet, convnet_bn };

Sequential model_of(Model which) {
  if (which == Model::convnet_bn)  // the convnet with BatchNormalization after each convolution
    return Sequential({Input({28, 28, 1}), Conv2D(32, 3, "relu"), BatchNormalization(),
                       MaxPooling2D(2), Conv2D(64, 3, "relu"), BatchNormalization(),
                       MaxPooling2D(2), Flatten(), Dropout(0.5), Dense(10, "softmax")});
  if (which == Model::convnet)  // Keras's "Simple MNIST convnet" (as in conv_test.cpp)
    return Sequential({Input({28, 28, 1}), Conv2D(32, 3, "relu"), MaxPooling2D(2),
                       Conv2D(64, 3, "relu"), MaxPooling2D(2), Flatten(), Dropout(0.5),
                       Dense(10, "softmax")});
  if (which == Model::big)
    return Sequential({Flatten({28, 28}), Dense(1000, "relu"), Dropout(0.2), Dense(1000, "relu"),
                       Dropout(0.2), Dense(10, "softmax")});
  return Sequential({Flatten({28, 28}), Dense(128, "relu"), Dropout(0.2), Dense(10, "softmax")});
}

void check_parity(Model which) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: CPU/GPU parity needs a GPU";
  const testing_util::Mnist10k& d = testing_util::Mnist10k::get();
  // 100 steps of batch 32.
  const Tensor x = d.x_train.rows(0, 3200), y = d.y_train.rows(0, 3200);
  Sequential cpu = model_of(which), gpu = model_of(which);
  cpu.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
              {.device = "cpu", .seed = 3});
  gpu.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
              {.device = "cuda", .seed = 3});
  cpu.fit(x, y, {.epochs = 1, .verbose = 0});
  gpu.fit(x, y, {.epochs = 1, .verbose = 0});
  EXPECT_EQ(gpu.optimizer_steps(), 100);
  const auto wc = cpu.get_weights(), wg = gpu.get_weights();
  ASSERT_EQ(wc.size(), wg.size());
  for (std::size_t i = 0; i < wc.size(); ++i)
    EXPECT_LE(testing_util::relative_difference(wg[i].value, wc[i].value), 1e-3) << wc[i].name;

  Sequential cpu3 = model_of(which), gpu3 = model_of(which);
  cpu3.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
               {.device = "cpu", .seed = 4});
  gpu3.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"},
               {.device = "cuda", .seed = 4});
  const History hc = cpu3.fit(d.x_train, d.y_train, {.epochs = 3, .verbose = 0});
  const History hg = gpu3.fit(d.x_train, d.y_train, {.epochs = 3, .verbose = 0});
  for (int e = 0; e < 3; ++e)
    EXPECT_NEAR(hg.epochs[e].loss, hc.epochs[e].loss, 0.005 * hc.epochs[e].loss)
        << "epoch " << e + 1;
}

TEST(Parity, SmallModelFollowsTheSameTrajectoryOnCpuAndGpu) { check_parity(Model::small); }
TEST(Parity, BigModelFollowsTheSameTrajectoryOnCpuAndGpu) { check_parity(Model::big); }
TEST(Parity, MnistConvnetFollowsTheSameTrajectoryOnCpuAndGpu) { check_parity(Model::convnet); }
// Batch normalization (crossover's CUDA kernels against oneDNN's): the weights include the moving
// statistics, so they are compared too.
TEST(Parity, ConvnetWithBatchNormFollowsTheSameTrajectoryOnCpuAndGpu) {
  check_parity(Model::convnet_bn);
}

}  // namespace
}  // namespace crossover
