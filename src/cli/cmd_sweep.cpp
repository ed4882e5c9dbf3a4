// crossover sweep: time per epoch across widths and batch sizes on each device and mode, the
// crossover width per batch size, as a table, JSON, CSV and an SVG chart.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "backends/cuda_info.h"
#include "backends/devices.h"
#include "cli/cli.h"
#include "core/error.h"
#include "core/machine.h"
#include "perf/cost_model.h"
#include "perf/explain.h"
#include "perf/measure.h"
#include "perf/plot.h"
#include "perf/profile.h"

namespace crossover::cli {

namespace {

struct SweepOptions : CommonOptions {
  std::string widths = "32,64,128,256,512,1024,2048,4096";
  std::string batch_sizes = "32,256,1024";
  int layers = 1;
  bool layers_given = false;
  // CommonOptions::model here: a layer list with W where the swept width goes, or "" (sweep's
  // default, set in add_sweep) for the MLP of --layers.
  int64_t steps = 200;
  double max_seconds = 3;
  bool predict_only = false;
  ProfileFlags profile;
  std::string csv, plot;
  std::string ranks;  // "1,2,4": the ranks table instead (ranks_table.cpp)
};

std::vector<int64_t> parse_list(const std::string& flag, const std::string& text) {
  std::vector<int64_t> v;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    std::size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || n < 1 || n > (1 << 20))
      throw Error(flag, "'" + item +
                            "' is not a positive whole number (expected a list such as 32,64,128)");
    v.push_back(n);
  }
  if (v.empty()) throw Error(flag, "the list is empty");
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

struct Point {
  int64_t width = 0, batch = 0;
  std::string device, mode;
  bool measured = false;
  double seconds_per_epoch = 0, seconds_per_step = 0;
  int64_t steps_measured = 0;
  int threads = 0;  // the CPU's thread count at this point (0 on a GPU)
  std::optional<double> predicted_seconds_per_epoch, predicted_seconds_per_step;
};

std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

// `spec` (a --model layer list) with each field W, or kW (k a whole number), replaced by width
// (k x width): "conv:W:3:relu,maxpool:2,conv:2W:3:relu" at 16 is "conv:16:3:relu,maxpool:2,
// conv:32:3:relu". `replaced` counts the fields replaced.
std::string spec_at_width(const std::string& spec, int64_t width, int* replaced = nullptr) {
  std::string out;
  int n = 0;
  for (const std::string& item : split_on(spec, ',')) {
    std::string layer;
    for (const std::string& field : split_on(item, ':')) {
      std::string f = field;
      const std::string k = field.empty() ? "" : field.substr(0, field.size() - 1);
      if (!field.empty() && field.back() == 'W' && k.size() < 6 &&
          std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        f = std::to_string((k.empty() ? 1 : std::stoll(k)) * width);
        ++n;
      }
      layer += (layer.empty() ? "" : ":") + f;
    }
    out += (out.empty() ? "" : ",") + layer;
  }
  if (replaced) *replaced = n;
  return out;
}

// The model swept at `width`: --model with W replaced, or --layers hidden Dense(width, relu) +
// Dropout(0.2) layers.
std::string spec_for(int64_t width, const SweepOptions& o) {
  if (!o.model.empty()) return spec_at_width(o.model, width);
  std::string s;
  for (int i = 0; i < o.layers; ++i) s += fmt::format("dense:{}:relu,dropout:0.2,", width);
  return s + "dense:10:softmax";
}

const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
                         "#8c564b", "#e377c2", "#17becf", "#7f7f7f"};

// What is measured, and what is predicted from which profile (the CPU's: per point).
struct Series {
  std::string device, mode;
  bool measured;
  std::optional<perf::Profile> profile;
};

