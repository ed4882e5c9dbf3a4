// Calibration: micro-benchmarks of one device through the engine's own code paths (the Backend
// interface: the CPU backend's oneDNN GEMMs and threaded loops, or the CUDA backend's cuBLASLt
// GEMMs, kernels, graphs and copies), summarised as a Profile (perf/profile.h, docs/PROFILE.md).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "nn/collective.h"
#include "perf/cost_model.h"
#include "perf/profile.h"

namespace crossover::perf {

struct CalibrateOptions {
  std::string device = "cpu";  // "cpu", "cuda", "cuda:N"
  bool quick = false;          // a coarser grid and fewer repeats: seconds, not a minute
  int threads = 0;             // CPU threads (0: all cores)
  std::function<void(const std::string&)> say;  // progress lines (may be empty)
};

// Measures the device; throws Error("cuda:N", ...) when the device is unavailable.
Profile calibrate(const CalibrateOptions& options);

// The GEMM grid calibrate measures (batch sizes, input widths, output widths), full or quick.
struct GemmGrid {
  std::vector<int64_t> batches, ins, outs;
};
GemmGrid gemm_grid(bool quick);

// ---- on demand: the shapes some models need, on this CPU ------------------------------------
//
// compare, explain, sweep and train --device auto need a profile of this CPU. When none matches
// (cpu_mismatch in perf/profile.h), they calibrate only what their models' steps need, in
// seconds, save it in the user's profile folder, and add what later models need to it.

// A GEMM as the dense layer calls it (op "forward", "backward_weights", "backward_input").
struct GemmNeed {
  std::string op;
  int64_t batch = 0, in = 0, out = 0;
  auto operator<=>(const GemmNeed&) const = default;
};
// A convolution call as a step makes it (ConvSample's op, shape, batch, bias, ReLU).
struct ConvNeed {
  std::string op;
  ConvShape shape;
  int64_t batch = 0;
  bool bias = false, relu = false;
  auto operator<=>(const ConvNeed&) const = default;
};
// A pooling call as a step makes it (PoolSample's op, shape, batch).
struct PoolNeed {
  std::string op;
  PoolShape shape;
  int64_t batch = 0;
  auto operator<=>(const PoolNeed&) const = default;
};
// A batch-normalization call as a step makes it (NormSample's op, shape, batch).
struct NormNeed {
  std::string op;
  BatchNormShape shape;
  int64_t batch = 0;
  auto operator<=>(const NormNeed&) const = default;
};
// What a CPU prediction of some training steps reads from a profile: GEMM shapes, the sizes
// of the elementwise and optimizer kernels (kernel, elements) -> rows (the step's rows, for the
// kernels that work row by row: gathers, the loss, softmax), and the exact convolution, pooling
// and batch-normalization calls.
struct ShapeNeeds {
  std::set<GemmNeed> gemms;
  std::set<GemmNeed> gemms_bf16;  // the dense GEMMs of a bf16 step (Profile::gemm_bf16)
  std::map<std::pair<std::string, int64_t>, int64_t> kernels;
  std::set<ConvNeed> convs;
  std::set<PoolNeed> pools;
  std::set<NormNeed> norms;
  bool memory_levels = false;  // the bandwidth of each cache level and DRAM (the roofline's)
  std::size_t size() const {
    return gemms.size() + gemms_bf16.size() + kernels.size() + convs.size() + pools.size() +
           norms.size() + (memory_levels ? 1 : 0);
  }
  bool empty() const { return size() == 0; }
};
// A model and the step sizes (rows) it will be predicted at.
struct Workload {
  ModelDesc model;
  std::vector<int64_t> rows;
  Precision precision = Precision::fp32;  // bf16: its dense GEMMs need bf16 rates
};
// The step sizes of an epoch of `samples` at `batch`: the full batch, and the ragged last one.
std::vector<int64_t> epoch_step_rows(int64_t samples, int64_t batch);
// What predicting `workloads` on the CPU (perf::step_ops, resident) reads: every GEMM shape, and
// every kernel size of a kernel calibration knows how to measure (the others are predicted from
// memory bandwidth, as they always are).
ShapeNeeds cpu_shape_needs(const std::vector<Workload>& workloads);
// What of `needs` profile `p` lacks: the convolution, pooling and batch-normalization calls it
// has no measurement of, every bf16 GEMM when it has no bf16 rates at all,
// and, unless it is a "grid" profile (which interpolates them), the GEMM shapes (fp32 and bf16)
// and kernel sizes it has no measurement of.
ShapeNeeds missing_shapes(const Profile& p, const ShapeNeeds& needs);
// Measures `needs` on this CPU with `threads` threads (0: all cores), each as the full
// calibration does (the same code), and, when `with_host`, the backend call, fork-join and memory
// bandwidth a profile must have. The bf16 GEMMs are measured on a CPU backend in bf16, and
// skipped (counted in `left`) on a CPU without bf16. Stops starting new measurements after
// `budget_seconds`;
// `left` (when not null) gets how many were not measured. A "shapes" profile of this CPU.
Profile calibrate_cpu_shapes(const ShapeNeeds& needs, int threads, bool with_host,
                             double budget_seconds, std::size_t* left = nullptr);

struct CpuProfileRequest {
  std::string explicit_path;  // --profile: used as given, nothing calibrated
  int threads = 0;            // the run's CPU threads (0: all cores)
  bool calibrate = true;      // false (--no-calibrate): the closest profile found, as it is
  std::vector<Workload> workloads;
  std::string what;  // for the progress line: "SMALL at batch 32"
  double budget_seconds = 30;
  std::function<void(const std::string&)> say;  // progress (stderr; empty: silent)
};
struct CpuProfileChoice {
  std::optional<Profile> profile;  // nullopt: no CPU profile at all (and none calibrated)
  std::string note;                // which profile and why, one phrase
  bool calibrated_now = false;     // this call measured (some of) it
  bool this_machine = false;       // measured on this CPU (cpu_mismatch empty)
};
// The CPU profile to predict `workloads` with: `explicit_path` if given; else this CPU's saved
// profile, first calibrating (and merging into it, under a lock) what it lacks; else, with
// `calibrate` false, the closest found (shipped included), labelled not this machine.
CpuProfileChoice cpu_profile_for(const CpuProfileRequest& request);

// ---- the ranks' allreduce (under mpirun) -----------------------------------------------------
//
// Every rank calls these together (they are collective calls on `ranks`). Rank 0 alone measures
// the compute (cpu_profile_for): N ranks calibrating at once would each time against the others.

// Times an in-place float allreduce (Collective::allreduce_sum) at sizes from 4 KB to 32 MB: at
// each size a few warm-up calls, then rounds of calls (7; 3 when `quick`) between barriers, the
// seconds of a call being the median of its rounds on rank 0; then fit_allreduce. From 1 MB on,
// each round is one call on a buffer just written, after a 64 MB pass that flushes the caches
// (twice as many rounds, plus one), as a training step leaves its gradients. Every rank returns
// rank 0's figures. `hosts`: the hosts the ranks are on (1: shared memory).
AllreduceFit calibrate_allreduce(Collective& ranks, int hosts, bool quick);
// The line seconds = latency + bytes / bandwidth through `fit.samples`, by least squares on the
// relative error (each sample weighed by 1 / its seconds squared), so that the small sizes set
// the latency and the large ones the bandwidth; the latency is not negative. Throws Error with
// fewer than two samples.
void fit_allreduce(AllreduceFit& fit);
// What a fit measured, for a person: "1.8 us at 4 KB, 3.09 GB/s at 1 MB, 0.77 GB/s at 32 MB" (the
// smallest size's time, then the rate at 1 MB, where a buffer still fits the caches, and at the
// largest size); the line's latency and bandwidth for a fit without samples.
std::string describe_allreduce(const AllreduceFit& fit);

// cpu_profile_for over ranks: rank 0 finds (or calibrates, as cpu_profile_for does) the compute
// profile while the others wait; when it has no allreduce fit for these ranks and hosts (and
// `request.calibrate`), every rank measures one (calibrate_allreduce) and rank 0 merges it into
// the saved profile; then rank 0's profile and note are broadcast, so that every rank returns
// the same choice. With one rank, cpu_profile_for.
CpuProfileChoice cpu_profile_for_ranks(const CpuProfileRequest& request, Collective& ranks,
                                       int hosts);

// Page-locked host memory for the pinned-bandwidth measurements: the CUDA runtime's
// cudaMallocHost where the build has CUDA (nullptr otherwise, or when it fails).
void* pinned_host_alloc(std::size_t bytes);
void pinned_host_free(void* p);

}  // namespace crossover::perf
