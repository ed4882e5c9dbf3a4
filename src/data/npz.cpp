// Keras's mnist.npz: a zip (numpy.savez) of x_train.npy, y_train.npy, x_test.npy, y_test.npy.
//
// Both layers are untrusted: the zip's directory says how large an entry inflates to, and the
// .npy header inside says how large the array is. Neither is believed alone. The .npy header is
// read first, checked against the zip's size for the entry, and then exactly the bytes it
// promises are read, plus one read that must find the end of the entry (which is also when
// libzip checks the entry's CRC).
#include <zip.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/dataset.h"
#include "data/detail.h"
#include "data/npy.h"

namespace crossover::data {
namespace {

constexpr uint8_t kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
// numpy itself refuses headers over 10,000 bytes by default; a mnist header is 118.
constexpr std::size_t kMaxNpyHeaderBytes = 64 * 1024;
// Same ceiling as the IDX reader: no corrupt header can ask for more than this.
constexpr uint64_t kMaxArrayBytes = uint64_t{1} << 31;
// Shape entries beyond this are nonsense for any array and would overflow products.
constexpr uint64_t kMaxShapeEntry = uint64_t{1} << 62;

// A recursive-descent reader for the one dict literal numpy writes. It accepts the Python
// syntax numpy and its older versions produce (either quote, trailing commas, Python 2 "L"
// suffixes on integers) and nothing else: no escapes, no nested containers beyond the tuple.
class DictParser {
 public:
  DictParser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (have_descr) fail("key 'descr' appears twice");
        if (peek() != '\'' && peek() != '"')
          fail("'descr' is not a plain dtype string (structured arrays are not supported)");
        h.descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) fail("key 'fortran_order' appears twice");
        h.fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) fail("key 'shape' appears twice");
        h.shape = parse_shape();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "' (a .npy header has 'descr', 'fortran_order', 'shape')");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail_at("expected ',' or '}'");
    }
    expect('}');
    skip_ws();
    if (pos_ != s_.size()) fail_at("unexpected text after the dict");
    if (!have_descr || !have_order || !have_shape)
      fail(std::string("missing key '") +
           (!have_descr   ? "descr"
            : !have_order ? "fortran_order"
                          : "shape") +
           "'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(where_, "malformed .npy header: " + why);
  }
  [[noreturn]] void fail_at(const std::string& why) const {
    fail(why + " at byte " + std::to_string(pos_) + " of the header dict");
  }

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    if (peek() != c) fail_at(std::string("expected '") + c + "'");
    ++pos_;
  }

  std::string parse_string() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail_at("expected a quoted string");
    const std::size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\' || s_[pos_] == '\n') fail_at("unsupported character in a string");
      ++pos_;
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    std::string out(s_.substr(start, pos_ - start));
    ++pos_;
    return out;
  }

  bool parse_bool() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail_at("'fortran_order' is not True or False");
  }

  int64_t parse_int() {
    if (peek() < '0' || peek() > '9') fail_at("expected a non-negative integer");
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > kMaxShapeEntry) fail("shape entry too large");
      ++pos_;
    }
    if (peek() == 'L') ++pos_;  // Python 2 long
    return static_cast<int64_t>(v);
  }

  Shape parse_shape() {
    Shape shape;
    expect('(');
    skip_ws();
    while (peek() != ')') {
      if (shape.size() >= 32) fail("shape has more than 32 dimensions");
      shape.push_back(parse_int());
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        skip_ws();
      } else if (peek() != ')') {
        fail_at("expected ',' or ')' in 'shape'");
      }
    }
    ++pos_;
    return shape;
  }

  std::string_view s_;
  std::string where_;
  std::size_t pos_ = 0;
};

}  // namespace

