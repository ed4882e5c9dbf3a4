// A calibration profile: what `crossover calibrate` measured about one device, saved as JSON
// (docs/PROFILE.md) and read by the cost model (perf/cost_model.h).
//
// Every number was measured through the engine's own code paths (the Backend interface), so a
// profile describes the device as crossover drives it, not a data sheet.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/fused_mlp.h"

namespace crossover::perf {

// The version of what a profile's numbers mean to the cost model (perf/cost_model.h): bump it
// whenever the model's terms change (a new kernel curve it reads, a GEMM measured another way, a
// new field), so that a profile saved by an older crossover is recalibrated, not trusted.
// Saved as "schema"; a profile without one is schema 0. Bump it too when the CPU's kernels change
// what the curves measure. 2: the CPU's dropout draws eight Philox blocks per AVX2 pass, its
// softmax loss reuses the softmax's exponentials, and each layer's update is fused into its
// weight gradient (2026-11-30). 3: each figure is the median of its batches, not the fastest,
// and on-demand shapes are measured in three interleaved rounds (2026-12-01). The convolution and
// pooling entries (`conv2d`, `pool2d`, 2026-12-01), the batch-normalization ones (`batchnorm`,
// 2026-12-01) and the bf16 GEMM rates (`gemm_bf16`, 2026-12-01) did not bump it: they are new
// lists, not new terms for what was there, and a profile without them has them measured on demand.
// 4: a dense forward whose weights fit the cores' L2 splits its reduction across the threads
// (2026-12-03), which changes the forward GEMM's rate at those shapes.
inline constexpr int kProfileSchema = 4;

// One GEMM rate, as the engine calls it. op says which of the dense layer's three products:
//   "forward":          y(batch, out) = x(batch, in) . w(in, out), with the bias+ReLU epilogue
//                       (m = batch, n = out, k = in)
//   "backward_weights": dw(in, out) = x^T . dy, with the bias gradient (m = in, n = out, k = batch)
//   "backward_input":   dx(batch, in) = dy . w^T (m = batch, n = in, k = out)
//   "" (any):           a plain product, used for every op when nothing better is known
struct GemmSample {
  std::string op;
  int64_t m = 0, n = 0, k = 0;
  double flops_per_second = 0;  // 2 m n k / seconds per call (call overhead included)
};

// One point of a kernel's time-by-size curve: the seconds of one call on `elements` elements.
struct KernelSample {
  int64_t elements = 0;
  double seconds = 0;
};

// One convolution call at one exact shape, as a training step makes it (conv2d_* in
// backends/backend.h), timed like the GEMMs: the seconds of one call. op:
//   "forward":          conv2d_forward, with the bias (`bias`) and ReLU fused (`relu`) as recorded
//   "backward_input":   conv2d_backward_input
//   "backward_weights": conv2d_backward_weights, with the bias gradient when `bias`
struct ConvSample {
  std::string op;
  ConvShape shape;
  int64_t batch = 0;  // samples (the backend's m)
  bool bias = false, relu = false;
  double seconds = 0;
};

// One pooling call at one exact shape: op "forward" (as training makes it: max pooling writes the
// workspace its backward reads) or "backward".
struct PoolSample {
  std::string op;
  PoolShape shape;
  int64_t batch = 0;
  double seconds = 0;
};

// One batch-normalization call at one exact shape (batchnorm_* in backends/backend.h): op
// "forward_training" (the batch's statistics), "forward_inference" (the moving ones),
// "backward" (dx, dgamma, dbeta) or "update_moving" (the moving statistics' update).
struct NormSample {
  std::string op;
  BatchNormShape shape;
  int64_t batch = 0;
  double seconds = 0;
};

// The allreduce of the ranks it was measured on (`crossover calibrate` or the on-demand
// calibration, under mpirun): the seconds of one in-place float sum across `ranks` ranks on
// `hosts` hosts at each size, and the line fitted through them, seconds = latency + bytes /
// bandwidth (least squares on the relative error, so that the small sizes set the latency and
// the large ones the bandwidth). Keyed by transport, ranks and hosts.
struct AllreduceSample {
  int64_t bytes = 0;
  double seconds = 0;  // the median of its rounds, on rank 0
};
struct AllreduceFit {
  std::string transport = "mpi";  // "mpi": MPI_Allreduce on MPI_COMM_WORLD (a CPU buffer)
  int ranks = 2;
  int hosts = 1;  // 1: shared memory between the ranks; more: the network between hosts
  double latency_seconds = 0;
  double bytes_per_second = 0;
  std::vector<AllreduceSample> samples;  // ascending bytes
};

// Host-device bandwidth; null where it does not apply (the CPU) or was not measured.
struct TransferRates {
  std::optional<double> pageable, pinned;
};

// The read+write bandwidth of one level of the memory hierarchy (calibrate: a streaming kernel
// over a working set that fits the level, at the profile's threads): "L2" (bytes: the L2 of every
// thread together), "L3", "DRAM" (bytes: 0, unbounded). The roofline floor (cost_model.h) prices an
// op's bytes at the smallest level that holds them.
struct MemoryLevel {
  std::string name;
  int64_t bytes = 0;
  double bytes_per_second = 0;
};

struct Profile {
  // ---- the device ----
  std::string kind = "cpu";      // "cpu" or "gpu"
  std::string name;              // "Intel(R) Xeon(R) Processor", "NVIDIA H200"
  std::string id = "cpu";        // the device it was measured as: "cpu", "cuda:0"
  int threads = 0;               // CPU threads the backend ran with (cpu)
  int cores = 0;                 // logical cores (cpu), streaming multiprocessors (gpu)
  std::vector<std::string> isa;  // SIMD extensions (cpu)
  int64_t memory_bytes = 0;      // device memory (gpu); 0 for the CPU
  // The CPU's identity beyond its name (cpu; see core/machine.h): CPUID family, model and
  // stepping (-1: not recorded), and its cache sizes (0: not recorded).
  int cpuid_family = -1, cpuid_model = -1, cpuid_stepping = -1;
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;

