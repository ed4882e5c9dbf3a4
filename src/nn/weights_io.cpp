// safetensors: save and load a model's weights (see weights_io.h for the format).
#include "nn/weights_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "nn/keras_h5.h"
#include "nn/model_config.h"
#include "nn/optimizers.h"

namespace crossover {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference implementation
constexpr uint64_t kMaxDim = uint64_t{1} << 48;
constexpr int kMaxJsonDepth = 32;  // a header is 3 levels deep

std::string printable(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 80) {
      out += "...";
      break;
    }
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return out;
}

std::string sys_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

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
    throw Error(where, fmt::format("malformed JSON header at byte {}: {}", e.byte, printable(msg)));
  } catch (const json::exception& e) {  // e.g. a number too large for any C++ type
    std::string msg = e.what();
    const auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    throw Error(where, "malformed JSON header: " + printable(msg));
  }
  if (!duplicate.empty())
    throw Error(where, "the header names '" + printable(duplicate) + "' twice");
  return doc;
}

// ---- files -----------------------------------------------------------------------------------

}  // namespace

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path, sys_error("cannot open"));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = sys_error("cannot stat");
    ::close(fd);
    throw Error(path, why);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(path, "is a folder, not a weights file");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path, "is not a regular file");
  }
  std::vector<uint8_t> bytes;
  try {
    bytes.resize(static_cast<std::size_t>(st.st_size));
  } catch (const std::bad_alloc&) {
    ::close(fd);
    throw Error(path, fmt::format("{} bytes do not fit in memory", st.st_size));
  }
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const std::string why = sys_error("read failed");
      ::close(fd);
      throw Error(path, why);
    }
    if (r == 0) break;  // the file shrank while we read it
    got += static_cast<std::size_t>(r);
  }
  ::close(fd);
  bytes.resize(got);
  return bytes;
}

namespace {

// The process's umask, without changing it (umask() itself is not thread-safe to query).
mode_t current_umask() {
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned mask = 0;
      if (std::sscanf(line, "Umask: %o", &mask) == 1) {
        std::fclose(f);
        return static_cast<mode_t>(mask);
      }
    }
    std::fclose(f);
  }
  return 022;
}

}  // namespace

void write_file_atomic(const std::string& path,
                       const std::vector<std::span<const uint8_t>>& pieces) {
  if (path.empty()) throw Error("save", "the output path is empty");
  const auto slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..")
    throw Error(path, "is a folder, not a file name");
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) throw Error(path, "is a folder: cannot save over it");
  std::string tmpl =
      (slash == std::string::npos ? std::string() : dir + "/") + "." + base + ".tmp-XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) throw Error(path, sys_error(("cannot create a temporary file in " + dir).c_str()));
  const std::string tmp(name.data());
  auto fail = [&](const std::string& why) {
    ::unlink(tmp.c_str());
    throw Error(path, why);
  };
  const mode_t mode = exists ? (st.st_mode & 07777) : (0666 & ~current_umask());
  if (::fchmod(fd, mode) != 0) {
    const std::string why = sys_error("cannot set permissions");
    ::close(fd);
    fail(why);
  }
  for (std::span<const uint8_t> piece : pieces) {
    std::size_t done = 0;
    while (done < piece.size()) {
      const ssize_t w = ::write(fd, piece.data() + done, piece.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        const std::string why = sys_error("write failed");
        ::close(fd);
        fail(why);
      }
      done += static_cast<std::size_t>(w);
    }
  }
  if (::fsync(fd) != 0) {
    const std::string why = sys_error("fsync failed");
    ::close(fd);
    fail(why);
  }
  if (::close(fd) != 0) fail(sys_error("close failed"));
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    fail(sys_error("cannot rename the temporary file over it"));
  // Make the rename itself durable; a failure here does not undo the save.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

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

std::string name_list(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i == 6) {
      s += fmt::format(", ... ({} in all)", names.size());
      break;
    }
    s += (i ? ", " : "") + printable(names[i]);
  }
  return s.empty() ? "none" : s;
}

