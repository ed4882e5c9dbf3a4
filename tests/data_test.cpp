// The data readers: the shipped digits, IDX (raw and gzip), Keras .npz, discovery, and what
// every reader does with hostile files (they must fail with one clear line, fast, without
// allocating what a lying header asks for).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zip.h>
#include <zlib.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/shipped.h"
#include "data/dataset.h"
#include "data/npy.h"
#include "test_util.h"

namespace crossover::data {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;
using testing_util::ScopedEnv;

// ---- helpers that write test files ---------------------------------------------------------

class TempFolder {
 public:
  TempFolder() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::path(::testing::TempDir()) / ("crossover-data-" + std::to_string(::getpid()) + "-" +
                                              info->test_suite_name() + "-" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

void write_gzip(const std::string& path, const Bytes& bytes) {
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(gz), Z_OK);
}

Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// An IDX file: magic 00 00 type rank, big-endian dims, payload.
Bytes idx(uint8_t type, const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes b = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(d >> shift));
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes iota_bytes(std::size_t n, unsigned modulo = 256) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i % modulo);
  return b;
}

// A .npy file as numpy 1.x writes it (version 1.0, dict padded to a 64-byte boundary).
Bytes npy(const std::string& descr, const std::string& shape, const Bytes& data,
          bool fortran = false, uint8_t major = 1) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': " + shape + ", }";
  const std::size_t preamble = major == 1 ? 10 : 12;
  while ((preamble + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  const std::size_t n = dict.size();
  b.push_back(static_cast<uint8_t>(n));
  b.push_back(static_cast<uint8_t>(n >> 8));
  if (major >= 2) {
    b.push_back(static_cast<uint8_t>(n >> 16));
    b.push_back(static_cast<uint8_t>(n >> 24));
  }
  b.insert(b.end(), dict.begin(), dict.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

Bytes int64_le(const std::vector<int64_t>& values) {
  Bytes b;
  for (int64_t v : values)
    for (int i = 0; i < 8; ++i)
      b.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
  return b;
}

using Entries = std::vector<std::pair<std::string, Bytes>>;

// A zip written with libzip, deflated like numpy.savez_compressed (or stored).
void write_zip(const std::string& path, const Entries& entries, bool deflate = true) {
  int err = 0;
  zip_t* za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  ASSERT_NE(za, nullptr) << "zip_open error " << err;
  for (const auto& [name, data] : entries) {
    zip_source_t* src = zip_source_buffer(za, data.data(), data.size(), 0);
    ASSERT_NE(src, nullptr);
    const zip_int64_t index = zip_file_add(za, name.c_str(), src, ZIP_FL_OVERWRITE);
    ASSERT_GE(index, 0) << zip_strerror(za);
    ASSERT_EQ(zip_set_file_compression(za, static_cast<zip_uint64_t>(index),
                                       deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0),
              0);
  }
  ASSERT_EQ(zip_close(za), 0);
}

// Rewrites the uncompressed size that the zip records (local header and central directory) for
// entry `name`: the entry's real data is left as it was, so the directory now lies.
void patch_zip_uncompressed_size(const std::string& path, const std::string& name, uint32_t size) {
  Bytes z = read_file(path);
  auto u16 = [&](std::size_t at) { return std::size_t{z[at]} | (std::size_t{z[at + 1]} << 8); };
  auto put32 = [&](std::size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i)
      z[at + static_cast<std::size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  };
  int patched = 0;
  for (std::size_t i = 0; i + 46 < z.size(); ++i) {
    if (z[i] != 'P' || z[i + 1] != 'K') continue;
    if (z[i + 2] == 3 && z[i + 3] == 4 && i + 30 + u16(i + 26) <= z.size() &&
        std::string(z.begin() + static_cast<std::ptrdiff_t>(i + 30),
                    z.begin() + static_cast<std::ptrdiff_t>(i + 30 + u16(i + 26))) == name) {
      put32(i + 22, size);
      ++patched;
    }
    if (z[i + 2] == 1 && z[i + 3] == 2 && i + 46 + u16(i + 28) <= z.size() &&
        std::string(z.begin() + static_cast<std::ptrdiff_t>(i + 46),
                    z.begin() + static_cast<std::ptrdiff_t>(i + 46 + u16(i + 28))) == name) {
      put32(i + 24, size);
      ++patched;
    }
  }
  ASSERT_EQ(patched, 2) << "did not find " << name << " in " << path;
  write_file(path, z);
}

// A small, valid mnist-shaped npz: 5 train and 3 test images of 4x3, uint8 labels.
Entries small_npz_entries() {
  return {{"x_train.npy", npy("|u1", "(5, 4, 3)", iota_bytes(60))},
          {"y_train.npy", npy("|u1", "(5,)", {0, 1, 2, 3, 9})},
          {"x_test.npy", npy("|u1", "(3, 4, 3)", iota_bytes(36, 7))},
          {"y_test.npy", npy("|u1", "(3,)", {4, 5, 6})}};
}

Entries with_entry(Entries entries, const std::string& name, Bytes data) {
  for (auto& [n, d] : entries)
    if (n == name) d = std::move(data);
  return entries;
}

Entries without_entry(Entries entries, const std::string& name) {
  std::erase_if(entries, [&](const auto& e) { return e.first == name; });
  return entries;
}

using testing_util::error_of;

// Peak resident memory since the last reset, via /proc/self/clear_refs (Linux); nullopt where
// that is unavailable. Used to show a lying header does not make the reader allocate.
class PeakMemory {
 public:
  PeakMemory() {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";
    reset.flush();
    ok_ = reset.good();
    start_ = hwm_kib();
  }
  std::optional<long> growth_mib() const {
    if (!ok_ || start_ < 0) return std::nullopt;
    return (hwm_kib() - start_) / 1024;
  }

 private:
  static long hwm_kib() {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key) {
      if (key == "VmHWM:") {
        long kib = -1;
        status >> kib;
        return kib;
      }
    }
    return -1;
  }
  bool ok_ = false;
  long start_ = -1;
};

// ---- the shipped digits ---------------------------------------------------------------------

TEST(DataMnist10k, SplitsTheTenThousandDigitsIntoEightThousandTrainAndTwoThousandTest) {
  const DataSplits d = read_mnist10k(mnist10k_folder());
  EXPECT_EQ(d.name, "mnist-10k");
  EXPECT_EQ(d.num_classes, 10);
  EXPECT_EQ(d.train.count, 8000);
  EXPECT_EQ(d.test.count, 2000);
  EXPECT_EQ(d.train.item_shape, (Shape{28, 28}));
  EXPECT_EQ(d.test.item_shape, (Shape{28, 28}));
  EXPECT_EQ(d.train.pixels.size(), 8000u * 784);
  EXPECT_EQ(d.test.pixels.size(), 2000u * 784);
  EXPECT_EQ(d.train.labels.size(), 8000u);
  EXPECT_EQ(d.test.labels.size(), 2000u);
}

TEST(DataMnist10k, ClassCountsMatchTheReadme) {
  const DataSplits d = read_mnist10k(mnist10k_folder());
  std::array<int, 10> counts{};
  for (uint8_t l : d.train.labels) ++counts.at(l);
  for (uint8_t l : d.test.labels) ++counts.at(l);
  EXPECT_EQ(counts, (std::array<int, 10>{1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978}));
}

TEST(DataMnist10k, NpzCopyHoldsTheSameBytesAsTheIdxFiles) {
  const DataSplits idx_data = read_mnist10k(mnist10k_folder());
  const DataSplits npz_data = read_npz(mnist10k_folder() + "/mnist-10k.npz");
  EXPECT_EQ(npz_data.train.count, 8000);
  EXPECT_EQ(npz_data.test.count, 2000);
  EXPECT_EQ(npz_data.train.item_shape, (Shape{28, 28}));
  EXPECT_TRUE(npz_data.train.pixels == idx_data.train.pixels);
  EXPECT_TRUE(npz_data.train.labels == idx_data.train.labels);
  EXPECT_TRUE(npz_data.test.pixels == idx_data.test.pixels);
  EXPECT_TRUE(npz_data.test.labels == idx_data.test.labels);
}

TEST(DataMnist10k, FolderIsTheSourceTreesDataFolder) {
  EXPECT_EQ(fs::canonical(mnist10k_folder()),
            fs::canonical(fs::path(crossover::testing_util::source_dir()) / "data/mnist-10k"));
}

// A wheel's binary finds its files beside itself, wherever pip put it and whatever argv[0] was
// (the `crossover` entry point runs it as a bare "crossover"): the places after the checkout's are
// those of the program's own folder, from /proc/self/exe.
TEST(DataMnist10k, ShippedPlacesFollowTheCheckoutWithTheProgramsOwnFolder) {
  const std::vector<std::string> places = crossover::shipped_places("mnist-10k");
  ASSERT_GE(places.size(), 4u);
  EXPECT_EQ(fs::path(places[0]),
            fs::path(crossover::testing_util::source_dir()) / "data/mnist-10k");
  const fs::path exe_dir = fs::canonical("/proc/self/exe").parent_path();
  EXPECT_EQ(fs::path(places[1]), exe_dir / "share/mnist-10k");
  EXPECT_EQ(fs::path(places[2]), exe_dir.parent_path() / "share/mnist-10k");
  EXPECT_EQ(fs::path(places[3]), exe_dir.parent_path() / "share/crossover/mnist-10k");
}

TEST(DataMnist10k, LoadDataByNameSaysWhatItLoaded) {
  std::vector<std::string> said;
  const DataSplits d = load_data("mnist-10k", [&](const std::string& s) { said.push_back(s); });
  EXPECT_EQ(d.train.count, 8000);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_NE(said[0].find("8000 train, 2000 test"), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("mnist-10k"), std::string::npos) << said[0];
}

// ---- float conversion -----------------------------------------------------------------------

TEST(DataToFloat, ImagesAreBytesOver255InTheSetsShape) {
  ImageSet set;
  set.count = 2;
  set.item_shape = {1, 3};
  set.pixels = {0, 1, 127, 128, 254, 255};
  set.labels = {3, 9};
  const Tensor x = to_float_images(set);
  EXPECT_EQ(x.shape(), (Shape{2, 1, 3}));
  for (std::size_t i = 0; i < set.pixels.size(); ++i)
    EXPECT_EQ(x[static_cast<int64_t>(i)], static_cast<float>(set.pixels[i]) / 255.0f);
  const Tensor y = to_float_labels(set);
  EXPECT_EQ(y.shape(), (Shape{2}));
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_EQ(y[1], 9.0f);
}

// ---- IDX ------------------------------------------------------------------------------------

TEST(DataIdx, ReadsRawAndGzipFilesAlikeTellingThemApartByContentNotName) {
  TempFolder dir;
  const Bytes file = idx(0x08, {3, 2, 5}, iota_bytes(30));
  write_file(dir / "raw", file);
  write_gzip(dir / "packed", file);
  write_file(dir / "raw-named.gz", file);
  for (const char* name : {"raw", "packed", "raw-named.gz"}) {
    Shape dims;
    EXPECT_EQ(read_idx(dir / name, 3, dims), iota_bytes(30)) << name;
    EXPECT_EQ(dims, (Shape{3, 2, 5})) << name;
  }
}

TEST(DataIdx, RefusesATruncatedFile) {
  TempFolder dir;
  Bytes file = idx(0x08, {3, 2, 5}, iota_bytes(30));
  file.pop_back();
  write_file(dir / "raw", file);
  write_gzip(dir / "gz", file);
  Shape dims;
  EXPECT_NE(error_of([&] { read_idx(dir / "raw", 3, dims); }).find("truncated"), std::string::npos);
  EXPECT_NE(error_of([&] { read_idx(dir / "gz", 3, dims); }).find("truncated"), std::string::npos);
  write_file(dir / "short", {0, 0, 8});
  EXPECT_NE(error_of([&] { read_idx(dir / "short", 3, dims); }).find("truncated"),
            std::string::npos);
  write_file(dir / "header-only", {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2});  // 2 of the 3 dims
  EXPECT_NE(error_of([&] { read_idx(dir / "header-only", 3, dims); }).find("truncated"),
            std::string::npos);
}

TEST(DataIdx, RefusesAGzipStreamCutShort) {
  TempFolder dir;
  write_gzip(dir / "whole", idx(0x08, {100, 10, 10}, iota_bytes(10000)));
  Bytes gz = read_file(dir / "whole");
  gz.resize(gz.size() / 2);
  write_file(dir / "cut", gz);
  Shape dims;
  const std::string e = error_of([&] { read_idx(dir / "cut", 3, dims); });
  EXPECT_NE(e.find(dir / "cut"), std::string::npos) << e;
  EXPECT_FALSE(e.empty());
}

TEST(DataIdx, RefusesBytesAfterTheGzipStreamSayingHowMany) {
  TempFolder dir;
  write_gzip(dir / "f", idx(0x08, {3, 2, 5}, iota_bytes(30)));
  Bytes gz = read_file(dir / "f");
  const std::size_t stream_bytes = gz.size();
  gz.insert(gz.end(), {'j', 'u', 'n', 'k', 0, 0, 0});
  write_file(dir / "f", gz);
  Shape dims;
  const std::string e = error_of([&] { read_idx(dir / "f", 3, dims); });
  EXPECT_EQ(e.rfind(dir / "f", 0), 0u) << "the message starts with the path: " << e;
  EXPECT_NE(e.find("7 bytes follow the end of the gzip stream (at byte " +
                   std::to_string(stream_bytes) + ")"),
            std::string::npos)
      << e;
  gz.resize(stream_bytes + 1);  // one byte, even the first of gzip's magic, is not a member
  gz.back() = 0x1F;
  write_file(dir / "f", gz);
  EXPECT_NE(error_of([&] { read_idx(dir / "f", 3, dims); }).find("1 byte follows"),
            std::string::npos);
}

TEST(DataIdx, ReadsConcatenatedGzipMembersAsOneStream) {
  // `cat a.gz b.gz` is a valid gzip file holding a then b (RFC 1952; gunzip reads it so).
  TempFolder dir;
  const Bytes file = idx(0x08, {3, 2, 5}, iota_bytes(30));
  write_gzip(dir / "a", Bytes(file.begin(), file.begin() + 17));
  write_gzip(dir / "b", Bytes(file.begin() + 17, file.end()));
  Bytes both = read_file(dir / "a");
  const Bytes b = read_file(dir / "b");
  both.insert(both.end(), b.begin(), b.end());
  write_file(dir / "ab", both);
  Shape dims;
  EXPECT_EQ(read_idx(dir / "ab", 3, dims), iota_bytes(30));
  EXPECT_EQ(dims, (Shape{3, 2, 5}));
}

TEST(DataIdx, RefusesAFileWithoutTheIdxMagic) {
  TempFolder dir;
  Bytes file = idx(0x08, {3}, {1, 2, 3});
  file[0] = 'P';
  file[1] = 'K';
  write_file(dir / "f", file);
  Shape dims;
  const std::string e = error_of([&] { read_idx(dir / "f", 1, dims); });
  EXPECT_NE(e.find("not an IDX file"), std::string::npos) << e;
  EXPECT_EQ(e.rfind(dir / "f", 0), 0u) << "the message starts with the path: " << e;
}

TEST(DataIdx, RefusesFloat32DataNamingTheType) {
  TempFolder dir;
  write_file(dir / "f", idx(0x0D, {2}, Bytes(8, 0)));
  Shape dims;
  const std::string e = error_of([&] { read_idx(dir / "f", 1, dims); });
  EXPECT_NE(e.find("data type 0x0D (float32) is not supported: only unsigned bytes (0x08)"),
            std::string::npos)
      << e;
}

TEST(DataIdx, RefusesEveryOtherIdxTypeByName) {
  TempFolder dir;
  const std::vector<std::pair<uint8_t, std::string>> types = {
      {0x09, "int8"}, {0x0B, "int16"}, {0x0C, "int32"}, {0x0E, "float64"}};
  for (const auto& [type, name] : types) {
    write_file(dir / "f", idx(type, {1}, Bytes(8, 0)));
    Shape dims;
    const std::string e = error_of([&] { read_idx(dir / "f", 1, dims); });
    EXPECT_NE(e.find("(" + name + ") is not supported"), std::string::npos) << e;
  }
  write_file(dir / "f", idx(0x42, {1}, Bytes(1, 0)));
  Shape dims;
  EXPECT_NE(error_of([&] { read_idx(dir / "f", 1, dims); }).find("not an IDX data type"),
            std::string::npos);
}

TEST(DataIdx, RefusesARankOtherThanExpected) {
  TempFolder dir;
  write_file(dir / "f", idx(0x08, {6, 5}, iota_bytes(30)));
  Shape dims;
  const std::string e = error_of([&] { read_idx(dir / "f", 3, dims); });
  EXPECT_NE(e.find("has 2 dimension(s), expected 3"), std::string::npos) << e;
}

TEST(DataIdx, RefusesCountsThatDisagreeWithTheFileSize) {
  TempFolder dir;
  // Header says 4 items of 2x5 = 40 bytes; 30 follow.
  write_file(dir / "short", idx(0x08, {4, 2, 5}, iota_bytes(30)));
  // Header says 2 items = 20 bytes; 30 follow.
  write_file(dir / "long", idx(0x08, {2, 2, 5}, iota_bytes(30)));
  write_gzip(dir / "long.gz", idx(0x08, {2, 2, 5}, iota_bytes(30)));
  Shape dims;
  std::string e = error_of([&] { read_idx(dir / "short", 3, dims); });
  EXPECT_NE(e.find("header promises 4 x 2 x 5 = 40 bytes"), std::string::npos) << e;
  e = error_of([&] { read_idx(dir / "long", 3, dims); });
  EXPECT_NE(e.find("10 more bytes follow"), std::string::npos) << e;
  e = error_of([&] { read_idx(dir / "long.gz", 3, dims); });
  EXPECT_NE(e.find("runs past"), std::string::npos) << e;
}

TEST(DataIdx, RefusesAZeroDimension) {
  TempFolder dir;
  write_file(dir / "f", idx(0x08, {0, 28, 28}, {}));
  Shape dims;
  EXPECT_NE(error_of([&] { read_idx(dir / "f", 3, dims); }).find("is 0"), std::string::npos);
}

TEST(DataIdx, RefusesAbsurdDimensionsFastWithoutAllocating) {
  TempFolder dir;
  // 2^31 x 2^31 x 1 in a 20-byte file.
  write_file(dir / "absurd", idx(0x08, {0x80000000u, 0x80000000u, 1}, {1, 2, 3, 4}));
  // 2048 x 1024 x 1024 = 2^31 bytes, exactly the most allowed, in a ~40-byte gzip file: the
  // reader must find the stream short without first making room for 2 GiB.
  write_gzip(dir / "big.gz", idx(0x08, {2048, 1024, 1024}, iota_bytes(100)));
  write_file(dir / "big", idx(0x08, {2048, 1024, 1024}, iota_bytes(100)));
  PeakMemory peak;
  const auto start = std::chrono::steady_clock::now();
  Shape dims;
  std::string e = error_of([&] { read_idx(dir / "absurd", 3, dims); });
  EXPECT_NE(e.find("header promises more than 2147483648 bytes"), std::string::npos) << e;
  e = error_of([&] { read_idx(dir / "big.gz", 3, dims); });
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  e = error_of([&] { read_idx(dir / "big", 3, dims); });
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_LT(elapsed, std::chrono::milliseconds(500));
  if (auto grew = peak.growth_mib()) {
    EXPECT_LT(*grew, 64) << "MiB of peak memory";
  }
}

TEST(DataIdx, PairRefusesALabelOutOfRange) {
  TempFolder dir;
  write_file(dir / "images", idx(0x08, {4, 2, 2}, iota_bytes(16)));
  write_file(dir / "labels", idx(0x08, {4}, {0, 9, 3, 12}));
  const std::string e = error_of([&] { read_idx_pair(dir / "images", dir / "labels"); });
  EXPECT_NE(e.find("label 12 at index 3 is out of range 0..9"), std::string::npos) << e;
  EXPECT_EQ(e.rfind(dir / "labels", 0), 0u) << e;
  EXPECT_NO_THROW(read_idx_pair(dir / "images", dir / "labels", 13));
}

TEST(DataIdx, PairRefusesImageAndLabelCountsThatDiffer) {
  TempFolder dir;
  write_file(dir / "images", idx(0x08, {4, 2, 2}, iota_bytes(16)));
  write_file(dir / "labels", idx(0x08, {3}, {0, 1, 2}));
  const std::string e = error_of([&] { read_idx_pair(dir / "images", dir / "labels"); });
  EXPECT_NE(e.find("holds 3 labels but"), std::string::npos) << e;
  EXPECT_NE(e.find("holds 4 images"), std::string::npos) << e;
}

TEST(DataIdx, PairReadsMatchingFiles) {
  TempFolder dir;
  write_file(dir / "images", idx(0x08, {4, 2, 3}, iota_bytes(24)));
  write_gzip(dir / "labels", idx(0x08, {4}, {0, 1, 2, 9}));
  const ImageSet set = read_idx_pair(dir / "images", dir / "labels");
  EXPECT_EQ(set.count, 4);
  EXPECT_EQ(set.item_shape, (Shape{2, 3}));
  EXPECT_EQ(set.pixels, iota_bytes(24));
  EXPECT_EQ(set.labels, (Bytes{0, 1, 2, 9}));
}

void write_idx_folder(const std::string& folder, bool gzip_some) {
  fs::create_directories(folder);
  write_file(folder + "/train-images-idx3-ubyte", idx(0x08, {5, 4, 3}, iota_bytes(60)));
  write_file(folder + "/train-labels-idx1-ubyte", idx(0x08, {5}, {0, 1, 2, 3, 9}));
  if (gzip_some) {
    write_gzip(folder + "/t10k-images-idx3-ubyte.gz", idx(0x08, {3, 4, 3}, iota_bytes(36, 7)));
    write_gzip(folder + "/t10k-labels-idx1-ubyte.gz", idx(0x08, {3}, {4, 5, 6}));
  } else {
    write_file(folder + "/t10k-images-idx3-ubyte", idx(0x08, {3, 4, 3}, iota_bytes(36, 7)));
    write_file(folder + "/t10k-labels-idx1-ubyte", idx(0x08, {3}, {4, 5, 6}));
  }
}

TEST(DataIdx, FolderReadsTheFourFilesRawOrGzipped) {
  TempFolder dir;
  write_idx_folder(dir / "mnist", true);
  const DataSplits d = read_idx_folder(dir / "mnist");
  EXPECT_EQ(d.name, "mnist");
  EXPECT_EQ(d.path, dir / "mnist");
  EXPECT_EQ(d.train.count, 5);
  EXPECT_EQ(d.test.count, 3);
  EXPECT_EQ(d.train.item_shape, (Shape{4, 3}));
  EXPECT_EQ(d.test.pixels, iota_bytes(36, 7));
  EXPECT_EQ(d.test.labels, (Bytes{4, 5, 6}));
}

TEST(DataIdx, FolderIsNamedFashionMnistWhenItsPathSaysFashion) {
  TempFolder dir;
  write_idx_folder(dir / "Fashion-MNIST", false);
  EXPECT_EQ(read_idx_folder(dir / "Fashion-MNIST").name, "fashion-mnist");
}

TEST(DataIdx, FolderMissingAFileNamesTheFolderAndTheFile) {
  TempFolder dir;
  write_idx_folder(dir / "mnist", true);
  fs::remove(dir / "mnist/t10k-labels-idx1-ubyte.gz");
  const std::string e = error_of([&] { read_idx_folder(dir / "mnist"); });
  EXPECT_EQ(e.rfind(dir / "mnist", 0), 0u) << e;
  EXPECT_NE(e.find("missing t10k-labels-idx1-ubyte"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { read_idx_folder(dir / "nowhere"); }).find("no such folder"),
            std::string::npos);
}

// ---- .npy headers ---------------------------------------------------------------------------

NpyHeader parse(const std::string& dict, uint8_t major = 1) {
  Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', major, 0};
  b.push_back(static_cast<uint8_t>(dict.size()));
  b.push_back(static_cast<uint8_t>(dict.size() >> 8));
  if (major >= 2) b.insert(b.end(), {0, 0});
  b.insert(b.end(), dict.begin(), dict.end());
  return parse_npy_header(b, "test.npy");
}

TEST(DataNpy, ParsesTheHeaderNumpyWrites) {
  const Bytes b = npy("|u1", "(8000, 28, 28)", {});
  const NpyHeader h = parse_npy_header(b, "x.npy");
  EXPECT_EQ(h.descr, "|u1");
  EXPECT_FALSE(h.fortran_order);
  EXPECT_EQ(h.shape, (Shape{8000, 28, 28}));
  EXPECT_EQ(h.data_offset, 128u);
  EXPECT_EQ(npy_header_size(b, "x.npy"), 128u);
}

TEST(DataNpy, AcceptsVersionTwoAndThreeOldPythonLongsAndEitherQuote) {
  EXPECT_EQ(parse("{'descr': '<i8', 'fortran_order': False, 'shape': (10,), }\n", 2).shape,
            (Shape{10}));
  EXPECT_EQ(parse("{'descr': '<i8', 'fortran_order': False, 'shape': (10,), }\n", 3).descr, "<i8");
  EXPECT_EQ(parse("{'descr': '|u1', 'fortran_order': False, 'shape': (60000L, 28L, 28L), }").shape,
            (Shape{60000, 28, 28}));
  const NpyHeader h = parse("{\"shape\": (), \"fortran_order\": True, \"descr\": \"<f4\"}");
  EXPECT_TRUE(h.fortran_order);
  EXPECT_EQ(h.shape, Shape{});
}

TEST(DataNpy, RefusesMalformedHeadersWithAReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{'descr': '|u1', 'fortran_order': False}", "missing key 'shape'"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unexpected key"},
      {"{'descr': '|u1', 'descr': '|u1', 'fortran_order': False, 'shape': (1,)}", "twice"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "structured"},
      {"{'descr': '|u1', 'fortran_order': 0, 'shape': (1,)}", "not True or False"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (-1,)}", "non-negative integer"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999999,)}", "too large"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (1,)} junk", "after the dict"},
      {"{'descr': '|u1", "unterminated"},
  };
  for (const auto& [dict, why] : cases) {
    const std::string e = error_of([&] { parse(dict); });
    EXPECT_NE(e.find(why), std::string::npos) << dict << " -> " << e;
    EXPECT_EQ(e.rfind("test.npy: ", 0), 0u) << e;
  }
}

