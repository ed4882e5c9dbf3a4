// crossover devices: the CPU (model, cores, SIMD extensions) and each GPU as cuda:N.
#include <fmt/format.h>

#include "backends/cuda_info.h"
#include "backends/devices.h"
#include "cli/cli.h"
#include "core/machine.h"

namespace crossover::cli {

namespace {

nlohmann::json devices_json() {
  const CpuInfo& cpu = cpu_info();
  nlohmann::json doc;
  doc["devices"].push_back(
      {{"device", "cpu"}, {"name", cpu.model}, {"cores", cpu.logical_cores}, {"isa", cpu.isa}});
  for (const CudaDeviceInfo& d : cuda_devices())
    doc["devices"].push_back({{"device", cuda_device_name(d.ordinal)},
                              {"name", d.name},
                              {"compute_capability", fmt::format("{}.{}", d.major, d.minor)},
                              {"sms", d.sm_count},
                              {"memory_bytes", d.memory_bytes},
                              {"host_link", d.host_link}});
  return doc;
}

}  // namespace

void add_devices(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "List the CPU and the GPUs crossover can train on");
  auto o = std::make_shared<CommonOptions>();
  add_common_options(*cmd, *o, kJsonOption, "Also write the list as JSON to this file");
  cmd->callback([o, json_path = &o->json] {
    if (!json_path->empty()) check_writable("--json", *json_path);
    const CpuInfo& cpu = cpu_info();
    std::string isa;
    for (const auto& f : cpu.isa) isa += (isa.empty() ? "" : " ") + f;
    fmt::print("cpu     {}, {} cores, {}\n", cpu.model, cpu.logical_cores, isa);
    const auto gpus = cuda_devices();
    for (const CudaDeviceInfo& d : gpus)
      fmt::print("{}  {}, compute capability {}.{}, {} SMs, {:.1f} GiB, {}\n",
                 cuda_device_name(d.ordinal), d.name, d.major, d.minor, d.sm_count,
                 static_cast<double>(d.memory_bytes) / (1 << 30), d.host_link);
    if (gpus.empty()) fmt::print("no CUDA device found\n");
    if (!json_path->empty()) write_json_file("--json", *json_path, devices_json());
  });
}

}  // namespace crossover::cli
