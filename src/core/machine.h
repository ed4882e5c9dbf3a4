// What machine this is: the facts `crossover devices` prints and reports record, and the
// backends read (the CPU backend keeps a layer's weights with one thread where they fit its L2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace crossover {

struct CpuInfo {
  std::string model;             // "Intel(R) Xeon(R) Processor"
  int logical_cores = 0;         // online logical CPUs
  std::vector<std::string> isa;  // the SIMD extensions that matter here: avx2, avx512f, ...
  // CPUID signature ("cpu family", "model", "stepping"); -1 where /proc/cpuinfo does not say.
  // Virtual machines often report a bare model name ("AMD EPYC"): these tell its generations
  // apart.
  int family = -1, model_number = -1, stepping = -1;
  // Per-core L1 data and L2, and the L3 (bytes; 0 where sysfs does not say).
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
};

// Read from /proc/cpuinfo and /sys/devices/system/cpu/cpu0/cache once and cached.
const CpuInfo& cpu_info();

}  // namespace crossover
