#include "perf/profile.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <tuple>

#include "backends/cuda_info.h"
#include "core/error.h"
#include "core/machine.h"
#include "core/shipped.h"

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

json int_or_null(int v) { return v >= 0 ? json(v) : json(nullptr); }

// The shipped folders: measured on the project's machines.
std::vector<std::string> shipped_dirs() { return shipped_places("profiles"); }

std::string isa_upper(const std::vector<std::string>& isa) {
  const auto has = [&](const char* f) { return std::find(isa.begin(), isa.end(), f) != isa.end(); };
  std::string s = has("avx512f") ? "AVX-512" : has("avx2") ? "AVX2" : has("avx") ? "AVX" : "SSE";
  if (has("amx_tile")) s += ", AMX";
  return s;
}

// An exclusive flock on `path` for the scope.
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(path, "cannot be opened as a lock file");
    while (::flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) {
        ::close(fd_);
        throw Error(path, "cannot be locked");
      }
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// "dilation" only where the kernel is dilated: the profiles written before it stay as they were.
json conv_to_json(const ConvSample& c) {
  const ConvShape& s = c.shape;
  json j = {{"op", c.op},
            {"batch", c.batch},
            {"input", {s.in_h, s.in_w, s.in_c}},
            {"output", {s.out_h, s.out_w, s.out_c}},
            {"kernel", {s.kernel_h, s.kernel_w}},
            {"strides", {s.stride_h, s.stride_w}},
            {"padding", {s.pad_top, s.pad_left, s.pad_bottom, s.pad_right}}};
  if (s.dilation_h != 1 || s.dilation_w != 1) j["dilation"] = {s.dilation_h, s.dilation_w};
  j["bias"] = c.bias;
  j["activation"] = c.relu ? "relu" : "linear";
  j["seconds"] = c.seconds;
  return j;
}

json pool_to_json(const PoolSample& c) {
  const PoolShape& s = c.shape;
  return {{"op", c.op},
          {"kind", s.kind == PoolKind::max ? "max" : "average"},
          {"batch", c.batch},
          {"input", {s.in_h, s.in_w, s.channels}},
          {"output", {s.out_h, s.out_w}},
          {"window", {s.window_h, s.window_w}},
          {"strides", {s.stride_h, s.stride_w}},
          {"padding", {s.pad_top, s.pad_left, s.pad_bottom, s.pad_right}},
          {"seconds", c.seconds}};
}

json norm_to_json(const NormSample& c) {
  const BatchNormShape& s = c.shape;
  return {
      {"op", c.op},           {"batch", c.batch}, {"spatial", s.spatial}, {"channels", s.channels},
      {"epsilon", s.epsilon}, {"scale", s.scale}, {"center", s.center},   {"seconds", c.seconds}};
}

// `count` integers of field `key` of `e` (positive ones unless `zero_ok`), into `slots`.
void read_ints(const Reader& r, const json& e, const std::string& key, const std::string& f,
               std::initializer_list<int64_t*> slots, bool zero_ok = false) {
  const json& v = r.member(e, key, f + "." + key);
  if (!v.is_array() || v.size() != slots.size())
    r.fail(f + "." + key, "must be an array of " + std::to_string(slots.size()) + " integers");
  std::size_t i = 0;
  for (int64_t* slot : slots) {
    *slot = r.integer(v[i], f + "." + key + "[" + std::to_string(i) + "]", !zero_ok);
    ++i;
  }
}

bool read_bool(const Reader& r, const json& e, const std::string& key, const std::string& f) {
  const json& v = r.member(e, key, f + "." + key);
  if (!v.is_boolean()) r.fail(f + "." + key, "must be true or false");
  return v.get<bool>();
}

// out = (in + padding - window) / stride + 1, per axis, as backend.h defines the shapes.
bool follows(int64_t in, int64_t pad_a, int64_t pad_b, int64_t window, int64_t stride,
             int64_t out) {
  return in + pad_a + pad_b >= window && (in + pad_a + pad_b - window) / stride + 1 == out;
}

