// The safetensors format: parsing and validating a file, reading and writing one
// (formats/safetensors.h).
#include "formats/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "formats/files.h"

namespace crossover {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation
constexpr uint64_t kMaxDim = uint64_t{1} << 48;
constexpr int kMaxJsonDepth = 32;  // a header is 3 levels deep

// Bytes per element of the safetensors dtypes.
int dtype_size(const std::string& d) {
  if (d == "BOOL" || d == "U8" || d == "I8" || d == "F8_E5M2" || d == "F8_E4M3") return 1;
  if (d == "I16" || d == "U16" || d == "F16" || d == "BF16") return 2;
  if (d == "I32" || d == "U32" || d == "F32") return 4;
  if (d == "I64" || d == "U64" || d == "F64") return 8;
  return 0;
}

struct TooDeep {};

// The header JSON, refusing duplicate keys (two tensors of one name) and absurd nesting.
json parse_header_json(std::string_view text, const std::string& where) {
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto cb = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (depth > kMaxJsonDepth) throw TooDeep{};
    switch (event) {
      case json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && parsed.is_string() &&
            !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default:
        break;
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), cb);
  } catch (const TooDeep&) {
    throw Error(where,
                fmt::format("the JSON header is nested more than {} levels deep", kMaxJsonDepth));
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    const auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw Error(where,
                fmt::format("malformed JSON header at byte {}: {}", e.byte, printable_name(msg)));
  } catch (const json::exception& e) {  // e.g. a number too large for any C++ type
    std::string msg = e.what();
    const auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw Error(where, "malformed JSON header: " + printable_name(msg));
  }
  if (!duplicate.empty())
    throw Error(where, "the header names '" + printable_name(duplicate) + "' twice");
  return doc;
}

// ---- files -----------------------------------------------------------------------------------

}  // namespace

namespace {

void to_little_endian_floats(const float* src, int64_t n, std::vector<uint8_t>& out) {
  const std::size_t at = out.size();
  out.resize(at + static_cast<std::size_t>(n) * 4);
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out.data() + at, src, static_cast<std::size_t>(n) * 4);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, src + i, 4);
      for (int b = 0; b < 4; ++b)
        out[at + static_cast<std::size_t>(i) * 4 + b] = static_cast<uint8_t>(u >> (8 * b));
    }
  }
}

void from_little_endian_floats(const uint8_t* src, int64_t n, float* dst) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * 4);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t u = 0;
      for (int b = 0; b < 4; ++b) u |= static_cast<uint32_t>(src[i * 4 + b]) << (8 * b);
      std::memcpy(dst + i, &u, 4);
    }
  }
}

}  // namespace

// ---- parsing ---------------------------------------------------------------------------------

