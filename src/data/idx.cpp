// IDX files (LeCun's MNIST format), raw or gzip-compressed, and the folders and pairs made of
// them.
//
// Layout: two zero bytes, a type byte, a rank byte, `rank` big-endian uint32 dimensions, then
// the data, row-major. Only unsigned bytes (type 0x08) are read: that is what MNIST and
// Fashion-MNIST use, and anything else reaching the trainer would be a different data set.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "data/detail.h"

namespace crossover::data {
namespace {

namespace fs = std::filesystem;

// Larger than any image data set this engine trains on in memory, small enough that a corrupt
// header can never ask for an allocation the machine cannot make.
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 31;

std::string hex_byte(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", v & 0xFFu);
  return buf;
}

// The IDX type codes other than 0x08 have names users know; naming them makes "not supported"
// distinguishable from "not an IDX file".
const char* idx_type_name(unsigned type) {
  switch (type) {
    case 0x08:
      return "uint8";
    case 0x09:
      return "int8";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return nullptr;
  }
}

std::string dims_to_string(const Shape& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

// One interface over a plain file and a gzip stream, so the header logic is written once.
class Source {
 public:
  virtual ~Source() = default;
  // Up to n bytes; fewer only at the end of the data. Throws Error on a read error.
  virtual std::size_t read(uint8_t* dst, std::size_t n) = 0;

  // Exactly n bytes or an Error saying the file ends inside `what`.
  void read_exact(uint8_t* dst, std::size_t n, const std::string& what) {
    std::size_t have = 0;
    while (have < n) {
      std::size_t got = read(dst + have, n - have);
      if (got == 0)
        throw Error(path_, "truncated: the file ends inside the " + what + " (" +
                               std::to_string(have) + " of " + std::to_string(n) + " bytes)");
      have += got;
    }
  }

 protected:
  explicit Source(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

class RawSource final : public Source {
 public:
  RawSource(const std::string& path, std::FILE* f) : Source(path), f_(f) {}
  ~RawSource() override { std::fclose(f_); }
  RawSource(const RawSource&) = delete;
  RawSource& operator=(const RawSource&) = delete;

  std::size_t read(uint8_t* dst, std::size_t n) override {
    std::size_t got = std::fread(dst, 1, n, f_);
    if (got < n && std::ferror(f_)) throw Error(path_, "read error");
    return got;
  }

 private:
  std::FILE* f_;
};

// A gzip file inflated with zlib's inflate, member after member. Concatenated members are one
// stream (RFC 1952 section 2.2; gunzip, zcat and Python's gzip read them so): `cat a.gz b.gz`
// is read as a then b. Anything else after the last member is refused, naming how many bytes
// follow: gzread would skip them silently, and bytes nobody meant to be there are corruption.
class GzSource final : public Source {
 public:
  // `f` is positioned at the file's start and owned from here on; `file_bytes` is its size.
  GzSource(const std::string& path, std::FILE* f, uint64_t file_bytes)
      : Source(path), f_(f), file_bytes_(file_bytes), in_(256 * 1024) {
    // 16 + MAX_WBITS: a gzip header and trailer (CRC-32 and length checked), nothing else.
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) {
      std::fclose(f_);
      throw Error(path, "cannot start gzip decompression (out of memory?)");
    }
  }
  ~GzSource() override {
    inflateEnd(&z_);
    std::fclose(f_);
  }
  GzSource(const GzSource&) = delete;
  GzSource& operator=(const GzSource&) = delete;

  std::size_t read(uint8_t* dst, std::size_t n) override {
    z_.next_out = dst;
    z_.avail_out = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    const uInt asked = z_.avail_out;
    while (z_.avail_out > 0 && !finished_) {
      if (member_ended_) {
        next_member_or_end();
        continue;
      }
      if (z_.avail_in == 0 && !fill(1))
        throw Error(path_, "truncated: the file ends inside gzip member " +
                               std::to_string(member_) + " (cut short?)");
      const int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        throw Error(path_, "corrupt gzip data in member " + std::to_string(member_) + ": " +
                               (z_.msg != nullptr ? z_.msg : "zlib error " + std::to_string(rc)));
      }
    }
    return asked - z_.avail_out;
  }

 private:
  // At least `k` unread compressed bytes in in_, unless the file has fewer left. False if fewer.
  bool fill(std::size_t k) {
    if (z_.avail_in >= k) return true;
    if (z_.avail_in > 0) std::memmove(in_.data(), z_.next_in, z_.avail_in);
    std::size_t have = z_.avail_in;
    while (have < k) {
      const std::size_t got = std::fread(in_.data() + have, 1, in_.size() - have, f_);
      if (got == 0) {
        if (std::ferror(f_)) throw Error(path_, "read error");
        break;
      }
      have += got;
      read_bytes_ += got;
    }
    z_.next_in = in_.data();
    z_.avail_in = static_cast<uInt>(have);
    return have >= k;
  }

  // A member just ended: the file's end, another member (its magic 1F 8B), or trailing bytes.
  void next_member_or_end() {
    fill(2);
    if (z_.avail_in == 0) {
      finished_ = true;
      return;
    }
    if (z_.avail_in >= 2 && z_.next_in[0] == 0x1F && z_.next_in[1] == 0x8B) {
      inflateReset(&z_);
      member_ended_ = false;
      ++member_;
      return;
    }
    const uint64_t end_of_stream = read_bytes_ - z_.avail_in;
    const uint64_t trailing = file_bytes_ > end_of_stream ? file_bytes_ - end_of_stream : 0;
    throw Error(path_, std::to_string(trailing) +
                           (trailing == 1 ? " byte follows" : " bytes follow") +
                           " the end of the gzip stream (at byte " + std::to_string(end_of_stream) +
                           "): trailing data that is not another gzip member");
  }

  std::FILE* f_;
  uint64_t file_bytes_;
  std::vector<uint8_t> in_;
  z_stream z_{};
  uint64_t read_bytes_ = 0;  // compressed bytes read from the file so far
  int member_ = 1;           // the gzip member being inflated, counted from 1
  bool member_ended_ = false, finished_ = false;
};

}  // namespace

std::vector<uint8_t> read_idx(const std::string& path, int expected_rank, Shape& dims) {
  if (expected_rank < 1 || expected_rank > 8)
    throw Error(path, "cannot read an IDX file of rank " + std::to_string(expected_rank));

  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error(path, "no such file");
  if (fs::is_directory(status)) throw Error(path, "is a folder, not an IDX file");
  const std::uintmax_t file_bytes = fs::file_size(path, ec);
  if (ec) throw Error(path, "cannot read its size: " + ec.message());

  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw Error(path, "cannot open for reading");
  // Compression is told by content, not by name: a .gz that was gunzipped in place, or raw
  // data saved under a .gz name, both still read.
  uint8_t sniff[2] = {0, 0};
  const bool gzip = std::fread(sniff, 1, 2, f) == 2 && sniff[0] == 0x1F && sniff[1] == 0x8B;
  std::rewind(f);
  std::unique_ptr<Source> src;
  if (gzip)
    src = std::make_unique<GzSource>(path, f, file_bytes);
  else
    src = std::make_unique<RawSource>(path, f);

  uint8_t magic[4];
  src->read_exact(magic, 4, "4-byte magic number");
  if (magic[0] != 0 || magic[1] != 0)
    throw Error(path, "not an IDX file: it starts with bytes " + hex_byte(magic[0]) + " " +
                          hex_byte(magic[1]) + ", an IDX file starts with 0x00 0x00");
  const unsigned type = magic[2];
  if (type != 0x08) {
    const char* name = idx_type_name(type);
    if (name == nullptr)
      throw Error(path, "not an IDX file: " + hex_byte(type) + " is not an IDX data type");
    throw Error(path, "data type " + hex_byte(type) + " (" + name +
                          ") is not supported: only unsigned bytes (0x08)");
  }
  const int rank = magic[3];
  if (rank != expected_rank)
    throw Error(path, "has " + std::to_string(rank) + " dimension(s), expected " +
                          std::to_string(expected_rank) +
                          (expected_rank == 3   ? " (images: count x rows x columns)"
                           : expected_rank == 1 ? " (labels: count)"
                                                : ""));

  std::vector<uint8_t> raw_dims(static_cast<std::size_t>(rank) * 4);
  src->read_exact(raw_dims.data(), raw_dims.size(), "header's dimensions");
  dims.assign(static_cast<std::size_t>(rank), 0);
  uint64_t payload = 1;
  for (int i = 0; i < rank; ++i) {
    const uint8_t* b = &raw_dims[static_cast<std::size_t>(i) * 4];
    const uint64_t d =
        (uint64_t{b[0]} << 24) | (uint64_t{b[1]} << 16) | (uint64_t{b[2]} << 8) | b[3];
    dims[static_cast<std::size_t>(i)] = static_cast<int64_t>(d);
    if (d == 0) throw Error(path, "dimension " + std::to_string(i) + " of the header is 0");
    // Each factor is < 2^32 and payload stays <= 2^31 before multiplying, so no overflow.
    payload *= d;
    if (payload > kMaxIdxBytes)
      throw Error(path, "header promises more than " + std::to_string(kMaxIdxBytes) + " bytes (" +
                            dims_to_string(Shape(dims.begin(), dims.begin() + i + 1)) +
                            (i + 1 < rank ? " x ..." : "") +
                            "), the most this reader accepts: a corrupt header?");
  }
  const uint64_t header_bytes = 4 + raw_dims.size();
  const std::string promise = "header promises " + dims_to_string(dims) + " = " +
                              std::to_string(payload) + " bytes of data";

  if (!gzip) {
    // The file size is known: decide before allocating anything.
    const uint64_t available = file_bytes >= header_bytes ? file_bytes - header_bytes : 0;
    if (available < payload)
      throw Error(path, "truncated: " + promise + " but only " + std::to_string(available) +
                            " follow the " + std::to_string(header_bytes) + "-byte header");
    if (available > payload)
      throw Error(path, promise + " but " + std::to_string(available - payload) +
                            " more bytes follow (trailing data, or a wrong header)");
  }
  // Raw: the size check above already proved the payload is there.
  const std::size_t plausible =
      gzip ? detail::deflate_output_bound(file_bytes) : static_cast<std::size_t>(payload);
  std::vector<uint8_t> data =
      detail::read_at_most(static_cast<std::size_t>(payload), plausible,
                           [&](uint8_t* dst, std::size_t n) { return src->read(dst, n); });
  if (data.size() < payload)
    throw Error(path, "truncated: " + promise + " but the " +
                          (gzip ? std::string("decompressed ") : std::string()) +
                          "data ends after " + std::to_string(data.size()) + " bytes");
  if (data.size() > payload)
    throw Error(path, promise + " but the " + (gzip ? "decompressed " : "") +
                          "data runs past them (trailing data, or a wrong header)");
  return data;
}

ImageSet read_idx_pair(const std::string& images_path, const std::string& labels_path,
                       int num_classes) {
  if (num_classes < 1 || num_classes > 256)
    throw Error(labels_path, "cannot check labels against " + std::to_string(num_classes) +
                                 " classes: uint8 labels allow 1..256");
  ImageSet set;
  Shape image_dims;
  Shape label_dims;
  set.pixels = read_idx(images_path, 3, image_dims);
  set.labels = read_idx(labels_path, 1, label_dims);
  if (label_dims[0] != image_dims[0])
    throw Error(labels_path, "holds " + std::to_string(label_dims[0]) + " labels but " +
                                 images_path + " holds " + std::to_string(image_dims[0]) +
                                 " images: the two files do not belong together");
  for (std::size_t i = 0; i < set.labels.size(); ++i) {
    if (set.labels[i] >= num_classes)
      throw Error(labels_path, "label " + std::to_string(set.labels[i]) + " at index " +
                                   std::to_string(i) + " is out of range 0.." +
                                   std::to_string(num_classes - 1));
  }
  set.count = image_dims[0];
  set.item_shape = {image_dims[1], image_dims[2]};
  return set;
}

namespace {

// The raw name if present, else name.gz; "" if neither.
std::string find_idx_file(const fs::path& folder, const std::string& name) {
  std::error_code ec;
  for (const std::string& candidate : {name, name + ".gz"}) {
    fs::path p = folder / candidate;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return {};
}

}  // namespace

DataSplits read_idx_folder(const std::string& folder) {
  std::error_code ec;
  if (!fs::exists(folder, ec)) throw Error(folder, "no such folder");
  if (!fs::is_directory(folder, ec)) throw Error(folder, "is not a folder");

  static const char* const kNames[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
  std::string paths[4];
  for (int i = 0; i < 4; ++i) {
    paths[i] = find_idx_file(folder, kNames[i]);
    if (paths[i].empty())
      throw Error(folder,
                  std::string("missing ") + kNames[i] + "[.gz]: an IDX data folder holds " +
                      "train-images-idx3-ubyte, train-labels-idx1-ubyte, "
                      "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte (each may be .gz)");
  }

  DataSplits splits;
  splits.train = read_idx_pair(paths[0], paths[1], splits.num_classes);
  splits.test = read_idx_pair(paths[2], paths[3], splits.num_classes);
  if (splits.train.item_shape != splits.test.item_shape)
    throw Error(folder, "train images are " + shape_to_string(splits.train.item_shape) +
                            " but test images are " + shape_to_string(splits.test.item_shape));
  splits.name = detail::dataset_name_for(folder);
  splits.path = folder;
  return splits;
}

DataSplits read_mnist10k(const std::string& folder) {
  constexpr int64_t kTotal = 10000;
  constexpr int64_t kTrain = 8000;
  const fs::path dir(folder);
  ImageSet all = read_idx_pair((dir / "mnist-10k-images-idx3-ubyte.gz").string(),
                               (dir / "mnist-10k-labels-idx1-ubyte.gz").string());
  if (all.count != kTotal)
    throw Error(folder, "mnist-10k should hold " + std::to_string(kTotal) + " digits, found " +
                            std::to_string(all.count));
  const auto item = static_cast<std::size_t>(all.item_shape[0] * all.item_shape[1]);
  const auto split = static_cast<std::size_t>(kTrain);

  DataSplits splits;
  splits.train.count = kTrain;
  splits.train.item_shape = all.item_shape;
  splits.train.pixels.assign(all.pixels.begin(), all.pixels.begin() + split * item);
  splits.train.labels.assign(all.labels.begin(), all.labels.begin() + split);
  splits.test.count = kTotal - kTrain;
  splits.test.item_shape = all.item_shape;
  splits.test.pixels.assign(all.pixels.begin() + split * item, all.pixels.end());
  splits.test.labels.assign(all.labels.begin() + split, all.labels.end());
  splits.name = "mnist-10k";
  splits.path = folder;
  return splits;
}

}  // namespace crossover::data