TEST(DataNpy, RefusesBadMagicUnknownVersionsAndTruncation) {
  Bytes b = npy("|u1", "(1,)", {7});
  Bytes bad = b;
  bad[1] = 'X';
  EXPECT_NE(error_of([&] { parse_npy_header(bad, "f"); }).find("not a .npy"), std::string::npos);
  bad = b;
  bad[6] = 4;
  EXPECT_NE(error_of([&] { parse_npy_header(bad, "f"); }).find("version 4.0 is not supported"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_npy_header(std::span(b).first(9), "f"); }).find("truncated"),
            std::string::npos);
  EXPECT_NE(error_of([&] { parse_npy_header(std::span(b).first(50), "f"); }).find("truncated"),
            std::string::npos);
  bad = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0, 0, 1};  // a 16 MiB header
  EXPECT_NE(error_of([&] { parse_npy_header(bad, "f"); }).find("more than"), std::string::npos);
}

// ---- .npz -----------------------------------------------------------------------------------

TEST(DataNpz, ReadsAKerasShapedNpz) {
  TempFolder dir;
  write_zip(dir / "mnist.npz", small_npz_entries());
  const DataSplits d = read_npz(dir / "mnist.npz");
  EXPECT_EQ(d.name, "mnist");
  EXPECT_EQ(d.path, dir / "mnist.npz");
  EXPECT_EQ(d.train.count, 5);
  EXPECT_EQ(d.test.count, 3);
  EXPECT_EQ(d.train.item_shape, (Shape{4, 3}));
  EXPECT_EQ(d.train.pixels, iota_bytes(60));
  EXPECT_EQ(d.train.labels, (Bytes{0, 1, 2, 3, 9}));
  EXPECT_EQ(d.test.labels, (Bytes{4, 5, 6}));
}

