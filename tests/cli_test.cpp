// The crossover command as a user meets it: exit codes, one clear line on stderr, the JSON record.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::run_crossover;
using testing_util::temp_folder;

int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

void expect_usage_error(const std::string& args, const std::string& needle) {
  SCOPED_TRACE(args);
  const auto r = run_crossover(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

// An IDX file: magic 0x0000 type rank, big-endian dims, then the bytes.
std::vector<uint8_t> idx(uint8_t type, std::vector<uint32_t> dims, std::size_t payload,
                         uint8_t fill = 1) {
  std::vector<uint8_t> b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(d >> s));
  b.insert(b.end(), payload, fill);
  return b;
}

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// A folder of the four files, each replaceable.
std::string idx_folder(const std::string& name, std::vector<uint8_t> train_images,
                       std::vector<uint8_t> train_labels) {
  const std::string dir = temp_folder(name);
  write(dir + "/train-images-idx3-ubyte", train_images);
  write(dir + "/train-labels-idx1-ubyte", train_labels);
  write(dir + "/t10k-images-idx3-ubyte", idx(8, {10, 28, 28}, 10 * 784));
  write(dir + "/t10k-labels-idx1-ubyte", idx(8, {10}, 10, 3));
  return dir;
}

TEST(Cli, BadUsageExitsTwoWithOneLine) {
  expect_usage_error("train --epochs many", "--epochs");
  expect_usage_error("train --no-such-flag", "--no-such-flag");
  expect_usage_error("train --model dens:128 --data mnist-10k", "--model");
  expect_usage_error("train --model dense:10:mish --data mnist-10k", "mish");
  expect_usage_error("train --batch-size 0 --data mnist-10k", "--batch-size");
  expect_usage_error("train --data /no/such/folder", "/no/such/folder");
  expect_usage_error("train --data mnist-10k --json /no/such/dir/out.json", "/no/such/dir");
  const auto r = run_crossover("");
  EXPECT_EQ(r.exit_code, 2);
}

TEST(Cli, AnUnknownSubcommandSaysSoAndSuggestsTheNearest) {
  expect_usage_error("trian --epochs 1", "unknown subcommand 'trian'; did you mean 'train'?");
  expect_usage_error("compair", "did you mean 'compare'?");
  expect_usage_error("reprot --out r.html", "did you mean 'report'?");
  // Nothing near: the list of subcommands instead of a guess.
  const auto r = run_crossover("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown subcommand 'frobnicate'; the subcommands are train,"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
}

TEST(Cli, ReportRefusesBadOptionsBeforeMeasuring) {
  expect_usage_error("report --data mnist-10k --out /no/such/dir/r.html", "/no/such/dir");
  expect_usage_error("report --data mnist-10k --epochs 0 --out r.html", "--epochs");
  expect_usage_error("report --data mnist-10k --device tpu --out r.html", "--device tpu");
}

TEST(Cli, ConvolutionSpecsBuildKerasLayersAndBadOnesNameTheSyntax) {
  expect_usage_error("train --model conv:32 --data mnist-10k",
                     "conv:FILTERS:KERNEL[:ACTIVATION[:PADDING[:STRIDES[:DILATION]]]]");
  expect_usage_error("train --model conv:8:3:relu:valid:2:2,flatten,dense:10 --data mnist-10k",
                     "`strides > 1` not supported in conjunction with `dilation_rate > 1`");
  expect_usage_error("train --model conv:8:3:relu:full,flatten,dense:10 --data mnist-10k",
                     "padding must be 'valid' or 'same'");
  expect_usage_error("train --model conv:8:3x0,flatten,dense:10 --data mnist-10k", "kernel_size");
  // No flatten before Dense: as in Keras, the Dense applies at each pixel, and the classes at each
  // position are what the loss cannot read, said in one line.
  expect_usage_error("train --model conv:8:3,dense:10:softmax --data mnist-10k",
                     "on an output of shape (26, 26, 10) reads the last axis as classes");
  // Grey 28x28 digits feed the named convnet as (28, 28, 1); epochs 0: built, summarised,
  // evaluated.
  auto r = run_crossover("train --model convnet --data mnist-10k --epochs 0 --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Total params: 34826"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(None, 26, 26, 32)"), std::string::npos) << r.out;
  r = run_crossover(
      "train --model conv:4:5:relu:same:2,avgpool:2:same,globalavgpool,dense:10:softmax "
      "--data mnist-10k --epochs 0 --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(None, 14, 14, 4)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(None, 7, 7, 4)"), std::string::npos) << r.out;
  // DILATION: a 3x3 kernel at (2, 3) spans 5x7: 'valid' 24x22 of the 28x28 digits.
  r = run_crossover(
      "train --model conv:4:3:relu:valid:1:2x3,flatten,dense:10:softmax --data mnist-10k "
      "--epochs 0 --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(None, 24, 22, 4)"), std::string::npos) << r.out;
}

TEST(Cli, AnUnavailableDeviceExitsTwoNamingIt) {
  expect_usage_error("train --data mnist-10k --epochs 1 --device tpu", "tpu");
  // Without a GPU (or without CUDA in the build) cuda:7 is unavailable either way.
  expect_usage_error("train --data mnist-10k --epochs 1 --device cuda:7", "cuda:7");
}

TEST(Cli, BadDataFilesExitTwoNamingTheFile) {
  const auto good_images = idx(8, {20, 28, 28}, 20 * 784);
  const auto good_labels = idx(8, {20}, 20, 4);
  struct Case {
    std::string name;
    std::vector<uint8_t> images, labels;
    std::string needle;
  };
  const std::vector<uint8_t> truncated(good_images.begin(), good_images.end() - 100);
  std::vector<uint8_t> bad_magic = good_images;
  bad_magic[0] = 0x1f;
  bad_magic[1] = 0x00;
  const std::vector<Case> cases = {
      {"truncated", truncated, good_labels, "train-images-idx3-ubyte"},
      {"magic", bad_magic, good_labels, "train-images-idx3-ubyte"},
      {"count", idx(8, {30, 28, 28}, 20 * 784), good_labels, "train-images-idx3-ubyte"},
      {"float", idx(0x0D, {20, 28, 28}, 20 * 784 * 4), good_labels, "0x0D"},
      {"label", good_images, idx(8, {20}, 20, 12), "label 12"},
      {"mismatch", good_images, idx(8, {19}, 19, 1), "train-labels-idx1-ubyte"},
  };
  for (const Case& c : cases) {
    const std::string dir = idx_folder("bad-" + c.name, c.images, c.labels);
    expect_usage_error("train --epochs 1 --quiet --data " + dir, c.needle);
  }
}

// `crossover ARGS --threads 1 --json F` in a fresh folder: what it printed and the JSON record it
// wrote. A failure of the command ends the test (an exception gtest reports with its message).
std::pair<testing_util::CommandResult, nlohmann::json> train_json(const std::string& args,
                                                                  const std::string& folder) {
  const std::string file = temp_folder(folder) + "/run.json";
  auto r = run_crossover(args + " --threads 1 --json " + file);
  if (r.exit_code != 0)
    throw std::runtime_error(args + ": exit " + std::to_string(r.exit_code) + ": " + r.err);
  std::ifstream f(file);
  return {r, nlohmann::json::parse(f)};
}

TEST(Cli, BatchNormSpecBuildsKerasLayerAndCountsItsMovingStatisticsApart) {
  expect_usage_error("train --model dense:8,batchnorm:fast,dense:10 --data mnist-10k",
                     "batchnorm[:MOMENTUM[:EPSILON]]");
  expect_usage_error("train --model dense:8,batchnorm:2,dense:10 --data mnist-10k", "momentum");
  const auto [r, j] = train_json(
      "train --model dense:32,batchnorm:0.9,activation:relu,dense:10:softmax --data mnist-10k "
      "--epochs 0",
      "bn-json");
  EXPECT_NE(r.out.find("batch_normalization (BatchNormalization)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Non-trainable params: 64 (256.00 B)"), std::string::npos) << r.out;
  // Keras's count_params: 784*32+32, 4*32 (gamma, beta, moving mean and variance), 32*10+10.
  EXPECT_EQ(j["model"]["parameters"], 25120 + 128 + 330);
  EXPECT_EQ(j["model"]["trainable_parameters"], 25120 + 64 + 330);
  EXPECT_EQ(j["model"]["layers"][2]["type"], "BatchNormalization");
  EXPECT_EQ(j["model"]["layers"][2]["momentum"], 0.9);
  // Before a convolution it normalises the images' one channel.
  const auto images = run_crossover(
      "train --model batchnorm,conv:4:3,flatten,dense:10:softmax --data mnist-10k --epochs 0 "
      "--threads 1");
  ASSERT_EQ(images.exit_code, 0) << images.err;
  EXPECT_NE(images.out.find("batch_normalization (BatchNormalization) (None, 28, 28, 1)"),
            std::string::npos)
      << images.out;
}

TEST(Cli, LayerNormSpecBuildsKerasLayerAndTrains) {
  expect_usage_error("train --model dense:8,layernorm:tiny,dense:10 --data mnist-10k",
                     "layernorm[:EPSILON]");
  expect_usage_error("train --model dense:8,layernorm:0,dense:10 --data mnist-10k", "epsilon");
  const auto [r, j] = train_json(
      "train --model dense:32,layernorm:0.01,activation:relu,dense:10:softmax --data mnist-10k "
      "--epochs 1",
      "ln-json");
  EXPECT_NE(r.out.find("layer_normalization (LayerNormalization)"), std::string::npos) << r.out;
  // 784*32+32, 2*32 (gamma, beta), 32*10+10: all trainable.
  EXPECT_EQ(j["model"]["parameters"], 25120 + 64 + 330);
  EXPECT_EQ(j["model"]["trainable_parameters"], 25120 + 64 + 330);
  EXPECT_EQ(j["model"]["layers"][2]["type"], "LayerNormalization");
  EXPECT_EQ(j["model"]["layers"][2]["epsilon"], 0.01);
}

TEST(Cli, UpsampleSpecBuildsKerasLayerWithItsShape) {
  expect_usage_error("train --model conv:4:3,upsample:big,flatten,dense:10 --data mnist-10k",
                     "upsample[:SIZE]");
  expect_usage_error("train --model conv:4:3,upsample:0,flatten,dense:10 --data mnist-10k", "size");
  const auto [r, j] = train_json(
      "train --model conv:2:3:relu,maxpool:2,upsample:2x3,flatten,dense:10:softmax --data "
      "mnist-10k --epochs 0",
      "up-json");
  // 28 -> conv 3 valid 26 -> pool 13 -> upsample (26, 39).
  EXPECT_NE(r.out.find("up_sampling2d (UpSampling2D)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(None, 26, 39, 2)"), std::string::npos) << r.out;
  EXPECT_EQ(j["model"]["parameters"], 20 + 26 * 39 * 2 * 10 + 10);
  EXPECT_EQ(j["model"]["layers"][3]["type"], "UpSampling2D");
  EXPECT_EQ(j["model"]["layers"][3]["size"], nlohmann::json::parse("[2, 3]"));
}

// lstm, gru and simple_rnn over MNIST's rows as steps: Keras's layers, their parameter counts
// and output shapes; a bad item names the syntax, each once.
TEST(Cli, RecurrentSpecsBuildKerasLayersAndBadOnesNameTheSyntax) {
  const auto bad = run_crossover(
      "train --model reshape:28x28,lstm:8:sideways,dense:10 --data mnist-10k --epochs 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_EQ(lines(bad.err), 1) << bad.err;
  for (const char* syntax : {"lstm:UNITS[:seq]", "gru:UNITS[:seq]", "simple_rnn:UNITS[:seq]"}) {
    const std::size_t at = bad.err.find(syntax);
    EXPECT_NE(at, std::string::npos) << bad.err;
    EXPECT_EQ(bad.err.find(syntax, at + 1), std::string::npos) << syntax << " twice: " << bad.err;
  }
  const auto [r, j] = train_json(
      "train --model reshape:28x28,lstm:8:seq,gru:6:seq,simple_rnn:4,dense:10:softmax --data "
      "mnist-10k --epochs 0",
      "rnn-json");
  EXPECT_NE(r.out.find("lstm (LSTM)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(None, 28, 8)"), std::string::npos) << r.out;
  // LSTM 4 (28 + 8 + 1) 8, GRU 3 (8 + 6 + 2) 6 (reset_after: two biases), SimpleRNN (6 + 4 + 1) 4,
  // Dense 4 x 10 + 10.
  EXPECT_EQ(j["model"]["parameters"], 4 * 37 * 8 + 3 * 16 * 6 + 11 * 4 + 50);
  EXPECT_EQ(j["model"]["layers"][2]["type"], "LSTM");  // after the Flatten of the images
  EXPECT_EQ(j["model"]["layers"][2]["return_sequences"], true);
  EXPECT_EQ(j["model"]["layers"][4]["return_sequences"], false);
}

TEST(Cli, ZeropadAndCropSpecsBuildKerasLayersWithTheirShapes) {
  expect_usage_error("train --model zeropad:big,conv:4:3,flatten,dense:10 --data mnist-10k",
                     "zeropad[:H[xW]]");
  expect_usage_error("train --model conv:4:3,crop:1:2,flatten,dense:10 --data mnist-10k",
                     "crop[:H[xW]]");
  expect_usage_error("train --model conv:4:3,crop:13,flatten,dense:10 --data mnist-10k",
                     "leaves nothing");
  const auto [r, j] = train_json(
      "train --model zeropad:1x2,conv:2:3:relu,crop:2,flatten,dense:10:softmax --data mnist-10k "
      "--epochs 0",
      "pad-json");
  // 28 -> pad (30, 32) -> conv 3 valid (28, 30) -> crop 2 (24, 26).
  EXPECT_NE(r.out.find("zero_padding2d (ZeroPadding2D)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(None, 30, 32, 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(None, 24, 26, 2)"), std::string::npos) << r.out;
  EXPECT_EQ(j["model"]["parameters"], 20 + 24 * 26 * 2 * 10 + 10);
  EXPECT_EQ(j["model"]["layers"][1]["type"], "ZeroPadding2D");
  EXPECT_EQ(j["model"]["layers"][1]["padding"], nlohmann::json::parse("[[1, 1], [2, 2]]"));
  EXPECT_EQ(j["model"]["layers"][3]["cropping"], nlohmann::json::parse("[[2, 2], [2, 2]]"));
}

TEST(Cli, NoiseSpecsBuildKerasNoiseLayersAndTrain) {
  expect_usage_error("train --model gnoise,dense:10 --data mnist-10k", "gnoise:STDDEV");
  expect_usage_error("train --model dense:32,gdropout,dense:10 --data mnist-10k", "gdropout:RATE");
  expect_usage_error("train --model conv:4:3,sdropout:0.2:1,flatten,dense:10 --data mnist-10k",
                     "sdropout:RATE");
  expect_usage_error("train --model dense:32,gdropout:1,dense:10 --data mnist-10k",
                     "rate must be in [0, 1)");
  expect_usage_error("train --model gnoise:2,dense:10 --data mnist-10k",
                     "stddev must be in [0, 1]");
  const auto [r, j] = train_json(
      "train --model conv:4:3:relu,sdropout:0.25,flatten,gnoise:0.1,dense:16:relu,gdropout:0.3,"
      "dense:10:softmax --data mnist-10k --epochs 1",
      "noise-json");
  EXPECT_NE(r.out.find("spatial_dropout2d (SpatialDropout2D)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gaussian_noise (GaussianNoise)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gaussian_dropout (GaussianDropout)"), std::string::npos) << r.out;
  EXPECT_EQ(j["model"]["parameters"], 40 + 26 * 26 * 4 * 16 + 16 + 16 * 10 + 10);
  EXPECT_EQ(j["model"]["layers"][2]["type"], "SpatialDropout2D");
  EXPECT_FLOAT_EQ(j["model"]["layers"][2]["rate"].get<float>(), 0.25f);
  EXPECT_EQ(j["model"]["layers"][4]["type"], "GaussianNoise");
  EXPECT_FLOAT_EQ(j["model"]["layers"][4]["stddev"].get<float>(), 0.1f);
  EXPECT_EQ(j["model"]["layers"][6]["type"], "GaussianDropout");
  EXPECT_FLOAT_EQ(j["model"]["layers"][6]["rate"].get<float>(), 0.3f);
}

TEST(Cli, PermuteAndRepeatSpecsBuildKerasLayersWithTheirShapes) {
  expect_usage_error("train --model reshape:28x28,permute,flatten,dense:10 --data mnist-10k",
                     "permute:DIMS");
  expect_usage_error("train --model dense:8,repeat,flatten,dense:10 --data mnist-10k", "repeat:N");
  expect_usage_error("train --model reshape:28x28,permute:1x1,flatten,dense:10 --data mnist-10k",
                     "must be consecutive and start from 1");
  expect_usage_error("train --model dense:8,repeat:0,flatten,dense:10 --data mnist-10k",
                     "should be a positive integer");
  expect_usage_error("train --model reshape:28x28,permute:2x1x3,flatten,dense:10 --data mnist-10k",
                     "permutes samples of 3 axes");
  expect_usage_error("train --model reshape:28x28,repeat:2,flatten,dense:10 --data mnist-10k",
                     "RepeatVector repeats flat samples");
  const auto [r, j] = train_json(
      "train --model reshape:28x28,permute:2x1,flatten,dense:8:relu,repeat:3,flatten,"
      "dense:10:softmax --data mnist-10k --epochs 1",
      "permute-json");
  EXPECT_NE(r.out.find("permute (Permute)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("repeat_vector (RepeatVector)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(None, 3, 8)"), std::string::npos) << r.out;
  EXPECT_EQ(j["model"]["parameters"], 784 * 8 + 8 + 24 * 10 + 10);
  EXPECT_EQ(j["model"]["layers"][2]["type"], "Permute");
  EXPECT_EQ(j["model"]["layers"][2]["dims"], nlohmann::json::parse("[2, 1]"));
  EXPECT_EQ(j["model"]["layers"][5]["type"], "RepeatVector");
  EXPECT_EQ(j["model"]["layers"][5]["n"], 3);
}

TEST(Cli, RescaleSpecBuildsKerasRescalingAndRefusesBadNumbers) {
  expect_usage_error("train --model rescale:x,dense:10 --data mnist-10k", "rescale:SCALE[:OFFSET]");
  expect_usage_error("train --model rescale,dense:10 --data mnist-10k", "rescale:SCALE[:OFFSET]");
  expect_usage_error("train --model rescale:inf,dense:10 --data mnist-10k",
                     "Rescaling: scale and offset must be finite numbers");
  const auto [r, j] = train_json(
      "train --model flatten,rescale:2:-0.5,dense:10:softmax --data mnist-10k --epochs 0 ",
      "rescale-json");
  EXPECT_NE(r.out.find("rescaling (Rescaling)"), std::string::npos) << r.out;
  EXPECT_EQ(j["model"]["parameters"], 784 * 10 + 10);
  EXPECT_EQ(j["model"]["layers"][1]["type"], "Rescaling");
  EXPECT_EQ(j["model"]["layers"][1]["scale"], 2.0);
  EXPECT_EQ(j["model"]["layers"][1]["offset"], -0.5);
}

TEST(Cli, ConvTransposeSpecBuildsKerasLayerWithItsShape) {
  expect_usage_error("train --model conv_transpose:4,flatten,dense:10 --data mnist-10k",
                     "conv_transpose:FILTERS:KERNEL[:ACTIVATION[:PADDING[:STRIDES[:DILATION]]]]");
  expect_usage_error("train --model conv_transpose:0:3,flatten,dense:10 --data mnist-10k",
                     "filters");
  const auto [r, j] = train_json(
      "train --model conv:2:3:relu:same:2,conv_transpose:3:3:relu:same:2,flatten,dense:10:softmax "
      "--data mnist-10k --epochs 0",
      "convt-json");
  // 28 -> conv same stride 2: 14 -> transposed same stride 2: 28.
  EXPECT_NE(r.out.find("conv2d_transpose (Conv2DTranspose)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(None, 28, 28, 3)"), std::string::npos) << r.out;
  EXPECT_EQ(j["model"]["parameters"], 20 + (3 * 3 * 2 * 3 + 3) + 28 * 28 * 3 * 10 + 10);
  const auto& layer = j["model"]["layers"][2];  // after the InputLayer and the Conv2D
  EXPECT_EQ(layer["type"], "Conv2DTranspose");
  EXPECT_EQ(layer["strides"], nlohmann::json::parse("[2, 2]"));
  EXPECT_EQ(layer["padding"], "same");
}

TEST(Cli, TrainWritesTheDocumentedJson) {
  const std::string dir = temp_folder("json");
  const auto r = run_crossover(
      "train --data mnist-10k --epochs 2 --batch-size 64 --seed 3 --threads 1 "
      "--validation-split 0.1 --json " +
      dir + "/run.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Epoch 2/2"), std::string::npos);
  EXPECT_NE(r.out.find("/113 [=============================="), std::string::npos) << r.out;
  std::ifstream f(dir + "/run.json");
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["model"]["parameters"], 101770);
  EXPECT_EQ(j["model"]["trainable_parameters"], 101770);
  EXPECT_EQ(j["data"]["name"], "mnist-10k");
  EXPECT_EQ(j["data"]["train"], 8000);
  EXPECT_EQ(j["data"]["test"], 2000);
  ASSERT_EQ(j["history"].size(), 2u);
  for (const auto& e : j["history"]) {
    for (const char* k :
         {"epoch", "loss", "accuracy", "seconds", "val_loss", "val_accuracy", "val_seconds"})
      EXPECT_TRUE(e.contains(k)) << k;
    EXPECT_GT(e["seconds"].get<double>(), 0.0);
  }
  for (const char* k : {"loss", "accuracy", "seconds"}) EXPECT_TRUE(j["test"].contains(k)) << k;
  EXPECT_GT(j["test"]["accuracy"].get<double>(), 0.8);
  EXPECT_EQ(j["optimizer"], "adam");
  EXPECT_EQ(j["loss"], "sparse_categorical_crossentropy");
  EXPECT_EQ(j["compile_config"]["optimizer"]["class_name"], "Adam");
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["threads_choice"]["chosen_by"], "user");
}

TEST(Cli, TrainWithThreadsZeroMeasuresTheCountItTrainsWith) {
  const std::string dir = temp_folder("threads0");
  const auto r =
      run_crossover("train --data mnist-10k --epochs 0 --threads 0 --json " + dir + "/run.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("threads: "), std::string::npos) << r.err;
  std::ifstream f(dir + "/run.json");
  const auto j = nlohmann::json::parse(f);
  const auto& c = j["threads_choice"];
  EXPECT_EQ(c["chosen_by"], "measurement");
  ASSERT_FALSE(c["trials"].empty());
  EXPECT_EQ(c["trials"][0]["threads"], 1);
  bool tried = false;
  for (const auto& t : c["trials"]) {
    EXPECT_GT(t["seconds_per_step"].get<double>(), 0.0);
    tried |= t["threads"] == j["threads"];
  }
  EXPECT_TRUE(tried) << c.dump();
  EXPECT_EQ(c["threads"], j["threads"]);
}

TEST(Cli, TrainsAKerasFileThatWasNeverCompiledWithTheDefaults) {
  // Keras 3's to_json() of an uncompiled model ("compile_config": {}): Adam and
  // sparse_categorical_crossentropy, as for a layer list.
  const std::string dir = temp_folder("keras-uncompiled");
  const auto r =
      run_crossover("train --data mnist-10k --epochs 1 --threads 1 --model " +
                    crossover::testing_util::source_dir() +
                    "/tests/data/keras/small_uncompiled_keras3.json --json " + dir + "/run.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("compile_config"), std::string::npos) << r.out;
  std::ifstream f(dir + "/run.json");
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["optimizer"], "adam");
  EXPECT_EQ(j["loss"], "sparse_categorical_crossentropy");
}

// A Keras file's optimizer or loss argument out of its range: one line naming the file, the
// field and the value, exit code 2.
TEST(Cli, AKerasFilesOptimizerOrLossArgumentOutOfRangeIsOneLineAndExitCode2) {
  const std::string dir = temp_folder("keras-bad-arguments");
  std::ifstream in(crossover::testing_util::source_dir() + "/tests/data/keras/small_keras3.json");
  const nlohmann::json model = nlohmann::json::parse(in);
  nlohmann::json lion = model;
  lion["compile_config"]["optimizer"] = {{"module", "keras.optimizers"},
                                         {"class_name", "Lion"},
                                         {"config", {{"beta_1", 0.0}}},
                                         {"registered_name", nullptr}};
  std::ofstream(dir + "/lion.json") << lion.dump();
  expect_usage_error("train --model " + dir + "/lion.json --data mnist-10k --epochs 1",
                     "lion.json: compile_config field optimizer: Lion: beta_1 must be in (0, 1], "
                     "got 0");
  nlohmann::json huber = model;
  huber["compile_config"]["loss"] = {{"module", "keras.losses"},
                                     {"class_name", "Huber"},
                                     {"config", {{"delta", -1}}},
                                     {"registered_name", nullptr}};
  std::ofstream(dir + "/huber.json") << huber.dump();
  expect_usage_error("train --model " + dir + "/huber.json --data mnist-10k --epochs 1",
                     "huber.json: compile_config field loss: Huber delta must be positive, got -1");
  // A regularizer crossover does not run: one line naming the layer and the field, exit code 2.
  nlohmann::json regularized = model;
  regularized["config"]["layers"][2]["config"]["kernel_regularizer"] = {
      {"module", "keras.regularizers"}, {"class_name", "L2"}, {"config", {{"l2", -0.5}}}};
  std::ofstream(dir + "/regularized.json") << regularized.dump();
  expect_usage_error("train --model " + dir + "/regularized.json --data mnist-10k --epochs 1",
                     "regularized.json: layer 'dense' field kernel_regularizer: regularizer ");
}

// A recurrent layer's argument the engine cannot run (recurrent_dropout, return_state): one line
// naming the file, the layer and the field, exit code 2.
TEST(Cli, AKerasFilesRecurrentLayerArgumentCrossoverLacksIsOneLineAndExitCode2) {
  const std::string dir = temp_folder("keras-bad-recurrent");
  std::ifstream in(crossover::testing_util::source_dir() + "/tests/data/keras/small_keras3.json");
  const nlohmann::json model = nlohmann::json::parse(in);
  for (const auto& [field, value, why] :
       {std::tuple{"recurrent_dropout", nlohmann::json(0.2),
                   "recurrent_dropout is not supported (yet): it must be 0"},
        {"return_state", nlohmann::json(true), "return_state is not supported (yet)"}}) {
    nlohmann::json m = model;
    m["config"]["layers"][1] = {{"class_name", "LSTM"},
                                {"config", {{"name", "lstm"}, {"units", 8}, {field, value}}}};
    const std::string file = dir + "/" + field + ".json";
    std::ofstream(file) << m.dump();
    expect_usage_error("train --model " + file + " --data mnist-10k --epochs 1",
                       std::string(field) + ".json: layer 'lstm' field " + field + ": " + why);
  }
}

TEST(Cli, TrainUsesTheOptimizerAndLossAKerasFileWasCompiledWith) {
  // The Keras 3 SMALL model, recompiled as SGD(0.05, momentum 0.9) + categorical_crossentropy.
  const std::string dir = temp_folder("keras-sgd");
  std::ifstream in(crossover::testing_util::source_dir() + "/tests/data/keras/small_keras3.json");
  nlohmann::json model = nlohmann::json::parse(in);
  nlohmann::json& cc = model["compile_config"];
  cc["optimizer"]["class_name"] = "SGD";
  nlohmann::json& opt = cc["optimizer"]["config"];
  for (const char* adam_only : {"beta_1", "beta_2", "epsilon", "amsgrad"}) opt.erase(adam_only);
  opt["name"] = "SGD";
  opt["learning_rate"] = 0.05;
  opt["momentum"] = 0.9;
  opt["nesterov"] = false;
  cc["loss"] = "categorical_crossentropy";
  std::ofstream(dir + "/sgd.json") << model.dump();

  const auto r = run_crossover("train --data mnist-10k --epochs 1 --threads 1 --model " + dir +
                               "/sgd.json --json " + dir + "/run.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("compile: sgd (learning rate 0.05, momentum 0.9), loss "
                       "categorical_crossentropy from " +
                       dir + "/sgd.json's compile_config"),
            std::string::npos)
      << r.out;
  std::ifstream f(dir + "/run.json");
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["optimizer"], "sgd");
  EXPECT_EQ(j["loss"], "categorical_crossentropy");
  EXPECT_EQ(j["compile_config"]["optimizer"]["class_name"], "SGD");
  EXPECT_NEAR(j["compile_config"]["optimizer"]["config"]["momentum"].get<double>(), 0.9, 1e-6);
  EXPECT_NEAR(j["history"][0]["learning_rate"].get<double>(), 0.05, 1e-6);
  EXPECT_GT(j["test"]["accuracy"].get<double>(), 0.8) << "one-hot targets reach the loss";
}

