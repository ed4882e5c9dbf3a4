#include "perf/measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/error.h"
#include "data/dataset.h"
#include "nn/optimizers.h"

namespace crossover::perf {

namespace {
using Clock = std::chrono::steady_clock;

// With ranks, rank 0's clock decides for every rank.
class StopAfter final : public Callback {
 public:
  StopAfter(Clock::time_point start, double limit, Collective* ranks)
      : start_(start), limit_(limit), ranks_(ranks) {}
  void on_epoch_end(Sequential& model, int, const Logs&) override {
    int stop = std::chrono::duration<double>(Clock::now() - start_).count() > limit_;
    if (ranks_) ranks_->broadcast(&stop, sizeof stop, 0);
    if (stop) {
      stopped = true;
      model.stop_training();
    }
  }
  bool stopped = false;

 private:
  Clock::time_point start_;
  double limit_;
  Collective* ranks_;
};
}  // namespace

TrainingData load_training_data(const std::string& spec,
                                const std::function<void(const std::string&)>& say) {
  data::DataSplits d = data::load_data(spec, say);
  TrainingData t;
  t.x_train = data::to_float_images(d.train);
  t.y_train = data::to_float_labels(d.train);
  t.x_test = data::to_float_images(d.test);
  t.y_test = data::to_float_labels(d.test);
  t.sample_shape = d.train.item_shape;
  t.classes = d.num_classes;
  t.name = d.name;
  t.path = d.path;
  return t;
}

bool is_gpu_device(const std::string& device) {
  return device == "cuda" || device.rfind("cuda:", 0) == 0;
}

void compile_for(Sequential& model, const RunConfig& c) {
  CompileOptions o;
  o.device = c.device;
  o.threads = c.threads;
  o.seed = c.seed;
  o.precision = precision_name(c.precision);
  o.graphs = c.mode == Mode::resident && !c.no_graph;
  const bool naive = c.mode == Mode::naive;
  const bool gpu = is_gpu_device(c.device);
  TimingBackend** timing = c.timing;
  o.collective = c.collective && timing ? std::make_shared<TimingCollective>(c.collective, timing)
                                        : c.collective;
  if (naive || timing) {
    o.wrap_backend = [naive, gpu, timing](std::unique_ptr<Backend> b) -> std::unique_ptr<Backend> {
      if (timing) {
        auto t = std::make_unique<TimingBackend>(std::move(b), gpu);
        *timing = t.get();
        b = std::move(t);
      }
      if (naive) b = std::make_unique<NaiveBackend>(std::move(b));
      return b;
    };
  }
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, o);
}

StepTiming time_steps(Sequential& model, const Tensor& x, const Tensor& y, int64_t batch,
                      int64_t steps, double max_seconds, TimingBackend* timing, Collective* ranks) {
  if (ranks && ranks->size() < 2) ranks = nullptr;
  const auto start = Clock::now();
  const int64_t n = x.dim(0);
  if (n < 1) throw Error("measure", "no samples to train on");
  StepTiming r;
  r.batch = std::min(batch, n);
  steps = std::max<int64_t>(steps, 1);

  // Warm-up: the plan for this batch size, the GEMM kernels, first touch of every buffer.
  if (timing) timing->set_enabled(false);
  const int64_t warm_rows = std::min(n / r.batch, int64_t{2}) * r.batch;
  const Tensor wx = x.rows(0, warm_rows), wy = y.rows(0, warm_rows);
  History warm = model.fit(
      wx, wy, {.epochs = 1, .batch_size = r.batch, .verbose = 0, .stop_on_interrupt = false});
  double est = warm.epochs.empty() || warm.epochs[0].steps == 0
                   ? 1e-3
                   : warm.epochs[0].seconds / static_cast<double>(warm.epochs[0].steps);
  if (ranks) ranks->broadcast(&est, sizeof est, 0);

  // Short epochs of k steps (about eight per measurement, fewer steps where the time cap needs
  // it): the step time is the median over epochs of each epoch's mean step, so that a moment's
  // interference from another process on a shared machine does not count.
  int64_t k = std::min<int64_t>(std::max<int64_t>(steps / 8, 1), n / r.batch);
  if (max_seconds > 0)
    k = std::min<int64_t>(k, std::max<int64_t>(1, static_cast<int64_t>(max_seconds / (10 * est))));
  k = std::max<int64_t>(k, 1);
  const int64_t rows = k * r.batch;
  const Tensor mx = x.rows(0, rows), my = y.rows(0, rows);
  const int epochs = static_cast<int>((steps + k - 1) / k);
  auto stop =
      std::make_shared<StopAfter>(Clock::now(), max_seconds > 0 ? max_seconds : 1e300, ranks);
  if (timing) {
    timing->reset();
    timing->set_enabled(true);
  }
  History h = model.fit(mx, my,
                        {.epochs = epochs,
                         .batch_size = r.batch,
                         .verbose = 0,
                         .callbacks = {stop},
                         .stop_on_interrupt = false});
  if (timing) timing->set_enabled(false);
  double seconds = 0;
  std::vector<double> per_epoch;
  for (const EpochRecord& e : h.epochs) {
    seconds += e.seconds;
    r.steps += e.steps;
    if (e.steps > 0) per_epoch.push_back(e.seconds / static_cast<double>(e.steps));
  }
  r.mean_seconds_per_step = r.steps ? seconds / static_cast<double>(r.steps) : 0;
  if (!per_epoch.empty()) {
    std::sort(per_epoch.begin(), per_epoch.end());
    const std::size_t m = per_epoch.size();
    r.seconds_per_step = m % 2 ? per_epoch[m / 2] : 0.5 * (per_epoch[m / 2 - 1] + per_epoch[m / 2]);
  }
  r.capped = stop->stopped;
  r.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

double max_relative_weight_difference(const std::vector<NamedTensor>& a,
                                      const std::vector<NamedTensor>& b) {
  if (a.size() != b.size()) throw Error("parity", "the two models have different weights");
  double worst = 0;
  for (std::size_t t = 0; t < a.size(); ++t) {
    if (a[t].value.shape() != b[t].value.shape())
      throw Error("parity", "weight '" + a[t].name + "' differs in shape");
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < a[t].value.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(a[t].value[i])));
      diff = std::max(diff, static_cast<double>(std::fabs(a[t].value[i] - b[t].value[i])));
    }
    if (diff > 0) worst = std::max(worst, scale > 0 ? diff / scale : INFINITY);
  }
  return worst;
}

}  // namespace crossover::perf
