#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/cuda_info.h"
#include "backends/devices.h"
#include "cli/cli.h"
#include "core/error.h"
#include "core/launcher.h"
#include "core/machine.h"
#include "formats/model_config.h"
#include "nn/layers/kind.h"
#include "perf/cost_model.h"
#include "perf/explain.h"
#include "perf/measure.h"
#include "perf/profile.h"
#include "ranks/mpi.h"
#include "ranks/nccl.h"

namespace crossover::cli {
namespace fs = std::filesystem;

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.emplace_back();
  return parts;
}

// The layer list's syntax, from each kind's: "dense:UNITS[:ACTIVATION], dropout:RATE, ..."
std::string layer_syntax() {
  std::vector<std::string_view> items;
  for (const LayerKind* k : layer_kinds())
    if (!k->cli_syntax().empty()) items.push_back(k->cli_syntax());
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i)
    s += std::string(i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + std::string(items[i]);
  return s + " (KERNEL, POOL, STRIDES: N or HxW; PADDING: valid or same; DIMS: such as 7x7x16)";
}

Layer parse_layer(const std::string& item) {
  const auto f = split(item, ':');
  const std::string bad = "'" + item + "' is not a layer: expected " + layer_syntax();
  try {
    if (const LayerKind* kind = f.empty() ? nullptr : find_cli_layer_kind(f[0]))
      if (std::optional<Layer> l = kind->from_cli(CliFields(f, bad))) return *l;
  } catch (const Error& e) {
    throw Error("--model", std::string(e.what()));
  } catch (const std::exception&) {
  }
  throw Error("--model", bad);
}

bool is_json_file(const std::string& spec) {
  return spec.size() > 5 && spec.substr(spec.size() - 5) == ".json";
}

std::string read_model_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("--model " + path, "cannot be read: " + std::string(std::strerror(errno)));
  std::stringstream text;
  text << f.rdbuf();
  if (f.bad()) throw Error("--model " + path, "cannot be read");
  return text.str();
}

// A functional model of one input (an InputLayer first) taking samples of `sample_shape` through
// a Flatten (named `flatten_name`) that every reader of its input now reads.
Sequential with_flattened_input(const Sequential& keras, const Shape& sample_shape,
                                const std::string& flatten_name) {
  LayerGraph g;
  g.layers = keras.layers();
  g.layers[0].input_shape = sample_shape;
  Layer flat = Flatten();
  flat.name = flatten_name;
  g.layers.insert(g.layers.begin() + 1, flat);
  const auto moved = [](int i) { return i + 1; };  // every index past the input's
  g.inputs.push_back({});
  g.inputs.push_back({0});
  for (std::size_t i = 1; i < keras.layers().size(); ++i) {
    std::vector<int> reads = keras.layer_inputs()[i];
    std::transform(reads.begin(), reads.end(), reads.begin(), moved);
    g.inputs.push_back(std::move(reads));
  }
  g.shared_with = {-1, -1};
  for (std::size_t i = 1; i < keras.layers().size(); ++i) {
    const int first = keras.layer_shared_with()[i];
    g.shared_with.push_back(first < 0 ? -1 : moved(first));
  }
  if (keras.output_layers().size() > 1)
    for (int o : keras.output_layers()) g.output_layers.push_back(moved(o));
  return Sequential(std::move(g), keras.name());
}

