// The fit loop (nn/model/fit_loop.h), and evaluate's loop over the evaluation rows.
#include "nn/model/fit_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "nn/device_memory.h"
#include "nn/interrupt.h"
#include "nn/metrics.h"
#include "nn/model/impl.h"
#include "nn/progress.h"

namespace crossover {

namespace {

// Fisher-Yates with Philox draws: the same permutation on every device and thread count.
void shuffled_indices(uint64_t seed, uint64_t epoch, std::vector<int32_t>& idx) {
  std::iota(idx.begin(), idx.end(), 0);
  for (int64_t i = static_cast<int64_t>(idx.size()) - 1; i > 0; --i) {
    const float u = philox_uniform(seed, RngStream::shuffle, 0, epoch, static_cast<uint64_t>(i));
    int64_t j = static_cast<int64_t>(u * static_cast<float>(i + 1));
    if (j > i) j = i;
    std::swap(idx[static_cast<std::size_t>(i)], idx[static_cast<std::size_t>(j)]);
  }
}

}  // namespace

EvaluateResult Sequential::Impl::run_evaluation(const DeviceData* d, int64_t batch, bool use_graphs,
                                                BatchHooks& hooks) {
  hooks.begin_loop();
  std::vector<StepCounters> c(static_cast<std::size_t>(losses.tallies()));
  const auto t0 = Clock::now();
  if (d && d->n > 0) {
    batch = std::min(batch, d->n);
    Plan& plan = plan_for(batch);
    with_weights(plan, *d);
    write_tally(eval_counters(), c);
    const int64_t full = d->n / batch, rest = d->n % batch;
    if (full > 0) {
      auto g = backend->capture([&] { eval_step(plan, *d, batch); }, use_graphs);
      for (int64_t s = 0; s < full; ++s)
        hooks.run(
            s, [&] { g->replay(); }, [&] { return logs_of(eval_counters()); });
    }
    if (rest > 0)
      hooks.run(
          full, [&] { eval_step(plan, *d, rest); }, [&] { return logs_of(eval_counters()); });
    c = read_tally(eval_counters());
  }
  sum_over_ranks(c[0]);
  EvaluateResult r = losses.result_of(c);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  Logs logs;
  for (const auto& [key, value] : losses.values_of(c, "")) logs[key] = value;
  hooks.end_loop(logs);
  return r;
}

FitLoop::BatchLayout FitLoop::layout_of(int64_t batch, int64_t n_train, int rank, int ranks) {
  BatchLayout b;
  b.batch = batch;
  b.full = n_train / batch;
  b.rest = n_train % batch;
  b.steps = b.full + (b.rest ? 1 : 0);
  b.full_rows = rank_rows(batch, rank, ranks);
  b.rest_rows = rank_rows(b.rest, rank, ranks);
  b.full_shard = {b.full_rows.count(), b.full_rows.begin, batch};
  b.rest_shard = {b.rest_rows.count(), b.rest_rows.begin, b.rest};
  b.local_batch = (batch + ranks - 1) / ranks;
  return b;
}

FitLoop::FitLoop(Sequential& model, Sequential::Impl& m, const Tensor& x, const Tensor& y,
                 FitOptions o)
    : model_(model), m_(m), o_(std::move(o)) {
  Sequential::Impl::check_fit_options(o_);
  m.build_for(x, "fit");
  m.check_xy(x, y, "fit");
  class_weights_ = m.fit_weights(x, y, o_);
  data_ = m.fit_data(x, y, o_, class_weights_.size() > 0 ? &class_weights_ : o_.sample_weight);
  seed_ = o_.seed.value_or(m.copts.seed);
  layout_ = layout_of(data_.batch, data_.n_train, m.rank(), m.ranks());
  plan_ = &m.plan_for(layout_.local_batch);
  m.with_weights(*plan_, data_.train);
  order_.assign(static_cast<std::size_t>(data_.n_train), 0);
  if (m.ranks() > 1) {
    local_order_.assign(static_cast<std::size_t>(layout_.steps * layout_.local_batch), 0);
    data_.train.indices = DeviceBlock(
        *m.backend,
        static_cast<std::size_t>(std::max<int64_t>(local_order_.size(), 16)) * sizeof(int32_t));
  }
  m.share_parameters();
}

void FitLoop::capture() {
  Sequential::Impl& m = m_;
  Sequential::Impl::Plan& plan = *plan_;
  const Sequential::Impl::DeviceData& train = data_.train;
  const Shard full_shard = layout_.full_shard, rest_shard = layout_.rest_shard;
  const uint64_t seed = seed_;
  full_ = layout_.full > 0
              ? m.backend->capture([&m, &plan, &train, full_shard,
                                    seed] { m.train_step(plan, train, full_shard, seed); },
                                   m.copts.graphs && !m.fused_mlp)
              : nullptr;
  rest_ = layout_.rest > 0
              ? m.backend->capture([&m, &plan, &train, rest_shard,
                                    seed] { m.train_step(plan, train, rest_shard, seed); },
                                   m.copts.graphs && !m.fused_mlp)
              : nullptr;
  m.graphs_dirty = false;
}

void FitLoop::start_epoch(int64_t first) {
  Sequential::Impl& m = m_;
  const BatchLayout& b = layout_;
  std::vector<StepCounters> t = m.read_tally(m.train_counters());
  t[0].batch_index = first;
  for (StepCounters& c : t) {
    c.loss_sum = c.correct_sum = c.sample_count = 0;
    std::fill_n(c.metric_sums, kMaxMetrics, 0.0);
  }
  m.write_tally(m.train_counters(), t);
  if (m.ranks() > 1) {
    for (int64_t s = 0; s < b.steps; ++s) {
      const RowRange rows = s < b.full ? b.full_rows : b.rest_rows;
      for (int64_t i = 0; i < rows.count(); ++i)
        local_order_[static_cast<std::size_t>(s * b.local_batch + i)] =
            order_[static_cast<std::size_t>(s * b.batch + rows.begin + i)];
    }
    m.backend->upload(data_.train.indices.as<void>(), local_order_.data(),
                      local_order_.size() * sizeof(int32_t));
  } else {
    m.backend->upload(data_.train.indices.as<void>(), order_.data(),
                      order_.size() * sizeof(int32_t));
  }
  m.backend->synchronize();
}

int64_t FitLoop::run_steps(const EpochSteps::Epoch& part, BatchHooks& hooks, ProgressBar& bar,
                           bool interactive, bool stop_on_interrupt) {
  Sequential::Impl& m = m_;
  int64_t done = 0;
  for (; done < part.steps; ++done) {
    hooks.run(
        done, [&] { (part.first + done < layout_.full ? full_ : rest_)->replay(); },
        [&] { return m.logs_of(m.train_counters()); });
    if ((stop_on_interrupt && InterruptGuard::requested()) || m.stop_requested) return done + 1;
    if (interactive) {
      const auto now = Clock::now();
      if (bar.due(now)) {
        std::vector<StepCounters> snap(static_cast<std::size_t>(m.losses.tallies()));
        m.backend->download_async(snap.data(), m.train_counters(),
                                  snap.size() * sizeof(StepCounters));
        bar.update(done + 1, m.losses.values_of(snap, ""), now);
      }
    }
  }
  return done;
}

EpochRecord FitLoop::finish_epoch(int epoch, int64_t done, double seconds, BatchHooks& test_hooks,
                                  std::vector<std::pair<std::string, double>>& values) {
  Sequential::Impl& m = m_;
  std::vector<StepCounters> end = m.read_tally(m.train_counters());
  m.sum_over_ranks(end[0]);
  const EvaluateResult r = m.losses.result_of(end);
  EpochRecord rec;
  rec.epoch = epoch + 1;
  rec.steps = done;
  rec.seconds = seconds;
  rec.loss = r.loss;
  rec.accuracy = r.accuracy;
  rec.metrics = r.metrics;
  rec.learning_rate = end[0].learning_rate;
  values = m.losses.values_of(end, "");
  if (data_.validate && (epoch + 1) % o_.validation_freq == 0) {
    EvaluateResult v = m.run_evaluation(data_.val ? &*data_.val : nullptr, data_.batch,
                                        m.copts.graphs, test_hooks);
    rec.val_loss = v.loss;
    rec.val_accuracy = v.accuracy;
    rec.val_seconds = v.seconds;
    rec.val_metrics = v.metrics;
    for (auto& value : m.losses.named_values(v.loss, v.accuracy, v.metrics, "val_"))
      values.push_back(std::move(value));
  }
  return rec;
}

History FitLoop::run() {
  Sequential::Impl& m = m_;
  const FitOptions& o = o_;
  EpochSteps epoch_steps(layout_.steps, o.steps_per_epoch);
  const int ranks = m.ranks();
  History h;
  m.stop_requested = false;
  struct Fitting {
    bool& flag;
    explicit Fitting(bool& f) : flag(f) { flag = true; }
    ~Fitting() { flag = false; }
  } fitting(m.fitting);
  // With ranks, Ctrl-C is the launcher's (mpirun ends every rank): a rank that stopped alone would
  // leave the others waiting in the next allreduce.
  std::optional<InterruptGuard> guard;
  if (ranks == 1) guard.emplace(o.second_interrupt_ends_process, !o.stop_on_interrupt);
  const bool stop_on_interrupt = o.stop_on_interrupt && ranks == 1;
  const bool show = o.verbose > 0;
  const TextSink out = o.output ? o.output : stdout_sink();
  const bool interactive =
      show && o.verbose == 1 && o.redraw.value_or(!o.output && is_terminal(stdout));
  for (auto& cb : o.callbacks) cb->on_train_begin(model_);
  BatchHooks train_hooks(model_, o.callbacks, BatchPhase::train);
  BatchHooks test_hooks(model_, o.callbacks, BatchPhase::test);
  m.plan_fused_step(*plan_, data_.train, seed_);
  if (show && !m.fused_note.empty()) out(m.fused_note + "\n");
  capture();

  for (int epoch = o.initial_epoch; epoch < o.epochs; ++epoch) {
    for (auto& cb : o.callbacks) cb->on_epoch_begin(model_, epoch);
    if (m.graphs_dirty) capture();
    const EpochSteps::Epoch part = epoch_steps.next();
    if (part.new_pass && o.shuffle) shuffled_indices(seed_, static_cast<uint64_t>(epoch), order_);
    if (part.new_pass && !o.shuffle) std::iota(order_.begin(), order_.end(), 0);
    start_epoch(part.first);

    if (show) out(fmt::format("Epoch {}/{}\n", epoch + 1, o.epochs));
    ProgressBar bar(out, epoch_steps.target(), interactive, o.metric_name);
    const auto t0 = Clock::now();
    const int64_t done = run_steps(part, train_hooks, bar, interactive, stop_on_interrupt);
    m.backend->synchronize();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<std::pair<std::string, double>> values;
    const EpochRecord rec = finish_epoch(epoch, done, seconds, test_hooks, values);
    if (show) bar.finish(done, seconds, values);

    Logs logs;
    for (const auto& [k, v] : values) logs[k] = v;
    logs["lr"] = rec.learning_rate;
    h.epochs.push_back(rec);
    for (const auto& [k, v] : logs) h.history[k].push_back(v);
    if (stop_on_interrupt && InterruptGuard::requested()) {
      h.interrupted = true;
      if (show)
        out(fmt::format(
            "Interrupted: training stopped after step {} of epoch {}; the model keeps its "
            "weights.\n",
            done, epoch + 1));
      break;
    }
    for (auto& cb : o.callbacks) cb->on_epoch_end(model_, epoch, logs);
    if (m.stop_requested) {
      h.stopped_early = true;
      break;
    }
  }
  for (auto& cb : o.callbacks) cb->on_train_end(model_);
  return h;
}

History Sequential::fit(std::span<const float> x, Shape x_shape, std::span<const float> y,
                        Shape y_shape, FitOptions options) {
  return fit(Tensor::view(std::move(x_shape), x), Tensor::view(std::move(y_shape), y),
             std::move(options));
}

History Sequential::fit(const Tensor& x, const Tensor& y, FitOptions o) {
  Impl& m = *impl_;
  m.require_compiled("fit");
  if (m.fitting) throw Error("fit", "called during fit (from a callback)");
  return FitLoop(*this, m, x, y, std::move(o)).run();
}

EvaluateResult Sequential::evaluate(const Tensor& x, const Tensor& y, EvaluateOptions o) {
  Impl& m = *impl_;
  m.require_compiled("evaluate");
  if (o.batch_size < 1) throw Error("evaluate", "batch_size must be at least 1");
  m.build_for(x, "evaluate");
  m.check_xy(x, y, "evaluate");
  if (x.dim(0) == 0) throw Error("evaluate", "x holds no samples");
  // With ranks, each evaluates its share of the rows and the sums are added.
  if (o.sample_weight) Impl::check_weights(*o.sample_weight, x.dim(0), "evaluate", "sample_weight");
  const std::optional<Impl::DeviceData> d = m.split_data(x, y, 0, x.dim(0), o.sample_weight);
  const int64_t batch = std::min<int64_t>(o.batch_size, x.dim(0));
  BatchHooks hooks(*this, o.callbacks, BatchPhase::test);
  EvaluateResult r = m.run_evaluation(d ? &*d : nullptr, batch, m.copts.graphs, hooks);
  if (o.verbose > 0) {
    const int64_t steps = (x.dim(0) + batch - 1) / batch;
    ProgressBar bar(o.output ? o.output : stdout_sink(), steps, false, o.metric_name);
    bar.finish(steps, r.seconds, m.losses.named_values(r.loss, r.accuracy, r.metrics, ""));
  }
  return r;
}

void Sequential::Impl::sum_over_ranks(StepCounters& c) const {
  if (ranks() < 2) return;
  double sums[3 + kMaxMetrics] = {c.loss_sum, c.correct_sum, c.sample_count};
  std::copy_n(c.metric_sums, losses.extra_metrics, sums + 3);
  exchange->sum(sums, 3 + losses.extra_metrics);
  c.loss_sum = sums[0], c.correct_sum = sums[1], c.sample_count = sums[2];
  std::copy_n(sums + 3, losses.extra_metrics, c.metric_sums);
}

}  // namespace crossover
