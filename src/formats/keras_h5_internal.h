// Internal to keras_h5's files: the libhdf5 plumbing that the .weights.h5 reader and writer
// and the legacy whole-model .h5 share. Included by src/formats/keras_h5*.cpp only.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace crossover::keras_h5_detail {

constexpr std::size_t kMaxLinksPerGroup = 4096;  // a Sequential model has a few dozen layers
constexpr std::size_t kMaxNameBytes = 256;
constexpr int kMaxRank = 8;

// ---- libhdf5 and its guard (keras_h5_guard.cpp) ---------------------------------------------

std::mutex& hdf5_mutex();
[[noreturn]] void fail_hdf5(const std::string& where, const std::string& what);
void quiet_hdf5();

// An HDF5 identifier, closed with its own close function.
class Id {
 public:
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Id(Id&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  Id& operator=(Id&&) = delete;
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void check_signature(std::span<const uint8_t> file, const std::string& where, const char* what);
Id open_image(std::span<const uint8_t> file, const std::string& where, const char* what);

void put_u64(std::vector<uint8_t>& out, uint64_t v);
void put_string(std::vector<uint8_t>& out, const std::string& s);
void put_tensor(std::vector<uint8_t>& out, const Tensor& t);

// Reads what serialize wrote (from our own child; still checked, as the child's memory may have
// been corrupted before it died).
struct Cursor {
  std::span<const uint8_t> in;
  std::size_t at = 0;
  const std::string& where;
  void need(uint64_t n) const {
    if (n > in.size() - at) throw Error(where, "the libhdf5 reader's answer is cut short");
  }
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[at + i]) << (8 * i);
    at += 8;
    return v;
  }
  std::string string() {
    const uint64_t n = u64();
    need(n);
    std::string s(reinterpret_cast<const char*>(in.data() + at), n);
    at += n;
    return s;
  }
  // A count of items that each take at least one byte of what is left.
  uint64_t count() {
    const uint64_t n = u64();
    need(n);
    return n;
  }
  Tensor tensor() {
    const uint64_t rank = u64();
    if (rank > kMaxRank) throw Error(where, "the libhdf5 reader's answer is corrupt");
    Shape shape;
    uint64_t count = 1;
    for (uint64_t k = 0; k < rank; ++k) {
      const uint64_t d = u64();
      if (__builtin_mul_overflow(count, d, &count) || count > in.size())
        throw Error(where, "the libhdf5 reader's answer is corrupt");
      shape.push_back(static_cast<int64_t>(d));
    }
    need(count * 4);
    Tensor t(shape);
    if (count > 0) std::memcpy(t.data(), in.data() + at, count * 4);
    at += count * 4;
    return t;
  }
};

std::vector<uint8_t> parse_guarded(std::span<const uint8_t> file, const std::string& where,
                                   const std::function<std::vector<uint8_t>()>& parse);

// ---- reading (keras_h5.cpp) -------------------------------------------------------------------

struct Reader {
  std::string where;
  std::size_t file_bytes = 0;
  std::size_t bytes_read = 0;  // all datasets so far: never more than the file holds
};

std::vector<std::string> link_names(const Reader& r, hid_t group, const std::string& path);
bool has(const std::vector<std::string>& names, const std::string& name);
Id open_group(const Reader& r, hid_t parent, const std::string& name, const std::string& path);
Tensor read_variable(Reader& r, hid_t vars, const std::string& name, const std::string& path);
bool looks_like_keras2(hid_t root);

// ---- writing (keras_h5_write.cpp) -------------------------------------------------------------

Id create_group(const std::string& where, hid_t parent, const std::string& name);
void write_dataset(const std::string& where, hid_t group, const std::string& name, const Tensor& t,
                   hid_t lcpl = H5P_DEFAULT);
std::vector<uint8_t> file_image(const std::string& where, hid_t f);

}  // namespace crossover::keras_h5_detail