// Keras 3's to_json() of SMALL compiled with categorical_crossentropy and `metrics`, at `path`.
void write_small_compiled_with(const std::string& path, const nlohmann::json& metrics) {
  std::ifstream in(crossover::testing_util::source_dir() + "/tests/data/keras/small_keras3.json");
  nlohmann::json model = nlohmann::json::parse(in);
  model["compile_config"]["loss"] = "categorical_crossentropy";
  model["compile_config"]["metrics"] = metrics;
  std::ofstream(path) << model.dump();
}

// What Keras 3.15 writes for compile(metrics=["mae", "mse", RootMeanSquaredError(name="err"),
// TopKCategoricalAccuracy(k=1, name="top1"), TopKCategoricalAccuracy(k=3)]).
const char* kFileMetrics = R"([
  "mae", "mse",
  {"module": "keras.metrics", "class_name": "RootMeanSquaredError",
   "config": {"name": "err", "dtype": "float32"}, "registered_name": null},
  {"module": "keras.metrics", "class_name": "TopKCategoricalAccuracy",
   "config": {"name": "top1", "dtype": "float32", "k": 1}, "registered_name": null},
  {"module": "keras.metrics", "class_name": "TopKCategoricalAccuracy",
   "config": {"name": "top_k_categorical_accuracy", "dtype": "float32", "k": 3},
   "registered_name": null}])";