// The flags that do not depend on the data.
void check_sweep_options(const SweepOptions& o) {
  for (const auto& [flag, path] :
       {std::pair{"--json", o.json}, {"--csv", o.csv}, {"--plot", o.plot}})
    if (!path.empty()) check_writable(flag, path);
  if (!o.plot.empty() && (o.plot.size() < 4 || o.plot.substr(o.plot.size() - 4) != ".svg"))
    throw Error("--plot " + o.plot, "the chart is written as SVG: give a file name ending in .svg");
  if (o.layers != 1 && o.layers != 2) throw Error("--layers", "must be 1 or 2 hidden layers");
  if (!o.model.empty()) {
    if (o.layers_given)
      throw Error("--layers", "applies to the default MLP; with --model the layer list says it");
    int replaced = 0;
    spec_at_width(o.model, 1, &replaced);
    if (replaced == 0)
      throw Error("--model " + o.model,
                  "sweep varies one width: give a layer list with W where it goes (Dense units or "
                  "Conv2D filters, 2W for twice it), e.g. conv:W:3:relu,maxpool:2,conv:2W:3:relu,"
                  "maxpool:2,flatten,dropout:0.5,dense:10:softmax (the convnet at W = 32)");
  }
  if (o.steps < 1) throw Error("--steps", "must be at least 1");
  if (!(o.max_seconds > 0)) throw Error("--max-seconds", "must be positive");
}

// One sweep: its plan (series, thread counts, profiles), its points, and what it writes.
class Sweep {
 public:
  explicit Sweep(const SweepOptions& o) : o_(o), out_{o.quiet} {}

  void run() {
    check_sweep_options(o_);
    widths_ = parse_list("--widths", o_.widths);
    batches_ = parse_list("--batch-sizes", o_.batch_sizes);
    // Every point trains (and is predicted) in it; the CPU's series always: refused where it
    // cannot.
    precision_ = cpu_run_precision("sweep", spec_for(widths_.front(), o_), o_.precision);
    d_ = perf::load_training_data(o_.data, [&](const std::string& l) { out_.say(l); });
    n_train_ = d_.x_train.dim(0);
    for (int64_t w : widths_)
      desc_of_[w] =
          perf::describe(model_from_spec(spec_for(w, o_), d_.sample_shape, d_.classes, precision_));
    choose_cpu_threads();
    choose_cpu_profiles();
    plan_series();
    measure_and_predict();
    find_crossover();
    print_table();
    if (!o_.json.empty()) write_json();
    if (!o_.csv.empty()) write_csv();
    if (!o_.plot.empty()) write_plot();
  }

 private:
  // The CPU's thread count at each point: measured where not given, as train does (the fastest
  // count differs by width: one thread for the narrowest MLPs, all cores for wide ones on some
  // machines). --predict-only measures nothing: it predicts all cores.
  void choose_cpu_threads() {
    const int cores = cpu_info().logical_cores;
    for (int64_t b : batches_)
      for (int64_t w : widths_) {
        if (o_.threads > 0 || o_.predict_only) {
          cpu_threads_[{b, w}] = o_.threads > 0 ? o_.threads : cores;
          continue;
        }
        const ThreadsForRun t = cpu_threads_for_run(
            0, cpu_model_maker(spec_for(w, o_), d_.sample_shape, d_.classes, o_.seed, precision_),
            d_.x_train, d_.y_train, b, true, fmt::format("width {} at batch {}", w, b),
            perf::threads_choice_key(desc_of_.at(w), b, precision_));
        cpu_threads_[{b, w}] = t.threads;
        out_.say(fmt::format("  width {:>5} batch {:>5} cpu: {}", w, b, t.choice->summary()));
      }
  }