TEST(DataNpz, ReadsStoredEntriesAndInt64OrInt32Labels) {
  TempFolder dir;
  Entries e =
      with_entry(small_npz_entries(), "y_train.npy", npy("<i8", "(5,)", int64_le({0, 1, 2, 3, 9})));
  e = with_entry(e, "y_test.npy", npy("<i4", "(3,)", {4, 0, 0, 0, 5, 0, 0, 0, 6, 0, 0, 0}));
  write_zip(dir / "a.npz", e, /*deflate=*/false);
  const DataSplits d = read_npz(dir / "a.npz");
  EXPECT_EQ(d.train.labels, (Bytes{0, 1, 2, 3, 9}));
  EXPECT_EQ(d.test.labels, (Bytes{4, 5, 6}));
}

TEST(DataNpz, RefusesFloat32ImagesNamingTheDtype) {
  TempFolder dir;
  write_zip(dir / "a.npz",
            with_entry(small_npz_entries(), "x_train.npy", npy("<f4", "(5, 4, 3)", Bytes(240, 0))));
  const std::string e = error_of([&] { read_npz(dir / "a.npz"); });
  EXPECT_NE(e.find("x_train.npy: dtype float32 ('<f4') is not supported"), std::string::npos) << e;
}

TEST(DataNpz, RefusesFortranOrder) {
  TempFolder dir;
  write_zip(dir / "a.npz", with_entry(small_npz_entries(), "x_test.npy",
                                      npy("|u1", "(3, 4, 3)", iota_bytes(36), true)));
  const std::string e = error_of([&] { read_npz(dir / "a.npz"); });
  EXPECT_NE(e.find("fortran_order is True"), std::string::npos) << e;
}