ConvSample conv_from_json(const Reader& r, const json& e, const std::string& f) {
  if (!e.is_object()) r.fail(f, "must be an object {op, batch, input, output, ..., seconds}");
  ConvSample c;
  c.op = r.string(r.member(e, "op", f + ".op"), f + ".op", true);
  if (c.op != "forward" && c.op != "backward_input" && c.op != "backward_weights")
    r.fail(f + ".op", "must be forward, backward_input or backward_weights, got \"" + c.op + "\"");
  ConvShape& s = c.shape;
  c.batch = r.integer(r.member(e, "batch", f + ".batch"), f + ".batch", true);
  read_ints(r, e, "input", f, {&s.in_h, &s.in_w, &s.in_c});
  read_ints(r, e, "output", f, {&s.out_h, &s.out_w, &s.out_c});
  read_ints(r, e, "kernel", f, {&s.kernel_h, &s.kernel_w});
  read_ints(r, e, "strides", f, {&s.stride_h, &s.stride_w});
  read_ints(r, e, "padding", f, {&s.pad_top, &s.pad_left, &s.pad_bottom, &s.pad_right}, true);
  if (e.contains("dilation")) read_ints(r, e, "dilation", f, {&s.dilation_h, &s.dilation_w});
  constexpr int64_t kMaxSpan = int64_t{1} << 40;  // (kernel - 1) * dilation must not overflow
  if (s.kernel_h - 1 > kMaxSpan / s.dilation_h || s.kernel_w - 1 > kMaxSpan / s.dilation_w)
    r.fail(f + ".dilation", "spans an absurdly large window with its kernel");
  if (!follows(s.in_h, s.pad_top, s.pad_bottom, dilated_extent(s.kernel_h, s.dilation_h),
               s.stride_h, s.out_h) ||
      !follows(s.in_w, s.pad_left, s.pad_right, dilated_extent(s.kernel_w, s.dilation_w),
               s.stride_w, s.out_w))
    r.fail(f + ".output", "does not follow from its input, kernel, dilation, strides and padding");
  c.bias = read_bool(r, e, "bias", f);
  const std::string act =
      r.string(r.member(e, "activation", f + ".activation"), f + ".activation", true);
  if (act != "relu" && act != "linear")
    r.fail(f + ".activation", "must be relu or linear, got \"" + act + "\"");
  c.relu = act == "relu";
  c.seconds = r.number_at(e, "seconds", f + ".seconds", true);
  return c;
}

PoolSample pool_from_json(const Reader& r, const json& e, const std::string& f) {
  if (!e.is_object()) r.fail(f, "must be an object {op, kind, batch, input, ..., seconds}");
  PoolSample c;
  c.op = r.string(r.member(e, "op", f + ".op"), f + ".op", true);
  if (c.op != "forward" && c.op != "backward")
    r.fail(f + ".op", "must be forward or backward, got \"" + c.op + "\"");
  PoolShape& s = c.shape;
  const std::string kind = r.string(r.member(e, "kind", f + ".kind"), f + ".kind", true);
  if (kind != "max" && kind != "average")
    r.fail(f + ".kind", "must be max or average, got \"" + kind + "\"");
  s.kind = kind == "max" ? PoolKind::max : PoolKind::average;
  c.batch = r.integer(r.member(e, "batch", f + ".batch"), f + ".batch", true);
  read_ints(r, e, "input", f, {&s.in_h, &s.in_w, &s.channels});
  read_ints(r, e, "output", f, {&s.out_h, &s.out_w});
  read_ints(r, e, "window", f, {&s.window_h, &s.window_w});
  read_ints(r, e, "strides", f, {&s.stride_h, &s.stride_w});
  read_ints(r, e, "padding", f, {&s.pad_top, &s.pad_left, &s.pad_bottom, &s.pad_right}, true);
  if (!follows(s.in_h, s.pad_top, s.pad_bottom, s.window_h, s.stride_h, s.out_h) ||
      !follows(s.in_w, s.pad_left, s.pad_right, s.window_w, s.stride_w, s.out_w))
    r.fail(f + ".output", "does not follow from its input, window, strides and padding");
  c.seconds = r.number_at(e, "seconds", f + ".seconds", true);
  return c;
}