  // This CPU's profile at each thread count used, calibrated first (the shapes of the points
  // that use it) where none matches this machine.
  void choose_cpu_profiles() {
    std::map<int, std::vector<perf::Workload>> workloads;
    for (int64_t b : batches_)
      for (int64_t w : widths_)
        workloads[cpu_threads_[{b, w}]].push_back(
            {desc_of_.at(w), perf::epoch_step_rows(n_train_, b), precision_});
    for (auto& [threads, w] : workloads) {
      const std::size_t points_here = w.size();
      perf::CpuProfileChoice c = cpu_profile_for_run(
          o_.profile, threads, o_.quiet, std::move(w),
          fmt::format("the sweep's {} point{} at {} thread{}", points_here,
                      points_here == 1 ? "" : "s", threads, threads == 1 ? "" : "s"));
      notes_.push_back(fmt::format("CPU at {} thread{} predicted from {}", threads,
                                   threads == 1 ? "" : "s", c.note));
      cpu_predicted_ = cpu_predicted_ && c.profile.has_value();
      cpu_choices_.emplace(threads, std::move(c));
    }
  }

  // The series: the CPU's, then each GPU's (or each shipped GPU profile's) in both modes.
  void plan_series() {
    if (!o_.predict_only) series_.push_back({"cpu", "resident", true, std::nullopt});
    if (cpu_predicted_) series_.push_back({"cpu", "resident", false, std::nullopt});
    const std::vector<CudaDeviceInfo> all_gpus = cuda_devices();
    // A model no GPU can train yet has no GPU series, measured or predicted (the layer kinds,
    // not the width, decide it).
    gpu_refusal_ = perf::unsupported_on(desc_of_.at(widths_.front()), perf::DeviceKind::gpu);
    if (!gpu_refusal_.empty())
      notes_.push_back("no GPU rows: the GPU cannot train this model (" + gpu_refusal_ + ")");
    const std::vector<CudaDeviceInfo> gpus =
        gpu_refusal_.empty() ? all_gpus : std::vector<CudaDeviceInfo>{};
    for (const CudaDeviceInfo& g : gpus) {
      const std::string id = cuda_device_name(g.ordinal);
      std::string note;
      std::optional<perf::Profile> gp = perf::profile_for_device(id, "", o_.threads, note);
      for (const char* m : {"resident", "naive"}) {
        if (!o_.predict_only) series_.push_back({id, m, true, std::nullopt});
        if (gp) series_.push_back({id, m, false, gp});
      }
      if (!gp) notes_.push_back(note);
    }
    if (all_gpus.empty()) notes_.push_back("no GPU present");
    if (all_gpus.empty() && gpu_refusal_.empty()) {
      const std::vector<perf::Profile> gp = perf::gpu_profiles();
      if (gp.empty())
        notes_.push_back("no GPU calibration profile is shipped yet: no GPU rows, no crossover");
      for (const perf::Profile& p : gp)
        for (const char* m : {"resident", "naive"}) series_.push_back({p.id, m, false, p});
    }
    if (!o_.predict_only)
      notes_.push_back(fmt::format(
          "measured points: up to {} steps each (at most {:g} s), extrapolated to an epoch of "
          "{} samples as ceil({} / batch) steps x the mean step",
          o_.steps, o_.max_seconds, n_train_, n_train_));
    for (const Series& s : series_)
      if (s.device != "cpu" &&
          std::find(gpu_ids_.begin(), gpu_ids_.end(), s.device) == gpu_ids_.end())
        gpu_ids_.push_back(s.device);
  }

  // The profile a predicted series uses at a point.
  const perf::Profile& profile_of(const Series& q, int64_t b, int64_t w) const {
    return q.device == "cpu" ? *cpu_choices_.at(cpu_threads_.at({b, w})).profile : *q.profile;
  }

  void measure_and_predict() {
    const std::string what = o_.model.empty()
                                 ? fmt::format("{} hidden layer{} of widths {}", o_.layers,
                                               o_.layers > 1 ? "s" : "", o_.widths)
                                 : fmt::format("{} for W in {}", o_.model, o_.widths);
    out_.say(fmt::format("sweep: {}, batch sizes {}, precision {}, on {} ({} training samples)",
                         what, o_.batch_sizes, precision_name(precision_), d_.name, n_train_));
    for (int64_t b : batches_)
      for (int64_t w : widths_)
        for (const Series& s : series_) {
          Point p{
              .width = w, .batch = b, .device = s.device, .mode = s.mode, .measured = s.measured};
          if (s.device == "cpu") p.threads = cpu_threads_.at({b, w});
          if (s.measured)
            measure(s, p);
          else
            predict(s, p);
          points_.push_back(p);
        }
  }