TEST(DataNpz, RefusesBigEndianLabels) {
  TempFolder dir;
  write_zip(dir / "a.npz",
            with_entry(small_npz_entries(), "y_train.npy", npy(">i8", "(5,)", Bytes(40, 0))));
  const std::string e = error_of([&] { read_npz(dir / "a.npz"); });
  EXPECT_NE(e.find("big-endian"), std::string::npos) << e;
}

TEST(DataNpz, RefusesAMissingEntryByName) {
  TempFolder dir;
  write_zip(dir / "a.npz", without_entry(small_npz_entries(), "y_test.npy"));
  const std::string e = error_of([&] { read_npz(dir / "a.npz"); });
  EXPECT_NE(e.find("missing y_test.npy"), std::string::npos) << e;
}

TEST(DataNpz, RefusesShapesThatDisagree) {
  TempFolder dir;
  write_zip(dir / "a.npz",
            with_entry(small_npz_entries(), "y_train.npy", npy("|u1", "(4,)", {0, 1, 2, 3})));
  EXPECT_NE(error_of([&] { read_npz(dir / "a.npz"); }).find("holds 4 labels but"),
            std::string::npos);
  write_zip(dir / "b.npz",
            with_entry(small_npz_entries(), "x_train.npy", npy("|u1", "(5, 12)", iota_bytes(60))));
  EXPECT_NE(error_of([&] { read_npz(dir / "b.npz"); }).find("should be (count, rows, columns)"),
            std::string::npos);
  write_zip(dir / "c.npz",
            with_entry(small_npz_entries(), "x_test.npy", npy("|u1", "(3, 3, 4)", iota_bytes(36))));
  EXPECT_NE(error_of([&] { read_npz(dir / "c.npz"); }).find("test images are (3, 4)"),
            std::string::npos);
}

