#include "perf/profile.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/cuda_info.h"
#include "core/error.h"
#include "perf/machine.h"

namespace crossover::perf {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormat = "crossover-profile";
constexpr int kVersion = 1;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// Field readers: each throws Error(where, "field '<path>': <why>").
struct Reader {
  std::string where;

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw Error(where, "field '" + field + "' " + why);
  }
  const json& member(const json& obj, const std::string& key, const std::string& field) const {
    if (!obj.is_object()) fail(field.substr(0, field.rfind('.')), "must be an object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(field, "is missing");
    return *it;
  }
  double number(const json& v, const std::string& field, bool positive) const {
    if (!v.is_number()) fail(field, "must be a number, got " + v.dump());
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(field, "must be finite");
    if (positive && !(d > 0)) fail(field, "must be positive, got " + v.dump());
    if (!positive && d < 0) fail(field, "must not be negative, got " + v.dump());
    return d;
  }
  double number_at(const json& obj, const std::string& key, const std::string& field,
                   bool positive) const {
    return number(member(obj, key, field), field, positive);
  }
  // Missing is allowed (older or hand-written profiles); returns `fallback`.
  double optional_at(const json& obj, const std::string& key, const std::string& field,
                     double fallback) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    return number(*it, field, false);
  }
  int64_t integer(const json& v, const std::string& field, bool positive) const {
    if (!v.is_number_integer() && !v.is_number_unsigned())
      fail(field, "must be an integer, got " + v.dump());
    const int64_t i = v.get<int64_t>();
    if (positive && i <= 0) fail(field, "must be positive, got " + v.dump());
    if (i < 0) fail(field, "must not be negative, got " + v.dump());
    return i;
  }
  std::string string(const json& v, const std::string& field, bool nonempty) const {
    if (!v.is_string()) fail(field, "must be a string, got " + v.dump());
    std::string s = v.get<std::string>();
    if (nonempty && s.empty()) fail(field, "must not be empty");
    return s;
  }
  TransferRates rates(const json& obj, const std::string& key) const {
    const json& r = member(obj, key, key);
    if (!r.is_object()) fail(key, "must be an object {pageable, pinned}");
    TransferRates t;
    for (const char* kind : {"pageable", "pinned"}) {
      const std::string field = key + "." + kind;
      const json& v = member(r, kind, field);
      if (v.is_null()) continue;
      (std::string(kind) == "pageable" ? t.pageable : t.pinned) = number(v, field, true);
    }
    return t;
  }
};

std::string home_dir() {
  const char* h = std::getenv("HOME");
  return h && *h ? h : "";
}

}  // namespace

json profile_to_json(const Profile& p) {
  json gemm = json::array();
  for (const GemmSample& g : p.gemm)
    gemm.push_back({{"op", g.op},
                    {"m", g.m},
                    {"n", g.n},
                    {"k", g.k},
                    {"flops_per_second", g.flops_per_second}});
  json kernels = json::object();
  for (const auto& [name, samples] : p.kernels) {
    json a = json::array();
    for (const KernelSample& s : samples)
      a.push_back({{"elements", s.elements}, {"seconds", s.seconds}});
    kernels[name] = a;
  }
  json device{{"kind", p.kind}, {"name", p.name}, {"id", p.id}, {"cores", p.cores}};
  if (p.kind == "cpu") {
    device["threads"] = p.threads;
    device["isa"] = p.isa;
  } else {
    device["memory_bytes"] = p.memory_bytes;
  }
  return json{{"format", kFormat},
              {"version", kVersion},
              {"device", device},
              {"created", p.created},
              {"crossover_version", p.crossover_version},
              {"quick", p.quick},
              {"calibration_seconds", p.calibration_seconds},
              {"launch_seconds", p.launch_seconds},
              {"graph_launch_seconds", p.graph_launch_seconds},
              {"graph_node_seconds", p.graph_node_seconds},
              {"sync_seconds", p.sync_seconds},
              {"h2d_latency_seconds", p.h2d_latency_seconds},
              {"d2h_latency_seconds", p.d2h_latency_seconds},
              {"h2d_bytes_per_second",
               {{"pageable", optional_number(p.h2d_bytes_per_second.pageable)},
                {"pinned", optional_number(p.h2d_bytes_per_second.pinned)}}},
              {"d2h_bytes_per_second",
               {{"pageable", optional_number(p.d2h_bytes_per_second.pageable)},
                {"pinned", optional_number(p.d2h_bytes_per_second.pinned)}}},
              {"memory_bytes_per_second", p.memory_bytes_per_second},
              {"call_seconds", p.call_seconds},
              {"fork_join_seconds", p.fork_join_seconds},
              {"gemm", gemm},
              {"kernels", kernels}};
}