  // A measured point, with the prediction for the same point beside it (the check).
  void measure(const Series& s, Point& p) {
    const int64_t w = p.width, b = p.batch;
    const int64_t bb = std::min(b, n_train_);
    const int64_t steps_per_epoch = (n_train_ + bb - 1) / bb;
    const perf::Mode mode = perf::parse_mode(s.mode);
    Sequential m = model_from_spec(spec_for(w, o_), d_.sample_shape, d_.classes, precision_);
    perf::compile_for(m, {.device = s.device,
                          .mode = mode,
                          .threads = cpu_threads_.at({b, w}),
                          .seed = o_.seed,
                          .precision = precision_});
    const perf::StepTiming t =
        perf::time_steps(m, d_.x_train, d_.y_train, b, o_.steps, o_.max_seconds);
    p.seconds_per_step = t.seconds_per_step;
    p.steps_measured = t.steps;
    p.seconds_per_epoch = t.seconds_per_step * static_cast<double>(steps_per_epoch);
    for (const Series& q : series_)
      if (!q.measured && q.device == s.device && q.mode == s.mode) {
        const perf::EpochPrediction e =
            perf::predict_epoch(desc_of_.at(w), n_train_, b, profile_of(q, b, w), mode, 1,
                                priced_precision(profile_of(q, b, w), precision_, notes_));
        p.predicted_seconds_per_epoch = e.seconds;
        p.predicted_seconds_per_step = e.full_step.step_seconds;
      }
    out_.say(fmt::format("  width {:>5} batch {:>5} {:<7} {:<9} {:>9}/step over {:>3} steps{}", w,
                         b, s.device, s.mode, perf::human_seconds(t.seconds_per_step), t.steps,
                         p.predicted_seconds_per_epoch
                             ? fmt::format(", predicted {}/step, predicted/measured {:.2f}",
                                           perf::human_seconds(*p.predicted_seconds_per_step),
                                           *p.predicted_seconds_per_step / p.seconds_per_step)
                             : ""));
  }

  void predict(const Series& s, Point& p) {
    const int64_t w = p.width, b = p.batch;
    const perf::EpochPrediction e = perf::predict_epoch(
        desc_of_.at(w), n_train_, b, profile_of(s, b, w), perf::parse_mode(s.mode), 1,
        priced_precision(profile_of(s, b, w), precision_, notes_));
    p.seconds_per_epoch = e.seconds;
    p.seconds_per_step = e.full_step.step_seconds;
    // Once per device: which of its ops the profile could not price from a measurement.
    if (!e.full_step.estimates.empty() && estimated_devices_.insert(s.device).second)
      notes_.push_back(perf::estimates_sentence(
          e.full_step, fmt::format("{}'s step at width {} batch {}", s.device, w, b),
          s.device == "cpu" ? "calibrating this machine measures them"
                            : "its profile has no measurement of them"));
  }

  // Time per epoch of a device/mode at a point: measured where there is a measurement.
  std::optional<double> epoch_time(int64_t w, int64_t b, const std::string& dev,
                                   const std::string& mode) const {
    std::optional<double> predicted;
    for (const Point& p : points_)
      if (p.width == w && p.batch == b && p.device == dev && p.mode == mode) {
        if (p.measured) return p.seconds_per_epoch;
        predicted = p.seconds_per_epoch;
      }
    return predicted;
  }