TEST(DataNpz, RefusesLabelsOutOfRangeIncludingNegativeOnes) {
  TempFolder dir;
  write_zip(dir / "a.npz", with_entry(small_npz_entries(), "y_test.npy",
                                      npy("<i8", "(3,)", int64_le({4, -1, 6}))));
  std::string e = error_of([&] { read_npz(dir / "a.npz"); });
  EXPECT_NE(e.find("y_test.npy: label -1 at index 1 is out of range 0..9"), std::string::npos) << e;
  write_zip(dir / "b.npz",
            with_entry(small_npz_entries(), "y_train.npy", npy("|u1", "(5,)", {0, 1, 10, 3, 9})));
  e = error_of([&] { read_npz(dir / "b.npz"); });
  EXPECT_NE(e.find("label 10 at index 2 is out of range 0..9"), std::string::npos) << e;
}

TEST(DataNpz, RefusesAnEntryLongerOrShorterThanItsHeaderPromises) {
  TempFolder dir;
  write_zip(dir / "long.npz",
            with_entry(small_npz_entries(), "y_train.npy", npy("|u1", "(5,)", {0, 1, 2, 3, 9, 9})));
  EXPECT_NE(error_of([&] { read_npz(dir / "long.npz"); }).find("header promises 133"),
            std::string::npos);
  write_zip(dir / "short.npz",
            with_entry(small_npz_entries(), "y_train.npy", npy("|u1", "(5,)", {0, 1, 2})));
  EXPECT_NE(error_of([&] { read_npz(dir / "short.npz"); }).find("header promises 133"),
            std::string::npos);
}

