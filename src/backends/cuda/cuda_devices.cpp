// cuda_devices(): what `crossover devices` prints about each GPU.
//
// The host link (PCIe generation and width) is not in the CUDA runtime's attributes; it comes
// from NVML, opened with dlopen so that the binary neither links nor needs it (the driver ships
// libnvidia-ml.so.1 wherever there is a GPU). Without it the link is "unknown".
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda_info.h"

namespace crossover {
namespace {

// The few NVML entry points used, declared here so no NVML header is needed.
using NvmlDevice = void*;
using NvmlInit = int (*)();
using NvmlShutdown = int (*)();
using NvmlByBusId = int (*)(const char*, NvmlDevice*);
using NvmlGetUint = int (*)(NvmlDevice, unsigned int*);

template <class Fn>
Fn symbol(void* lib, const char* name) {
  void* s = dlsym(lib, name);
  Fn fn = nullptr;
  static_assert(sizeof fn == sizeof s);
  std::memcpy(&fn, &s, sizeof fn);  // object pointer to function pointer, without a cast warning
  return fn;
}

class Nvml {
 public:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    auto init = symbol<NvmlInit>(lib_, "nvmlInit_v2");
    by_bus_id_ = symbol<NvmlByBusId>(lib_, "nvmlDeviceGetHandleByPciBusId_v2");
    max_gen_ = symbol<NvmlGetUint>(lib_, "nvmlDeviceGetMaxPcieLinkGeneration");
    max_width_ = symbol<NvmlGetUint>(lib_, "nvmlDeviceGetMaxPcieLinkWidth");
    shutdown_ = symbol<NvmlShutdown>(lib_, "nvmlShutdown");
    ok_ = init && by_bus_id_ && max_gen_ && max_width_ && shutdown_ && init() == 0;
  }
  ~Nvml() {
    if (ok_) shutdown_();
    if (lib_) dlclose(lib_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // "PCIe gen5 x16", or "unknown".
  std::string host_link(const char* bus_id) const {
    if (!ok_) return "unknown";
    NvmlDevice dev = nullptr;
    unsigned int gen = 0, width = 0;
    if (by_bus_id_(bus_id, &dev) != 0 || max_gen_(dev, &gen) != 0 || max_width_(dev, &width) != 0 ||
        gen == 0 || width == 0)
      return "unknown";
    return "PCIe gen" + std::to_string(gen) + " x" + std::to_string(width);
  }

 private:
  void* lib_ = nullptr;
  bool ok_ = false;
  NvmlByBusId by_bus_id_ = nullptr;
  NvmlGetUint max_gen_ = nullptr, max_width_ = nullptr;
  NvmlShutdown shutdown_ = nullptr;
};

}  // namespace

bool cuda_built() { return true; }

std::vector<CudaDeviceInfo> cuda_devices() {
  std::vector<CudaDeviceInfo> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return out;
  }
  Nvml nvml;
  for (int i = 0; i < count; ++i) {
    CudaDeviceInfo info;
    info.ordinal = i;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
      cudaGetLastError();
      info.name = "unknown";
      info.host_link = "unknown";
      out.push_back(info);
      continue;
    }
    info.name = prop.name;
    info.major = prop.major;
    info.minor = prop.minor;
    info.sm_count = prop.multiProcessorCount;
    info.memory_bytes = prop.totalGlobalMem;
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i) == cudaSuccess) {
      info.host_link = nvml.host_link(bus_id);
    } else {
      cudaGetLastError();
      info.host_link = "unknown";
    }
    out.push_back(info);
  }
  return out;
}

}  // namespace crossover