  // The crossover: the smallest width at which the GPU's faster mode beats the CPU.
  void find_crossover() {
    for (int64_t b : batches_) {
      std::optional<int64_t> found;
      std::string which;
      for (int64_t w : widths_) {
        const std::optional<double> c = epoch_time(w, b, "cpu", "resident");
        for (const std::string& g : gpu_ids_)
          for (const char* m : {"resident", "naive"}) {
            const std::optional<double> t = epoch_time(w, b, g, m);
            if (c && t && *t < *c && !found) {
              found = w;
              which = g;
            }
          }
        if (found) break;
      }
      cross_[b] = found;
      crossover_json_.push_back(
          {{"batch_size", b},
           {"width", found ? nlohmann::json(*found) : nlohmann::json(nullptr)},
           {"device", found ? nlohmann::json(which) : nlohmann::json(nullptr)}});
    }
  }

  // The table: seconds per epoch, one column per device and mode; the crossovers; the notes.
  void print_table() {
    out_.say("");
    std::string head = fmt::format("{:>6} {:>6}", "batch", "width");
    for (const Series& c : series_)
      head += fmt::format(" {:>22}", c.device + " " + c.mode + (c.measured ? "" : " (pred)"));
    out_.say(head + "   s/epoch");
    for (int64_t b : batches_)
      for (int64_t w : widths_) {
        std::string line = fmt::format("{:>6} {:>6}", b, w);
        for (const Series& c : series_) {
          std::string cell = "-";
          for (const Point& p : points_)
            if (p.width == w && p.batch == b && p.device == c.device && p.mode == c.mode &&
                p.measured == c.measured)
              cell = fmt::format("{:.3f}", p.seconds_per_epoch);
          line += fmt::format(" {:>22}", cell);
        }
        out_.say(line);
      }
    out_.say("");
    for (int64_t b : batches_)
      out_.say(cross_[b] ? fmt::format("crossover at batch {}: width {} (the GPU's faster mode "
                                       "beats the CPU from there)",
                                       b, *cross_[b])
                         : fmt::format("crossover at batch {}: none in range{}", b,
                                       gpu_ids_.empty() ? " (no GPU rows)" : ""));
    for (const std::string& n : notes_) out_.say(n);
  }

  static nlohmann::json point_json(const Point& p) {
    nlohmann::json j{{"width", p.width},
                     {"batch_size", p.batch},
                     {"device", p.device},
                     {"mode", p.mode},
                     {"seconds_per_epoch", p.seconds_per_epoch},
                     {"seconds_per_step", p.seconds_per_step},
                     {"measured", p.measured}};
    if (p.device == "cpu") j["threads"] = p.threads;
    if (p.measured) {
      j["steps_measured"] = p.steps_measured;
      j["predicted_seconds_per_epoch"] = p.predicted_seconds_per_epoch
                                             ? nlohmann::json(*p.predicted_seconds_per_epoch)
                                             : nlohmann::json(nullptr);
      j["predicted_seconds_per_step"] = p.predicted_seconds_per_step
                                            ? nlohmann::json(*p.predicted_seconds_per_step)
                                            : nlohmann::json(nullptr);
    }
    return j;
  }

  void write_json() const {
    nlohmann::json jp = nlohmann::json::array();
    for (const Point& p : points_) jp.push_back(point_json(p));
    // One CPU profile per thread count the points used; cpu_profile: the one most points used.
    nlohmann::json profiles = nlohmann::json::array();
    int most = 0;
    std::size_t most_points = 0;
    for (const auto& [threads, c] : cpu_choices_) {
      nlohmann::json one = profile_json(c);
      if (one.is_object()) one["threads"] = threads;
      profiles.push_back(one);
      const auto n = static_cast<std::size_t>(
          std::count_if(cpu_threads_.begin(), cpu_threads_.end(),
                        [t = threads](const auto& kv) { return kv.second == t; }));
      if (n > most_points) most_points = n, most = threads;
    }
    nlohmann::json models = nlohmann::json::array();
    for (int64_t w : widths_)
      models.push_back(
          {{"width", w}, {"spec", spec_for(w, o_)}, {"parameters", desc_of_.at(w).parameters()}});
    write_json_file(
        "--json", o_.json,
        {{"command", "sweep"},
         {"model", o_.model.empty() ? nlohmann::json(nullptr) : nlohmann::json(o_.model)},
         {"models", models},
         {"layers", o_.layers},
         {"data", d_.name},
         {"train_samples", n_train_},
         {"widths", widths_},
         {"batch_sizes", batches_},
         {"precision", precision_name(precision_)},
         {"points", jp},
         {"crossover", crossover_json_},
         {"cpu_profile", profile_json(cpu_choices_.at(most))},
         {"cpu_profiles", profiles},
         {"notes", notes_}});
  }

