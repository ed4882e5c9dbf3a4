// A step's timeline for the tools people already use: explain's timed steps (ExplainConfig::trace)
// in the Chrome trace event format (a JSON object with "traceEvents"), which Perfetto
// (ui.perfetto.dev, its trace processor) and chrome://tracing open.
//
// One process; one track per thread of work: the host thread that makes the backend calls (on
// the CPU every call runs there, its OpenMP workers inside it), and on an instrumented GPU the
// device's stream. On the host track each timed step is a slice, inside it its stages (forward,
// loss, backward, allreduce, optimizer: they tile the step), inside those the backend calls; the
// gaps between calls are the host's own work. Each call is a complete event ("ph": "X") whose
// args carry the cost model's op (name, shapes, FLOPs, bytes, predicted time) where the step's
// calls line up with the op list (as ExplainResult::op_measured). Times are the timed run's own,
// as the clock read them (not scaled to the untimed run's step as explain's phase table is), in
// microseconds from the first step's start, to the eighth of a microsecond (a multiple of 0.125
// is exact in binary, so a reader's arithmetic keeps every child inside its parent).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "perf/explain.h"

namespace crossover::perf {

struct TraceLabels {
  std::string title;        // the process's name: "crossover explain: mlp on cpu, batch 128"
  std::string device;       // "cpu", "cuda:0"
  std::string device_name;  // for the device track: "NVIDIA H200"
};

// The trace of `r` (from run_explain with trace on). Throws Error when it holds no traced step.
nlohmann::json chrome_trace(const ExplainResult& r, const TraceLabels& labels);

// chrome_trace written to `path` atomically (a temporary file, then a rename); Error naming
// `where` when it cannot be written.
void write_chrome_trace(const std::string& path, const ExplainResult& r, const TraceLabels& labels,
                        const std::string& where);

}  // namespace crossover::perf