std::size_t npy_header_size(std::span<const uint8_t> prefix, const std::string& where) {
  if (prefix.size() < 8 || std::memcmp(prefix.data(), kNpyMagic, 6) != 0) {
    if (prefix.size() >= 6 && std::memcmp(prefix.data(), kNpyMagic, 6) != 0)
      throw Error(where, "not a .npy array: it does not start with \\x93NUMPY");
    throw Error(where, "truncated: too short for a .npy header");
  }
  const unsigned major = prefix[6], minor = prefix[7];
  if ((major < 1 || major > 3) || minor != 0)
    throw Error(where, ".npy format version " + std::to_string(major) + "." +
                           std::to_string(minor) + " is not supported (1.0, 2.0 and 3.0 are)");
  const std::size_t preamble = major == 1 ? 10 : 12;
  if (prefix.size() < preamble) throw Error(where, "truncated: too short for a .npy header");
  std::size_t dict_bytes = std::size_t{prefix[8]} | (std::size_t{prefix[9]} << 8);
  if (major >= 2) dict_bytes |= (std::size_t{prefix[10]} << 16) | (std::size_t{prefix[11]} << 24);
  if (dict_bytes > kMaxNpyHeaderBytes)
    throw Error(where, ".npy header claims " + std::to_string(dict_bytes) +
                           " bytes, more than the " + std::to_string(kMaxNpyHeaderBytes) +
                           " this reader accepts");
  return preamble + dict_bytes;
}

NpyHeader parse_npy_header(std::span<const uint8_t> bytes, const std::string& where) {
  const std::size_t total = npy_header_size(bytes, where);
  if (bytes.size() < total)
    throw Error(where, "truncated: the .npy header is " + std::to_string(total) +
                           " bytes but only " + std::to_string(bytes.size()) + " are there");
  const std::size_t preamble = bytes[6] == 1 ? 10 : 12;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + preamble,
                              total - preamble);
  NpyHeader h = DictParser(text, where).parse();
  h.data_offset = total;
  return h;
}

namespace {

namespace fs = std::filesystem;

struct ZipDiscard {
  void operator()(zip_t* z) const noexcept { zip_discard(z); }
};
struct ZipFileClose {
  void operator()(zip_file_t* f) const noexcept { zip_fclose(f); }
};

// "float32 ('<f4')": the numpy name a user recognises, with the exact descr.
std::string describe_dtype(const std::string& descr) {
  static const std::array<std::pair<std::string_view, std::string_view>, 12> kNames = {
      {{"u1", "uint8"},
       {"u2", "uint16"},
       {"u4", "uint32"},
       {"u8", "uint64"},
       {"i1", "int8"},
       {"i2", "int16"},
       {"i4", "int32"},
       {"i8", "int64"},
       {"f2", "float16"},
       {"f4", "float32"},
       {"f8", "float64"},
       {"b1", "bool"}}};
  std::string_view code(descr);
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '|' || code[0] == '='))
    code.remove_prefix(1);
  for (const auto& [c, name] : kNames)
    if (code == c) return std::string(name) + " ('" + descr + "')";
  return "'" + descr + "'";
}

// Byte width of the accepted dtypes; 0 if `descr` is not one of `accepted`.
std::size_t accepted_item_size(const std::string& descr, bool labels) {
  // Byte order means nothing for one-byte types, so every prefix numpy could write is fine.
  if (descr == "|u1" || descr == "<u1" || descr == ">u1" || descr == "=u1" || descr == "u1")
    return 1;
  if (labels && descr == "<i8") return 8;
  if (labels && descr == "<i4") return 4;
  return 0;
}

