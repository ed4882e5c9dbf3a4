// The crossover command as a user meets it: exit codes, one clear line on stderr, the JSON record.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

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
  expect_usage_error("train --model dense:10:swish --data mnist-10k", "swish");
  expect_usage_error("train --batch-size 0 --data mnist-10k", "--batch-size");
  expect_usage_error("train --data /no/such/folder", "/no/such/folder");
  expect_usage_error("train --data mnist-10k --json /no/such/dir/out.json", "/no/such/dir");
  const auto r = run_crossover("");
  EXPECT_EQ(r.exit_code, 2);
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