// A Keras model.to_json() file, fitted to the data's sample shape: a model declared on flat
// (784,) inputs takes (28, 28) images through a Flatten; a model without an input shape gets one.
Sequential model_from_json_file(const std::string& path, const Shape& sample_shape) {
  Sequential keras = model_from_json(read_model_file(path), path);
  const Shape in = keras.input_shape();
  Shape one_channel = sample_shape;
  one_channel.push_back(1);
  // Grey (h, w) images feed a model declared on (h, w, 1) as they are (Sequential takes them).
  if (in == sample_shape || in == one_channel) return keras;
  if (keras.input_layers().size() > 1)
    throw Error("--model " + path,
                fmt::format("the model has {} inputs: it takes samples of shape {} (their values "
                            "side by side), but the data's samples have shape {}",
                            keras.input_layers().size(), shape_to_string(in),
                            shape_to_string(sample_shape)));
  if (!in.empty() && shape_size(in) != shape_size(sample_shape))
    throw Error("--model " + path, "the model takes samples of shape " + shape_to_string(in) +
                                       " but the data's samples have shape " +
                                       shape_to_string(sample_shape));
  std::vector<Layer> layers = keras.layers();
  std::string flatten_name = "flatten";
  for (int k = 1; std::any_of(layers.begin(), layers.end(),
                              [&](const Layer& l) { return l.name == flatten_name; });
       ++k)
    flatten_name = "flatten_" + std::to_string(k);
  if (keras.functional()) return with_flattened_input(keras, sample_shape, flatten_name);
  if (layer_kind(layers[0]).declares_input() && !layer_kind(layers[0]).is_model_input()) {
    layers[0].input_shape = sample_shape;
  } else if (layer_kind(layers[0]).is_model_input()) {
    const std::string name = layers[0].name;
    layers[0] = Flatten(sample_shape);
    layers[0].name = name;
  } else {
    Layer flat = Flatten(sample_shape);
    flat.name = flatten_name;
    layers.insert(layers.begin(), flat);
  }
  return Sequential(std::move(layers), keras.name());
}

}  // namespace

Sequential model_from_spec(const std::string& spec, const Shape& sample_shape, int num_classes,
                           Precision precision) {
  const std::string out = std::to_string(num_classes) + ":softmax";
  std::string list;
  if (spec == "small")
    list = "dense:128:relu,dropout:0.2,dense:" + out;
  else if (spec == "big")
    list = "dense:1000:relu,dropout:0.2,dense:1000:relu,dropout:0.2,dense:" + out;
  else if (spec == "convnet")  // Keras's "Simple MNIST convnet" (34,826 parameters for MNIST)
    list = "conv:32:3:relu,maxpool:2,conv:64:3:relu,maxpool:2,flatten,dropout:0.5,dense:" + out;
  else if (is_json_file(spec))
    return model_from_json_file(spec, sample_shape);
  else
    list = spec;
  if (list.empty())
    throw Error("--model", "empty model: give small, big, convnet, a layer list or a .json file");
  std::vector<Layer> parsed;
  for (const std::string& item : split(list, ',')) {
    parsed.push_back(parse_layer(item));
    parsed.back().dtype_policy =
        precision == Precision::bf16 ? DTypePolicy::mixed_bfloat16 : DTypePolicy::float32;
  }
  // A list that starts with an image layer (after any batch normalization, which keeps the shape)
  // takes the samples as images, (height, width, channels): grey (h, w) images get their one
  // channel. Any other list starts flattened.
  std::vector<Layer> layers;
  const auto first = std::find_if(parsed.begin(), parsed.end(),
                                  [](const Layer& l) { return !layer_kind(l).keeps_shape(); });
  if (first != parsed.end() && layer_kind(*first).takes_images()) {
    Shape image = sample_shape;
    if (image.size() == 2) image.push_back(1);
    layers.push_back(Input(image));
  } else if (!layer_kind(parsed.front()).declares_input()) {
    layers.push_back(Flatten(sample_shape));
  } else {
    parsed.front().input_shape = sample_shape;
  }
  layers.insert(layers.end(), parsed.begin(), parsed.end());
  const bool named = spec == "small" || spec == "big" || spec == "convnet";
  return Sequential(std::move(layers), named ? spec : "sequential");
}

Precision precision_for_layers(const std::vector<Layer>& layers, const std::string& flag,
                               const std::string& source) {
  // compile's rule (model_precision), worded for --precision; compile is given the flag itself.
  try {
    model_dtype_policy(layers);
  } catch (const Error& e) {
    throw Error(source, e.what());
  }
  return model_precision(layers, flag, "--precision", source);
}

Precision precision_for_spec(const std::string& spec, const std::string& flag) {
  if (!is_json_file(spec)) return flag.empty() ? Precision::fp32 : parse_precision(flag);
  const Sequential m = model_from_json(read_model_file(spec), spec);
  return precision_for_layers(m.layers(), flag, spec);
}

Precision cpu_run_precision(const std::string& command, const std::string& spec,
                            const std::string& flag) {
  const Precision precision = precision_for_spec(spec, flag);
  if (const std::string why = cpu_precision_problem(precision); !why.empty())
    throw Error(std::string("--precision ") + precision_name(precision),
                command + " trains on the CPU, which cannot: " + why);
  return precision;
}