class NpzEntry {
 public:
  NpzEntry(zip_t* za, const std::string& path, uintmax_t file_bytes, const char* name)
      : where_(path + ": " + name) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat(za, name, 0, &st) != 0)
      throw Error(path, std::string("missing ") + name +
                            ": a Keras mnist.npz holds x_train.npy, y_train.npy, x_test.npy and "
                            "y_test.npy");
    if (!(st.valid & ZIP_STAT_SIZE)) throw Error(where_, "the zip does not give the entry's size");
    entry_bytes_ = st.size;
    // What the entry's compressed bytes can inflate to, whatever the directory claims.
    uintmax_t compressed = file_bytes;
    if ((st.valid & ZIP_STAT_COMP_SIZE) && st.comp_size < compressed) compressed = st.comp_size;
    inflate_bound_ = detail::deflate_output_bound(compressed);

    file_.reset(zip_fopen_index(za, st.index, 0));
    if (!file_) throw Error(where_, std::string("cannot open the entry: ") + zip_strerror(za));

    // Preamble first (10 bytes, 12 from version 2.0), then the dict it announces.
    std::vector<uint8_t> head(10);
    read_exact(head.data(), 10);
    if (head[6] >= 2 && std::memcmp(head.data(), kNpyMagic, 6) == 0) {
      head.resize(12);
      read_exact(head.data() + 10, 2);
    }
    const std::size_t header_bytes = npy_header_size(head, where_);
    if (header_bytes > entry_bytes_)
      throw Error(where_, "the .npy header claims " + std::to_string(header_bytes) +
                              " bytes, more than the whole entry (" + std::to_string(entry_bytes_) +
                              ")");
    const std::size_t have = head.size();
    head.resize(header_bytes);
    read_exact(head.data() + have, header_bytes - have);
    header_ = parse_npy_header(head, where_);
  }

  const NpyHeader& header() const { return header_; }
  const std::string& where() const { return where_; }

  // The array's bytes: exactly `data_bytes` of them, the entry's end right after.
  std::vector<uint8_t> read_data(uint64_t data_bytes) {
    const uint64_t expected = header_.data_offset + data_bytes;
    if (entry_bytes_ != expected)
      throw Error(where_, "the entry is " + std::to_string(entry_bytes_) +
                              " bytes but its .npy header promises " + std::to_string(expected) +
                              " (" + std::to_string(header_.data_offset) + " of header, " +
                              std::to_string(data_bytes) + " of data)");
    std::vector<uint8_t> data =
        detail::read_at_most(static_cast<std::size_t>(data_bytes), inflate_bound_,
                             [&](uint8_t* dst, std::size_t n) { return read_some(dst, n); });
    if (data.size() < data_bytes)
      throw Error(where_, "truncated: the data ends after " + std::to_string(data.size()) +
                              " of the " + std::to_string(data_bytes) +
                              " bytes its header promises");
    if (data.size() > data_bytes)
      throw Error(where_, "the data runs past the " + std::to_string(data_bytes) +
                              " bytes its header promises");
    return data;
  }

 private:
  std::size_t read_some(uint8_t* dst, std::size_t n) {
    const zip_int64_t got = zip_fread(file_.get(), dst, n);
    if (got < 0)
      throw Error(where_, std::string("corrupt entry: ") + zip_file_strerror(file_.get()));
    return static_cast<std::size_t>(got);
  }
  void read_exact(uint8_t* dst, std::size_t n) {
    std::size_t have = 0;
    while (have < n) {
      const std::size_t got = read_some(dst + have, n - have);
      if (got == 0) throw Error(where_, "truncated: the entry ends inside its .npy header");
      have += got;
    }
  }

  std::string where_;
  std::unique_ptr<zip_file_t, ZipFileClose> file_;
  uint64_t entry_bytes_ = 0;
  std::size_t inflate_bound_ = 0;
  NpyHeader header_;
};

// Bytes of an array of `shape` with `item_size`-byte elements, refused past kMaxArrayBytes.
uint64_t array_bytes(const NpzEntry& e, std::size_t item_size) {
  uint64_t n = item_size;
  for (int64_t d : e.header().shape) {
    const auto u = static_cast<uint64_t>(d);
    if (u == 0) throw Error(e.where(), "shape " + shape_to_string(e.header().shape) + " is empty");
    if (n > kMaxArrayBytes / u)
      throw Error(e.where(), "shape " + shape_to_string(e.header().shape) + " is more than " +
                                 std::to_string(kMaxArrayBytes) +
                                 " bytes, the most this reader accepts");
    n *= u;
  }
  return n;
}

