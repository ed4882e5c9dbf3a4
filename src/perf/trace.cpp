#include "perf/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "perf/profile.h"

namespace crossover::perf {

namespace {

constexpr int kPid = 1;
constexpr int kHostTid = 1;
constexpr int kDeviceTid = 2;

// A step's stages, in the order a step makes its calls.
enum class Stage { forward, loss, backward, allreduce, optimizer };

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::forward:
      return "forward";
    case Stage::loss:
      return "loss";
    case Stage::backward:
      return "backward";
    case Stage::allreduce:
      return "allreduce";
    case Stage::optimizer:
      return "optimizer";
  }
  return "?";
}

// The stage of a call, given the stage of the call before it: forward (the batch's gather and
// the layers) until the loss, backward after it, the ranks' allreduce (and its barrier), then the
// optimizer and whatever follows it in the step (the batch counter, a naive loop's read-back).
Stage next_stage(Stage before, const TracedCall& c) {
  if (c.barrier || c.call == Call::allreduce) return Stage::allreduce;
  if (c.call == Call::loss_forward_backward) return Stage::loss;
  if (c.call == Call::optimizer_step) return Stage::optimizer;
  switch (before) {
    case Stage::forward:
      return Stage::forward;
    case Stage::loss:
    case Stage::backward:
      return Stage::backward;
    case Stage::allreduce:
    case Stage::optimizer:
      return Stage::optimizer;
  }
  return before;
}

// Nanoseconds from the origin, rounded down to 125 ns (exact in binary as microseconds), so
// that rounding keeps every order: a child stays inside its parent, siblings do not overlap.
int64_t quantum(int64_t t, int64_t origin) { return std::max<int64_t>(0, t - origin) / 125 * 125; }
double micros(int64_t quantised_ns) { return static_cast<double>(quantised_ns) / 1000.0; }

nlohmann::json complete(const std::string& name, const char* category, int tid, int64_t start,
                        int64_t end, nlohmann::json args) {
  return {{"name", name},
          {"cat", category},
          {"ph", "X"},
          {"ts", micros(start)},
          {"dur", micros(end - start)},
          {"pid", kPid},
          {"tid", tid},
          {"args", std::move(args)}};
}

