// What machine this is: the facts `crossover devices` prints and reports record.
#pragma once

#include <string>
#include <vector>

namespace crossover::perf {

struct CpuInfo {
  std::string model;             // "Intel(R) Xeon(R) Processor"
  int logical_cores = 0;         // online logical CPUs
  std::vector<std::string> isa;  // the SIMD extensions that matter here: avx2, avx512f, ...
};

// Read from /proc/cpuinfo once and cached.
const CpuInfo& cpu_info();

}  // namespace crossover::perf
