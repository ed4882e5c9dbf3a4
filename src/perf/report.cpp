#include "perf/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "perf/explain.h"
#include "perf/plot.h"

namespace crossover::perf {

double StepSplit::step_seconds() const {
  double s = 0;
  for (double p : phase_seconds) s += p;
  return s;
}

std::vector<StepSplit> step_splits_of_explain(const nlohmann::json& explain) {
  StepSplit measured{.device = explain.value("device", ""),
                     .device_name = explain.value("device_name", ""),
                     .mode = explain.value("mode", "resident"),
                     .measured = true};
  StepSplit predicted = measured;
  predicted.measured = false;
  bool has_prediction = false;
  for (const nlohmann::json& p : explain.at("phases")) {
    const auto k = static_cast<std::size_t>(parse_phase(p.at("name").get<std::string>()));
    measured.phase_seconds[k] = p.at("measured_seconds").get<double>();
    if (p.at("predicted_seconds").is_number()) {
      predicted.phase_seconds[k] = p.at("predicted_seconds").get<double>();
      has_prediction = true;
    }
  }
  std::vector<StepSplit> out{measured};
  if (has_prediction) out.push_back(predicted);
  return out;
}

namespace {

const auto esc = xml_escape;

// One colour per phase (Phase's order), told apart in grey print too (lightness varies).
constexpr std::array<const char*, kPhaseCount> kPhaseColors = {
    "#8c8c8c",  // host overhead
    "#f2b134",  // h2d copy
    "#e07b39",  // d2h copy
    "#2b6cb0",  // gemm
    "#68b0e0",  // elementwise
    "#38a169",  // optimizer
    "#c53030",  // sync wait
    "#805ad5",  // allreduce
};

std::string phase_label(Phase p) {
  std::string s = phase_name(p);
  std::replace(s.begin(), s.end(), '_', ' ');
  if (s == "gemm") return "GEMM";
  return s;
}

std::string bar_label(const StepSplit& s) { return fmt::format("{} {}", s.device, s.mode); }

double phase(const StepSplit& s, Phase p) { return s.phase_seconds[static_cast<std::size_t>(p)]; }

// The run of a compare document on `device` in `mode`, or null.
const nlohmann::json* run_of(const nlohmann::json& compare, const std::string& device,
                             const std::string& mode) {
  if (!compare.is_object()) return nullptr;
  for (const nlohmann::json& r : compare.at("runs"))
    if (r.value("device", "") == device && r.value("mode", "") == mode) return &r;
  return nullptr;
}

const nlohmann::json* cpu_run(const nlohmann::json& compare) {
  return run_of(compare, "cpu", "resident");
}

// The first step split of `device` in `mode`: measured where there is one.
const StepSplit* split_of(const ReportModel& m, const std::string& device,
                          const std::string& mode) {
  const StepSplit* found = nullptr;
  for (const StepSplit& s : m.steps)
    if (s.device == device && s.mode == mode && (!found || (s.measured && !found->measured)))
      found = &s;
  return found;
}

std::string measured_word(bool measured) { return measured ? "measured" : "predicted"; }

std::string percent(double part, double whole) {
  return fmt::format("{:.0f}%", 100 * part / std::max(whole, 1e-15));
}

// What the GPU's step is made of: the fixed costs (host, copies, launches, sync) against the
// arithmetic (GEMM, elementwise, optimizer).
double fixed_seconds(const StepSplit& s) {
  return phase(s, Phase::host_overhead) + phase(s, Phase::h2d_copy) + phase(s, Phase::d2h_copy) +
         phase(s, Phase::sync_wait);
}

// The crossover width at the sweep's first batch size, and that batch size.
std::optional<std::pair<int64_t, int64_t>> sweep_crossover(const nlohmann::json& sweep) {
  if (!sweep.is_object()) return std::nullopt;
  for (const nlohmann::json& c : sweep.at("crossover"))
    if (c.at("width").is_number())
      return std::pair{c.at("width").get<int64_t>(), c.at("batch_size").get<int64_t>()};
  return std::nullopt;
}

// The widths a sweep document swept (ascending); {0} when it has none.
std::vector<int64_t> sweep_widths(const nlohmann::json& sweep) {
  std::vector<int64_t> w;
  if (sweep.is_object() && sweep.contains("widths"))
    for (const nlohmann::json& v : sweep.at("widths")) w.push_back(v.get<int64_t>());
  std::sort(w.begin(), w.end());
  return w.empty() ? std::vector<int64_t>{0} : w;
}

// The sentences about one model: who wins, and why (what a step is made of on each device).
void model_sentences(const ReportModel& m, std::vector<std::string>& out) {
  const nlohmann::json* cpu = cpu_run(m.compare);
  if (!cpu) return;
  const double cpu_epoch = cpu->at("seconds_per_epoch").get<double>();
  // The GPU rows: the fastest mode, and the naive one (how typical framework code runs).
  const nlohmann::json* best_gpu = nullptr;
  const nlohmann::json* naive_gpu = nullptr;
  for (const nlohmann::json& r : m.compare.at("runs")) {
    if (r.value("device", "") == "cpu") continue;
    if (!best_gpu ||
        r.at("seconds_per_epoch").get<double>() < best_gpu->at("seconds_per_epoch").get<double>())
      best_gpu = &r;
    if (r.value("mode", "") == "naive" && !naive_gpu) naive_gpu = &r;
  }
  const std::string params = fmt::format("{} parameters", m.compare.value("parameters", 0));
  if (!best_gpu) {
    out.push_back(fmt::format("{} ({}): {} an epoch on the CPU ({}); no GPU row to compare with.",
                              m.label, params, human_seconds(cpu_epoch),
                              measured_word(cpu->value("measured", false))));
    return;
  }
  const double gpu_epoch = best_gpu->at("seconds_per_epoch").get<double>();
  const bool cpu_wins = cpu_epoch <= gpu_epoch;
  std::string s = fmt::format(
      "{} ({}): the CPU takes {} an epoch ({}); the {} takes {} in its faster mode ({}, {})",
      m.label, params, human_seconds(cpu_epoch), measured_word(cpu->value("measured", false)),
      best_gpu->value("device_name", best_gpu->value("device", "GPU")), human_seconds(gpu_epoch),
      best_gpu->value("mode", ""), measured_word(best_gpu->value("measured", false)));
  if (naive_gpu && naive_gpu != best_gpu)
    s += fmt::format(
        " and {} the way typical framework code drives it (naive: a copy and a sync "
        "every step, one launch per op)",
        human_seconds(naive_gpu->at("seconds_per_epoch").get<double>()));
  s += fmt::format(
      ". {} is {:.1f}x faster here.", cpu_wins ? "The CPU" : "The GPU",
      cpu_wins ? gpu_epoch / std::max(cpu_epoch, 1e-15) : cpu_epoch / std::max(gpu_epoch, 1e-15));
  out.push_back(s);

  // Why: the step on each side.
  const StepSplit* c = split_of(m, "cpu", "resident");
  const StepSplit* g = split_of(m, best_gpu->value("device", ""), "naive");
  if (!g) g = split_of(m, best_gpu->value("device", ""), "resident");
  if (!c || !g) return;
  const double cs = c->step_seconds(), gs = g->step_seconds();
  const double g_fixed = fixed_seconds(*g);
  const double g_gemm = phase(*g, Phase::gemm), c_gemm = phase(*c, Phase::gemm);
  out.push_back(fmt::format(
      "Why: one {} step takes {} on the CPU ({}), {} of it in the GEMMs. On the GPU ({} mode, {}) "
      "it takes {}: its GEMMs take only {}, while {} ({}) goes to what every step pays whatever "
      "its size: host work and launches, copies and the wait for the device.",
      m.label, human_seconds(cs), measured_word(c->measured), percent(c_gemm, cs), g->mode,
      measured_word(g->measured), human_seconds(gs), human_seconds(g_gemm), human_seconds(g_fixed),
      percent(g_fixed, gs)));
  if (cpu_wins && g_fixed > cs)
    out.push_back(fmt::format(
        "So for {} the GPU loses before it computes anything: its fixed cost per step alone ({}) "
        "is more than the CPU's whole step ({}).",
        m.label, human_seconds(g_fixed), human_seconds(cs)));
  else if (!cpu_wins && c_gemm > 0.5 * cs)
    out.push_back(fmt::format(
        "For {} the arithmetic dominates: the CPU spends {} a step in GEMMs that the GPU does in "
        "{}, which pays for the GPU's fixed cost many times over.",
        m.label, human_seconds(c_gemm), human_seconds(g_gemm)));
}

std::string fmt_rate(double flops_per_second) {
  return fmt::format("{:.1f} GFLOP/s", flops_per_second / 1e9);
}

double peak_gemm(const Profile& p) {
  double best = 0;
  for (const GemmSample& g : p.gemm) best = std::max(best, g.flops_per_second);
  return best;
}

// ---- HTML pieces ----

std::string compare_table(const ReportModel& m) {
  std::string o =
      "<div class=\"scroll\"><table><thead><tr><th>device</th><th>mode</th><th>s/epoch</th>"
      "<th>&micro;s/step</th><th>test acc.</th><th>source</th></tr></thead><tbody>\n";
  for (const nlohmann::json& r : m.compare.at("runs")) {
    const bool measured = r.value("measured", false);
    std::string source = measured ? "measured" : "predicted";
    if (measured && r.at("predicted_seconds_per_epoch").is_number())
      source += fmt::format(" (model: {:.3f} s, x{:.2f})",
                            r.at("predicted_seconds_per_epoch").get<double>(),
                            r.at("predicted_seconds_per_epoch").get<double>() /
                                std::max(r.at("seconds_per_epoch").get<double>(), 1e-15));
    o += fmt::format(
        "<tr class=\"{}\"><td>{}<br><small>{}</small></td><td>{}</td><td class=\"n\">{:.3f}</td>"
        "<td class=\"n\">{:.1f}</td><td class=\"n\">{}</td><td>{}</td></tr>\n",
        measured ? "measured" : "predicted", esc(r.value("device", "")),
        esc(r.value("device_name", "")), esc(r.value("mode", "")),
        r.at("seconds_per_epoch").get<double>(), 1e6 * r.at("seconds_per_step").get<double>(),
        r.at("test_accuracy").is_number()
            ? fmt::format("{:.4f}", r.at("test_accuracy").get<double>())
            : "&ndash;",
        esc(source));
  }
  return o + "</tbody></table></div>\n";
}

// Seconds per epoch, one bar per row of the compare document, solid measured, hatched predicted.
std::string svg_epoch_bars(const ReportModel& m, std::size_t index) {
  const nlohmann::json& runs = m.compare.at("runs");
  double top = 0;
  for (const nlohmann::json& r : runs) top = std::max(top, r.at("seconds_per_epoch").get<double>());
  top = std::max(top, 1e-9);
  constexpr double W = 480, L = 130, R = 80, row = 30, T = 34;
  const double H = T + row * static_cast<double>(runs.size()) + 12;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" font-family=\"DejaVu Sans, Helvetica, "
      "Arial, sans-serif\" font-size=\"13\">\n"
      "<title>{}: seconds per epoch on each device</title>\n"
      "<defs><pattern id=\"hatch-{}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fff\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#2b6cb0\" stroke-width=\"3\"/>"
      "</pattern></defs>\n"
      "<text x=\"0\" y=\"18\" font-weight=\"bold\">{}: seconds per epoch (shorter is "
      "faster)</text>\n",
      W, H, W, H, esc(m.label), index, esc(m.label));
  double y = T;
  for (const nlohmann::json& r : runs) {
    const double s = r.at("seconds_per_epoch").get<double>();
    const bool measured = r.value("measured", false);
    const double w = (W - L - R) * s / top;
    o += fmt::format(
        "<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{} {}</text>\n"
        "<rect x=\"{:.0f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\" fill=\"{}\" "
        "stroke=\"#2b6cb0\"><title>{:.3f} s/epoch ({})</title></rect>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{} {}</text>\n",
        L - 8, y + 15, esc(r.value("device", "")), esc(r.value("mode", "")), L, y + 2,
        std::max(w, 1.0), row - 10,
        measured ? std::string("#2b6cb0") : fmt::format("url(#hatch-{})", index), s,
        measured_word(measured), L + std::max(w, 1.0) + 6, y + 15, human_seconds(s),
        measured ? "" : "(pred.)");
    y += row;
  }
  return o + "</svg>\n";
}

std::string machine_section(const ReportInput& in) {
  std::string o = "<dl class=\"machine\">\n";
  auto item = [&](const std::string& k, const std::string& v) {
    o += "<dt>" + esc(k) + "</dt><dd>" + esc(v) + "</dd>\n";
  };
  std::string isa;
  for (const std::string& i : in.cpu.isa) isa += (isa.empty() ? "" : ", ") + i;
  item("CPU", fmt::format("{} ({} logical cores)", in.cpu.model, in.cpu.logical_cores));
  item("ISA", isa.empty() ? "-" : isa);
  if (in.cpu.l2_bytes || in.cpu.l3_bytes)
    item("caches", fmt::format("L1d {} KiB, L2 {} KiB a core; L3 {} MiB", in.cpu.l1d_bytes / 1024,
                               in.cpu.l2_bytes / 1024, in.cpu.l3_bytes / (1024 * 1024)));
  std::string gpus;
  for (const std::string& g : in.gpus) gpus += (gpus.empty() ? "" : "; ") + g;
  item("GPU",
       gpus.empty() ? "none present: GPU rows are predicted from a calibration profile" : gpus);
  if (in.cpu_profile) {
    const Profile& p = *in.cpu_profile;
    item("CPU profile",
         fmt::format("{} thread{}: GEMM up to {}, memory {:.1f} GB/s, a backend call {}{}",
                     p.threads, p.threads == 1 ? "" : "s", fmt_rate(peak_gemm(p)),
                     p.memory_bytes_per_second / 1e9, human_seconds(p.call_seconds),
                     p.shipped ? " (shipped, measured on another machine)" : ""));
  }
  for (const Profile& p : in.gpu_profiles) {
    std::string link;
    if (p.h2d_bytes_per_second.pageable)
      link = fmt::format(", host to device {:.1f} GB/s pageable",
                         *p.h2d_bytes_per_second.pageable / 1e9);
    item(p.name + " profile",
         fmt::format("GEMM up to {}, memory {:.0f} GB/s, a launch {}, a graph launch {}, a sync "
                     "{}{}{}",
                     fmt_rate(peak_gemm(p)), p.memory_bytes_per_second / 1e9,
                     human_seconds(p.launch_seconds), human_seconds(p.graph_launch_seconds),
                     human_seconds(p.sync_seconds), link,
                     p.shipped ? " (shipped with crossover)" : ""));
  }
  return o + "</dl>\n";
}

constexpr const char* kStyle = R"(
:root { --ink: #1a202c; --muted: #5a6270; --line: #d8dde6; --accent: #2b6cb0; }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 60rem; padding: 1rem 1.25rem 3rem; color: var(--ink);
  font: 16px/1.5 "DejaVu Sans", Helvetica, Arial, sans-serif; background: #fff; }
h1 { font-size: 1.6rem; line-height: 1.25; margin: .5rem 0 .25rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .5rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1rem; margin: 1.25rem 0 .25rem; }
p.meta, small, .note { color: var(--muted); }
.answer { background: #f3f7fc; border-left: 4px solid var(--accent); padding: .5rem 1rem;
  margin: 1rem 0; }
.answer li { margin: .35rem 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { border-bottom: 1px solid var(--line); padding: .3rem .5rem; text-align: left;
  vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.predicted td { font-style: italic; }
svg { display: block; max-width: 100%; height: auto; margin: .5rem 0; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 28rem), 1fr));
  gap: 0 1.5rem; }
dl.machine { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.machine dt { font-weight: bold; }
dl.machine dd { margin: 0; }
@media (max-width: 40rem) {
  body { font-size: 15px; padding: .75rem; }
  dl.machine { grid-template-columns: 1fr; }
  dl.machine dd { margin-bottom: .4rem; }
}
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  h2 { break-after: avoid; }
  svg, table, .answer { break-inside: avoid; }
  .answer { background: none; }
}
)";

}  // namespace