  // ---- latencies (0 on the CPU, where nothing is launched and nothing waited for) ----
  double launch_seconds = 0;        // one kernel launch, back to back (naive mode's per-op floor)
  double graph_launch_seconds = 0;  // launching a captured graph (resident mode, once per step)
  double graph_node_seconds = 0;    // each node of a replayed graph
  double sync_seconds = 0;          // the round trip of a synchronize() on a just-enqueued op
  double h2d_latency_seconds = 0;   // a tiny pageable host-to-device copy
  double d2h_latency_seconds = 0;   // a tiny device-to-host copy

  // ---- bandwidth ----
  TransferRates h2d_bytes_per_second, d2h_bytes_per_second;  // null on the CPU
  double memory_bytes_per_second = 0;  // streaming read+write through an elementwise kernel
  // Per level (ascending capacity; the CPU's L2, L3 and DRAM); empty in profiles from before
  // them and on GPUs, where the roofline takes memory_bytes_per_second for every byte.
  std::vector<MemoryLevel> memory_levels;

  // ---- host side ----
  double call_seconds = 0;       // one backend call that does (almost) nothing
  double fork_join_seconds = 0;  // an empty OpenMP parallel region (cpu)

  // ---- compute ----
  std::vector<GemmSample> gemm;
  // The same three products with bf16 operands and float32 accumulation (--precision bf16,
  // backends/backend.h's Precision): the rates the cost model prices a bf16 step's dense GEMMs
  // at. Measured on a CPU with AVX512_BF16 or AMX-BF16 only; empty elsewhere (and on GPUs, whose
  // profiles do not have them yet).
  std::vector<GemmSample> gemm_bf16;
  // Time-by-size of each elementwise kernel, by name (see docs/PROFILE.md): gather_rows,
  // gather_labels, dropout_forward, dropout_backward, relu_dropout_backward, relu_forward,
  // relu_backward, sigmoid_forward, ..., loss_sparse_softmax, adam. Sizes ascend.
  std::map<std::string, std::vector<KernelSample>> kernels;
  // Convolutions and pooling at the exact shapes of the models asked about (measured on demand;
  // `calibrate`'s grid has none).
  std::vector<ConvSample> conv2d;
  std::vector<PoolSample> pool2d;
  // Batch normalization likewise (measured on demand at the shapes of the models asked about).
  std::vector<NormSample> batchnorm;
  // The ranks' allreduce, by transport, ranks and hosts (measured under mpirun only).
  std::vector<AllreduceFit> allreduce;
  // The fused training step's rates (gpu; backends/fused_mlp.h): nullopt where not measured (in
  // profiles from before them), and the cost model then leaves the fused step unpriced.
  std::optional<FusedStepRates> fused_step;