TEST(DataNpz, RefusesAnEntryThatInflatesPastWhatItsHeaderAndDirectoryPromise) {
  // The zip directory is patched to agree with the .npy header (5 labels) while the deflated
  // data holds 6: only reading one byte past the promise can tell.
  TempFolder dir;
  write_zip(dir / "a.npz",
            with_entry(small_npz_entries(), "y_train.npy", npy("|u1", "(5,)", {0, 1, 2, 3, 9, 9})));
  patch_zip_uncompressed_size(dir / "a.npz", "y_train.npy", 128 + 5);
  const std::string e = error_of([&] { read_npz(dir / "a.npz"); });
  EXPECT_NE(e.find("y_train.npy: the data runs past the 5 bytes its header promises"),
            std::string::npos)
      << e;
}

TEST(DataNpz, RefusesAHugeShapeBeforeAllocating) {
  TempFolder dir;
  write_zip(dir / "a.npz", with_entry(small_npz_entries(), "x_train.npy",
                                      npy("|u1", "(1099511627776, 28, 28)", iota_bytes(60))));
  std::string e = error_of([&] { read_npz(dir / "a.npz"); });
  EXPECT_NE(e.find("the most this reader accepts"), std::string::npos) << e;

  // 2^31 bytes promised by the header and (patched) by the directory, 60 bytes really there.
  Entries entries = with_entry(small_npz_entries(), "x_train.npy",
                               npy("|u1", "(2048, 1024, 1024)", iota_bytes(60)));
  entries = with_entry(entries, "y_train.npy", npy("|u1", "(2048,)", iota_bytes(5, 10)));
  write_zip(dir / "b.npz", entries);
  patch_zip_uncompressed_size(dir / "b.npz", "x_train.npy", 128u + (1u << 31));
  PeakMemory peak;
  const auto start = std::chrono::steady_clock::now();
  e = error_of([&] { read_npz(dir / "b.npz"); });
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  if (auto grew = peak.growth_mib()) {
    EXPECT_LT(*grew, 64) << "MiB of peak memory";
  }
}

