#include "perf/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace crossover::perf {

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string num(double v) {
  if (v >= 1000) return fmt::format("{:.0f}", v);
  if (v >= 1) return fmt::format("{:g}", v);
  return fmt::format("{:g}", v);
}

std::string width_label(double v) {
  if (v >= 1024 && std::fmod(v, 1024) == 0) return fmt::format("{:g}k", v / 1024);
  return fmt::format("{:g}", v);
}

// The axes' log ranges, shared by all panels so they compare at a glance: x in log2, y in
// log10 (whole decades).
struct Ranges {
  double lx0 = 0, lx1 = 0, ly0 = 0, ly1 = 0;
};

Ranges data_ranges(const PlotSpec& spec) {
  double xmin = std::numeric_limits<double>::infinity(), xmax = 0;
  double ymin = std::numeric_limits<double>::infinity(), ymax = 0;
  for (const PlotPanel& p : spec.panels)
    for (const PlotSeries& s : p.series)
      for (auto [x, y] : s.points) {
        if (!(x > 0) || !(y > 0)) continue;
        xmin = std::min(xmin, x), xmax = std::max(xmax, x);
        ymin = std::min(ymin, y), ymax = std::max(ymax, y);
      }
  if (!(xmax > 0)) xmin = 1, xmax = 10;
  if (!(ymax > 0)) ymin = 1, ymax = 10;
  if (xmax / xmin < 2) xmin /= 1.5, xmax *= 1.5;
  Ranges r;
  r.ly0 = std::floor(std::log10(ymin)), r.ly1 = std::ceil(std::log10(ymax));
  if (r.ly1 - r.ly0 < 1) r.ly1 = r.ly0 + 1;
  r.lx0 = std::log2(xmin) - 0.25, r.lx1 = std::log2(xmax) + 0.25;
  return r;
}

// Every distinct series label, in order of appearance.
std::vector<const PlotSeries*> legend_entries(const PlotSpec& spec) {
  std::vector<const PlotSeries*> legend;
  for (const PlotPanel& p : spec.panels)
    for (const PlotSeries& s : p.series)
      if (std::none_of(legend.begin(), legend.end(),
                       [&](const PlotSeries* l) { return l->label == s.label; }))
        legend.push_back(&s);
  return legend;
}

// The footnote, wrapped at "; " to the chart's width W (about 6.2 px a character at 11 px).
std::vector<std::string> wrapped_footnote(const std::string& footnote, double W) {
  std::vector<std::string> foot;
  const std::size_t max_chars = static_cast<std::size_t>((W - 28) / 6.2);
  std::string line, rest = footnote;
  while (!rest.empty()) {
    const std::size_t cut = rest.find("; ");
    std::string part = cut == std::string::npos ? rest : rest.substr(0, cut + 1);
    rest = cut == std::string::npos ? "" : rest.substr(cut + 2);
    if (!line.empty() && line.size() + 1 + part.size() > max_chars) {
      foot.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + part;
  }
  if (!line.empty()) foot.push_back(line);
  return foot;
}

// One panel's plotting area (x0..x1, y0..y1 in pixels) and its data-to-pixel maps.
struct Frame {
  double x0, x1, y0, y1;
  Ranges r;
  double X(double v) const { return x0 + (std::log2(v) - r.lx0) / (r.lx1 - r.lx0) * (x1 - x0); }
  double Y(double v) const { return y1 - (std::log10(v) - r.ly0) / (r.ly1 - r.ly0) * (y1 - y0); }
};

// The grid lines and tick labels (y: decades, and 2 and 5 within them when the range is short;
// x: powers of two) and the axis labels; `ox`: the panel's left edge.
void draw_axes(std::string& o, const Frame& f, const PlotSpec& spec, double ox) {
  const Ranges& r = f.r;
  for (int d = static_cast<int>(r.ly0); d <= static_cast<int>(r.ly1); ++d) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, d);
      if (std::log10(v) > r.ly1 + 1e-9) continue;
      if (m != 1.0 && r.ly1 - r.ly0 > 3) continue;
      const double y = f.Y(v);
      o += fmt::format(
          "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\"/>\n", f.x0,
          y, f.x1, y, m == 1.0 ? "#d0d0d0" : "#ececec");
      o += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-size=\"11\">{}</text>\n",
          f.x0 - 5, y + 4, num(v));
    }
  }
  for (int e = static_cast<int>(std::ceil(r.lx0)); e <= static_cast<int>(std::floor(r.lx1)); ++e) {
    const double v = std::pow(2.0, e), x = f.X(v);
    o += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#e4e4e4\"/>\n", x,
        f.y0, x, f.y1);
    o += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"11\">{}</text>\n", x,
        f.y1 + 16, width_label(v));
  }
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                   (f.x0 + f.x1) / 2, f.y1 + 36, esc(spec.x_label));
  o += fmt::format(
      "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 {:.1f} "
      "{:.1f})\">{}</text>\n",
      ox + 22, (f.y0 + f.y1) / 2, ox + 22, (f.y0 + f.y1) / 2, esc(spec.y_label));
}

// Each series: a polyline through its points (sorted by x), and a dot at each.
void draw_series(std::string& o, const Frame& f, const PlotPanel& panel) {
  for (const PlotSeries& s : panel.series) {
    std::vector<std::pair<double, double>> pts;
    for (auto [x, y] : s.points)
      if (x > 0 && y > 0) pts.emplace_back(x, y);
    if (pts.empty()) continue;
    std::sort(pts.begin(), pts.end());
    std::string path;
    for (auto [x, y] : pts) path += fmt::format("{:.1f},{:.1f} ", f.X(x), f.Y(y));
    o += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2.2\"{} "
        "points=\"{}\"><title>{}</title></polyline>\n",
        s.color, s.dashed ? " stroke-dasharray=\"7,4\"" : "", path, esc(s.label));
    for (auto [x, y] : pts)
      o += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"/>\n", f.X(x),
                       f.Y(y), s.dashed ? "2" : "3",
                       s.dashed ? "white\" stroke=\"" + s.color : s.color);
  }
}