SafetensorsHeader parse_safetensors(std::span<const uint8_t> file, const std::string& where) {
  if (file.size() < 8)
    throw Error(where, fmt::format("truncated: {} bytes, but a safetensors file starts with an "
                                   "8-byte header length",
                                   file.size()));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(file[static_cast<std::size_t>(i)]) << (8 * i);
  const uint64_t rest = file.size() - 8;
  if (n > kMaxHeaderBytes)
    throw Error(where, fmt::format("the header length {} is absurd (at most {} bytes): not a "
                                   "safetensors file, or a corrupt one",
                                   n, kMaxHeaderBytes));
  if (n > rest)
    throw Error(where, fmt::format("the header length {} runs past the end of the file (only {} "
                                   "bytes follow it): truncated or not a safetensors file",
                                   n, rest));
  if (n < 2 || file[8] != '{')
    throw Error(where,
                "the header is not a JSON object (it must start with '{'): not a safetensors file");
  const std::string_view text(reinterpret_cast<const char*>(file.data() + 8),
                              static_cast<std::size_t>(n));
  const json doc = parse_header_json(text, where);
  if (!doc.is_object()) throw Error(where, "the header is not a JSON object");

  SafetensorsHeader h;
  h.data_offset = 8 + n;
  h.data_bytes = rest - n;
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "__metadata__") {
      if (v.is_null()) continue;
      if (!v.is_object()) throw Error(where, "__metadata__ is not a JSON object of strings");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw Error(where,
                      "__metadata__ entry '" + printable_name(m.key()) + "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string who = "tensor " + printable_name(key);
    if (!v.is_object()) throw Error(where, who + ": its header entry is not a JSON object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) throw Error(where, who + ": no dtype");
    if (sh == v.end() || !sh->is_array()) throw Error(where, who + ": no shape list");
    if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      throw Error(where, who + ": data_offsets must be two non-negative integers [begin, end]");
    SafetensorsEntry e;
    e.name = key;
    e.dtype = dt->get<std::string>();
    const int esize = dtype_size(e.dtype);
    if (esize == 0) throw Error(where, who + ": unknown dtype '" + printable_name(e.dtype) + "'");
    uint64_t count = 1;
    bool overflow = false;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxDim)
        throw Error(where,
                    who + ": invalid dimension " + printable_name(d.dump()) + " in its shape");
      const uint64_t dim = d.get<uint64_t>();
      e.shape.push_back(static_cast<int64_t>(dim));
      if (!overflow && __builtin_mul_overflow(count, dim, &count)) overflow = true;
    }
    if (e.shape.size() > 16) throw Error(where, who + ": more than 16 dimensions");
    uint64_t bytes = 0;
    if (overflow || __builtin_mul_overflow(count, static_cast<uint64_t>(esize), &bytes))
      throw Error(where, who + ": its shape " + shape_to_string(e.shape) + " is absurdly large");
    e.begin = (*off)[0].get<uint64_t>();
    e.end = (*off)[1].get<uint64_t>();
    if (e.begin > e.end)
      throw Error(where, fmt::format("{}: data_offsets [{}, {}] end before they begin", who,
                                     e.begin, e.end));
    if (e.end > h.data_bytes)
      throw Error(where, fmt::format("{}: data_offsets [{}, {}] run past the end of the data ({} "
                                     "bytes): the file is truncated or corrupt",
                                     who, e.begin, e.end, h.data_bytes));
    if (e.end - e.begin != bytes)
      throw Error(where, fmt::format("{}: shape {} of {} needs {} bytes, but data_offsets [{}, {}] "
                                     "hold {}",
                                     who, shape_to_string(e.shape), e.dtype, bytes, e.begin, e.end,
                                     e.end - e.begin));
    h.tensors.push_back(std::move(e));
  }
  std::sort(h.tensors.begin(), h.tensors.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  // The tensors must tile the data section: each starts where the previous one ended.
  uint64_t at = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry& e : h.tensors) {
    if (e.begin < at)
      throw Error(where, fmt::format("tensors {} and {} overlap (bytes [{}, {}) and [{}, {}))",
                                     printable_name(prev->name), printable_name(e.name),
                                     prev->begin, prev->end, e.begin, e.end));
    if (e.begin > at)
      throw Error(where,
                  fmt::format("{} bytes of data before tensor {} (bytes [{}, {})) belong to no "
                              "tensor: the offsets are corrupt",
                              e.begin - at, printable_name(e.name), at, e.begin));
    at = e.end;
    prev = &e;
  }
  if (at != h.data_bytes)
    throw Error(where, fmt::format("{} bytes after the last tensor belong to no tensor (the data "
                                   "section is {} bytes, the tensors end at byte {})",
                                   h.data_bytes - at, h.data_bytes, at));
  return h;
}

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const NamedTensor& t : tensors)
    if (t.name == name) return &t.value;
  return nullptr;
}

SafetensorsFile read_safetensors(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  SafetensorsFile f;
  f.header = parse_safetensors(bytes, path);
  for (const SafetensorsEntry& e : f.header.tensors) {
    if (e.dtype != "F32")
      throw Error(path, "tensor " + printable_name(e.name) + " has dtype " + e.dtype +
                            ": crossover loads F32 only");
    Tensor t(e.shape);
    from_little_endian_floats(bytes.data() + f.header.data_offset + e.begin, t.size(), t.data());
    f.tensors.push_back({e.name, std::move(t)});
  }
  return f;
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson m = ojson::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  std::vector<uint8_t> data;
  std::size_t total = 0;
  for (const NamedTensor& t : tensors) total += static_cast<std::size_t>(t.value.size()) * 4;
  data.reserve(total);
  std::set<std::string> seen;
  for (const NamedTensor& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !seen.insert(t.name).second)
      throw Error(path, "cannot save a tensor named '" + printable_name(t.name) +
                            "' (empty, reserved or repeated)");
    const uint64_t begin = data.size();
    to_little_endian_floats(t.value.data(), t.value.size(), data);
    ojson shape = ojson::array();
    for (int64_t d : t.value.shape()) shape.push_back(d);
    header[t.name] = ojson{{"dtype", "F32"},
                           {"shape", shape},
                           {"data_offsets", {begin, static_cast<uint64_t>(data.size())}}};
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const ojson::exception& e) {
    throw Error(path, std::string("cannot write the header: ") + e.what());
  }
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  while ((text.size() + 8) % 8 != 0) text.push_back(' ');
  uint8_t len[8];
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  write_file_atomic(
      path, {std::span<const uint8_t>(len, 8),
             std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
             std::span<const uint8_t>(data)});
}

void load_weights(Sequential& model, const SafetensorsFile& file, const std::string& path) {
  load_named_weights(model, file.tensors, path);
}

}  // namespace crossover