NormSample norm_from_json(const Reader& r, const json& e, const std::string& f) {
  if (!e.is_object()) r.fail(f, "must be an object {op, batch, spatial, channels, ..., seconds}");
  NormSample c;
  c.op = r.string(r.member(e, "op", f + ".op"), f + ".op", true);
  if (c.op != "forward_training" && c.op != "forward_inference" && c.op != "backward" &&
      c.op != "update_moving")
    r.fail(f + ".op",
           "must be forward_training, forward_inference, backward or update_moving, got \"" + c.op +
               "\"");
  BatchNormShape& s = c.shape;
  c.batch = r.integer(r.member(e, "batch", f + ".batch"), f + ".batch", true);
  s.spatial = r.integer(r.member(e, "spatial", f + ".spatial"), f + ".spatial", true);
  s.channels = r.integer(r.member(e, "channels", f + ".channels"), f + ".channels", true);
  s.epsilon = static_cast<float>(r.number_at(e, "epsilon", f + ".epsilon", true));
  s.scale = read_bool(r, e, "scale", f);
  s.center = read_bool(r, e, "center", f);
  c.seconds = r.number_at(e, "seconds", f + ".seconds", true);
  return c;
}

json allreduce_to_json(const AllreduceFit& f) {
  json samples = json::array();
  for (const AllreduceSample& s : f.samples)
    samples.push_back({{"bytes", s.bytes}, {"seconds", s.seconds}});
  return {{"transport", f.transport},
          {"ranks", f.ranks},
          {"hosts", f.hosts},
          {"latency_seconds", f.latency_seconds},
          {"bytes_per_second", f.bytes_per_second},
          {"samples", samples}};
}

AllreduceFit allreduce_from_json(const Reader& r, const json& e, const std::string& f) {
  if (!e.is_object())
    r.fail(f, "must be an object {transport, ranks, hosts, latency_seconds, bytes_per_second}");
  AllreduceFit a;
  a.transport = r.string(r.member(e, "transport", f + ".transport"), f + ".transport", true);
  a.ranks = static_cast<int>(r.integer(r.member(e, "ranks", f + ".ranks"), f + ".ranks", true));
  if (a.ranks < 2) r.fail(f + ".ranks", "must be at least 2");
  a.hosts = static_cast<int>(r.integer(r.member(e, "hosts", f + ".hosts"), f + ".hosts", true));
  a.latency_seconds = r.number_at(e, "latency_seconds", f + ".latency_seconds", false);
  a.bytes_per_second = r.number_at(e, "bytes_per_second", f + ".bytes_per_second", true);
  if (auto it = e.find("samples"); it != e.end() && !it->is_null()) {
    if (!it->is_array()) r.fail(f + ".samples", "must be an array of {bytes, seconds}");
    for (std::size_t i = 0; i < it->size(); ++i) {
      const std::string fi = f + ".samples[" + std::to_string(i) + "]";
      AllreduceSample s;
      s.bytes = r.integer(r.member((*it)[i], "bytes", fi + ".bytes"), fi + ".bytes", true);
      s.seconds = r.number_at((*it)[i], "seconds", fi + ".seconds", true);
      if (!a.samples.empty() && s.bytes <= a.samples.back().bytes)
        r.fail(fi + ".bytes", "must ascend");
      a.samples.push_back(s);
    }
  }
  return a;
}

// A convolution, pooling, batch-normalization or allreduce entry's identity: all but its
// seconds.
auto conv_key(const ConvSample& c) { return std::tuple{c.op, c.shape, c.batch, c.bias, c.relu}; }
auto pool_key(const PoolSample& c) { return std::tuple{c.op, c.shape, c.batch}; }
auto norm_key(const NormSample& c) { return std::tuple{c.op, c.shape, c.batch}; }
auto allreduce_key(const AllreduceFit& f) { return std::tuple{f.transport, f.ranks, f.hosts}; }

}  // namespace

json gemm_to_json(const std::vector<GemmSample>& samples) {
  json gemm = json::array();
  for (const GemmSample& g : samples)
    gemm.push_back({{"op", g.op},
                    {"m", g.m},
                    {"n", g.n},
                    {"k", g.k},
                    {"flops_per_second", g.flops_per_second}});
  return gemm;
}

