#include "perf/threads.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/machine.h"
#include "nn/layers/kind.h"
#include "perf/explain.h"
#include "perf/measure.h"
#include "perf/profile.h"

namespace crossover::perf {

std::string ThreadsChoice::summary() const {
  std::string s = fmt::format("{} thread{} (", threads, threads == 1 ? "" : "s");
  for (std::size_t i = 0; i < trials.size(); ++i)
    s += fmt::format("{}{}: {}", i ? ", " : "", trials[i].threads,
                     human_seconds(trials[i].seconds_per_step));
  return s + " a step)";
}

nlohmann::json trials_json(const std::vector<ThreadsTrial>& trials) {
  nlohmann::json j = nlohmann::json::array();
  for (const ThreadsTrial& t : trials)
    j.push_back({{"threads", t.threads}, {"seconds_per_step", t.seconds_per_step}});
  return j;
}

namespace {

// One trial: the model compiled for `threads`, its median step over a few short epochs.
ThreadsTrial time_trial(const std::function<Sequential(int)>& make, const Tensor& x,
                        const Tensor& y, int64_t batch, int threads, int64_t steps,
                        double max_seconds) {
  Sequential m = make(threads);
  return {threads, time_steps(m, x, y, batch, steps, max_seconds).seconds_per_step};
}

}  // namespace

std::vector<int> thread_candidates(int max_threads) {
  max_threads = std::max(max_threads, 1);
  std::vector<int> c;
  for (int t = 1; t < max_threads; t *= 2) c.push_back(t);
  c.push_back(max_threads);
  return c;
}

int pick_threads(const std::vector<ThreadsTrial>& trials) {
  int chosen = 1;
  double best = 0;
  for (std::size_t i = 0; i < trials.size(); ++i)
    if (i == 0 || trials[i].seconds_per_step < 0.95 * best) {
      best = trials[i].seconds_per_step;
      chosen = trials[i].threads;
    }
  return chosen;
}

bool past_the_optimum(const std::vector<ThreadsTrial>& trials) {
  if (trials.size() < 2) return false;
  double best = trials.front().seconds_per_step;
  for (const ThreadsTrial& t : trials) best = std::min(best, t.seconds_per_step);
  return trials.back().seconds_per_step > 2.5 * best;
}

ThreadsChoice fastest_cpu_threads(const std::function<Sequential(int)>& make, const Tensor& x,
                                  const Tensor& y, int64_t batch, int max_threads, int64_t steps,
                                  double max_seconds_each) {
  if (x.dim(0) < 1) throw Error("--threads 0", "no samples to time the thread counts on");
  const auto start = std::chrono::steady_clock::now();
  ThreadsChoice c;
  for (int t : thread_candidates(max_threads)) {
    c.trials.push_back(time_trial(make, x, y, batch, t, steps, max_seconds_each));
    if (past_the_optimum(c.trials)) break;
  }
  // A second look at the two fastest when they are close: on a shared machine one short
  // measurement can mislead (on the H200's host, BIG's trials once put 8 threads 22% ahead of
  // 16 and the epoch then ran 24% slower than at 16). Each is timed again, after all the trials,
  // and keeps the faster of its two measurements.
  std::vector<std::size_t> order(c.trials.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return c.trials[a].seconds_per_step < c.trials[b].seconds_per_step;
  });
  if (order.size() >= 2 &&
      c.trials[order[1]].seconds_per_step < 1.5 * c.trials[order[0]].seconds_per_step)
    for (std::size_t i : {order[0], order[1]})
      c.trials[i].seconds_per_step =
          std::min(c.trials[i].seconds_per_step,
                   time_trial(make, x, y, batch, c.trials[i].threads, steps, max_seconds_each)
                       .seconds_per_step);
  c.threads = pick_threads(c.trials);
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return c;
}

ThreadsRecheck recheck_threads(const std::function<Sequential(int)>& make, const Tensor& x,
                               const Tensor& y, int64_t batch, int threads, int64_t steps,
                               double max_seconds_each) {
  ThreadsRecheck r;
  if (threads <= 1) return r;
  r.saved = time_trial(make, x, y, batch, threads, steps, max_seconds_each);
  r.one = time_trial(make, x, y, batch, 1, steps, max_seconds_each);
  r.holds = !(r.saved.seconds_per_step > 1.5 * r.one.seconds_per_step);
  return r;
}

std::string threads_choice_key(const ModelDesc& model, int64_t batch, Precision precision) {
  // FNV-1a over the step's op list (kernels and shapes): the same step, the same key, on any build.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const std::string& s) {
    for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  };
  for (const Op& o : step_ops(model, batch, DeviceKind::cpu, Mode::resident))
    mix(fmt::format("{}:{}:{}:{}:{}|", o.kernel, o.m, o.k, o.n, o.elements));
  mix(model.loss);
  if (precision != Precision::fp32) mix(precision_name(precision));
  return fmt::format("{:016x}-b{}", h, batch);
}

std::string threads_choice_path() {
  Profile me;
  set_this_cpu(me, 0);
  // A folder of its own: the profile folder holds only profiles (find_profiles reads every file).
  return user_profile_dir() + "/threads/" + profile_slug(me) + ".json";
}