TEST(Cli, TrainReportsTheMetricsAKerasFileWasCompiledWith) {
  const std::string dir = temp_folder("keras-metrics");
  write_small_compiled_with(dir + "/m.json", nlohmann::json::parse(kFileMetrics));
  const auto r = run_crossover(
      "train --data mnist-10k --epochs 1 --threads 1 --validation-split "
      "0.1 --model " +
      dir + "/m.json --json " + dir + "/run.json --save " + dir + "/m.safetensors");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("compile_config; metrics accuracy, mae, mse, err, top1 (k 1), "
                       "top_k_categorical_accuracy (k 3)"),
            std::string::npos)
      << r.out;
  // The epoch's line and the evaluation's name each metric, as Keras's progress bar does.
  for (const char* shown : {" - mae: ", " - mse: ", " - err: ", " - top1: ",
                            " - top_k_categorical_accuracy: ", " - val_mae: ", " - val_top1: "})
    EXPECT_NE(r.out.find(shown), std::string::npos) << shown << "\n" << r.out;

  std::ifstream f(dir + "/run.json");
  const auto j = nlohmann::json::parse(f);
  const auto& e = j["history"][0];
  for (const char* k : {"mae", "mse", "err", "top1", "top_k_categorical_accuracy", "val_mae",
                        "val_mse", "val_err", "val_top1", "val_top_k_categorical_accuracy"})
    ASSERT_TRUE(e.contains(k)) << k << " in " << e.dump();
  for (const char* k : {"mae", "mse", "err", "top1", "top_k_categorical_accuracy"})
    ASSERT_TRUE(j["test"].contains(k)) << k << " in " << j["test"].dump();
  // Each is the metric it names: top-1 is the accuracy (argmax), top-3 at least that; the root
  // mean squared error is the root of the mean squared error over the same rows.
  for (const auto& [acc, top1, top3, mse, err] :
       {std::tuple{e["accuracy"], e["top1"], e["top_k_categorical_accuracy"], e["mse"], e["err"]},
        std::tuple{e["val_accuracy"], e["val_top1"], e["val_top_k_categorical_accuracy"],
                   e["val_mse"], e["val_err"]},
        std::tuple{j["test"]["accuracy"], j["test"]["top1"],
                   j["test"]["top_k_categorical_accuracy"], j["test"]["mse"], j["test"]["err"]}}) {
    EXPECT_NEAR(top1.get<double>(), acc.get<double>(), 1e-9) << j.dump();
    EXPECT_GT(top3.get<double>(), top1.get<double>()) << j.dump();
    EXPECT_NEAR(err.get<double>() * err.get<double>(), mse.get<double>(), 1e-6 * mse.get<double>());
  }
  EXPECT_GT(e["mae"].get<double>(), 0.0);
  EXPECT_LT(e["mae"].get<double>(), 0.2) << "one-hot targets against softmax rows";
  // The record's compile_config is what Keras would write for the same compile.
  auto written = nlohmann::json::parse(kFileMetrics);
  written.insert(written.begin(), "accuracy");
  EXPECT_EQ(j["compile_config"]["metrics"], written) << j["compile_config"].dump();

  // The saved model keeps them: evaluate reports the same test numbers (one-hot targets for its
  // categorical loss, as train gave them).
  const auto ev = run_crossover("evaluate --load " + dir + "/m.safetensors --data mnist-10k " +
                                "--threads 1 --json " + dir + "/eval.json");
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  EXPECT_NE(ev.out.find(" - top1: "), std::string::npos) << ev.out;
  std::ifstream ef(dir + "/eval.json");
  const auto et = nlohmann::json::parse(ef)["test"];
  for (const char* k :
       {"loss", "accuracy", "mae", "mse", "err", "top1", "top_k_categorical_accuracy"})
    EXPECT_NEAR(et[k].get<double>(), j["test"][k].get<double>(), 1e-9) << k;
}