Profile profile_from_json(const json& j, const std::string& where) {
  const Reader r{where};
  if (!j.is_object()) throw Error(where, "a profile must be a JSON object");
  if (auto it = j.find("format"); it != j.end() && *it != kFormat)
    r.fail("format", "must be \"" + std::string(kFormat) + "\", got " + it->dump());
  if (auto it = j.find("version"); it != j.end()) {
    const int64_t v = r.integer(*it, "version", true);
    if (v > kVersion)
      r.fail("version", "is " + std::to_string(v) + ", newer than this crossover reads (" +
                            std::to_string(kVersion) + ")");
  }
  Profile p;
  const json& dev = r.member(j, "device", "device");
  if (!dev.is_object()) r.fail("device", "must be an object");
  p.kind = r.string(r.member(dev, "kind", "device.kind"), "device.kind", true);
  if (p.kind != "cpu" && p.kind != "gpu")
    r.fail("device.kind", "must be \"cpu\" or \"gpu\", got \"" + p.kind + "\"");
  p.name = r.string(r.member(dev, "name", "device.name"), "device.name", true);
  if (auto it = dev.find("id"); it != dev.end())
    p.id = r.string(*it, "device.id", true);
  else
    p.id = p.kind == "cpu" ? "cpu" : "cuda:0";
  if (auto it = dev.find("threads"); it != dev.end())
    p.threads = static_cast<int>(r.integer(*it, "device.threads", false));
  if (auto it = dev.find("cores"); it != dev.end())
    p.cores = static_cast<int>(r.integer(*it, "device.cores", false));
  if (auto it = dev.find("memory_bytes"); it != dev.end() && !it->is_null())
    p.memory_bytes = r.integer(*it, "device.memory_bytes", false);
  if (auto it = dev.find("isa"); it != dev.end()) {
    if (!it->is_array()) r.fail("device.isa", "must be an array of strings");
    for (std::size_t i = 0; i < it->size(); ++i)
      p.isa.push_back(r.string((*it)[i], "device.isa[" + std::to_string(i) + "]", true));
  }

  if (auto it = j.find("created"); it != j.end() && !it->is_null())
    p.created = r.string(*it, "created", false);
  if (auto it = j.find("crossover_version"); it != j.end() && !it->is_null())
    p.crossover_version = r.string(*it, "crossover_version", false);
  if (auto it = j.find("quick"); it != j.end()) {
    if (!it->is_boolean()) r.fail("quick", "must be true or false");
    p.quick = it->get<bool>();
  }
  p.calibration_seconds = r.optional_at(j, "calibration_seconds", "calibration_seconds", 0);

  p.launch_seconds = r.number_at(j, "launch_seconds", "launch_seconds", false);
  p.graph_node_seconds = r.number_at(j, "graph_node_seconds", "graph_node_seconds", false);
  p.sync_seconds = r.number_at(j, "sync_seconds", "sync_seconds", false);
  p.graph_launch_seconds = r.optional_at(j, "graph_launch_seconds", "graph_launch_seconds", 0);
  p.h2d_latency_seconds = r.optional_at(j, "h2d_latency_seconds", "h2d_latency_seconds", 0);
  p.d2h_latency_seconds = r.optional_at(j, "d2h_latency_seconds", "d2h_latency_seconds", 0);
  p.h2d_bytes_per_second = r.rates(j, "h2d_bytes_per_second");
  p.d2h_bytes_per_second = r.rates(j, "d2h_bytes_per_second");
  p.memory_bytes_per_second =
      r.number_at(j, "memory_bytes_per_second", "memory_bytes_per_second", true);
  p.call_seconds = r.optional_at(j, "call_seconds", "call_seconds", 0);
  p.fork_join_seconds = r.optional_at(j, "fork_join_seconds", "fork_join_seconds", 0);
  if (p.kind == "gpu") {
    if (!(p.launch_seconds > 0)) r.fail("launch_seconds", "must be positive for a GPU profile");
    if (!p.h2d_bytes_per_second.pageable)
      r.fail("h2d_bytes_per_second.pageable", "must be measured for a GPU profile");
    if (!p.d2h_bytes_per_second.pageable)
      r.fail("d2h_bytes_per_second.pageable", "must be measured for a GPU profile");
  }

  const json& gemm = r.member(j, "gemm", "gemm");
  if (!gemm.is_array()) r.fail("gemm", "must be an array of {m, n, k, flops_per_second}");
  if (gemm.empty()) r.fail("gemm", "must hold at least one measurement");
  static const std::set<std::string> ops{"", "forward", "backward_weights", "backward_input"};
  for (std::size_t i = 0; i < gemm.size(); ++i) {
    const std::string f = "gemm[" + std::to_string(i) + "]";
    const json& e = gemm[i];
    if (!e.is_object()) r.fail(f, "must be an object {m, n, k, flops_per_second}");
    GemmSample g;
    if (auto it = e.find("op"); it != e.end() && !it->is_null()) {
      g.op = r.string(*it, f + ".op", false);
      if (!ops.count(g.op))
        r.fail(f + ".op",
               "must be forward, backward_weights or backward_input, got \"" + g.op + "\"");
    }
    g.m = r.integer(r.member(e, "m", f + ".m"), f + ".m", true);
    g.n = r.integer(r.member(e, "n", f + ".n"), f + ".n", true);
    g.k = r.integer(r.member(e, "k", f + ".k"), f + ".k", true);
    g.flops_per_second = r.number_at(e, "flops_per_second", f + ".flops_per_second", true);
    p.gemm.push_back(g);
  }

  if (auto it = j.find("kernels"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) r.fail("kernels", "must be an object of name -> [{elements, seconds}]");
    for (const auto& [name, arr] : it->items()) {
      const std::string f = "kernels." + name;
      if (!arr.is_array() || arr.empty())
        r.fail(f, "must be a non-empty array of {elements, seconds}");
      std::vector<KernelSample> samples;
      for (std::size_t i = 0; i < arr.size(); ++i) {
        const std::string fi = f + "[" + std::to_string(i) + "]";
        KernelSample s;
        s.elements =
            r.integer(r.member(arr[i], "elements", fi + ".elements"), fi + ".elements", true);
        s.seconds = r.number_at(arr[i], "seconds", fi + ".seconds", true);
        if (!samples.empty() && s.elements <= samples.back().elements)
          r.fail(fi + ".elements", "must ascend");
        samples.push_back(s);
      }
      p.kernels[name] = std::move(samples);
    }
  }
  return p;
}

