// A hand-written SVG chart: log-log line plots in panels side by side (one per batch size), one
// line per device and mode, measured solid and predicted dashed, a crossover marker, a legend.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace crossover::perf {

struct PlotSeries {
  std::string label;                              // "cpu resident (measured)"
  std::string color;                              // "#1f77b4"
  bool dashed = false;                            // predicted
  std::vector<std::pair<double, double>> points;  // (x, y), both > 0
};

struct PlotPanel {
  std::string title;  // "batch 32"
  std::vector<PlotSeries> series;
  std::optional<double> marker_x;  // the crossover width
  std::string marker_label;        // "crossover: width 256"
};

struct PlotSpec {
  std::string title;
  std::string x_label, y_label;
  std::vector<PlotPanel> panels;
  std::string footnote;
};

// `s` with & < > " as XML (and HTML) entities, for text and attribute values.
std::string xml_escape(const std::string& s);

// The SVG document (UTF-8 text, starting with "<svg").
std::string svg_plot(const PlotSpec& spec);

}  // namespace crossover::perf