TEST(DataNpz, RefusesAFileThatIsNotAZip) {
  TempFolder dir;
  write_file(dir / "a.npz", idx(0x08, {3}, {1, 2, 3}));
  const std::string e = error_of([&] { read_npz(dir / "a.npz"); });
  EXPECT_NE(e.find("not a zip file"), std::string::npos) << e;
  EXPECT_EQ(e.rfind(dir / "a.npz", 0), 0u) << e;
  write_file(dir / "empty.npz", {});
  EXPECT_FALSE(error_of([&] { read_npz(dir / "empty.npz"); }).empty());
}

TEST(DataNpz, RefusesAnEntryThatIsNotNpy) {
  TempFolder dir;
  write_zip(dir / "a.npz", with_entry(small_npz_entries(), "x_train.npy", iota_bytes(300)));
  const std::string e = error_of([&] { read_npz(dir / "a.npz"); });
  EXPECT_NE(e.find("x_train.npy: not a .npy array"), std::string::npos) << e;
}

// ---- discovery ------------------------------------------------------------------------------

TEST(DataLoad, APathLoadsAFolderOrAnNpzAndSaysSo) {
  TempFolder dir;
  write_idx_folder(dir / "mnist", true);
  write_zip(dir / "mine.npz", small_npz_entries());
  std::vector<std::string> said;
  auto say = [&](const std::string& s) { said.push_back(s); };
  EXPECT_EQ(load_data(dir / "mnist", say).train.count, 5);
  EXPECT_EQ(load_data(dir / "mine.npz", say).test.count, 3);
  ASSERT_EQ(said.size(), 2u);
  EXPECT_EQ(said[0], "data: real MNIST (5 train, 3 test) from " + (dir / "mnist"));
  EXPECT_EQ(said[1], "data: real MNIST (5 train, 3 test) from " + (dir / "mine.npz"));
  EXPECT_NO_THROW(load_data(dir / "mnist", nullptr));
}

TEST(DataLoad, AnEmptySpecIsAnError) {
  EXPECT_NE(error_of([] { load_data("", nullptr); }).find("--data: empty"), std::string::npos);
}

TEST(DataLoad, ANonexistentPathIsAnError) {
  EXPECT_EQ(error_of([] { load_data("/nonexistent/crossover-data", nullptr); }),
            "/nonexistent/crossover-data: no such file or folder");
}

TEST(DataLoad, AutoTakesCrossoverDataFirst) {
  TempFolder dir;
  write_zip(dir / "mine.npz", small_npz_entries());
  ScopedEnv env("CROSSOVER_DATA", (dir / "mine.npz").c_str());
  std::vector<std::string> said;
  const DataSplits d = load_data("auto", [&](const std::string& s) { said.push_back(s); });
  EXPECT_EQ(d.train.count, 5);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0],
            "data: real MNIST (5 train, 3 test) from " + (dir / "mine.npz") + " ($CROSSOVER_DATA)");
}