json profile_to_json(const Profile& p) {
  const json gemm = gemm_to_json(p.gemm);
  json kernels = json::object();
  for (const auto& [name, samples] : p.kernels) {
    json a = json::array();
    for (const KernelSample& s : samples)
      a.push_back({{"elements", s.elements}, {"seconds", s.seconds}});
    kernels[name] = a;
  }
  json conv2d = json::array(), pool2d = json::array();
  for (const ConvSample& c : p.conv2d) conv2d.push_back(conv_to_json(c));
  for (const PoolSample& c : p.pool2d) pool2d.push_back(pool_to_json(c));
  json batchnorm = json::array();
  json levels = json::array();
  for (const MemoryLevel& l : p.memory_levels)
    levels.push_back(
        {{"name", l.name}, {"bytes", l.bytes}, {"bytes_per_second", l.bytes_per_second}});
  for (const NormSample& c : p.batchnorm) batchnorm.push_back(norm_to_json(c));
  json allreduce = json::array();
  for (const AllreduceFit& f : p.allreduce) allreduce.push_back(allreduce_to_json(f));
  json device{{"kind", p.kind}, {"name", p.name}, {"id", p.id}, {"cores", p.cores}};
  if (p.kind == "cpu") {
    device["threads"] = p.threads;
    device["isa"] = p.isa;
    device["cpuid"] = {{"family", int_or_null(p.cpuid_family)},
                       {"model", int_or_null(p.cpuid_model)},
                       {"stepping", int_or_null(p.cpuid_stepping)}};
    device["cache_bytes"] = {{"l1d", p.l1d_bytes}, {"l2", p.l2_bytes}, {"l3", p.l3_bytes}};
  } else {
    device["memory_bytes"] = p.memory_bytes;
  }
  json doc{{"format", kFormat},
           {"version", kVersion},
           {"schema", p.schema},
           {"coverage", p.coverage},
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
           {"memory_levels", levels},
           {"call_seconds", p.call_seconds},
           {"fork_join_seconds", p.fork_join_seconds},
           {"gemm", gemm},
           {"gemm_bf16", gemm_to_json(p.gemm_bf16)},
           {"kernels", kernels},
           {"conv2d", conv2d},
           {"pool2d", pool2d},
           {"batchnorm", batchnorm},
           {"allreduce", allreduce}};
  // Only where measured: a profile without it is written as before.
  if (p.fused_step)
    doc["fused_step"] = {{"grid_sync_seconds", p.fused_step->grid_sync_seconds},
                         {"block_flops_per_second", p.fused_step->block_flops_per_second},
                         {"blocks_per_sm", p.fused_step->blocks_per_sm},
                         {"l2_bytes", p.fused_step->l2_bytes}};
  return doc;
}

// The GEMM samples of the array `gemm` (the profile's `name`), appended to `out`.
static void read_gemm_samples(const Reader& r, const json& gemm, const std::string& name,
                              std::vector<GemmSample>& out) {
  static const std::set<std::string> ops{"", "forward", "backward_weights", "backward_input"};
  for (std::size_t i = 0; i < gemm.size(); ++i) {
    const std::string f = name + "[" + std::to_string(i) + "]";
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
    out.push_back(g);
  }
}