// The crossover: a dashed red line at marker_x with its label, or the label alone, centred.
void draw_marker(std::string& o, const Frame& f, const PlotPanel& panel) {
  if (panel.marker_x && *panel.marker_x > 0) {
    const double x = f.X(*panel.marker_x);
    o += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#d62728\" "
        "stroke-width=\"1.5\" "
        "stroke-dasharray=\"3,3\"/>\n",
        x, f.y0, x, f.y1);
    o += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d62728\" font-size=\"12\" "
        "text-anchor=\"{}\">{}</text>\n",
        x + (x > (f.x0 + f.x1) / 2 ? -4 : 4), f.y0 + 15, x > (f.x0 + f.x1) / 2 ? "end" : "start",
        esc(panel.marker_label));
  } else if (!panel.marker_label.empty()) {
    o += fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#666\" font-size=\"12\" "
        "text-anchor=\"middle\">{}</text>\n",
        (f.x0 + f.x1) / 2, f.y0 + 15, esc(panel.marker_label));
  }
}

// Panel size and margins, in pixels.
constexpr double kPanelW = 400, kPanelH = 320, kMarginL = 78, kMarginR = 18, kMarginT = 34,
                 kMarginB = 56;

// One panel, its top-left corner at (ox, oy).
void draw_panel(std::string& o, const PlotSpec& spec, const PlotPanel& panel, const Ranges& r,
                double ox, double oy) {
  const Frame f{ox + kMarginL, ox + kPanelW - kMarginR, oy + kMarginT, oy + kPanelH - kMarginB, r};
  o += fmt::format(
      "<g class=\"panel\">\n<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
      "font-weight=\"bold\">{}</text>\n",
      (f.x0 + f.x1) / 2, oy + 20, esc(panel.title));
  o += fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#fafafa\" "
      "stroke=\"#444\"/>\n",
      f.x0, f.y0, f.x1 - f.x0, f.y1 - f.y0);
  draw_axes(o, f, spec, ox);
  draw_series(o, f, panel);
  draw_marker(o, f, panel);
  o += "</g>\n";
}

// The title and the legend (one or two columns) above the panels.
void draw_heading(std::string& o, const PlotSpec& spec,
                  const std::vector<const PlotSeries*>& legend, int legend_cols, double W) {
  o += fmt::format(
      "<text x=\"{:.0f}\" y=\"26\" text-anchor=\"middle\" font-size=\"17\" "
      "font-weight=\"bold\">{}</text>\n",
      W / 2, esc(spec.title));
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const double lx = 30 + static_cast<double>(i % legend_cols) * (W - 60) / legend_cols;
    const double ly = 48 + 22.0 * static_cast<double>(i / legend_cols);
    o += fmt::format(
        "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" "
        "stroke-width=\"2.5\"{}/>\n",
        lx, ly, lx + 34, ly, legend[i]->color,
        legend[i]->dashed ? " stroke-dasharray=\"7,4\"" : "");
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", lx + 42, ly + 4.5,
                     esc(legend[i]->label));
  }
}

}  // namespace

std::string svg_plot(const PlotSpec& spec) {
  const Ranges r = data_ranges(spec);
  // Layout: up to three panels a row.
  const int per_row = std::min<int>(3, std::max<int>(1, static_cast<int>(spec.panels.size())));
  const int rows = static_cast<int>((spec.panels.size() + per_row - 1) / per_row);
  const std::vector<const PlotSeries*> legend = legend_entries(spec);
  // Wide enough for the title (bold 17 px: about 10.5 px a character) and for two legend
  // columns of the longest label (13 px: about 7.5 px a character, after a 42 px swatch).
  std::size_t longest_label = 0;
  for (const PlotSeries* l : legend) longest_label = std::max(longest_label, l->label.size());
  const double panels_w = per_row * kPanelW + 20;
  const double W = std::max(panels_w, 10.5 * static_cast<double>(spec.title.size()) + 40);
  const int legend_cols = (W - 60) / 2 >= 50 + 7.5 * static_cast<double>(longest_label) ? 2 : 1;
  const double legend_h = 22.0 * ((legend.size() + legend_cols - 1) / legend_cols) + 10;
  const double top = 44 + legend_h;
  const double panels_left = (W - panels_w) / 2;  // centred when the title is wider
  const std::vector<std::string> foot = wrapped_footnote(spec.footnote, W);
  const double H = top + rows * kPanelH + 10 + 16.0 * static_cast<double>(foot.size());

  std::string o;
  o += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 "
      "{:.0f} {:.0f}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"13\">\n",
      W, H, W, H);
  o += fmt::format("<rect x=\"0\" y=\"0\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"white\"/>\n", W,
                   H);
  draw_heading(o, spec, legend, legend_cols, W);
  for (std::size_t pi = 0; pi < spec.panels.size(); ++pi)
    draw_panel(o, spec, spec.panels[pi], r,
               panels_left + 10 + static_cast<double>(pi % per_row) * kPanelW,
               top + static_cast<double>(pi / per_row) * kPanelH);
  for (std::size_t i = 0; i < foot.size(); ++i)
    o += fmt::format("<text x=\"14\" y=\"{:.1f}\" font-size=\"11\" fill=\"#555\">{}</text>\n",
                     top + rows * kPanelH + 6 + 16.0 * static_cast<double>(i), esc(foot[i]));
  o += "</svg>\n";
  return o;
}

}  // namespace crossover::perf