std::vector<std::string> report_sentences(const ReportInput& in) {
  std::vector<std::string> out;
  for (const ReportModel& m : in.models) model_sentences(m, out);
  if (const auto cross = sweep_crossover(in.sweep)) {
    std::string s = fmt::format(
        "The crossover: at batch {} the GPU beats this CPU from a hidden width of {} (a "
        "one-hidden-layer MLP swept over widths{})",
        cross->second, cross->first,
        sweep_widths(in.sweep).front() == cross->first
            ? ", and that is the narrowest swept: the GPU wins at every width tried"
            : "");
    for (const ReportModel& m : in.models) {
      const int64_t width = m.spec == "small" ? 128 : m.spec == "big" ? 1000 : 0;
      if (width > 0)
        s += fmt::format("; {}'s width, {}, is {} it", m.label, width,
                         width < cross->first ? "below" : "above");
    }
    out.push_back(s + ".");
  } else if (in.sweep.is_object()) {
    out.push_back(
        "The sweep found no crossover in its range: the CPU is faster at every width it tried "
        "(or there is no GPU row).");
  }
  return out;
}

std::string svg_step_bars(const std::string& title, const std::vector<StepSplit>& steps) {
  double top = 0;
  for (const StepSplit& s : steps) top = std::max(top, s.step_seconds());
  top = std::max(top, 1e-12);
  // The phases that appear at all, for the legend.
  std::vector<int> used;
  for (int i = 0; i < kPhaseCount; ++i)
    if (std::any_of(steps.begin(), steps.end(), [&](const StepSplit& s) {
          return s.phase_seconds[static_cast<std::size_t>(i)] > 0;
        }))
      used.push_back(i);
  constexpr double W = 480, L = 130, R = 70, row = 34, legend_row = 20;
  const double legend_h = legend_row * std::ceil(static_cast<double>(used.size()) / 3.0);
  const double T = 30 + legend_h + 8;
  const double H = T + row * static_cast<double>(steps.size()) + 26;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" font-family=\"DejaVu Sans, Helvetica, "
      "Arial, sans-serif\" font-size=\"13\">\n<title>{}</title>\n"
      "<text x=\"0\" y=\"18\" font-weight=\"bold\">{}</text>\n",
      W, H, W, H, esc(title), esc(title));
  for (std::size_t i = 0; i < used.size(); ++i) {
    const double x = static_cast<double>(i % 3) * (W / 3);
    const double y = 30 + legend_row * static_cast<double>(i / 3);
    o += fmt::format(
        "<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{:.0f}\" y=\"{:.0f}\" font-size=\"12\">{}</text>\n",
        x, y, kPhaseColors[static_cast<std::size_t>(used[i])], x + 17, y + 11,
        esc(phase_label(static_cast<Phase>(used[i]))));
  }
  double y = T;
  for (const StepSplit& s : steps) {
    o += fmt::format(
        "<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>"
        "<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"11\" "
        "fill=\"#5a6270\">{}</text>\n",
        L - 8, y + 11, esc(bar_label(s)), L - 8, y + 24, measured_word(s.measured));
    double x = L;
    for (int i = 0; i < kPhaseCount; ++i) {
      const double v = s.phase_seconds[static_cast<std::size_t>(i)];
      if (!(v > 0)) continue;
      const double w = (W - L - R) * v / top;
      o += fmt::format(
          "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"{}>"
          "<title>{}: {} ({})</title></rect>\n",
          x, y + 2, w, row - 10, kPhaseColors[static_cast<std::size_t>(i)],
          s.measured ? "" : " fill-opacity=\"0.7\" stroke=\"#fff\" stroke-dasharray=\"3,2\"",
          esc(phase_label(static_cast<Phase>(i))), human_seconds(v), percent(v, s.step_seconds()));
      x += w;
    }
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", x + 6, y + 17,
                     human_seconds(s.step_seconds()));
    y += row;
  }
  // The time axis: 0 and the longest step.
  o += fmt::format(
      "<line x1=\"{0:.0f}\" y1=\"{1:.1f}\" x2=\"{2:.0f}\" y2=\"{1:.1f}\" stroke=\"#888\"/>"
      "<text x=\"{0:.0f}\" y=\"{3:.1f}\" font-size=\"11\">0</text>"
      "<text x=\"{2:.0f}\" y=\"{3:.1f}\" font-size=\"11\" text-anchor=\"end\">{4} a "
      "step</text>\n",
      L, y + 2, W - R, y + 16, human_seconds(top));
  return o + "</svg>\n";
}