namespace {

// The profile's "device": what machine it measured.
void read_device(const Reader& r, const json& dev, Profile& p) {
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
  if (auto it = dev.find("cpuid"); it != dev.end() && !it->is_null()) {
    if (!it->is_object()) r.fail("device.cpuid", "must be an object {family, model, stepping}");
    for (auto [key, slot] : {std::pair{"family", &p.cpuid_family},
                             {"model", &p.cpuid_model},
                             {"stepping", &p.cpuid_stepping}})
      if (auto v = it->find(key); v != it->end() && !v->is_null())
        *slot = static_cast<int>(r.integer(*v, std::string("device.cpuid.") + key, false));
  }
  if (auto it = dev.find("cache_bytes"); it != dev.end() && !it->is_null()) {
    if (!it->is_object()) r.fail("device.cache_bytes", "must be an object {l1d, l2, l3}");
    for (auto [key, slot] :
         {std::pair{"l1d", &p.l1d_bytes}, {"l2", &p.l2_bytes}, {"l3", &p.l3_bytes}})
      if (auto v = it->find(key); v != it->end() && !v->is_null())
        *slot = r.integer(*v, std::string("device.cache_bytes.") + key, false);
  }
}

// The latencies, transfer rates and memory levels (a GPU profile must have its launches and
// pageable transfers measured).
void read_rates(const Reader& r, const json& j, Profile& p) {
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
  // Per level: absent in profiles from before them.
  if (auto it = j.find("memory_levels"); it != j.end() && !it->is_null()) {
    if (!it->is_array())
      r.fail("memory_levels", "must be an array of {name, bytes, bytes_per_second}");
    for (std::size_t i = 0; i < it->size(); ++i) {
      const std::string f = "memory_levels[" + std::to_string(i) + "]";
      const json& e = (*it)[i];
      MemoryLevel l;
      l.name = r.string(r.member(e, "name", f + ".name"), f + ".name", true);
      l.bytes = r.integer(r.member(e, "bytes", f + ".bytes"), f + ".bytes", false);
      l.bytes_per_second = r.number_at(e, "bytes_per_second", f + ".bytes_per_second", true);
      if (!p.memory_levels.empty() && p.memory_levels.back().bytes == 0)
        r.fail(f + ".bytes", "follows the unbounded level (bytes 0), which must be the last");
      if (!p.memory_levels.empty() && l.bytes != 0 && l.bytes <= p.memory_levels.back().bytes)
        r.fail(f + ".bytes", "must ascend");
      p.memory_levels.push_back(std::move(l));
    }
  }
  p.call_seconds = r.optional_at(j, "call_seconds", "call_seconds", 0);
  p.fork_join_seconds = r.optional_at(j, "fork_join_seconds", "fork_join_seconds", 0);
  if (p.kind == "gpu") {
    if (!(p.launch_seconds > 0)) r.fail("launch_seconds", "must be positive for a GPU profile");
    if (!p.h2d_bytes_per_second.pageable)
      r.fail("h2d_bytes_per_second.pageable", "must be measured for a GPU profile");
    if (!p.d2h_bytes_per_second.pageable)
      r.fail("d2h_bytes_per_second.pageable", "must be measured for a GPU profile");
  }
}

// The per-kernel timings and the convolution, pooling, batch-normalization and allreduce
// measurements, each absent in profiles from before it.
void read_measurements(const Reader& r, const json& j, Profile& p) {
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
  // Convolution and pooling entries: absent in profiles from before them (measured on demand).
  if (auto it = j.find("conv2d"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) r.fail("conv2d", "must be an array of convolution measurements");
    for (std::size_t i = 0; i < it->size(); ++i)
      p.conv2d.push_back(conv_from_json(r, (*it)[i], "conv2d[" + std::to_string(i) + "]"));
  }
  if (auto it = j.find("pool2d"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) r.fail("pool2d", "must be an array of pooling measurements");
    for (std::size_t i = 0; i < it->size(); ++i)
      p.pool2d.push_back(pool_from_json(r, (*it)[i], "pool2d[" + std::to_string(i) + "]"));
  }
  if (auto it = j.find("batchnorm"); it != j.end() && !it->is_null()) {
    if (!it->is_array())
      r.fail("batchnorm", "must be an array of batch-normalization measurements");
    for (std::size_t i = 0; i < it->size(); ++i)
      p.batchnorm.push_back(norm_from_json(r, (*it)[i], "batchnorm[" + std::to_string(i) + "]"));
  }
  // Allreduce fits: absent in profiles made without mpirun.
  if (auto it = j.find("allreduce"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) r.fail("allreduce", "must be an array of allreduce fits");
    for (std::size_t i = 0; i < it->size(); ++i)
      p.allreduce.push_back(
          allreduce_from_json(r, (*it)[i], "allreduce[" + std::to_string(i) + "]"));
  }
  // The fused step's rates: absent in profiles from before them (the fused step is then unpriced).
  if (auto it = j.find("fused_step"); it != j.end() && !it->is_null()) {
    if (!it->is_object())
      r.fail("fused_step",
             "must be an object {grid_sync_seconds, block_flops_per_second, blocks_per_sm, "
             "l2_bytes}");
    FusedStepRates f;
    f.grid_sync_seconds =
        r.number_at(*it, "grid_sync_seconds", "fused_step.grid_sync_seconds", true);
    f.block_flops_per_second =
        r.number_at(*it, "block_flops_per_second", "fused_step.block_flops_per_second", true);
    f.blocks_per_sm =
        static_cast<int>(r.integer(r.member(*it, "blocks_per_sm", "fused_step.blocks_per_sm"),
                                   "fused_step.blocks_per_sm", true));
    f.l2_bytes =
        r.integer(r.member(*it, "l2_bytes", "fused_step.l2_bytes"), "fused_step.l2_bytes", true);
    p.fused_step = f;
  }
}

}  // namespace

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
  read_device(r, r.member(j, "device", "device"), p);
  p.schema = 0;
  if (auto it = j.find("schema"); it != j.end() && !it->is_null())
    p.schema = static_cast<int>(r.integer(*it, "schema", false));
  if (auto it = j.find("coverage"); it != j.end() && !it->is_null()) {
    p.coverage = r.string(*it, "coverage", true);
    if (p.coverage != "grid" && p.coverage != "shapes")
      r.fail("coverage", "must be \"grid\" or \"shapes\", got \"" + p.coverage + "\"");
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

  read_rates(r, j, p);

  const json& gemm = r.member(j, "gemm", "gemm");
  if (!gemm.is_array()) r.fail("gemm", "must be an array of {m, n, k, flops_per_second}");
  if (gemm.empty()) r.fail("gemm", "must hold at least one measurement");
  read_gemm_samples(r, gemm, "gemm", p.gemm);
  // bf16 rates: absent in profiles from before them, and of CPUs without bf16.
  if (auto it = j.find("gemm_bf16"); it != j.end() && !it->is_null()) {
    if (!it->is_array()) r.fail("gemm_bf16", "must be an array of {m, n, k, flops_per_second}");
    read_gemm_samples(r, *it, "gemm_bf16", p.gemm_bf16);
  }

  read_measurements(r, j, p);
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

void write_json_atomically(const std::string& path, const nlohmann::json& doc, int indent,
                           const std::string& where) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  static std::atomic<int> counter{0};
  const fs::path tmp = dir / ("." + target.filename().string() + ".tmp-" +
                              std::to_string(::getpid()) + "-" + std::to_string(counter++));
  {
    std::ofstream f(tmp);
    f << doc.dump(indent) << '\n';
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error(where, "could not be written");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(where, "could not be written: " + ec.message());
  }
}