TEST(Cli, TrainRefusesAFileMetricItCannotComputeOrReport) {
  const std::string dir = temp_folder("keras-metrics-bad");
  const std::string file = dir + "/m.json";
  const std::string train = "train --data mnist-10k --epochs 1 --threads 1 --model " + file;
  write_small_compiled_with(file, nlohmann::json::parse(R"(["auc"])"));
  expect_usage_error(train, "metric 'auc' is not supported");
  write_small_compiled_with(file, nlohmann::json::parse(R"([{"module": "keras.metrics",
      "class_name": "TopKCategoricalAccuracy", "config": {"name": "t", "k": 2.5}}])"));
  expect_usage_error(train, "k must be a whole number of at least 1, got 2.5");
  write_small_compiled_with(file, nlohmann::json::parse(R"([{"module": "keras.metrics",
      "class_name": "MeanAbsoluteError", "config": {"name": "seconds"}}])"));
  expect_usage_error(train, "metric 'seconds': the JSON record has a field 'seconds' already");
}

// A Keras model file's dtype policy decides the precision (what Keras 3.15's model.save wrote for
// SMALL under mixed_bfloat16 trains in bf16 without --precision); --precision given must agree.
TEST(Cli, AModelFilesDTypePolicyIsThePrecisionAndADisagreeingFlagIsRefused) {
  const std::string dir = temp_folder("dtype-policy");
  const std::string keras = crossover::testing_util::source_dir() + "/tests/data/keras/";
  const std::string bf16 = keras + "small_mixed_bfloat16_keras3.json";
  const std::string fp32 = keras + "small_keras3.json";
  const std::string why = cpu_bf16_problem(cpu_bf16_support());
  const auto r = run_crossover("train --data mnist-10k --epochs 1 --threads 1 --model " + bf16 +
                               " --checkpoint " + dir + "/c --json " + dir + "/run.json");
  if (!why.empty()) {
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("precision bf16: " + why), std::string::npos) << r.err;
  } else {
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("precision: bf16, as " + bf16 + "'s dtype policy says"), std::string::npos)
        << r.out;
    EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir + "/run.json"))["precision"], "bf16");
    // The checkpoint keeps the policy: resuming it trains on in bf16.
    const auto resumed = run_crossover("train --data mnist-10k --epochs 1 --threads 1 --resume " +
                                       dir + "/c --json " + dir + "/resumed.json");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir + "/resumed.json"))["precision"], "bf16");
    expect_usage_error("train --data mnist-10k --resume " + dir + "/c --precision fp32",
                       "--precision fp32: --resume " + dir + "/c's Dense and Conv2D layers");
  }
  expect_usage_error("train --data mnist-10k --model " + bf16 + " --precision fp32",
                     "--precision fp32: " + bf16 +
                         "'s Dense and Conv2D layers have the dtype policy 'mixed_bfloat16', "
                         "which trains in bf16: leave --precision out");
  expect_usage_error(
      "train --data mnist-10k --model " + fp32 + " --precision bf16",
      "--precision bf16: " + fp32 + "'s Dense and Conv2D layers have the dtype policy 'float32'");
  expect_usage_error("explain --data mnist-10k --model " + bf16 + " --precision fp32",
                     "'s Dense and Conv2D layers have the dtype policy 'mixed_bfloat16'");
  // float16, and Dense layers of two policies: one line each, before any data is read.
  nlohmann::json model = nlohmann::json::parse(std::ifstream(bf16));
  nlohmann::json& last_dense = model["config"]["layers"][4]["config"];
  ASSERT_EQ(last_dense["name"], "dense_1");
  last_dense["dtype"]["config"]["name"] = "float32";
  std::ofstream(dir + "/two.json") << model.dump();
  expect_usage_error("train --data mnist-10k --model " + dir + "/two.json",
                     dir +
                         "/two.json: dtype: layers 'dense' (dtype policy 'mixed_bfloat16') "
                         "and 'dense_1' ('float32') differ");
  last_dense["dtype"]["config"]["name"] = "mixed_float16";
  std::ofstream(dir + "/f16.json") << model.dump();
  expect_usage_error("train --data mnist-10k --model " + dir + "/f16.json",
                     "layer 'dense_1' field dtype: the dtype policy 'mixed_float16' is not "
                     "supported by crossover: the engine has no float16 matrix products");
}