std::string report_html(const ReportInput& in) {
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  o += "<title>" + esc(in.title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  o += "<h1>" + esc(in.title) + "</h1>\n";
  std::string models;
  for (const ReportModel& m : in.models) models += (models.empty() ? "" : " and ") + m.label;
  const nlohmann::json& first = in.models.empty() ? nlohmann::json() : in.models.front().compare;
  o += fmt::format(
      "<p class=\"meta\">crossover report, {}: {} on {}, {} epoch{} at batch {}, precision {}, "
      "on {}.</p>\n",
      esc(in.created), esc(models), esc(first.value("data", "?")), first.value("epochs", 0),
      first.value("epochs", 0) == 1 ? "" : "s", first.value("batch_size", 0),
      esc(first.value("precision", "fp32")), esc(in.cpu.model));

  o += "<section class=\"answer\"><h2>The answer, on this machine</h2>\n<ul>\n";
  for (const std::string& s : report_sentences(in)) o += "<li>" + esc(s) + "</li>\n";
  o += "</ul>\n<p class=\"note\">Measured: timed on this machine now. Predicted: from the cost "
       "model and a calibration profile (a device that is absent, or the model's check beside a "
       "measurement).</p></section>\n";

  o += "<h2>The seed's models on each device</h2>\n<div class=\"grid\">\n";
  for (std::size_t i = 0; i < in.models.size(); ++i) {
    const ReportModel& m = in.models[i];
    o += "<div>\n<h3>" + esc(m.label) + " <small>" +
         esc(fmt::format("({}, {} parameters)", m.spec, m.compare.value("parameters", 0))) +
         "</small></h3>\n";
    o += svg_epoch_bars(m, i) + compare_table(m) + "</div>\n";
  }
  o += "</div>\n";

  o += "<h2>Where one step's time goes</h2>\n<p class=\"note\">One training step split into "
       "phases on each device: measured (solid) against the cost model's prediction (pale, "
       "dashed).</p>\n<div class=\"grid\">\n";
  for (const ReportModel& m : in.models) {
    o += "<div>\n" + svg_step_bars(m.label + ": one step, by phase", m.steps);
    if (!m.explain_sentences.empty()) {
      o += "<ul class=\"note\">\n";
      for (const std::string& s : m.explain_sentences) o += "<li>" + esc(s) + "</li>\n";
      o += "</ul>\n";
    }
    o += "</div>\n";
  }
  o += "</div>\n";

  if (in.sweep.is_object()) {
    o += "<h2>The crossover</h2>\n";
    if (const auto cross = sweep_crossover(in.sweep))
      o += fmt::format(
          "<p>At batch {} the GPU's faster mode beats this CPU from a hidden width of <b>{}</b> "
          "(the red line).</p>\n",
          cross->second, cross->first);
    else
      o += "<p>No crossover within the widths swept.</p>\n";
    o += in.sweep_svg;
    if (in.sweep.contains("notes")) {
      o += "<ul class=\"note\">\n";
      for (const nlohmann::json& n : in.sweep.at("notes"))
        o += "<li>" + esc(n.get<std::string>()) + "</li>\n";
      o += "</ul>\n";
    }
  }

  o += "<h2>The machine</h2>\n" + machine_section(in);
  o += "<h2>Notes</h2>\n<ul class=\"note\">\n";
  for (const ReportModel& m : in.models)
    if (m.compare.contains("notes"))
      for (const nlohmann::json& n : m.compare.at("notes"))
        o += "<li>" + esc(m.label + ": " + n.get<std::string>()) + "</li>\n";
  o += "</ul>\n<p class=\"meta\">Made by <code>" + esc(in.command_line) + "</code>.</p>\n";
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace crossover::perf