Precision priced_precision(const perf::Profile& profile, Precision precision,
                           std::vector<std::string>& notes) {
  const Precision priced = perf::priced_precision(profile, precision);
  if (priced != precision) {
    const std::string note = fmt::format(
        "{} has no {} GEMM rates: its rows are priced at {} rates (an upper bound on their step)",
        profile.source.empty() ? profile.name : profile.source, precision_name(precision),
        precision_name(priced));
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
  return priced;
}

std::optional<TrainingConfig> training_config_from_spec(const std::string& spec) {
  if (!is_json_file(spec)) return std::nullopt;
  return training_config_from_json(read_model_file(spec), spec);
}

void add_common_options(CLI::App& cmd, CommonOptions& o, unsigned which,
                        const std::string& json_help, const std::string& quiet_help) {
  if (which & kModelOption)
    cmd.add_option("--model", o.model,
                   "small, big, convnet, a layer list such as dense:128:relu,dropout:0.2,"
                   "dense:10:softmax or conv:32:3:relu,maxpool:2,flatten,dense:10:softmax, or a "
                   "Keras model .json (model.to_json(), Keras 2 or 3)")
        ->capture_default_str();
  if (which & kDataOption)
    cmd.add_option("--data", o.data,
                   "auto, mnist-10k, a folder of the four IDX files, or a .npz file")
        ->capture_default_str();
  if (which & kSeedOption)
    cmd.add_option("--seed", o.seed, "Seed of initial weights, shuffling and dropout")
        ->capture_default_str();
  if (which & kThreadsOption) {
    // Checked while parsing, before any data is read; the library refuses the same counts.
    const CLI::Validator limit(
        [](std::string& text) {
          try {
            std::size_t used = 0;
            const long long n = std::stoll(text, &used);
            if (used == text.size()) return cpu_threads_problem(n);
          } catch (const std::exception&) {
          }
          return std::string();  // not a whole number: the conversion says so
        },
        "", "thread count");
    cmd.add_option("--threads", o.threads,
                   "CPU threads (0: where a model trains, the count that trains it fastest here, "
                   "measured first; elsewhere all cores; at most " +
                       std::to_string(max_cpu_threads()) +
                       ", 4 x the logical cores: more threads than cores only wait for each other)")
        ->check(limit)
        ->capture_default_str();
  }
  if (which & kPrecisionOption)
    cmd.add_option("--precision", o.precision,
                   "Dense and Conv2D arithmetic: fp32, tf32 (GPU) or bf16 (GPU, or a CPU with "
                   "AVX512_BF16 or AMX-BF16; bf16 operands, fp32 accumulation and weights: "
                   "faster, less exact). Default: a model file's dtype policy (mixed_bfloat16: "
                   "bf16; float32: fp32), else fp32; given, it must agree with the file's");
  if (which & kJsonOption) cmd.add_option("--json", o.json, json_help);
  if (which & kQuietOption) cmd.add_flag("--quiet", o.quiet, quiet_help);
  if (which & kRankTimeoutOption)
    cmd.add_option("--rank-timeout", o.rank_timeout,
                   "Under mpirun: seconds a rank may wait for the others in one collective call "
                   "(a rank stuck or stopped) before it names itself and ends every rank; 0: "
                   "wait forever")
        ->check(CLI::Validator(
            [](std::string& text) {
              try {
                std::size_t used = 0;
                const double seconds = std::stod(text, &used);
                if (used == text.size() && seconds >= 0) return std::string();
              } catch (const std::exception&) {
              }
              return "must be a number of seconds, 0 (wait forever) or more, got '" + text + "'";
            },
            "", "seconds"))
        ->capture_default_str();
}

void check_writable(const std::string& flag, const std::string& path) {
  if (path.empty()) throw Error(flag, "the output path is empty");
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) throw Error(flag + " " + path, "is a folder, not a file");
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec))
    throw Error(flag + " " + path, "cannot be written: folder " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    throw Error(flag + " " + path, "cannot be written: no permission to write in " + dir.string());
  if (fs::exists(p, ec) && ::access(p.c_str(), W_OK) != 0)
    throw Error(flag + " " + path, "cannot be written: the file is read-only");
}

void write_json_file(const std::string& flag, const std::string& path, const nlohmann::json& doc) {
  perf::write_json_atomically(path, doc, 2, flag + " " + path);
}