void save_profile(const Profile& p, const std::string& path) {
  write_json_atomically(path, profile_to_json(p), 1, path);
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
    // Two CPUs of the same name (a VM's bare "AMD EPYC") must not share a file.
    if (p.cpuid_family >= 0 && p.cpuid_model >= 0)
      slug += "-f" + std::to_string(p.cpuid_family) + "m" + std::to_string(p.cpuid_model);
  }
  return slug;
}

std::string user_profile_dir() {
  if (const char* env = std::getenv("CROSSOVER_PROFILE_DIR"); env && *env) return env;
  const std::string home = home_dir();
  return home.empty() ? "." : home + "/.local/share/crossover/profiles";
}

std::vector<std::string> profile_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("CROSSOVER_PROFILES"); env && *env) {
    std::stringstream in(env);
    for (std::string d; std::getline(in, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  }
  dirs.push_back(user_profile_dir());
  for (const std::string& d : shipped_dirs()) dirs.push_back(d);
  return dirs;
}

std::string default_profile_path(const Profile& p) {
  return user_profile_dir() + "/" + profile_slug(p) + ".json";
}

std::vector<Profile> find_profiles(std::vector<std::string>* skipped) {
  std::vector<Profile> out;
  std::set<std::string> seen, shipped;
  for (const std::string& dir : shipped_dirs()) {
    std::error_code ec;
    shipped.insert(fs::weakly_canonical(dir, ec).string());
  }
  for (const std::string& dir : profile_dirs()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    const bool from_shipped = shipped.count(fs::weakly_canonical(dir, ec).string()) > 0;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      const std::string canon = fs::weakly_canonical(f, ec).string();
      if (!seen.insert(canon).second) continue;
      try {
        out.push_back(load_profile(f.string()));
        out.back().shipped = from_shipped;
      } catch (const Error& e) {
        if (skipped) skipped->push_back(e.what());
      }
    }
  }
  return out;
}

void set_this_cpu(Profile& p, int threads) {
  const CpuInfo& cpu = cpu_info();
  p.kind = "cpu";
  p.name = cpu.model;
  p.id = "cpu";
  p.cores = cpu.logical_cores;
  p.threads = threads > 0 ? threads : cpu.logical_cores;
  p.isa = cpu.isa;
  p.cpuid_family = cpu.family;
  p.cpuid_model = cpu.model_number;
  p.cpuid_stepping = cpu.stepping;
  p.l1d_bytes = cpu.l1d_bytes;
  p.l2_bytes = cpu.l2_bytes;
  p.l3_bytes = cpu.l3_bytes;
  p.schema = kProfileSchema;
}