TEST(DataLoad, AutoTakesKerasCacheNext) {
  TempFolder dir;
  fs::create_directories(dir / "home/.keras/datasets");
  write_zip(dir / "home/.keras/datasets/mnist.npz", small_npz_entries());
  ScopedEnv env("CROSSOVER_DATA", nullptr);
  ScopedEnv home("HOME", (dir / "home").c_str());
  std::vector<std::string> said;
  const DataSplits d = load_data("auto", [&](const std::string& s) { said.push_back(s); });
  EXPECT_EQ(d.test.count, 3);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0],
            "data: real MNIST (5 train, 3 test) from " + (dir / "home/.keras/datasets/mnist.npz"));
}

TEST(DataLoad, AutoReportsACorruptCandidateInsteadOfSkippingIt) {
  TempFolder dir;
  write_file(dir / "bad.npz", {1, 2, 3});
  ScopedEnv env("CROSSOVER_DATA", (dir / "bad.npz").c_str());
  EXPECT_NE(error_of([] { load_data("auto", nullptr); }).find("not a zip file"), std::string::npos);
}

TEST(DataLoad, AutoFallsBackToFashionMnistOrExplainsWhatToInstall) {
  TempFolder dir;
  ScopedEnv env("CROSSOVER_DATA", nullptr);
  ScopedEnv home("HOME", dir.str().c_str());
  if (fs::exists("data/mnist")) GTEST_SKIP() << "./data/mnist exists in the working folder";
  std::vector<std::string> said;
  auto say = [&](const std::string& s) { said.push_back(s); };
  if (fs::exists("/usr/share/datasets/fashion-mnist")) {
    const DataSplits d = load_data("auto", say);
    EXPECT_EQ(d.name, "fashion-mnist");
    EXPECT_EQ(d.train.count, 60000);
    EXPECT_EQ(d.test.count, 10000);
    EXPECT_EQ(d.train.item_shape, (Shape{28, 28}));
    ASSERT_EQ(said.size(), 1u);
    EXPECT_EQ(said[0],
              "data: Fashion-MNIST (60000 train, 10000 test) from "
              "/usr/share/datasets/fashion-mnist (no real MNIST found: looked at "
              "$CROSSOVER_DATA, ~/.keras/datasets/mnist.npz, ./data/mnist/)");
  } else {
    const std::string e = error_of([&] { load_data("auto", say); });
    EXPECT_EQ(e.rfind("--data auto: no data set found: looked at $CROSSOVER_DATA", 0), 0u) << e;
    EXPECT_NE(e.find("install Debian's dataset-fashion-mnist or pass --data PATH"),
              std::string::npos);
  }
}

// keras.datasets' discovery (data::find_keras_dataset): Keras's cache first after
// $CROSSOVER_DATA, and every place listed when none exists.
TEST(KerasDataset, MnistTakesTheFileKerasCachesRelativeToItsDatasetsFolder) {
  TempFolder dir;
  fs::create_directories(dir / "home/.keras/datasets/sub");
  write_zip(dir / "home/.keras/datasets/sub/d.npz", small_npz_entries());
  ScopedEnv env("CROSSOVER_DATA", nullptr);
  ScopedEnv keras_home("KERAS_HOME", nullptr);
  ScopedEnv home("HOME", (dir / "home").c_str());
  std::vector<std::string> looked;
  const std::optional<DataSplits> d = find_keras_dataset("mnist", "sub/d.npz", looked);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->train.count, 5);
  EXPECT_EQ(d->path, dir / "home/.keras/datasets/sub/d.npz");
}

TEST(KerasDataset, KerasHomeReplacesTheHomeFolder) {
  TempFolder dir;
  fs::create_directories(dir / "kh/datasets");
  write_zip(dir / "kh/datasets/mnist.npz", small_npz_entries());
  ScopedEnv env("CROSSOVER_DATA", nullptr);
  ScopedEnv keras_home("KERAS_HOME", (dir / "kh").c_str());
  std::vector<std::string> looked;
  EXPECT_TRUE(find_keras_dataset("mnist", "mnist.npz", looked).has_value());
}

TEST(KerasDataset, CrossoverDataOfTheOtherKindIsSkippedAndSaidSo) {
  TempFolder dir;
  write_zip(dir / "fashion.npz", small_npz_entries());
  ScopedEnv env("CROSSOVER_DATA", (dir / "fashion.npz").c_str());
  ScopedEnv keras_home("KERAS_HOME", nullptr);
  ScopedEnv home("HOME", (dir / "home").c_str());
  if (fs::exists("data/mnist")) GTEST_SKIP() << "./data/mnist exists in the working folder";
  std::vector<std::string> looked;
  EXPECT_FALSE(find_keras_dataset("mnist", "mnist.npz", looked).has_value());
  ASSERT_EQ(looked.size(), 3u);
  EXPECT_EQ(looked[0],
            "$CROSSOVER_DATA=" + (dir / "fashion.npz") + " (skipped: Fashion-MNIST by its name)");
  EXPECT_EQ(looked[1], dir / "home/.keras/datasets/mnist.npz");
  EXPECT_EQ(looked[2], "./data/mnist/");
  std::vector<std::string> looked_fashion;
  const std::optional<DataSplits> d = find_keras_dataset("fashion-mnist", "", looked_fashion);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->name, "fashion-mnist");
  EXPECT_TRUE(looked_fashion.empty());
}

TEST(KerasDataset, AnUnknownKindIsAnError) {
  std::vector<std::string> looked;
  EXPECT_NE(error_of([&] { find_keras_dataset("cifar10", "", looked); }).find("unknown kind"),
            std::string::npos);
}

}  // namespace
}  // namespace crossover::data