nlohmann::json test_json(const EvaluateResult& test) {
  nlohmann::json j{{"loss", test.loss}, {"accuracy", test.accuracy}};
  for (const auto& [name, value] : test.metrics) j[name] = value;
  j["seconds"] = test.seconds;
  j["samples"] = test.samples;
  return j;
}

void check_metric_keys(const Sequential& model, const std::string& where) {
  // The keys of a history entry and of the test object besides the metrics.
  static const std::set<std::string> kTaken = {
      "epoch",         "loss",    "accuracy", "seconds",      "steps",
      "learning_rate", "samples", "val_loss", "val_accuracy", "val_seconds"};
  std::vector<std::string> names;
  for (const MetricSpec& m : model.metric_specs())
    if (!m.loss_accuracy) names.push_back(m.name);
  for (const std::string& name : names) {
    if (kTaken.count(name))
      throw Error(where, "metric '" + name + "': the JSON record has a field '" + name +
                             "' already: give the metric another name");
    for (const std::string& other : names)
      if ("val_" + name == other)
        throw Error(where, "metric '" + other + "' is also the validation key of metric '" + name +
                               "': give it another name");
  }
}

// The model object of every command's JSON (docs/JSON.md).
nlohmann::json model_json(const Sequential& model, const std::string& name) {
  nlohmann::json layers = nlohmann::json::array();
  for (std::size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& l = model.layers()[i];
    if (model.layer_shared_with()[i] >= 0) continue;  // a shared layer: listed once
    nlohmann::json j{{"name", l.name}, {"type", layer_kind(l).class_name()}};
    layer_kind(l).describe(l, j);
    layers.push_back(j);
  }
  return {{"name", name},
          {"layers", layers},
          {"parameters", model.count_params()},
          {"trainable_parameters", model.trainable_params()},
          {"input_shape", model.input_shape()}};
}

std::string device_description(const std::string& device) {
  if (device == "cpu") return "cpu (" + cpu_info().model + ")";
  return device;
}

void add_profile_options(CLI::App* cmd, ProfileFlags& flags) {
  cmd->add_option("--profile", flags.profile,
                  "CPU calibration profile to predict with (default: this machine's, calibrated "
                  "first where none matches)");
  cmd->add_flag("--no-calibrate", flags.no_calibrate,
                "Never calibrate: without a profile of this machine, predict from the closest "
                "one found (labelled not this machine)");
}

namespace {
// The request of a command's profile; progress lines on stderr when `say`.
perf::CpuProfileRequest profile_request(const ProfileFlags& flags, int threads, bool say,
                                        std::vector<perf::Workload> workloads,
                                        const std::string& what) {
  perf::CpuProfileRequest r;
  r.explicit_path = flags.profile;
  r.threads = threads;
  r.calibrate = !flags.no_calibrate;
  r.workloads = std::move(workloads);
  r.what = what;
  if (say) r.say = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  return r;
}
}  // namespace

perf::CpuProfileChoice cpu_profile_for_run(const ProfileFlags& flags, int threads, bool quiet,
                                           std::vector<perf::Workload> workloads,
                                           const std::string& what) {
  return perf::cpu_profile_for(profile_request(flags, threads, !quiet, std::move(workloads), what));
}

perf::CpuProfileChoice cpu_profile_for_run(const ProfileFlags& flags, int threads, bool quiet,
                                           std::vector<perf::Workload> workloads,
                                           const std::string& what, const Ranks& ranks) {
  if (!ranks.collective || ranks.size < 2)
    return cpu_profile_for_run(flags, threads, quiet, std::move(workloads), what);
  return perf::cpu_profile_for_ranks(
      profile_request(flags, threads, !quiet && ranks.leader(), std::move(workloads), what),
      *ranks.collective, hosts_of(ranks));
}

nlohmann::json profile_json(const perf::CpuProfileChoice& choice) {
  if (!choice.profile) return nullptr;
  return {{"source", choice.profile->source},
          {"calibrated_now", choice.calibrated_now},
          {"this_machine", choice.this_machine}};
}

ThreadsForRun cpu_threads_for_run(int requested, const std::function<Sequential(int)>& make,
                                  const Tensor& x, const Tensor& y, int64_t batch, bool quiet,
                                  const std::string& what, const std::string& key) {
  std::function<void(const std::string&)> say;
  if (!quiet)
    say = [](const std::string& line) { std::fprintf(stderr, "threads: %s\n", line.c_str()); };
  return perf::cpu_threads_for_run(requested, make, x, y, batch, say, what, key, "--threads N");
}