// compare and sweep always train on the CPU: a precision it lacks is refused in one line, first.
TEST(Cli, CompareAndSweepRefuseAPrecisionTheCpuCannotTrainIn) {
  for (const char* command : {"compare", "sweep"}) {
    expect_usage_error(std::string(command) + " --data mnist-10k --precision tf32",
                       std::string("--precision tf32: ") + command +
                           " trains on the CPU, which cannot: tf32 is a GPU precision");
    expect_usage_error(std::string(command) + " --data mnist-10k --precision fp16",
                       "unknown precision 'fp16'");
  }
  const std::string why = cpu_bf16_problem(cpu_bf16_support());
  if (!why.empty())
    expect_usage_error("compare --data mnist-10k --precision bf16",
                       "--precision bf16: compare trains on the CPU, which cannot: " + why);
}

// Built-in models take --precision as their layers' policy (Keras's set_global_policy before the
// model is made): a bf16 checkpoint of SMALL resumes in bf16 without --precision.
TEST(Cli, ABuiltInModelTrainedInBf16ResumesInBf16) {
  if (!cpu_bf16_problem(cpu_bf16_support()).empty()) GTEST_SKIP() << "no bf16 on this CPU";
  const std::string dir = temp_folder("builtin-bf16");
  const auto r = run_crossover(
      "train --data mnist-10k --epochs 1 --threads 1 --quiet "
      "--precision bf16 --checkpoint " +
      dir + "/c");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto resumed = run_crossover(
      "train --data mnist-10k --epochs 1 --threads 1 --quiet "
      "--resume " +
      dir + "/c --json " + dir + "/run.json");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir + "/run.json"))["precision"], "bf16");
}