bool is_optimizer_tensor(const std::string& name) { return name.rfind("optimizer/", 0) == 0; }

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
          throw Error(where, "__metadata__ entry '" + printable(m.key()) + "' is not a string");
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string who = "tensor " + printable(key);
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
    if (esize == 0) throw Error(where, who + ": unknown dtype '" + printable(e.dtype) + "'");
    uint64_t count = 1;
    bool overflow = false;
    for (const json& d : *sh) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxDim)
        throw Error(where, who + ": invalid dimension " + printable(d.dump()) + " in its shape");
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
                                     printable(prev->name), printable(e.name), prev->begin,
                                     prev->end, e.begin, e.end));
    if (e.begin > at)
      throw Error(where,
                  fmt::format("{} bytes of data before tensor {} (bytes [{}, {})) belong to no "
                              "tensor: the offsets are corrupt",
                              e.begin - at, printable(e.name), at, e.begin));
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
      throw Error(path, "tensor " + printable(e.name) + " has dtype " + e.dtype +
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
      throw Error(path, "cannot save a tensor named '" + printable(t.name) +
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

// ---- models ----------------------------------------------------------------------------------

WeightsFormat weights_format_of(const std::string& path) {
  auto ends_with = [&](std::string_view suffix) {
    if (path.size() < suffix.size()) return false;
    for (std::size_t i = 0; i < suffix.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(path[path.size() - suffix.size() + i])) !=
          suffix[i])
        return false;
    return true;
  };
  constexpr const char* kSupported =
      "crossover saves and loads weights as .safetensors or Keras 3's .weights.h5";
  if (ends_with(".weights.h5")) return WeightsFormat::keras_h5;
  if (ends_with(".keras"))
    throw Error(path, std::string("a .keras archive (model.save) is not supported: ") + kSupported +
                          " (model.save_weights)");
  if (ends_with(".h5") || ends_with(".hdf5") || ends_with(".he5"))
    throw Error(path, std::string("a legacy Keras 2 .h5 file is not supported: ") + kSupported +
                          " (name the file *.weights.h5)");
  return WeightsFormat::safetensors;
}

void save_weights(const Sequential& model, const std::string& path) {
  if (weights_format_of(path) == WeightsFormat::keras_h5) {
    save_keras_weights_h5(model, path);
    return;
  }
  std::vector<NamedTensor> w = model.get_weights();
  if (w.empty())
    throw Error(
        path,
        "the model has no weights to save yet: compile it with a known input shape, or fit it");
  std::map<std::string, std::string> meta{{"format", "crossover"},
                                          {"contents", "weights"},
                                          {"architecture", model_to_json(model)},
                                          {"crossover_version", "0.1.0"}};
  write_safetensors(path, w, meta);
}

std::vector<NamedTensor> weights_to_load(const Sequential& model, const std::string& path) {
  if (!model.compiled())
    throw Error(path,
                "compile the model before loading weights into it (compile() sets up the "
                "parameters, and re-initializes them)");
  std::vector<NamedTensor> expected = model.get_weights();
  if (expected.empty())
    throw Error(path,
                "the model's input shape is not known yet: declare it (Input, input_shape or "
                "Flatten({28, 28})) before loading weights");
  return expected;
}

void load_weights(Sequential& model, const SafetensorsFile& file, const std::string& path) {
  const std::vector<NamedTensor> expected = weights_to_load(model, path);
  std::vector<std::string> file_names, model_names;
  for (const NamedTensor& t : file.tensors)
    if (!is_optimizer_tensor(t.name)) file_names.push_back(t.name);
  for (const NamedTensor& t : expected) model_names.push_back(t.name);

  std::vector<NamedTensor> values;
  for (const NamedTensor& want : expected) {
    const Tensor* got = file.find(want.name);
    if (!got)
      throw Error(path,
                  "tensor " + want.name + " of the model is not in the file (the file holds " +
                      name_list(file_names) + "): it was saved from a different architecture");
    if (got->shape() != want.value.shape())
      throw Error(path, "tensor " + want.name + " has shape " + shape_to_string(got->shape()) +
                            " in the file but " + shape_to_string(want.value.shape()) +
                            " in the model: it was saved from a different architecture");
    values.push_back({want.name, *got});
  }
  for (const std::string& name : file_names)
    if (std::find(model_names.begin(), model_names.end(), name) == model_names.end())
      throw Error(path,
                  "tensor " + printable(name) + " in the file is not in the model (the model has " +
                      name_list(model_names) + "): it was saved from a different architecture");
  for (const NamedTensor& t : values) {
    int64_t bad = 0;
    for (float v : t.value.values()) bad += std::isfinite(v) ? 0 : 1;
    if (bad > 0)
      std::fprintf(stderr, "warning: %s: tensor %s holds %lld NaN/Inf values\n", path.c_str(),
                   t.name.c_str(), static_cast<long long>(bad));
  }
  model.set_weights(values);
}

void load_weights(Sequential& model, const std::string& path) {
  if (!model.compiled())
    throw Error(path,
                "compile the model before loading weights into it (compile() sets up the "
                "parameters, and re-initializes them)");
  if (weights_format_of(path) == WeightsFormat::keras_h5) {
    load_keras_weights_h5(model, path);
    return;
  }
  load_weights(model, read_safetensors(path), path);
}

Sequential load_model(const std::string& path, CompileOptions options) {
  if (weights_format_of(path) == WeightsFormat::keras_h5)
    throw Error(path,
                "a .weights.h5 file holds weights only, without the architecture: build the model "
                "in code and use load_weights");
  const SafetensorsFile file = read_safetensors(path);
  auto arch = file.header.metadata.find("architecture");
  if (arch == file.header.metadata.end())
    throw Error(path,
                "the file holds weights only, without the architecture (no 'architecture' in "
                "__metadata__): build the model in code and use load_weights");
  const std::string where = path + " (architecture)";
  Sequential model = model_from_json(arch->second, where);
  if (model.input_shape().empty())
    throw Error(where, "the architecture does not declare the model's input shape");
  std::optional<TrainingConfig> tc = training_config_from_json(arch->second, where);
  if (tc)
    model.compile_with(tc->optimizer, LossSpec{tc->loss, tc->from_logits}, tc->metrics, options);
  else
    model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, options);
  load_weights(model, file, path);
  return model;
}

}  // namespace crossover
