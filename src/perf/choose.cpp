#include "perf/choose.h"

#include <fmt/format.h>

#include <optional>

#include "backends/cuda_info.h"
#include "nn/sequential.h"
#include "perf/cost_model.h"
#include "perf/profile.h"

namespace crossover::perf {

namespace {
std::string us(double s) {
  return s >= 1e-3 ? fmt::format("{:.2f} ms", s * 1e3) : fmt::format("{:.0f} us", s * 1e6);
}
}  // namespace

std::string choose_device(const Sequential& model, int64_t batch, std::string& why,
                          const CpuProfileSource& cpu_profile, Precision precision) {
  const std::vector<CudaDeviceInfo> gpus = cuda_devices();
  if (gpus.empty()) {
    why = "no GPU present: training on the CPU";
    return "cpu";
  }
  const ModelDesc desc = describe(model);
  const std::string first_gpu = "cuda:" + std::to_string(gpus.front().ordinal);
  // A model the GPU cannot train (a convnet: no cuDNN yet) trains on the CPU, whatever the speed.
  if (const std::string why_not = unsupported_on(desc, DeviceKind::gpu); !why_not.empty()) {
    why = fmt::format("the GPU ({}, {}) cannot train this model ({}): training on the CPU",
                      first_gpu, gpus.front().name, why_not);
    return "cpu";
  }
  if (const std::string cpu_cannot = cpu_precision_problem(precision); !cpu_cannot.empty()) {
    why = fmt::format("{} ({}): the CPU cannot train in {} ({})", first_gpu, gpus.front().name,
                      precision_name(precision), cpu_cannot);
    return first_gpu;
  }
  std::vector<Workload> workloads{{desc, {batch}, precision}};
  const std::string what = fmt::format("{} at batch {}", model.name(), batch);
  const CpuProfileChoice choice = cpu_profile
                                      ? cpu_profile(std::move(workloads), what)
                                      : cpu_profile_for({.workloads = workloads, .what = what});
  const std::string& cpu_note = choice.note;
  const std::optional<Profile>& cpu = choice.profile;
  if (!cpu) {
    why = fmt::format(
        "{}: no CPU calibration profile to compare with (run crossover calibrate); "
        "choosing the GPU ({}, resident mode) without a prediction",
        first_gpu, gpus.front().name);
    return first_gpu;
  }
  const double cpu_step = predict(step_ops(desc, batch, DeviceKind::cpu, Mode::resident), *cpu,
                                  Mode::resident, precision)
                              .step_seconds;
  std::string best = "cpu", best_label = "cpu";
  double best_step = cpu_step;
  std::string missing, fp32_rates;  // GPUs without a profile; bf16 priced at fp32 rates
  bool any_gpu_prediction = false;
  for (const CudaDeviceInfo& g : gpus) {
    const std::vector<Profile> profiles = gpu_profiles(g.name);
    const std::string id = "cuda:" + std::to_string(g.ordinal);
    if (profiles.empty()) {
      missing += (missing.empty() ? "" : ", ") + id + " (" + g.name + ")";
      continue;
    }
    any_gpu_prediction = true;
    const Precision gpu_precision = priced_precision(profiles.front(), precision);
    if (gpu_precision != precision) fp32_rates += (fp32_rates.empty() ? "" : ", ") + id;
    const double step = predict(step_ops(desc, batch, DeviceKind::gpu, Mode::resident),
                                profiles.front(), Mode::resident, gpu_precision)
                            .step_seconds;
    if (step < best_step) {
      best = id;
      best_label = id + " (" + g.name + ", resident)";
      best_step = step;
    }
  }
  if (!any_gpu_prediction) {
    why = fmt::format(
        "{}: no calibration profile for {} (run crossover calibrate --device {}), so no "
        "prediction; choosing the GPU (resident mode); the CPU is predicted at {} per step at "
        "batch {}",
        first_gpu, missing, first_gpu, us(cpu_step), batch);
    return first_gpu;
  }
  const double other = best == "cpu" ? -1 : cpu_step;
  if (best == "cpu") {
    why = fmt::format(
        "cpu is predicted fastest: {} per step at batch {} (the GPUs' resident steps are slower); "
        "{}",
        us(cpu_step), batch, cpu_note);
  } else {
    why = fmt::format("{} is predicted {:.1f}x faster than the CPU: {} vs {} per step at batch {}",
                      best_label, other / best_step, us(best_step), us(cpu_step), batch);
  }
  if (precision != Precision::fp32) why += fmt::format("; in {}", precision_name(precision));
  if (precision == Precision::tf32) why += " (the GPUs priced at their fp32 GEMM rates)";
  if (!fp32_rates.empty())
    why += "; " + fp32_rates + " priced at fp32 GEMM rates (no bf16 rates in its profile)";
  if (!missing.empty()) why += "; no profile for " + missing;
  return best;
}

}  // namespace crossover::perf
