#include "core/machine.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace crossover {

namespace {

std::string first_line(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

// "32K", "512K", "32768K", "1M" -> bytes; 0 when unreadable.
int64_t cache_size(const std::string& text) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || v <= 0) return 0;
  const char unit = *end;
  return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : unit == 'G' ? v << 30 : v;
}

int to_int(const std::string& s) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  return end == s.c_str() ? -1 : static_cast<int>(v);
}

}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = [] {
    CpuInfo c;
    c.logical_cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    std::set<std::string> flags;
    while (std::getline(f, line)) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon);
      while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
      const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
      if (key == "model name" && c.model.empty()) c.model = value;
      if (key == "cpu family" && c.family < 0) c.family = to_int(value);
      if (key == "model" && c.model_number < 0) c.model_number = to_int(value);
      if (key == "stepping" && c.stepping < 0) c.stepping = to_int(value);
      if (key == "flags" && flags.empty()) {
        std::istringstream in(value);
        for (std::string w; in >> w;) flags.insert(w);
      }
    }
    if (c.model.empty()) c.model = "unknown CPU";
    // In the order they matter for float32 GEMM.
    for (const char* fl :
         {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
          "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"})
      if (flags.count(fl)) c.isa.emplace_back(fl);
    std::error_code ec;
    const std::filesystem::path caches("/sys/devices/system/cpu/cpu0/cache");
    for (const auto& e : std::filesystem::directory_iterator(caches, ec)) {
      if (e.path().filename().string().rfind("index", 0) != 0) continue;
      const int level = to_int(first_line(e.path() / "level"));
      const std::string type = first_line(e.path() / "type");
      const int64_t size = cache_size(first_line(e.path() / "size"));
      if (level == 1 && type == "Data") c.l1d_bytes = size;
      if (level == 2) c.l2_bytes = size;
      if (level == 3) c.l3_bytes = size;
    }
    return c;
  }();
  return info;
}

}  // namespace crossover