namespace {

nlohmann::json read_choices(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (j.is_object() && j.value("format", "") == "crossover-threads" && j.contains("choices") &&
        j["choices"].is_object())
      return j["choices"];
  } catch (const nlohmann::json::exception&) {
  }
  return nlohmann::json::object();  // unreadable: measured again, then rewritten
}

}  // namespace

std::optional<ThreadsChoice> saved_threads_choice(const std::string& key) {
  const nlohmann::json choices = read_choices(threads_choice_path());
  auto it = choices.find(key);
  if (it == choices.end() || !it->is_object()) return std::nullopt;
  try {
    ThreadsChoice c;
    c.threads = it->at("threads").get<int>();
    for (const nlohmann::json& t : it->at("trials"))
      c.trials.push_back({t.at("threads").get<int>(), t.at("seconds_per_step").get<double>()});
    if (c.threads < 1 || c.threads > max_cpu_threads()) return std::nullopt;
    return c;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

void save_threads_choice(const std::string& key, const std::string& what, const ThreadsChoice& c) {
  const std::string path = threads_choice_path();
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  nlohmann::json choices = read_choices(path);
  choices[key] = {{"what", what}, {"threads", c.threads}, {"trials", trials_json(c.trials)}};
  Profile me;
  set_this_cpu(me, 0);
  const nlohmann::json doc{{"format", "crossover-threads"},
                           {"version", 1},
                           {"cpu", describe_cpu(me)},
                           {"choices", choices}};
  try {
    write_json_atomically(path, doc, 2, path);
  } catch (const Error&) {
    // A folder we cannot write: the choice is measured again next time.
  }
}

ThreadsForRun cpu_threads_for_run(int requested, const std::function<Sequential(int)>& make,
                                  const Tensor& x, const Tensor& y, int64_t batch,
                                  const std::function<void(const std::string&)>& say,
                                  const std::string& what, const std::string& key,
                                  const std::string& how_to_pin) {
  if (requested > 0) return {requested, std::nullopt, "user"};
  const int cores = cpu_info().logical_cores;
  auto tell = [&](const std::string& line) {
    if (say) say(line);
  };
  std::optional<ThreadsChoice> saved = key.empty() ? std::nullopt : saved_threads_choice(key);
  bool busy = false;
  if (saved) {
    const ThreadsRecheck r = recheck_threads(make, x, y, batch, saved->threads);
    if (r.holds) {
      tell(
          fmt::format("{} of {} logical cores, measured fastest for {} by an earlier run: {} "
                      "(saved in {}; delete it to measure again)",
                      saved->threads, cores, what, saved->summary(), threads_choice_path()));
      const int chosen = saved->threads;
      return {chosen, std::move(saved), "saved measurement"};
    }
    // Busier than when it was measured: measure again for this run, and keep the saved choice
    // for when the machine is quiet again.
    busy = true;
    tell(
        fmt::format("the saved {} threads for {} now take {} a step against {} on one thread (the "
                    "machine is busier than when they were measured): measuring again for this "
                    "run",
                    saved->threads, what, human_seconds(r.saved.seconds_per_step),
                    human_seconds(r.one.seconds_per_step)));
  }
  ThreadsChoice c = fastest_cpu_threads(make, x, y, batch, cores);
  tell(
      fmt::format("{} of {} logical cores, the fastest for {} here: {}, measured in {:.1f} s "
                  "({} pins a count)",
                  c.threads, cores, what, c.summary(), c.seconds, how_to_pin));
  if (!key.empty() && !busy) save_threads_choice(key, what, c);
  const int chosen = c.threads;
  return {chosen, std::move(c), "measurement"};
}

ThreadsForRun cpu_threads_for_model(const Sequential& model, const Tensor& x, const Tensor& y,
                                    int64_t batch, uint64_t seed,
                                    const std::function<void(const std::string&)>& say,
                                    const std::string& how_to_pin) {
  if (!model.compiled()) throw Error("threads", "the model must be compiled first");
  if (x.rank() < 2)
    throw Error("fit",
                "x must have shape (samples, features...), got " + shape_to_string(x.shape()));
  std::vector<Layer> layers = model.layers();
  const Layer& first = layers.front();
  const bool has_shape = layer_kind(first).declares_input() && !first.input_shape.empty();
  // A functional model's copies are its graph (its InputLayers declare their shapes).
  const bool graph = model.functional();
  const LayerGraph copy = graph ? model.layer_graph() : LayerGraph{};
  if (!has_shape && !graph)
    layers.insert(layers.begin(), Input(Shape(x.shape().begin() + 1, x.shape().end())));
  const OptimizerConfig optimizer = model.optimizer();
  const LossSpec loss{model.loss_name(), model.from_logits(), model.loss_parameter()};
  const std::string name = model.name();
  const std::vector<MetricSpec> metrics = model.metric_specs();
  const std::string precision = model.precision();
  auto make = [=](int threads) {
    Sequential m = graph ? Sequential(copy, name) : Sequential(layers, name);
    m.compile_with(optimizer, loss, metrics,
                   {.device = "cpu", .threads = threads, .seed = seed, .precision = precision});
    return m;
  };
  const int64_t b = std::max<int64_t>(1, std::min(batch, x.dim(0)));
  const std::string what = fmt::format("{} at batch {}", name, b);
  return cpu_threads_for_run(0, make, x, y, b, say, what,
                             threads_choice_key(describe(make(1)), b, parse_precision(precision)),
                             how_to_pin);
}

}  // namespace crossover::perf