std::function<Sequential(int)> cpu_model_maker(const std::string& spec, const Shape& sample_shape,
                                               int num_classes, uint64_t seed,
                                               Precision precision) {
  return [=](int threads) {
    Sequential m = model_from_spec(spec, sample_shape, num_classes, precision);
    perf::compile_for(m,
                      {.device = "cpu", .threads = threads, .seed = seed, .precision = precision});
    return m;
  };
}

nlohmann::json threads_json(const ThreadsForRun& t) {
  nlohmann::json j{{"threads", t.threads}, {"chosen_by", t.chosen_by}};
  if (t.choice) j["trials"] = perf::trials_json(t.choice->trials);
  return j;
}

Ranks ranks_for_command(double rank_timeout) {
  const LaunchedRanks launched = launched_ranks();
  if (launched.size < 2) return {};
  if (!dist::built_with_mpi())
    throw Error("mpirun",
                fmt::format("started by mpirun with {} ranks ({}) but built without MPI: install "
                            "libopenmpi-dev and build again (CROSSOVER_MPI), or run one process",
                            launched.size, launched.source));
  const std::shared_ptr<dist::MpiWorld> world = dist::world();
  if (world->size() != launched.size)
    throw Error("mpirun",
                fmt::format("the launcher's variables say {} ranks ({}) but MPI sees {}: "
                            "start crossover with the mpirun of the MPI it was built "
                            "with ({})",
                            launched.size, launched.source, world->size(), world->description()));
  world->set_timeout(rank_timeout);
  return {world, world->rank(), world->size(), world->local_size(), world->local_rank()};
}

void place_ranks_on_device(Ranks& ranks, std::string& device) {
  if (ranks.size < 2 || !device.starts_with("cuda")) return;
  if (!dist::built_with_nccl())
    throw Error("--device " + device,
                fmt::format("training over {} ranks on a GPU needs NCCL between the GPUs, and this "
                            "crossover was built without it (CROSSOVER_NCCL: the CUDA toolkit's "
                            "nccl.h and libnccl): use --device cpu",
                            ranks.size));
  const int count = static_cast<int>(cuda_devices().size());
  if (count == 0) throw Error("--device " + device, "no CUDA device on this host");
  // NCCL takes one GPU per rank (two ranks on one device are its error, "Duplicate GPU").
  if (ranks.local_size > count)
    throw Error(
        "--device " + device,
        fmt::format("{} ranks on this host but {} CUDA device{}: NCCL needs a GPU per rank "
                    "(start at most {} rank{} per host)",
                    ranks.local_size, count, count == 1 ? "" : "s", count, count == 1 ? "" : "s"));
  const int ordinal = dist::device_for_local_rank(ranks.local_rank, count);
  device = cuda_device_name(ordinal);
  ranks.collective = dist::nccl_collective(ranks.collective, ordinal);
}

int hosts_of(const Ranks& ranks) {
  if (!ranks.collective || ranks.size < 2) return 1;
  double firsts = ranks.local_rank == 0 ? 1 : 0;
  ranks.collective->allreduce_sum(&firsts, 1);
  return static_cast<int>(std::lround(firsts));
}

namespace {
std::vector<std::string>& command_line_store() {
  static std::vector<std::string> line;
  return line;
}

// The path of `name` on PATH, "" when it is not there.
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  std::size_t at = 0;
  while (at <= dirs.size()) {
    const std::size_t colon = std::min(dirs.find(':', at), dirs.size());
    const std::string dir = dirs.substr(at, colon - at);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = colon + 1;
  }
  return "";
}
}  // namespace

void remember_command_line(int argc, char** argv) {
  command_line_store().assign(argv, argv + argc);
}

std::string mpirun_for_ranks(const std::string& command, int ranks) {
  const std::string flag = fmt::format("--ranks {}", ranks);
  if (!dist::built_with_mpi())
    throw Error(flag,
                "this crossover was built without MPI (CROSSOVER_MPI=OFF, or no "
                "libopenmpi-dev when it was configured): it cannot run " +
                    command + " over ranks");
  const std::string mpirun = on_path("mpirun");
  if (mpirun.empty())
    throw Error(flag, "needs mpirun on PATH to start " + std::to_string(ranks) +
                          " ranks (Debian: apt install openmpi-bin), or start crossover under "
                          "mpirun yourself");
  return mpirun;
}