  void write_csv() const {
    std::ostringstream csv;
    csv << "width,batch_size,device,mode,measured,seconds_per_epoch,seconds_per_step,steps_"
           "measured,predicted_seconds_per_epoch,threads\n";
    for (const Point& p : points_)
      csv << p.width << ',' << p.batch << ',' << p.device << ',' << p.mode << ','
          << (p.measured ? "true" : "false") << ','
          << fmt::format("{:.6g},{:.6g},", p.seconds_per_epoch, p.seconds_per_step)
          << (p.measured ? std::to_string(p.steps_measured) : "") << ','
          << (p.predicted_seconds_per_epoch ? fmt::format("{:.6g}", *p.predicted_seconds_per_epoch)
                                            : "")
          << ',' << (p.device == "cpu" ? std::to_string(p.threads) : "") << '\n';
    std::ofstream f(o_.csv);
    f << csv.str();
    if (!f) throw Error("--csv " + o_.csv, "could not be written");
  }

  // One panel per batch size: a line per series, the crossover marked.
  perf::PlotPanel plot_panel(int64_t b) {
    perf::PlotPanel panel;
    panel.title = fmt::format("batch {}", b);
    std::size_t ci = 0;
    std::map<std::string, std::string> color_of;
    for (const Series& s : series_) {
      const std::string key = s.device + " " + s.mode;
      if (!color_of.count(key)) color_of[key] = kColors[ci++ % (sizeof kColors / sizeof *kColors)];
      perf::PlotSeries ps;
      ps.label = key + (s.measured ? " (measured)" : " (predicted)");
      ps.color = color_of[key];
      ps.dashed = !s.measured;
      for (const Point& p : points_)
        if (p.batch == b && p.device == s.device && p.mode == s.mode && p.measured == s.measured)
          ps.points.emplace_back(static_cast<double>(p.width), p.seconds_per_epoch);
      panel.series.push_back(std::move(ps));
    }
    if (cross_[b]) {
      panel.marker_x = static_cast<double>(*cross_[b]);
      panel.marker_label = fmt::format("crossover: width {}", *cross_[b]);
    } else {
      panel.marker_label = gpu_ids_.empty() ? "" : "no crossover in range";
    }
    return panel;
  }

  void write_plot() {
    perf::PlotSpec spec;
    spec.title =
        o_.model.empty()
            ? fmt::format(
                  "Time per epoch vs width: {} hidden layer{} ({} samples per "
                  "epoch)",
                  o_.layers, o_.layers > 1 ? "s" : "", n_train_)
            : fmt::format("Time per epoch vs W: {} ({} samples per epoch)", o_.model, n_train_);
    spec.x_label = o_.model.empty() ? "hidden width (units)" : "W (units or filters)";
    spec.y_label = "seconds per epoch";
    spec.footnote =
        o_.predict_only
            ? "dashed: predicted from a calibration profile"
            : fmt::format(
                  "solid: measured (up to {} steps a point, extrapolated to an epoch); dashed: "
                  "predicted from a calibration profile",
                  o_.steps);
    if (gpu_ids_.empty())
      spec.footnote += gpu_refusal_.empty()
                           ? "; no GPU rows (no GPU present, no GPU profile shipped)"
                           : "; no GPU rows (the GPU cannot train this model yet)";
    for (int64_t b : batches_) spec.panels.push_back(plot_panel(b));
    std::ofstream f(o_.plot);
    f << perf::svg_plot(spec);
    if (!f) throw Error("--plot " + o_.plot, "could not be written");
    out_.say("chart written to " + o_.plot);
  }