Profile load_profile(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(path, "cannot be read (no such file, or no permission)");
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) {
    throw Error(path, std::string("is not valid JSON: ") + e.what());
  }
  Profile p = profile_from_json(j, path);
  p.source = path;
  return p;
}

void save_profile(const Profile& p, const std::string& path) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const fs::path tmp =
      dir / ("." + target.filename().string() + ".tmp-" + std::to_string(::getpid()));
  {
    std::ofstream f(tmp);
    f << profile_to_json(p).dump(1) << '\n';
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(path, "could not be written");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(path, "could not be written: " + ec.message());
  }
}

std::string profile_slug(const Profile& p) {
  std::string words;
  for (char c : p.name)
    words += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : ' ';
  std::istringstream in(words);
  std::string slug = p.kind;
  static const std::set<std::string> noise{"r",           "tm",   "processor", "cpu",
                                           "corporation", "with", "graphics"};
  for (std::string w; in >> w;)
    if (!noise.count(w)) slug += "-" + w;
  if (p.kind == "cpu") {
    const auto has = [&](const char* f) {
      return std::find(p.isa.begin(), p.isa.end(), f) != p.isa.end();
    };
    if (has("avx512f"))
      slug += "-avx512";
    else if (has("avx2"))
      slug += "-avx2";
    if (has("amx_tile")) slug += "-amx";
    slug += "-" + std::to_string(p.threads > 0 ? p.threads : p.cores) + "t";
  }
  return slug;
}