nlohmann::json metadata(const char* what, int tid, nlohmann::json args) {
  return {{"name", what}, {"ph", "M"}, {"pid", kPid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

nlohmann::json chrome_trace(const ExplainResult& r, const TraceLabels& labels) {
  const std::vector<TracedStep>& steps = r.raw.traced_steps;
  const std::vector<TracedCall>& calls = r.raw.traced_calls;
  if (steps.empty())
    throw Error("--trace", "the timed run kept no steps to trace (explain ran without tracing)");
  const int64_t origin = steps.front().start;
  const auto q = [origin](int64_t t) { return quantum(t, origin); };

  // The n-th call of a step is the n-th op of the list less its host op, when the counts agree
  // (as explain's per-op times).
  std::vector<const Op*> op_at;
  for (const Op& o : r.ops)
    if (o.phase != Phase::host_overhead) op_at.push_back(&o);
  if (op_at.size() != r.raw.by_position.size()) op_at.clear();
  std::vector<double> predicted_at;
  if (r.has_prediction && !op_at.empty())
    for (std::size_t i = 0; i < r.ops.size(); ++i)
      if (r.ops[i].phase != Phase::host_overhead)
        predicted_at.push_back(r.prediction.op_seconds[i]);

  const bool device_track = std::any_of(calls.begin(), calls.end(), [](const TracedCall& c) {
    return c.device_end > c.device_start;
  });
  nlohmann::json events = nlohmann::json::array();
  events.push_back(metadata("process_name", 0, {{"name", labels.title}}));
  events.push_back(metadata(
      "thread_name", kHostTid,
      {{"name", labels.device == "cpu" ? "host thread (each backend call, as the CPU ran it)"
                                       : "host thread (each backend call's launch or copy)"}}));
  events.push_back(metadata("thread_sort_index", kHostTid, {{"sort_index", 0}}));
  if (device_track) {
    events.push_back(
        metadata("thread_name", kDeviceTid,
                 {{"name", fmt::format("{} {} stream (each call's device time, instrumented)",
                                       labels.device, labels.device_name)}}));
    events.push_back(metadata("thread_sort_index", kDeviceTid, {{"sort_index", 1}}));
  }

  std::vector<nlohmann::json> slices;
  std::size_t next = 0;  // the first call of the step at hand
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const int64_t step_start = q(steps[s].start), step_end = q(steps[s].end);
    std::size_t last = next;
    while (last < calls.size() && calls[last].step == static_cast<int64_t>(s)) ++last;
    slices.push_back(complete(fmt::format("step {}", s), "step", kHostTid, step_start, step_end,
                              {{"step", s}, {"calls", last - next}}));
    // The stages tile the step: each from its first call (the first from the step's start) to
    // the next one's start (the last to the step's end).
    Stage stage = Stage::forward;
    int64_t stage_start = step_start;
    for (std::size_t i = next; i < last; ++i) {
      const Stage now = next_stage(stage, calls[i]);
      if (now == stage) continue;
      // A stage that took no time (its calls under 125 ns) is left out; its calls, of no
      // duration, lie at the next one's start.
      const int64_t at = std::min(q(calls[i].start), step_end);
      if (at > stage_start)
        slices.push_back(
            complete(stage_name(stage), "stage", kHostTid, stage_start, at, {{"step", s}}));
      stage = now;
      stage_start = std::max(stage_start, at);
    }
    slices.push_back(
        complete(stage_name(stage), "stage", kHostTid, stage_start, step_end, {{"step", s}}));

    for (std::size_t i = next; i < last; ++i) {
      const TracedCall& c = calls[i];
      const bool lined_up =
          !c.barrier && c.position >= 0 && static_cast<std::size_t>(c.position) < op_at.size();
      const Op* op = lined_up ? op_at[static_cast<std::size_t>(c.position)] : nullptr;
      std::string name = c.barrier ? "barrier (waiting for the slowest rank)"
                         : op      ? op->name
                                   : call_name(c.call);
      nlohmann::json args{{"call", c.barrier ? "barrier" : call_name(c.call)},
                          {"phase", phase_name(c.barrier ? Phase::sync_wait : call_phase(c.call))},
                          {"step", s},
                          {"position", c.position}};
      if (op) {
        args["op"] = op->name;
        if (!op->kernel.empty()) args["kernel"] = op->kernel;
        if (!op->layer.empty()) args["layer"] = op->layer;
        args["m"] = op->m;
        args["n"] = op->n;
        args["k"] = op->k;
        args["flops"] = op->flops;
        args["bytes_read"] = op->bytes_read;
        args["bytes_written"] = op->bytes_written;
        if (op->transfer_bytes > 0) args["transfer_bytes"] = op->transfer_bytes;
        if (!predicted_at.empty())
          args["predicted_us"] = predicted_at[static_cast<std::size_t>(c.position)] * 1e6;
      }
      slices.push_back(complete(name, "call", kHostTid, std::min(q(c.start), step_end),
                                std::min(q(c.end), step_end), args));
      if (c.device_end > c.device_start)
        slices.push_back(
            complete(name, "device", kDeviceTid, q(c.device_start), q(c.device_end), args));
    }
    next = last;
  }

  // In the order a reader nests them: by track, then start, the longer (the parent) first.
  std::stable_sort(
      slices.begin(), slices.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
        const auto key = [](const nlohmann::json& e) {
          return std::tuple(e["tid"].get<int>(), e["ts"].get<double>(), -e["dur"].get<double>());
        };
        return key(a) < key(b);
      });
  for (nlohmann::json& e : slices) events.push_back(std::move(e));
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"command", "crossover explain"},
            {"title", labels.title},
            {"device", labels.device},
            {"steps", steps.size()},
            {"calls", calls.size()},
            {"timed_step_seconds", r.timed_step_wall},
            {"measured_step_seconds", r.step_measured},
            {"times",
             "the timed run's, as the clock read them: its step is timed_step_seconds; explain's "
             "phase table scales that run's split to measured_step_seconds, the step of an "
             "untimed run"}}}};
}

void write_chrome_trace(const std::string& path, const ExplainResult& r, const TraceLabels& labels,
                        const std::string& where) {
  write_json_atomically(path, chrome_trace(r, labels), -1, where);
}

}  // namespace crossover::perf