  const SweepOptions& o_;
  Output out_;
  std::vector<int64_t> widths_, batches_;
  Precision precision_ = Precision::fp32;
  perf::TrainingData d_;
  int64_t n_train_ = 0;
  std::vector<std::string> notes_;
  std::map<int64_t, perf::ModelDesc> desc_of_;              // width -> the model at that width
  std::map<std::pair<int64_t, int64_t>, int> cpu_threads_;  // (batch, width) -> threads
  std::map<int, perf::CpuProfileChoice> cpu_choices_;       // threads -> this CPU's profile
  bool cpu_predicted_ = true;
  std::vector<Series> series_;
  std::string gpu_refusal_;
  std::vector<std::string> gpu_ids_;
  std::vector<Point> points_;
  std::set<std::string> estimated_devices_;  // devices whose predictions estimated some ops
  std::map<int64_t, std::optional<int64_t>> cross_;
  nlohmann::json crossover_json_ = nlohmann::json::array();
};

void run_sweep(const SweepOptions& o) { Sweep(o).run(); }

}  // namespace

void add_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  o->model.clear();  // no model: the MLP of --layers
  auto* cmd = app.add_subcommand(
      "sweep", "Time per epoch across widths and batch sizes on each device; the crossover width");
  add_common_options(*cmd, *o,
                     kDataOption | kSeedOption | kThreadsOption | kJsonOption | kQuietOption |
                         kRankTimeoutOption | kPrecisionOption,
                     "Write points and crossovers as JSON", "Nothing on stdout");
  cmd->add_option("--widths", o->widths, "Hidden widths, comma-separated")->capture_default_str();
  cmd->add_option("--batch-sizes", o->batch_sizes, "Batch sizes, comma-separated")
      ->capture_default_str();
  auto* layers = cmd->add_option("--layers", o->layers,
                                 "Hidden layers (1 or 2), each Dense(width, relu) + Dropout(0.2)")
                     ->capture_default_str();
  cmd->add_option("--model", o->model,
                  "Sweep this layer list instead, with W where the width goes (Dense units or "
                  "Conv2D filters; 2W for twice it), e.g. conv:W:3:relu,maxpool:2,conv:2W:3:relu,"
                  "maxpool:2,flatten,dropout:0.5,dense:10:softmax");
  cmd->add_option("--steps", o->steps, "Steps measured per point (at most)")->capture_default_str();
  cmd->add_option("--max-seconds", o->max_seconds,
                  "Seconds spent measuring a point (at most, roughly)")
      ->capture_default_str();
  cmd->add_flag("--predict-only", o->predict_only, "Measure nothing: predicted rows only");
  add_profile_options(cmd, o->profile);
  cmd->add_option("--csv", o->csv, "Write points as CSV");
  cmd->add_option("--plot", o->plot, "Write a chart (SVG)");
  cmd->add_option("--ranks", o->ranks,
                  "Sweep these rank counts instead (e.g. 1,2,4; MPI data parallelism on the CPU) "
                  "for --model (default small) at the first --batch-sizes: where more ranks stop "
                  "paying");
  cmd->callback([o, layers] {
    refuse_ranks("sweep");
    o->layers_given = layers->count() > 0;
    if (!o->ranks.empty()) {
      RanksTableOptions t("sweep", *o);
      if (t.model.empty()) t.model = "small";
      t.ranks = o->ranks;
      t.batch = parse_list("--batch-sizes", o->batch_sizes).front();
      t.steps = o->steps;
      t.max_seconds = o->max_seconds;
      t.predict_only = o->predict_only;
      t.profile = o->profile;
      run_ranks_table(t);
      return;
    }
    run_sweep(*o);
  });
}

}  // namespace crossover::cli
