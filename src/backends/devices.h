// The devices the engine trains on, by the names users give them: "cpu", "cuda" (cuda:0) and
// "cuda:N". Each backend lists its devices here (the CPU: one; CUDA: cuda_devices()), and
// make_backend makes the backend of a device by its name; nothing above backends/ parses a
// device name or spells "cuda:".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace crossover {

struct DeviceId {
  enum class Kind { cpu, cuda } kind = Kind::cpu;
  int ordinal = 0;           // CUDA's device ordinal
  std::string name() const;  // "cpu", "cuda:N"
};

// "cpu", "cuda", "cuda:N" (N of at most three digits); throws Error naming the device otherwise.
DeviceId parse_device(const std::string& device);

// The name of CUDA device `ordinal` ("cuda:1").
std::string cuda_device_name(int ordinal);

// Every device this machine has, by name: "cpu", then each CUDA device found.
std::vector<std::string> device_names();

// The backend of `device` (parse_device's names) with `threads` CPU threads (the CPU's; 0: the
// backend's default) and GEMMs in `precision`.
std::unique_ptr<Backend> make_backend(const std::string& device, int threads, Precision precision);

}  // namespace crossover