TEST(Cli, AThreadCountAboveTheLimitIsRefusedByEverySubcommandThatTakesOne) {
  // 100,000 threads crashed libgomp (exit 139); every subcommand now refuses before any work.
  for (const std::string cmd : {"train", "evaluate --load m.safetensors", "compare", "explain",
                                "sweep", "calibrate", "report"}) {
    expect_usage_error(cmd + " --threads 100000", "--threads: 100000 is more than");
    expect_usage_error(cmd + " --threads -1", "--threads");
    const auto help = run_crossover(cmd + " --help");
    EXPECT_NE(help.out.find("4 x the logical cores"), std::string::npos) << cmd << help.out;
  }
  expect_usage_error("train --data mnist-10k --threads " + std::to_string(max_cpu_threads() + 1),
                     "4 x the");
}

// The commands that run over ranks take --rank-timeout (seconds; 0: forever) and refuse what is
// not a count of seconds before any work.
TEST(Cli, ARankTimeoutThatIsNotSecondsIsRefusedByEveryCommandThatRunsOverRanks) {
  // compare and sweep pass it on to the explain runs of their --ranks tables.
  for (const std::string cmd :
       {"train", "evaluate --load m.safetensors", "explain", "calibrate", "compare", "sweep"}) {
    expect_usage_error(cmd + " --rank-timeout -1", "--rank-timeout: must be a number of seconds");
    expect_usage_error(cmd + " --rank-timeout soon", "got 'soon'");
    const auto help = run_crossover(cmd + " --help");
    EXPECT_NE(help.out.find("--rank-timeout"), std::string::npos) << cmd << help.out;
  }
}

