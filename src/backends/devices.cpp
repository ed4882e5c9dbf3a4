#include "backends/devices.h"

#include <algorithm>
#include <cctype>

#include "backends/cuda_info.h"
#include "core/error.h"

namespace crossover {

std::string DeviceId::name() const {
  return kind == Kind::cpu ? std::string("cpu") : cuda_device_name(ordinal);
}

DeviceId parse_device(const std::string& device) {
  if (device == "cpu") return {};
  if (device == "cuda") return {.kind = DeviceId::Kind::cuda};
  if (device.rfind("cuda:", 0) == 0) {
    const std::string n = device.substr(5);
    if (n.empty() || n.size() > 3 ||
        !std::all_of(n.begin(), n.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
      throw Error("device '" + device + "'", "expected cpu, cuda or cuda:N");
    return {.kind = DeviceId::Kind::cuda, .ordinal = std::stoi(n)};
  }
  throw Error("device '" + device + "'", "unknown device: expected cpu, cuda or cuda:N");
}

std::string cuda_device_name(int ordinal) { return "cuda:" + std::to_string(ordinal); }

std::vector<std::string> device_names() {
  std::vector<std::string> out{"cpu"};
  for (const CudaDeviceInfo& d : cuda_devices()) out.push_back(cuda_device_name(d.ordinal));
  return out;
}

std::unique_ptr<Backend> make_backend(const std::string& device, int threads, Precision precision) {
  const DeviceId id = parse_device(device);
  if (id.kind == DeviceId::Kind::cpu) return make_cpu_backend(threads, precision);
  return make_cuda_backend(id.ordinal, precision);
}

}  // namespace crossover