std::vector<std::string> profile_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("CROSSOVER_PROFILES"); env && *env) {
    std::stringstream in(env);
    for (std::string d; std::getline(in, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  }
  if (const std::string home = home_dir(); !home.empty())
    dirs.push_back(home + "/.local/share/crossover/profiles");
#ifdef CROSSOVER_SOURCE_DIR
  dirs.emplace_back(CROSSOVER_SOURCE_DIR "/profiles");
#endif
#ifdef CROSSOVER_INSTALL_DATADIR
  dirs.emplace_back(CROSSOVER_INSTALL_DATADIR "/profiles");
#endif
  return dirs;
}

std::string default_profile_path(const Profile& p) {
  const std::string home = home_dir();
  const std::string dir = home.empty() ? "." : home + "/.local/share/crossover/profiles";
  return dir + "/" + profile_slug(p) + ".json";
}

std::vector<Profile> find_profiles(std::vector<std::string>* skipped) {
  std::vector<Profile> out;
  std::set<std::string> seen;
  for (const std::string& dir : profile_dirs()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const std::string canon = fs::weakly_canonical(f, ec).string();
      if (!seen.insert(canon).second) continue;
      try {
        out.push_back(load_profile(f.string()));
      } catch (const Error& e) {
        if (skipped) skipped->push_back(e.what());
      }
    }
  }
  return out;
}

std::optional<Profile> cpu_profile_for_this_machine(const std::string& explicit_path, int threads,
                                                    std::string& note) {
  if (!explicit_path.empty()) {
    Profile p = load_profile(explicit_path);
    note = "profile " + explicit_path + " (given)";
    return p;
  }
  const CpuInfo& cpu = cpu_info();
  const int want = threads > 0 ? threads : cpu.logical_cores;
  std::optional<Profile> any;
  for (Profile& p : find_profiles()) {
    if (p.kind != "cpu") continue;
    if (p.name == cpu.model && p.threads == want && p.isa == cpu.isa) {
      note = "profile " + p.source + " (this CPU, " + std::to_string(want) + " threads)";
      return std::move(p);
    }
    if (!any) any = std::move(p);
  }
  if (any) {
    note = "profile " + any->source + " (measured on " + any->name + " with " +
           std::to_string(any->threads) + " threads, not this machine: run crossover calibrate)";
    return any;
  }
  note = "no CPU calibration profile found (run crossover calibrate)";
  return std::nullopt;
}

std::vector<Profile> gpu_profiles(const std::string& name) {
  std::vector<Profile> out;
  for (Profile& p : find_profiles())
    if (p.kind == "gpu" && (name.empty() || p.name == name)) out.push_back(std::move(p));
  return out;
}

std::optional<Profile> profile_for_device(const std::string& device,
                                          const std::string& explicit_path, int threads,
                                          std::string& note) {
  if (device == "cpu") return cpu_profile_for_this_machine(explicit_path, threads, note);
  if (!explicit_path.empty()) {
    note = "profile " + explicit_path + " (given)";
    return load_profile(explicit_path);
  }
  const int ordinal = device == "cuda" ? 0 : std::atoi(device.c_str() + 5);
  std::string name;
  for (const CudaDeviceInfo& d : cuda_devices())
    if (d.ordinal == ordinal) name = d.name;
  if (name.empty()) {
    note = "no GPU " + device + " to find a profile for";
    return std::nullopt;
  }
  std::vector<Profile> found = gpu_profiles(name);
  if (found.empty()) {
    note =
        "no calibration profile for " + name + " (run crossover calibrate --device " + device + ")";
    return std::nullopt;
  }
  note = "profile " + found.front().source + " (" + name + ")";
  return std::move(found.front());
}

}  // namespace crossover::perf