void check_layout(const NpzEntry& e, bool labels, std::size_t& item_size) {
  const NpyHeader& h = e.header();
  if (h.descr.size() >= 2 && h.descr[0] == '>' && h.descr.substr(1) != "u1")
    throw Error(e.where(), "dtype " + describe_dtype(h.descr) +
                               " is big-endian: only little-endian arrays are read");
  item_size = accepted_item_size(h.descr, labels);
  if (item_size == 0)
    throw Error(e.where(),
                "dtype " + describe_dtype(h.descr) + " is not supported: " +
                    (labels ? "labels must be uint8 ('|u1'), int64 ('<i8') or int32 ('<i4')"
                            : "images must be uint8 ('|u1')"));
  if (h.fortran_order)
    throw Error(e.where(),
                "fortran_order is True (column-major data): only C-order arrays are read");
  const std::size_t rank = labels ? 1 : 3;
  if (h.shape.size() != rank)
    throw Error(e.where(), "shape " + shape_to_string(h.shape) + " should be " +
                               (labels ? "(count,)" : "(count, rows, columns)"));
}

ImageSet read_split(zip_t* za, const std::string& path, uintmax_t file_bytes, const char* x_name,
                    const char* y_name, int num_classes) {
  NpzEntry x(za, path, file_bytes, x_name);
  std::size_t x_item = 0;
  check_layout(x, false, x_item);
  const uint64_t x_bytes = array_bytes(x, x_item);
  NpzEntry y(za, path, file_bytes, y_name);
  std::size_t y_item = 0;
  check_layout(y, true, y_item);
  const uint64_t y_bytes = array_bytes(y, y_item);
  if (x.header().shape[0] != y.header().shape[0])
    throw Error(y.where(), "holds " + std::to_string(y.header().shape[0]) + " labels but " +
                               x_name + " holds " + std::to_string(x.header().shape[0]) +
                               " images");

  ImageSet set;
  set.count = x.header().shape[0];
  set.item_shape = {x.header().shape[1], x.header().shape[2]};
  set.pixels = x.read_data(x_bytes);
  const std::vector<uint8_t> raw = y.read_data(y_bytes);
  set.labels.resize(static_cast<std::size_t>(set.count));
  for (std::size_t i = 0; i < set.labels.size(); ++i) {
    // Little-endian by construction (check_layout), assembled bytewise to be host-independent;
    // int32 and int64 labels are sign-extended so -1 reads as out of range, not as 255.
    const uint8_t* p = raw.data() + i * y_item;
    int64_t v = 0;
    if (y_item == 1) {
      v = p[0];
    } else {
      uint64_t u = 0;
      for (std::size_t b = y_item; b-- > 0;) u = (u << 8) | p[b];
      if (y_item == 4) u = static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(u)));
      v = static_cast<int64_t>(u);
    }
    if (v < 0 || v >= num_classes)
      throw Error(y.where(), "label " + std::to_string(v) + " at index " + std::to_string(i) +
                                 " is out of range 0.." + std::to_string(num_classes - 1));
    set.labels[i] = static_cast<uint8_t>(v);
  }
  return set;
}

}  // namespace

DataSplits read_npz(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (!fs::exists(status)) throw Error(path, "no such file");
  if (fs::is_directory(status)) throw Error(path, "is a folder, not an .npz file");
  const uintmax_t file_bytes = fs::file_size(path, ec);
  if (ec) throw Error(path, "cannot read its size: " + ec.message());

  int code = 0;
  std::unique_ptr<zip_t, ZipDiscard> za(zip_open(path.c_str(), ZIP_RDONLY, &code));
  if (!za) {
    if (code == ZIP_ER_NOZIP) throw Error(path, "not a zip file: an .npz is a zip of .npy arrays");
    zip_error_t err;
    zip_error_init_with_code(&err, code);
    const std::string why = zip_error_strerror(&err);
    zip_error_fini(&err);
    throw Error(path, "cannot open as a zip: " + why);
  }

  DataSplits splits;
  splits.train =
      read_split(za.get(), path, file_bytes, "x_train.npy", "y_train.npy", splits.num_classes);
  splits.test =
      read_split(za.get(), path, file_bytes, "x_test.npy", "y_test.npy", splits.num_classes);
  if (splits.train.item_shape != splits.test.item_shape)
    throw Error(path, "train images are " + shape_to_string(splits.train.item_shape) +
                          " but test images are " + shape_to_string(splits.test.item_shape));
  splits.name = detail::dataset_name_for(path);
  splits.path = path;
  return splits;
}

}  // namespace crossover::data