  // ---- how it was made ----
  std::string created;            // ISO 8601 UTC
  std::string crossover_version;  // "0.1.0"
  bool quick = false;             // made with --quick (a coarser grid, fewer repeats)
  double calibration_seconds = 0;
  int schema = kProfileSchema;  // kProfileSchema of the crossover that measured it
  // "grid": `crossover calibrate`'s full (or quick) grid of shapes and sizes. "shapes": only the
  // shapes and sizes of the models that were asked about (made on demand by compare, explain,
  // sweep, train --device auto), extended as other models are asked about.
  std::string coverage = "grid";
  std::string source;    // where it was loaded from (not saved)
  bool shipped = false;  // loaded from the source tree's profiles/ or the installed share/ (not
                         // saved): measured on the project's machines, never this one's
};

// The profile as JSON (docs/PROFILE.md).
nlohmann::json profile_to_json(const Profile& p);
// Validates every field; throws Error(where, "field 'gemm[3].flops_per_second': ...") naming the
// first bad field.
Profile profile_from_json(const nlohmann::json& j, const std::string& where = "profile");
// Reads and validates a profile file; throws Error(path, ...).
Profile load_profile(const std::string& path);
// Writes atomically (temporary file, then rename); throws Error(path, ...).
void save_profile(const Profile& p, const std::string& path);
// Writes `doc` (indented by `indent`) to `path` atomically: a temporary file in the same folder,
// unique to this process and call, then a rename, so a reader never sees half a file. Throws
// Error naming `where` when it cannot. Profiles, the saved thread choices and the commands'
// --json files all go through it.
void write_json_atomically(const std::string& path, const nlohmann::json& doc, int indent,
                           const std::string& where);

// A file-name-safe name for the profile: "cpu-intel-xeon-avx512-amx-2c", "gpu-nvidia-h200".
std::string profile_slug(const Profile& p);

// The user's profile folder, where calibrate and the on-demand calibration save:
// $CROSSOVER_PROFILE_DIR when set, else ~/.local/share/crossover/profiles.
std::string user_profile_dir();
// The folders searched for profiles, in order: $CROSSOVER_PROFILES (':'-separated), the user's
// folder (user_profile_dir()), then the shipped ones: the source tree's profiles/ and the
// installed share/crossover/profiles.
std::vector<std::string> profile_dirs();
// The default output of `crossover calibrate` for a device: <user folder>/<slug>.json.
std::string default_profile_path(const Profile& p);

// Every readable, valid profile in profile_dirs() (invalid ones are skipped; `skipped` gets one
// line per skipped file when not null). Those from the shipped folders have `shipped` set.
std::vector<Profile> find_profiles(std::vector<std::string>* skipped = nullptr);

// This CPU as a profile records it: name, CPUID signature, ISA, caches, `threads` (0: all
// logical cores), and the schema of this crossover.
void set_this_cpu(Profile& p, int threads);
// Why profile `p` is not this CPU run with `threads` threads (0: all cores): "" when it is (same
// name, CPUID family/model/stepping, ISA, cache sizes, thread count, and schema), else the first
// difference, e.g. "measured on Intel(R) Xeon(R) Processor, this is AMD EPYC". A shipped
// profile is never this machine's.
std::string cpu_mismatch(const Profile& p, int threads);
// "AMD EPYC (family 25 model 1 stepping 1), AVX2, 2 threads"
std::string describe_cpu(const Profile& p);

// Adds to `into` what `from` measured that `into` lacks: GEMM entries of another (op, m, n, k),
// kernel samples of another size (kept ascending), convolution and pooling entries of another
// (op, shape, batch, ...), allreduce fits of another (transport, ranks, hosts), and the fused
// step's rates where `into` has none. What both have keeps `into`'s number.
void merge_profile(Profile& into, const Profile& from);
// Saves `fresh` to `path`, merged with what is there: under an exclusive lock (`path`.lock,
// flock), re-reads the file; when it holds a valid profile of the same device (cpu_mismatch
// empty, for the CPU) and schema, merges `fresh` into it (merge_profile), else replaces it. Then
// writes atomically. Two processes doing this at once both land. Returns what was saved.
Profile merge_and_save_profile(const Profile& fresh, const std::string& path);

// A CPU profile of this machine (cpu_mismatch empty) from the non-shipped folders, its
// default_profile_path first; nullopt when none matches. `why_not` (when not null) gets, when none
// matches, why the nearest candidate did not ("no CPU profile saved yet" when there is none).
std::optional<Profile> find_this_cpu_profile(int threads, std::string* why_not = nullptr);
// The CPU profile nearest this one among all found (shipped included): the most alike by ISA,
// thread count and name; nullopt when there is no CPU profile at all.
std::optional<Profile> closest_cpu_profile(int threads);

// The CPU profile to predict this machine with, without calibrating: `explicit_path` if not
// empty; else this CPU's (find_this_cpu_profile); else the closest (closest_cpu_profile), with a
// note that it was measured elsewhere. `note` says which was chosen and why. nullopt when there is
// none. (perf/calibrate.h's cpu_profile_for calibrates instead when none matches.)
std::optional<Profile> cpu_profile_for_this_machine(const std::string& explicit_path, int threads,
                                                    std::string& note);
// The GPU profiles found (device.kind "gpu"); with `name` not empty, only those for that GPU.
std::vector<Profile> gpu_profiles(const std::string& name = "");
// The profile to predict `device` ("cpu", "cuda:N") with: `explicit_path` if given, else the CPU's
// (cpu_profile_for_this_machine) or the first GPU profile for that GPU's model. `note` says which
// and why; nullopt when there is none.
std::optional<Profile> profile_for_device(const std::string& device,
                                          const std::string& explicit_path, int threads,
                                          std::string& note);

}  // namespace crossover::perf