int relaunch_under_mpirun(const std::string& command, int ranks, bool quiet) {
  const std::string mpirun = mpirun_for_ranks(command, ranks);
  std::error_code ec;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  const std::vector<std::string>& line = command_line_store();
  std::vector<std::string> args{mpirun, "-np", std::to_string(ranks)};
  if (ranks > cpu_info().logical_cores) args.push_back("--oversubscribe");
  if (::geteuid() == 0) args.push_back("--allow-run-as-root");
  args.push_back(self.empty() ? (line.empty() ? "crossover" : line[0]) : self);
  args.insert(args.end(), line.begin() + (line.empty() ? 0 : 1), line.end());
  const bool set_cma = std::getenv("OMPI_MCA_btl_vader_single_copy_mechanism") == nullptr;
  if (set_cma) ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  std::string shown;
  for (const std::string& a : args) shown += (shown.empty() ? "" : " ") + a;
  if (!quiet)
    std::printf("%s: not started by mpirun: running %d ranks as `%s`%s\n", command.c_str(), ranks,
                shown.c_str(),
                set_cma ? " (with OMPI_MCA_btl_vader_single_copy_mechanism=none)" : "");
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) throw Error(fmt::format("--ranks {}", ranks), "cannot start mpirun (fork failed)");
  if (child == 0) {
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void check_same_data(const Ranks& ranks, const std::string& where,
                     std::initializer_list<const Tensor*> tensors) {
  if (!ranks.collective) return;
  // FNV-1a over 64-bit words: the shapes, then the values' bytes.
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint64_t word) { h = (h ^ word) * 1099511628211ull; };
  for (const Tensor* t : tensors) {
    mix(static_cast<uint64_t>(t->rank()));
    for (int64_t d : t->shape()) mix(static_cast<uint64_t>(d));
    const auto* bytes = reinterpret_cast<const unsigned char*>(t->data());
    const std::size_t n = static_cast<std::size_t>(t->size()) * sizeof(float);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t word;
      std::memcpy(&word, bytes + i, 8);
      mix(word);
    }
    for (; i < n; ++i) mix(bytes[i]);
  }
  uint64_t root = h;
  ranks.collective->broadcast(&root, sizeof root, 0);
  if (root != h)
    throw Error(where, fmt::format("rank {}'s data differ from rank 0's (fingerprint {:016x}, rank "
                                   "0's {:016x}): every rank must read the same data",
                                   ranks.rank, h, root));
}

void refuse_ranks(const std::string& command) {
  const LaunchedRanks launched = launched_ranks();
  if (launched.size > 1)
    throw Error(command, fmt::format("does not run over ranks yet (started as rank {} of {}, {}): "
                                     "train and evaluate do; run {} as one process",
                                     launched.rank, launched.size, launched.source, command));
}

int threads_per_rank(const Ranks& ranks) {
  return std::max(1, cpu_info().logical_cores / std::max(ranks.local_size, 1));
}

void add_ranks_json(nlohmann::json& doc, const Ranks& ranks) {
  doc["ranks"] = ranks.size;
  if (ranks.collective) doc["collective"] = ranks.collective->description();
}

std::string model_label(const std::string& spec) {
  if (spec == "small") return "SMALL";
  if (spec == "big") return "BIG";
  if (spec == "convnet") return "CONVNET";
  return spec;
}

Tensor targets_for(const Sequential& model, const data::ImageSet& set, const Tensor& images,
                   int num_classes, const std::string& where) {
  const std::vector<Shape> shapes = model.layer_output_shapes();
  const Shape out = shapes.empty() ? Shape{} : shapes.back();
  if (out.size() > 1) {
    const Shape image(images.shape().begin() + 1, images.shape().end());
    if (shape_size(out) != shape_size(image))
      throw Error(where, "the model's output has shape " + shape_to_string(out) +
                             ": the command line trains on the data's labels, or, for an image "
                             "output, on the images themselves, which have shape " +
                             shape_to_string(image));
    Shape s{images.dim(0)};
    s.insert(s.end(), out.begin(), out.end());
    return images.reshaped(s);
  }
  return model.loss_name() == "sparse_categorical_crossentropy"
             ? data::to_float_labels(set)
             : data::to_one_hot_labels(set, num_classes);
}

}  // namespace crossover::cli