std::string describe_cpu(const Profile& p) {
  std::string s = p.name;
  if (p.cpuid_family >= 0)
    s += " (family " + std::to_string(p.cpuid_family) + " model " + std::to_string(p.cpuid_model) +
         " stepping " + std::to_string(p.cpuid_stepping) + ")";
  return s + ", " + isa_upper(p.isa) + ", " + std::to_string(p.threads) + " threads";
}

std::string cpu_mismatch(const Profile& p, int threads) {
  if (p.kind != "cpu") return "a " + p.kind + " profile, not a CPU's";
  if (p.shipped)
    return "shipped with crossover (measured on " + describe_cpu(p) + "), not this machine";
  Profile me;
  set_this_cpu(me, threads);
  const std::string theirs = describe_cpu(p), mine = describe_cpu(me);
  if (p.name != me.name || p.cpuid_family != me.cpuid_family || p.cpuid_model != me.cpuid_model ||
      p.cpuid_stepping != me.cpuid_stepping || p.isa != me.isa)
    return "measured on " + theirs + "; this is " + mine;
  if (p.l1d_bytes != me.l1d_bytes || p.l2_bytes != me.l2_bytes || p.l3_bytes != me.l3_bytes)
    return fmt::format(
        "measured on a {} with caches L1d/L2/L3 {}/{}/{} KiB; this one's are {}/{}/{} KiB", p.name,
        p.l1d_bytes >> 10, p.l2_bytes >> 10, p.l3_bytes >> 10, me.l1d_bytes >> 10,
        me.l2_bytes >> 10, me.l3_bytes >> 10);
  if (p.threads != me.threads)
    return fmt::format("measured with {} thread{}; this run uses {}", p.threads,
                       p.threads == 1 ? "" : "s", me.threads);
  if (p.schema != kProfileSchema)
    return "of profile schema " + std::to_string(p.schema) + "; this crossover's is " +
           std::to_string(kProfileSchema);
  return "";
}

void merge_profile(Profile& into, const Profile& from) {
  if (into.memory_levels.empty()) into.memory_levels = from.memory_levels;
  for (auto list : {&Profile::gemm, &Profile::gemm_bf16}) {
    std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> have;
    for (const GemmSample& g : into.*list) have.insert({g.op, g.m, g.n, g.k});
    for (const GemmSample& g : from.*list)
      if (have.insert({g.op, g.m, g.n, g.k}).second) (into.*list).push_back(g);
  }
  for (const auto& [name, samples] : from.kernels) {
    std::vector<KernelSample>& curve = into.kernels[name];
    for (const KernelSample& s : samples) {
      auto at = std::lower_bound(curve.begin(), curve.end(), s.elements,
                                 [](const KernelSample& k, int64_t e) { return k.elements < e; });
      if (at == curve.end() || at->elements != s.elements) curve.insert(at, s);
    }
  }
  std::set<decltype(conv_key(ConvSample{}))> convs;
  for (const ConvSample& c : into.conv2d) convs.insert(conv_key(c));
  for (const ConvSample& c : from.conv2d)
    if (convs.insert(conv_key(c)).second) into.conv2d.push_back(c);
  std::set<decltype(pool_key(PoolSample{}))> pools;
  for (const PoolSample& c : into.pool2d) pools.insert(pool_key(c));
  for (const PoolSample& c : from.pool2d)
    if (pools.insert(pool_key(c)).second) into.pool2d.push_back(c);
  std::set<decltype(norm_key(NormSample{}))> norms;
  for (const NormSample& c : into.batchnorm) norms.insert(norm_key(c));
  for (const NormSample& c : from.batchnorm)
    if (norms.insert(norm_key(c)).second) into.batchnorm.push_back(c);
  std::set<decltype(allreduce_key(AllreduceFit{}))> fits;
  for (const AllreduceFit& f : into.allreduce) fits.insert(allreduce_key(f));
  for (const AllreduceFit& f : from.allreduce)
    if (fits.insert(allreduce_key(f)).second) into.allreduce.push_back(f);
  if (!into.fused_step) into.fused_step = from.fused_step;
  // The longer of the two: `from` may already hold `into`'s time (an extension of it, re-merged
  // under the lock), and adding would count it twice.
  into.calibration_seconds = std::max(into.calibration_seconds, from.calibration_seconds);
}

