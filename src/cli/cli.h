// The crossover command: shared pieces of its subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "data/dataset.h"
#include "formats/model_config.h"
#include "nn/sequential.h"
#include "perf/calibrate.h"
#include "perf/threads.h"

namespace crossover::cli {

// Messages on stdout unless --quiet; warnings and errors always go to stderr.
struct Output {
  bool quiet = false;
  void say(const std::string& line) const {
    if (!quiet) std::printf("%s\n", line.c_str());
  }
};

// The options most subcommands share, each with one default (here) and one help text
// (add_common_options). A subcommand's options struct derives from it.
struct CommonOptions {
  std::string model = "small";
  std::string data = "auto";
  uint64_t seed = 0;
  int threads = 0;
  std::string json;
  bool quiet = false;
  // --precision: fp32, tf32 or bf16; empty (not given): the model's dtype policy decides
  // (precision_for_spec).
  std::string precision;
  // Under mpirun: how long a rank may wait in one collective call before it ends every rank
  // (dist::MpiWorld::set_timeout); 0: forever.
  double rank_timeout = 600;
};

// Which of the common options a subcommand has, or'ed together.
enum CommonOption : unsigned {
  kModelOption = 1u << 0,
  kDataOption = 1u << 1,
  kSeedOption = 1u << 2,
  kThreadsOption = 1u << 3,
  kJsonOption = 1u << 4,
  kQuietOption = 1u << 5,
  kAllCommonOptions = (1u << 6) - 1,
  kRankTimeoutOption = 1u << 6,  // the commands that run over ranks (not in kAllCommonOptions)
  kPrecisionOption = 1u << 7,    // the commands that train or time training (not in kAll...)
};

// Adds --model, --data, --seed, --threads, --json, --quiet, --rank-timeout and --precision (those
// in `which`) to `cmd`, bound to `o`. What --json writes and what --quiet silences differ per
// subcommand: `json_help` and `quiet_help` say it. --threads refuses, at parse time, a count above
// max_cpu_threads().
void add_common_options(CLI::App& cmd, CommonOptions& o, unsigned which,
                        const std::string& json_help = "", const std::string& quiet_help = "");

// --model: "small", "big", "convnet", a layer list ("dense:128:relu,dropout:0.2,dense:10:softmax",
// input flattened; one that starts with conv/maxpool/avgpool/globalavgpool takes (h, w, c)
// images, a grey (h, w) image as one channel), or a Keras model JSON file. sample_shape: the
// data's per-sample shape.
// `precision` is the dtype policy of the layers of small, big, convnet and a layer list
// (mixed_bfloat16 for bf16, else float32), as Keras's set_global_policy before a model is made; a
// file's layers keep the policy the file gives them.
Sequential model_from_spec(const std::string& spec, const Shape& sample_shape, int num_classes,
                           Precision precision = Precision::fp32);

// The precision a model trains in, by compile's rule (model_precision: its layers' dtype policy,
// and --precision, `flag`, empty when not given, must agree), for what the command prices and
// reports before it compiles; compile is given `flag` itself. A --precision that disagrees is
// Error("--precision X", ...), differing policies Error(source, ...). `source` names the file
// ("m.json", "--resume c").
Precision precision_for_layers(const std::vector<Layer>& layers, const std::string& flag,
                               const std::string& source);
// precision_for_layers for a --model: a Keras model JSON file's layers; for small, big, convnet
// and a layer list, --precision itself (fp32 when not given).
Precision precision_for_spec(const std::string& spec, const std::string& flag);
// precision_for_spec for a command that always trains on the CPU (compare, sweep and their
// --ranks tables): refused in one line where this CPU cannot train in it (Error("--precision X",
// "<command> trains on the CPU, which cannot: " + cpu_precision_problem)).
Precision cpu_run_precision(const std::string& command, const std::string& spec,
                            const std::string& flag);
// The precision `profile` prices a run in `precision` at (perf::priced_precision); where that is
// fp32 for bf16, a note saying so is added to `notes` (once per profile).
Precision priced_precision(const perf::Profile& profile, Precision precision,
                           std::vector<std::string>& notes);

// The optimizer, loss and metrics a Keras model JSON given as --model was compiled with (its
// compile_config); nullopt for small, big, a layer list, or a file without one.
std::optional<TrainingConfig> training_config_from_spec(const std::string& spec);

// Refuses, before any work, an output path that cannot be written (missing folder, a folder in
// the way, no permission). Throws Error naming the flag and the path.
void check_writable(const std::string& flag, const std::string& path);
// Writes `doc` to path atomically (temporary file in the same folder, then rename).
void write_json_file(const std::string& flag, const std::string& path, const nlohmann::json& doc);

// The JSON "model" object: name, layers (Keras class names and settings), parameters,
// input_shape.
nlohmann::json model_json(const Sequential& model, const std::string& name);

// The JSON "test" object of train and evaluate: loss, accuracy, each other compiled metric by its
// name ("mae", ...), seconds, samples.
nlohmann::json test_json(const EvaluateResult& test);

// Refuses (Error at `where`) a compiled metric whose name the JSON record already uses for
// something else ("loss", "seconds", ...; "mae" beside "val_mae"), which would overwrite it.
void check_metric_keys(const Sequential& model, const std::string& where);

// "cpu" plus the CPU's model name, or "cuda:N".
std::string device_description(const std::string& device);

// --profile FILE and --no-calibrate: how a command that predicts this CPU finds its profile
// (docs/PROFILE.md, "On demand"). One helper for compare, explain, sweep and train.
struct ProfileFlags {
  std::string profile;
  bool no_calibrate = false;
};
void add_profile_options(CLI::App* cmd, ProfileFlags& flags);
// The CPU profile to predict `workloads` with (perf::cpu_profile_for): calibrates this CPU first
// where no saved profile matches it (or the one that does lacks their shapes), with a progress
// line on stderr unless `quiet`. `what` names the workloads for that line ("SMALL at batch 32").
perf::CpuProfileChoice cpu_profile_for_run(const ProfileFlags& flags, int threads, bool quiet,
                                           std::vector<perf::Workload> workloads,
                                           const std::string& what);
// {"source": PATH, "calibrated_now": bool} (docs/JSON.md), null without a profile.
nlohmann::json profile_json(const perf::CpuProfileChoice& choice);
// --threads on the CPU: perf::cpu_threads_for_run, with its line on stderr unless `quiet`.
using perf::ThreadsForRun;
ThreadsForRun cpu_threads_for_run(int requested, const std::function<Sequential(int)>& make,
                                  const Tensor& x, const Tensor& y, int64_t batch, bool quiet,
                                  const std::string& what, const std::string& key);
// make(t) for cpu_threads_for_run: the --model spec, compiled as the commands train it
// (perf::compile_for: Adam, sparse categorical cross-entropy) for the CPU with t threads, its
// dense GEMMs in `precision`.
std::function<Sequential(int)> cpu_model_maker(const std::string& spec, const Shape& sample_shape,
                                               int num_classes, uint64_t seed,
                                               Precision precision = Precision::fp32);
// {"threads": N, "chosen_by": "user" | "measurement" | "saved measurement" | "all cores",
// "trials": [{threads, seconds_per_step}] (when measured, also by an earlier run)}
nlohmann::json threads_json(const ThreadsForRun& t);

// The ranks this process trains among (docs/DISTRIBUTED.md): one process (rank 0 of 1, no
// collective) unless a launcher started it as one of N > 1 (mpirun), then MPI's world (src/ranks).
// Under a launcher, a binary built without MPI throws Error (exit 2) rather than train N copies.
struct Ranks {
  std::shared_ptr<Collective> collective;  // null for one process
  int rank = 0, size = 1;
  int local_size = 1;  // the ranks on this host
  int local_rank = 0;  // this one among them
  bool leader() const { return rank == 0; }
};
// Under a launcher, MPI's watchdog ends every rank once one has waited `rank_timeout` seconds in
// a collective (--rank-timeout; 0: never).
Ranks ranks_for_command(double rank_timeout);
// cpu_profile_for_run over ranks (`ranks.size` > 1; every rank calls it together):
// perf::cpu_profile_for_ranks. Rank 0 alone finds or calibrates the compute (its progress lines
// only), the ranks measure their allreduce where the profile has none for them, and every rank
// gets rank 0's profile.
perf::CpuProfileChoice cpu_profile_for_run(const ProfileFlags& flags, int threads, bool quiet,
                                           std::vector<perf::Workload> workloads,
                                           const std::string& what, const Ranks& ranks);
// The hosts the ranks run on (the ranks whose local_rank is 0, counted with an allreduce; every
// rank calls it together); 1 for one process.
int hosts_of(const Ranks& ranks);
// Thrown by a command that ran itself again as another process (relaunch_under_mpirun): main
// exits with that process's status.
struct ExitStatus {
  int code = 0;
};
// The command line main() was given, for a command that starts itself again under mpirun.
void remember_command_line(int argc, char** argv);
// For `--ranks N` given to a command run as one process: runs this very command line again as
// `mpirun -np N ...` (mpirun from PATH; --oversubscribe when N exceeds this host's cores,
// --allow-run-as-root as root; OMPI_MCA_btl_vader_single_copy_mechanism=none unless set, as
// containers often lack the ptrace rights Open MPI's single-copy transport needs), after one line
// on stdout (unless `quiet`) saying so, and returns mpirun's exit status. Throws Error (exit 2)
// when this crossover was built without MPI or mpirun is not on PATH.
// The mpirun that runs `command` ("explain") over `ranks` ranks; throws Error ("--ranks N", exit
// 2) when this binary was built without MPI or there is no mpirun on PATH.
std::string mpirun_for_ranks(const std::string& command, int ranks);
int relaunch_under_mpirun(const std::string& command, int ranks, bool quiet);
// With ranks on a GPU (`device` "cuda" or "cuda:N" under mpirun): each rank takes this host's GPU
// local_rank mod the device count (`device` becomes that "cuda:K"), and ranks.collective becomes
// NCCL between the GPUs, bootstrapped over MPI. Throws Error (exit 2) when built without NCCL.
// Does nothing for one process or another device.
void place_ranks_on_device(Ranks& ranks, std::string& device);
// --threads 0 for one of several ranks: this host's logical cores divided among its ranks, at
// least 1 (the threads measurement of one process would time every rank against the others).
int threads_per_rank(const Ranks& ranks);
// With ranks: every rank has read the same data, checked at start by a fingerprint of `tensors`
// (shapes and values) broadcast from rank 0. A rank whose data differ throws Error naming itself
// and `where` (the --data path), which ends every rank.
void check_same_data(const Ranks& ranks, const std::string& where,
                     std::initializer_list<const Tensor*> tensors);
// For the commands that do not run over ranks yet: throws Error (exit 2) when a launcher started
// this process as one of several, naming the command, instead of running it N times over.
void refuse_ranks(const std::string& command);
// The JSON's "ranks" (a count) and, with ranks, "collective" (what carries them).
void add_ranks_json(nlohmann::json& doc, const Ranks& ranks);

// compare --ranks LIST and sweep --ranks LIST (src/cli/ranks_table.cpp): one epoch of `model` at
// the global `batch` over each rank count, with `threads` per rank (0: the cores divided among
// the ranks). A count up to this host's cores is measured by `crossover explain --ranks N` (a
// child process; it starts mpirun itself), unless `predict_only`; every count is predicted
// (perf::predict_epoch over N ranks). A table, where more ranks stop paying and why (the
// allreduce's share of the step), and JSON.
// The common options (model, data, seed, threads, json, quiet, rank_timeout: the latter for the
// explain runs over more than one rank) are the calling command's own.
struct RanksTableOptions : CommonOptions {
  RanksTableOptions(std::string command_name, const CommonOptions& common)
      : CommonOptions(common), command(std::move(command_name)) {}
  std::string command;  // "compare" or "sweep": for the messages
  std::string ranks;
  int64_t batch = kDefaultBatchSize;
  int64_t steps = 200;
  double max_seconds = 20;
  bool predict_only = false;
  ProfileFlags profile;
};
void run_ranks_table(const RanksTableOptions& options);
// "1,2,4" -> {1, 2, 4} (sorted, without repeats); throws Error("--ranks", ...) otherwise.
std::vector<int64_t> parse_ranks(const std::string& text);

// "SMALL" and "BIG" for the built-in models, the spec itself otherwise.
std::string model_label(const std::string& spec);

// What `model` trains and is evaluated on from a split's labels and its `images` (in the model's
// input shape): class indices for the sparse loss, one-hot rows for the other losses, or, for a
// model whose output is an image of as many values as its input (an autoencoder), the images
// themselves; another image output is refused, naming `where`.
Tensor targets_for(const Sequential& model, const data::ImageSet& set, const Tensor& images,
                   int num_classes, const std::string& where);

// The subcommands.
void add_train(CLI::App& app);
void add_evaluate(CLI::App& app);
void add_predict(CLI::App& app);
void add_devices(CLI::App& app);
void add_calibrate(CLI::App& app);
void add_explain(CLI::App& app);
void add_compare(CLI::App& app);
void add_sweep(CLI::App& app);
void add_report(CLI::App& app);

}  // namespace crossover::cli
