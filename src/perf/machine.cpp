#include "perf/machine.h"

#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

namespace crossover::perf {

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
      if (key == "flags" && flags.empty()) {
        std::istringstream in(value);
        for (std::string w; in >> w;) flags.insert(w);
      }
    }
    if (c.model.empty()) c.model = "unknown CPU";
    // In the order they matter for float32 GEMM.
    for (const char* f :
         {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
          "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"})
      if (flags.count(f)) c.isa.emplace_back(f);
    return c;
  }();
  return info;
}

}  // namespace crossover::perf