Profile merge_and_save_profile(const Profile& fresh, const std::string& path) {
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  FileLock lock(path + ".lock");
  Profile merged = fresh;
  if (fs::exists(target, ec)) {
    try {
      Profile old = load_profile(path);
      const bool same = old.kind == fresh.kind && old.name == fresh.name &&
                        old.schema == fresh.schema &&
                        (fresh.kind != "cpu" || cpu_mismatch(old, fresh.threads).empty());
      // A full grid keeps its GEMMs and curves as they are: it interpolates any shape, and
      // scattered extra entries would turn its trilinear interpolation into inverse-distance
      // weighting. It gains only convolution, pooling and batch-norm shapes and allreduce fits,
      // which it has no grid of.
      if (same && old.coverage == "grid" && fresh.coverage == "shapes") {
        auto count = [](const Profile& p) {
          return p.conv2d.size() + p.pool2d.size() + p.batchnorm.size() + p.allreduce.size();
        };
        const std::size_t before = count(old);
        Profile shapes;
        shapes.conv2d = fresh.conv2d;
        shapes.pool2d = fresh.pool2d;
        shapes.batchnorm = fresh.batchnorm;
        shapes.allreduce = fresh.allreduce;
        merge_profile(old, shapes);
        if (count(old) > before) save_profile(old, path);
        old.source = path;
        old.shipped = false;
        return old;
      }
      if (same) {
        merge_profile(old, fresh);
        merged = std::move(old);
      }
    } catch (const Error&) {
      // An unreadable or invalid file is replaced.
    }
  }
  save_profile(merged, path);
  merged.source = path;
  merged.shipped = false;
  return merged;
}

std::optional<Profile> find_this_cpu_profile(int threads, std::string* why_not) {
  std::string first_reason;
  {
    // Where the on-demand calibration saves this machine's profile, first.
    Profile me;
    set_this_cpu(me, threads);
    const std::string path = default_profile_path(me);
    std::error_code ec;
    if (fs::exists(path, ec)) try {
        Profile p = load_profile(path);
        const std::string why = cpu_mismatch(p, threads);
        if (why.empty()) return p;
        first_reason = path + " was " + why;
      } catch (const Error&) {
      }
  }
  for (Profile& p : find_profiles()) {
    if (p.kind != "cpu" || p.shipped) continue;
    const std::string why = cpu_mismatch(p, threads);
    if (why.empty()) return std::move(p);
    if (first_reason.empty()) first_reason = p.source + " was " + why;
  }
  if (why_not) {
    Profile me;
    set_this_cpu(me, threads);
    *why_not = first_reason.empty()
                   ? "no profile of this machine (" + describe_cpu(me) + ") is saved yet"
                   : "no profile matches this machine: " + first_reason;
  }
  return std::nullopt;
}

std::optional<Profile> closest_cpu_profile(int threads) {
  Profile me;
  set_this_cpu(me, threads);
  std::optional<Profile> best;
  int best_score = -1;
  for (Profile& p : find_profiles()) {
    if (p.kind != "cpu") continue;
    // Alike in what decides speed most: the widest SIMD, then the thread count, then the name.
    int score = 0;
    if (isa_upper(p.isa) == isa_upper(me.isa)) score += 4;
    if (p.threads == me.threads) score += 2;
    if (p.name == me.name) score += 1;
    if (score > best_score) {
      best_score = score;
      best = std::move(p);
    }
  }
  return best;
}

std::optional<Profile> cpu_profile_for_this_machine(const std::string& explicit_path, int threads,
                                                    std::string& note) {
  if (!explicit_path.empty()) {
    Profile p = load_profile(explicit_path);
    note = "profile " + explicit_path + " (given)";
    return p;
  }
  const int want = threads > 0 ? threads : cpu_info().logical_cores;
  if (std::optional<Profile> p = find_this_cpu_profile(threads)) {
    note = "profile " + p->source + " (this CPU, " + std::to_string(want) + " threads)";
    return p;
  }
  if (std::optional<Profile> p = closest_cpu_profile(threads)) {
    note = "profile " + p->source + " (measured on " + describe_cpu(*p) +
           ", not this machine: run crossover calibrate)";
    return p;
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
