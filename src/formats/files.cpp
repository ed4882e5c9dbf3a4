// The files every weight format shares: whole-file reads, atomic writes, and the checked load of
// named tensors into a model (formats/files.h).
#include "formats/files.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace crossover {
namespace {

std::string sys_error(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::string name_list(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i == 6) {
      s += fmt::format(", ... ({} in all)", names.size());
      break;
    }
    s += (i ? ", " : "") + printable_name(names[i]);
  }
  return s.empty() ? "none" : s;
}

bool is_optimizer_tensor(const std::string& name) { return name.rfind("optimizer/", 0) == 0; }

}  // namespace

std::string printable_name(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 80) {
      out += "...";
      break;
    }
    // ASCII only: a name in a hostile file may be any bytes, and messages become Python strings.
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u >= 0x7f) ? '?' : c;
  }
  return out;
}

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

void load_named_weights(Sequential& model, const std::vector<NamedTensor>& tensors,
                        const std::string& path) {
  const std::vector<NamedTensor> expected = weights_to_load(model, path);
  std::vector<std::string> file_names, model_names;
  for (const NamedTensor& t : tensors)
    if (!is_optimizer_tensor(t.name)) file_names.push_back(t.name);
  for (const NamedTensor& t : expected) model_names.push_back(t.name);

  std::vector<NamedTensor> values;
  for (const NamedTensor& want : expected) {
    auto found = std::find_if(tensors.begin(), tensors.end(),
                              [&](const NamedTensor& t) { return t.name == want.name; });
    const Tensor* got = found == tensors.end() ? nullptr : &found->value;
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
      throw Error(path, "tensor " + printable_name(name) +
                            " in the file is not in the model (the model has " +
                            name_list(model_names) +
                            "): it was saved from a different architecture");
  for (const NamedTensor& t : values) {
    int64_t bad = 0;
    for (float v : t.value.values()) bad += std::isfinite(v) ? 0 : 1;
    if (bad > 0)
      std::fprintf(stderr, "warning: %s: tensor %s holds %lld NaN/Inf values\n", path.c_str(),
                   t.name.c_str(), static_cast<long long>(bad));
  }
  model.set_weights(values);
}

}  // namespace crossover