TEST(Cli, DeviceAutoWeighsTheCpuAtItsMeasuredThreadCount) {
  const std::string dir = temp_folder("auto-threads");
  // A profile folder of its own: a thread count that an earlier test in this process measured
  // and kept would be reused ("saved measurement") instead of measured.
  const std::string profiles = dir + "/profiles";
  testing_util::ScopedEnv own_profiles("CROSSOVER_PROFILE_DIR", profiles.c_str());
  const auto r =
      run_crossover("train --data mnist-10k --epochs 0 --device auto --json " + dir + "/run.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream f(dir + "/run.json");
  const auto j = nlohmann::json::parse(f);
  if (j["device"] != "cpu") GTEST_SKIP() << "--device auto chose " << j["device"];
  EXPECT_EQ(j["threads_choice"]["chosen_by"], "measurement");
  EXPECT_EQ(j["threads_choice"]["threads"], j["threads"]);
}

// --device auto --precision bf16 weighs the CPU at the count measured in bf16 (a bf16 step's
// cost is not an fp32 step's), and keeps that choice apart from fp32's.
TEST(Cli, DeviceAutoInBf16MeasuresTheThreadCountInBf16) {
  const std::string dir = temp_folder("auto-threads-bf16");
  const std::string profiles = dir + "/profiles";
  testing_util::ScopedEnv own_profiles("CROSSOVER_PROFILE_DIR", profiles.c_str());
  auto train = [&](const std::string& precision) {
    const auto r =
        run_crossover("train --data mnist-10k --epochs 0 --quiet --device auto " +
                      std::string("--precision ") + precision + " --json " + dir + "/run.json");
    nlohmann::json j;
    if (r.exit_code == 0) j = nlohmann::json::parse(std::ifstream(dir + "/run.json"));
    return std::pair{r, j};
  };
  const std::string why = cpu_bf16_problem(cpu_bf16_support());
  const auto [r, j] = train("bf16");
  if (!why.empty()) {
    // No bf16 here: nothing is measured in it, and without a GPU the CPU's refusal is the answer.
    if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU can train in bf16 here";
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("precision bf16: " + why), std::string::npos) << r.err;
    return;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (j["device"] != "cpu") GTEST_SKIP() << "--device auto chose " << j["device"];
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_EQ(j["threads_choice"]["chosen_by"], "measurement");
  EXPECT_EQ(j["threads_choice"]["threads"], j["threads"]);
  // fp32 does not take bf16's saved count: it measures its own, and both are kept.
  auto saved_choices = [&] {
    std::size_t n = 0;
    for (const auto& f : std::filesystem::directory_iterator(profiles + "/threads"))
      n += nlohmann::json::parse(std::ifstream(f.path()))["choices"].size();
    return n;
  };
  EXPECT_EQ(saved_choices(), 1u);
  const auto [r32, j32] = train("fp32");
  ASSERT_EQ(r32.exit_code, 0) << r32.err;
  EXPECT_EQ(j32["threads_choice"]["chosen_by"], "measurement");
  EXPECT_EQ(saved_choices(), 2u);
}

TEST(Cli, TheThreadLimitItselfIsAValidCount) {
  const auto r = run_crossover("train --data mnist-10k --epochs 0 --quiet --threads " +
                               std::to_string(max_cpu_threads()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(Cli, AModelTooLargeForMemorySaysHowManyBytesItNeedsAndHowManyThereAre) {
  // (784 x 10^9 + 10^9 + 10^9 x 10 + 10, rounded up to 16) parameters, 4 floats each (value,
  // gradient, two optimizer slots): 12.7 TB, refused before anything is allocated.
  const auto r = run_crossover(
      "train --data mnist-10k --epochs 1 --threads 1 --model "
      "dense:1000000000:relu,dense:10:softmax");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("need 12720000000256 bytes (11.6 TiB) of cpu memory, but "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("are available ("), std::string::npos) << r.err;
}

TEST(Cli, BytesAfterAGzippedIdxFileExitTwoNamingTheFileAndTheCount) {
  const auto images = idx(8, {20, 28, 28}, 20 * 784);
  const std::string dir = idx_folder("gz-trailing", images, idx(8, {20}, 20, 4));
  const std::string path = dir + "/train-images-idx3-ubyte";
  std::filesystem::remove(path);
  gzFile gz = gzopen((path + ".gz").c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, images.data(), static_cast<unsigned>(images.size())),
            static_cast<int>(images.size()));
  ASSERT_EQ(gzclose(gz), Z_OK);
  std::ofstream(path + ".gz", std::ios::binary | std::ios::app) << "appended";
  expect_usage_error("train --epochs 1 --quiet --data " + dir,
                     path + ".gz: 8 bytes follow the end of the gzip stream");
}

TEST(Cli, QuietPrintsNothingOnStdout) {
  const auto r = run_crossover("train --data mnist-10k --epochs 1 --quiet --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(Cli, DevicesListsTheCpu) {
  const auto r = run_crossover("devices");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("cpu ", 0), 0u) << r.out;
}

}  // namespace
}  // namespace crossover
