// The report page from data (perf/report.h): its sentences follow the numbers, its bars are drawn
// to scale, its text is escaped. The whole command is checked by ctest report.page and
// report.chromium (tests/report_check.py).
#include "perf/report.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string_view>

namespace crossover::perf {
namespace {

nlohmann::json run(const std::string& device, const std::string& mode, bool measured,
                   double seconds_per_epoch, const std::string& name = "") {
  return {{"device", device},
          {"device_name", name.empty() ? device : name},
          {"mode", mode},
          {"measured", measured},
          {"seconds_per_epoch", seconds_per_epoch},
          {"seconds_per_step", seconds_per_epoch / 100},
          {"test_accuracy", measured ? nlohmann::json(0.9) : nlohmann::json(nullptr)},
          {"predicted_seconds_per_epoch", nullptr}};
}

StepSplit split(const std::string& device, const std::string& mode, bool measured, double gemm,
                double host, double sync = 0) {
  StepSplit s{.device = device, .device_name = device, .mode = mode, .measured = measured};
  s.phase_seconds[static_cast<std::size_t>(Phase::gemm)] = gemm;
  s.phase_seconds[static_cast<std::size_t>(Phase::host_overhead)] = host;
  s.phase_seconds[static_cast<std::size_t>(Phase::sync_wait)] = sync;
  return s;
}

// SMALL: the CPU 1 s an epoch, the GPU 3 s resident and 5 s naive; BIG: the CPU 20 s, the GPU 2 s.
ReportInput two_models() {
  ReportInput in;
  in.title = "Why is the GPU slower for the small Keras MLP?";
  ReportModel small{.label = "SMALL", .spec = "small"};
  small.compare = {
      {"parameters", 101770},
      {"data", "mnist-10k"},
      {"epochs", 1},
      {"batch_size", 32},
      {"runs",
       {run("cpu", "resident", true, 1.0), run("cuda:0", "resident", false, 3.0, "H200"),
        run("cuda:0", "naive", false, 5.0, "H200")}}};
  small.steps = {split("cpu", "resident", true, 60e-6, 40e-6),
                 split("cuda:0", "naive", false, 5e-6, 100e-6, 200e-6)};
  ReportModel big{.label = "BIG", .spec = "big"};
  big.compare = {
      {"parameters", 1796010},
      {"runs",
       {run("cpu", "resident", true, 20.0), run("cuda:0", "resident", false, 2.0, "H200"),
        run("cuda:0", "naive", false, 4.0, "H200")}}};
  big.steps = {split("cpu", "resident", true, 5e-3, 1e-3),
               split("cuda:0", "naive", false, 50e-6, 100e-6, 200e-6)};
  in.models = {small, big};
  in.sweep = {{"crossover", {{{"batch_size", 32}, {"width", 512}, {"device", "cuda:0"}}}},
              {"widths", {32, 512, 4096}},
              {"notes", nlohmann::json::array()}};
  in.sweep_svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1 1\"></svg>";
  return in;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

TEST(Report, SentencesSayWhichDeviceWinsEachModelAndByHowMuch) {
  const std::string s = joined(report_sentences(two_models()));
  EXPECT_NE(s.find("SMALL (101770 parameters): the CPU takes 1.00 s an epoch (measured)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("The CPU is 3.0x faster here."), std::string::npos) << s;
  EXPECT_NE(s.find("The GPU is 10.0x faster here."), std::string::npos) << s;
  // SMALL's GPU step: 300 us of fixed cost against the CPU's whole 100 us step.
  EXPECT_NE(s.find("So for SMALL the GPU loses before it computes anything: its fixed cost per "
                   "step alone (300 us) is more than the CPU's whole step (100 us)."),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("from a hidden width of 512 (a one-hidden-layer MLP swept over widths);"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("; SMALL's width, 128, is below it; BIG's width, 1000, is above it."),
            std::string::npos)
      << s;
}

TEST(Report, ACrossoverAtTheNarrowestWidthSaysTheGpuWinsAtEveryWidthTried) {
  ReportInput in = two_models();
  in.sweep["crossover"][0]["width"] = 32;
  const std::string s = joined(report_sentences(in));
  EXPECT_NE(s.find("from a hidden width of 32 (a one-hidden-layer MLP swept over widths, and that "
                   "is the narrowest swept: the GPU wins at every width tried)"),
            std::string::npos)
      << s;
}

// The widths of the <rect x="N" y="N" width="N" ...> elements, in order (a scan rather than
// std::regex, which GCC 12 under -fsanitize=address warns about inside libstdc++).
std::vector<double> rect_widths(const std::string& svg) {
  auto number = [&](std::size_t& at) {
    const std::size_t from = at;
    while (at < svg.size() && (std::isdigit(static_cast<unsigned char>(svg[at])) || svg[at] == '.'))
      ++at;
    return at > from ? svg.substr(from, at - from) : std::string();
  };
  auto literal = [&](std::size_t& at, std::string_view text) {
    if (svg.compare(at, text.size(), text) != 0) return false;
    at += text.size();
    return true;
  };
  std::vector<double> widths;
  for (std::size_t at = svg.find("<rect "); at != std::string::npos; at = svg.find("<rect ", at)) {
    at += 6;
    std::size_t p = at;
    if (!literal(p, "x=\"") || number(p).empty() || !literal(p, "\" y=\"") || number(p).empty() ||
        !literal(p, "\" width=\""))
      continue;
    const std::string w = number(p);
    if (!w.empty() && literal(p, "\"")) widths.push_back(std::stod(w));
  }
  return widths;
}

TEST(Report, StepBarsAreDrawnToOneScale) {
  // Two steps, the second twice the first: its GEMM segment is twice as wide.
  const std::string svg = svg_step_bars(
      "t", {split("cpu", "resident", true, 1e-3, 0), split("x", "naive", false, 2e-3, 0)});
  const std::vector<double> widths = rect_widths(svg);
  ASSERT_EQ(widths.size(), 3u) << svg;  // the legend's swatch, then the two bars
  EXPECT_NEAR(widths[2], 2 * widths[1], 0.05) << svg;
  EXPECT_NE(svg.find("measured"), std::string::npos);
  EXPECT_NE(svg.find("predicted"), std::string::npos);
}

TEST(Report, ThePageEscapesItsTextAndLoadsNothing) {
  ReportInput in = two_models();
  in.models[0].compare["runs"][1]["device_name"] = "<script>alert(1)</script>";
  in.command_line = "crossover report --out \"a&b.html\"";
  const std::string page = report_html(in);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(page.find("a&amp;b.html"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  EXPECT_NE(page.find("SMALL"), std::string::npos);
  EXPECT_NE(page.find("BIG"), std::string::npos);
}

TEST(Report, AnExplainDocumentGivesItsMeasuredAndPredictedSplits) {
  nlohmann::json phases = nlohmann::json::array();
  for (int i = 0; i < kPhaseCount; ++i)
    phases.push_back({{"name", phase_name(static_cast<Phase>(i))},
                      {"measured_seconds", i == 3 ? 2e-3 : 0.0},
                      {"predicted_seconds", i == 3 ? 1e-3 : 0.0}});
  const std::vector<StepSplit> s = step_splits_of_explain(
      {{"device", "cpu"}, {"device_name", "cpu X"}, {"mode", "resident"}, {"phases", phases}});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_TRUE(s[0].measured);
  EXPECT_FALSE(s[1].measured);
  EXPECT_DOUBLE_EQ(s[0].step_seconds(), 2e-3);
  EXPECT_DOUBLE_EQ(s[1].step_seconds(), 1e-3);
  // Without a prediction: the measured split alone.
  for (auto& p : phases) p["predicted_seconds"] = nullptr;
  EXPECT_EQ(step_splits_of_explain({{"device", "cpu"}, {"phases", phases}}).size(), 1u);
}

}  // namespace
}  // namespace crossover::perf
