// explain --trace: the timed steps as a Chrome trace (perf/trace.h), checked as a trace viewer
// reads it: well-formed, every slice complete and named on a named track, slices nested per track
// (never a partial overlap), and its steps adding up to the step explain reports for that run.
#include "perf/trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace crossover {
namespace {

using json = nlohmann::json;
using testing_util::run_crossover;
using testing_util::temp_folder;

json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  return json::parse(f);  // throws on a malformed file: the test fails
}

// A complete event, its times in nanoseconds (the microseconds a reader multiplies by 1000).
struct Slice {
  std::string name, cat;
  int64_t start = 0, end = 0;
  json args;
};

// Checks what a trace viewer needs and returns the complete events by track (pid, tid).
std::map<std::pair<int64_t, int64_t>, std::vector<Slice>> check_trace(const json& t) {
  std::map<std::pair<int64_t, int64_t>, std::vector<Slice>> tracks;
  EXPECT_TRUE(t.is_object());
  EXPECT_TRUE(t.contains("displayTimeUnit") &&
              (t["displayTimeUnit"] == "ms" || t["displayTimeUnit"] == "ns"));
  if (!t.contains("traceEvents") || !t["traceEvents"].is_array()) {
    ADD_FAILURE() << "no traceEvents array";
    return tracks;
  }
  std::set<int64_t> named_processes;
  std::set<std::pair<int64_t, int64_t>> named_threads;
  for (const json& e : t["traceEvents"]) {
    EXPECT_TRUE(e.contains("ph") && e["ph"].is_string()) << e.dump();
    EXPECT_TRUE(e.contains("pid") && e["pid"].is_number_integer()) << e.dump();
    EXPECT_TRUE(e.contains("tid") && e["tid"].is_number_integer()) << e.dump();
    if (e["ph"] == "M") {
      EXPECT_TRUE(e["args"].contains("name") || e["args"].contains("sort_index")) << e.dump();
      if (e["name"] == "process_name" && !e["args"]["name"].get<std::string>().empty())
        named_processes.insert(e["pid"].get<int64_t>());
      if (e["name"] == "thread_name" && !e["args"]["name"].get<std::string>().empty())
        named_threads.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
      continue;
    }
    EXPECT_EQ(e["ph"], "X") << e.dump();
    EXPECT_TRUE(e.contains("name") && e["name"].is_string() &&
                !e["name"].get<std::string>().empty())
        << e.dump();
    EXPECT_TRUE(e.contains("ts") && e["ts"].is_number()) << e.dump();
    EXPECT_TRUE(e.contains("dur") && e["dur"].is_number()) << e.dump();
    const double ts = e["ts"].get<double>(), dur = e["dur"].get<double>();
    EXPECT_GE(ts, 0) << e.dump();
    EXPECT_GE(dur, 0) << e.dump();
    const auto start = static_cast<int64_t>(std::llround(ts * 1000));
    // In the file as a reader nests them: per track by start, a parent before its children.
    const std::pair<int64_t, int64_t> track{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()};
    if (!tracks[track].empty()) {
      const Slice& before = tracks[track].back();
      EXPECT_TRUE(before.start < start ||
                  (before.start == start && before.end >= start + std::llround(dur * 1000)))
          << e.dump() << " comes after " << before.name;
    }
    tracks[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back(
        {e["name"].get<std::string>(), e.value("cat", std::string()), start,
         start + std::llround(dur * 1000), e.value("args", json::object())});
  }
  for (auto& [track, slices] : tracks) {
    EXPECT_TRUE(named_processes.count(track.first)) << "pid " << track.first << " has no name";
    EXPECT_TRUE(named_threads.count(track)) << "tid " << track.second << " has no name";
    // Nested per track: sorted by start (the longer first), each slice ends by the end of the
    // innermost open slice it starts in.
    std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<const Slice*> open;
    for (const Slice& s : slices) {
      while (!open.empty() && open.back()->end <= s.start) open.pop_back();
      if (!open.empty()) {
        EXPECT_LE(s.end, open.back()->end)
            << s.name << " [" << s.start << ", " << s.end << ") overlaps " << open.back()->name
            << " [" << open.back()->start << ", " << open.back()->end << ") partly";
      }
      open.push_back(&s);
    }
  }
  return tracks;
}

TEST(Trace, ExplainWritesAChromeTraceWhoseStepsAddUpToTheStepItReports) {
  const std::string dir = temp_folder("explain-trace");
  testing_util::ScopedEnv profiles("CROSSOVER_PROFILE_DIR", dir.c_str());
  const std::string trace = dir + "/step.json", doc = dir + "/explain.json";
  const auto r = run_crossover(
      "explain --model dense:32:relu,dropout:0.2,dense:10:softmax --data mnist-10k --steps 6 "
      "--batch-size 64 --threads 1 --no-calibrate --quiet --trace '" +
      trace + "' --json '" + doc + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json t = read_json(trace);
  const json j = read_json(doc);
  const auto tracks = check_trace(t);
  ASSERT_EQ(tracks.size(), 1u);  // the CPU: the host thread's track alone
  const std::vector<Slice>& host = tracks.begin()->second;

  int64_t steps = 0, step_ns = 0, calls_ns = 0;
  std::set<std::string> stages;
  bool dense_forward = false;
  for (const Slice& s : host) {
    if (s.cat == "step") {
      ++steps;
      step_ns += s.end - s.start;
    } else if (s.cat == "stage") {
      stages.insert(s.name);
    } else {
      ASSERT_EQ(s.cat, "call") << s.name;
      calls_ns += s.end - s.start;
      ASSERT_TRUE(s.args.contains("call")) << s.args.dump();
      // The step's calls line up with the cost model's ops: each has its op, shape and costs.
      ASSERT_TRUE(s.args.contains("op")) << s.args.dump();
      EXPECT_EQ(s.name, s.args["op"]);
      for (const char* key : {"m", "n", "k", "flops", "bytes_read", "bytes_written"})
        EXPECT_TRUE(s.args.contains(key) && s.args[key].get<int64_t>() >= 0) << key;
      EXPECT_GT(s.args["bytes_read"].get<int64_t>() + s.args["bytes_written"].get<int64_t>(), 0)
          << s.args.dump();
      EXPECT_TRUE(s.args["predicted_us"].is_number()) << s.args.dump();
      if (s.args["call"] == "dense_forward") {
        dense_forward = true;
        EXPECT_EQ(s.args["flops"].get<int64_t>(), 2 * s.args["m"].get<int64_t>() *
                                                      s.args["n"].get<int64_t>() *
                                                      s.args["k"].get<int64_t>());
        EXPECT_EQ(s.args["m"], 64);
      }
    }
  }
  EXPECT_TRUE(dense_forward);
  EXPECT_EQ(stages, (std::set<std::string>{"forward", "loss", "backward", "optimizer"}));
  ASSERT_GE(steps, 6);
  EXPECT_EQ(t["otherData"]["steps"], steps);
  // The calls are inside the steps; what the steps hold beyond them is the host's own work.
  EXPECT_LE(calls_ns, step_ns);
  EXPECT_GT(calls_ns, 0);
  // The steps add up to the step explain reports for the run the trace is of (its timed run),
  // within 5% (they are the same clock readings, rounded to 125 ns).
  const double timed = j["step_seconds"]["timed"].get<double>();
  ASSERT_GT(timed, 0);
  const double mean_step = static_cast<double>(step_ns) / static_cast<double>(steps) * 1e-9;
  EXPECT_NEAR(mean_step, timed, 0.05 * timed);
  EXPECT_DOUBLE_EQ(t["otherData"]["timed_step_seconds"].get<double>(), timed);
  EXPECT_DOUBLE_EQ(t["otherData"]["measured_step_seconds"].get<double>(),
                   j["step_seconds"]["measured"].get<double>());
}

TEST(Trace, ABadTracePathIsOneClearErrorBeforeAnythingIsMeasured) {
  for (const std::string& path : {std::string("/no/such/folder/t.json"), temp_folder("t-dir")}) {
    SCOPED_TRACE(path);
    const auto r = run_crossover("explain --data mnist-10k --threads 1 --trace '" + path + "'");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("--trace " + path), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("measured"), std::string::npos) << r.out;
  }
}

// The writer on a made-up GPU step over ranks (what this machine cannot run): the device's track,
// the barrier and the allreduce in their stage, the stages tiling each step.
TEST(Trace, AnInstrumentedStepOverRanksHasADeviceTrackAndItsStagesInOrder) {
  perf::ExplainResult r;
  EXPECT_NE(testing_util::error_of([&] { (void)perf::chrome_trace(r, {}); }).find("no steps"),
            std::string::npos);
  const int64_t t0 = 5'000'000'000;  // steady-clock nanoseconds
  using perf::Call;
  const std::vector<Call> step = {Call::gather_rows,
                                  Call::dense_forward,
                                  Call::loss_forward_backward,
                                  Call::dense_backward_weights,
                                  Call::allreduce,
                                  Call::optimizer_step};
  for (int s = 0; s < 2; ++s) {
    const int64_t base = t0 + s * 100'000;
    r.raw.traced_steps.push_back({base, base + 90'000});
    int64_t at = base + 1'000, position = 0;
    for (Call c : step) {
      if (c == Call::allreduce)
        r.raw.traced_calls.push_back(
            {.call = c, .barrier = true, .step = s, .start = at, .end = at + 2'000});
      at += 3'000;
      r.raw.traced_calls.push_back({.call = c,
                                    .position = position++,
                                    .step = s,
                                    .start = at,
                                    .end = at + 1'000,
                                    .device_start = at + 1'000,
                                    .device_end = at + 7'000});
      at += 10'000;
    }
  }
  r.raw.by_position.assign(step.size(), 0.0);  // no op list: the calls are named by call
  const json t = perf::chrome_trace(r, {.title = "t", .device = "cuda:0", .device_name = "G"});
  const auto tracks = check_trace(t);
  ASSERT_EQ(tracks.size(), 2u);
  const std::vector<Slice>& host = tracks.at({1, 1});
  const std::vector<Slice>& device = tracks.at({1, 2});
  std::vector<std::string> stages;
  int64_t step_ns = 0, stage_ns = 0;
  for (const Slice& s : host) {
    if (s.cat == "step") step_ns += s.end - s.start;
    if (s.cat != "stage") continue;
    stage_ns += s.end - s.start;
    if (s.args["step"] == 0) stages.push_back(s.name);
  }
  EXPECT_EQ(stages,
            (std::vector<std::string>{"forward", "loss", "backward", "allreduce", "optimizer"}));
  EXPECT_EQ(step_ns, 2 * 90'000);
  EXPECT_EQ(stage_ns, step_ns);  // the stages tile each step
  ASSERT_EQ(device.size(), 2 * step.size());
  EXPECT_EQ(device[1].name, "dense_forward");
  EXPECT_EQ(device[1].end - device[1].start, 6'000);
  EXPECT_EQ(host.size(), 2 * (1 + 5 + step.size() + 1));  // step, stages, calls, barrier
}

}  // namespace
}  // namespace crossover
