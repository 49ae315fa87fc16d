// plot.hpp: gnuplot charts as files a user can rerun -- <id>.dat + <id>.gp -> <id>.svg + <id>.png.
//
// Usage:
//   LineChart c{.id = "loss_baseline", .title = "Loss", .x_label = "step", .y_label = "loss (nats)"};
//   c.series.push_back({.name = "ddp", .x = {1, 2, 3}, .y = {5.6, 4.9, 4.1}});
//   ChartFiles f = write_chart(c, "reports/latest");   // writes loss_baseline.dat and .gp
//   run_gnuplot(f, "reports/latest");                   // runs `gnuplot loss_baseline.gp` there
//
// The script uses only paths relative to its own directory, so `cd DIR && gnuplot ID.gp` reproduces both
// images. Text is `noenhanced` (ids contain underscores). Bar charts and time/rate axes start at zero so
// the picture does not exaggerate differences.
// Errors throw AnalysisError (from results.hpp) naming the chart id and the rule broken.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace dtlab::analysis {

struct Series {
  std::string name;       // legend entry
  std::vector<double> x;  // REQUIRES: x.size() == y.size(); NaN y values are gaps
  std::vector<double> y;
  bool dashed = false;          // a dashed line (a model's prediction beside measured points)
  bool muted = false;           // drawn in light grey (points that are not the result, e.g. oversubscribed runs)
  bool points_only = false;     // points without a line (points that do not form a curve)
  int colour = 0;               // > 0: the palette's colour number (a model line in its points' colour); 0: by position
  int point_type = 0;           // > 0: gnuplot's point type, drawn larger (2: a cross, e.g. where a run stopped)
  bool in_legend = true;        // false: no legend entry (the caption explains the marks)
  bool in_every_panel = false;  // a reference line (a cap, a threshold): grey dotted, in each panel of small multiples
  std::vector<std::string> point_labels = {};  // empty, or one text per point drawn beside it (its setting)
};

struct LineChart {
  std::string id;  // file stem, [A-Za-z0-9_.-]+ ; unique within the report dir
  std::string title;
  std::string x_label;  // with unit, e.g. "step"
  std::string y_label;  // with unit, e.g. "step time (ms)"
  std::vector<Series> series;
  bool y_from_zero = false;  // true for times and rates
  // When > 0, the band x <= shade_until_x is greyed and labelled shade_label (e.g. warm-up steps that the
  // summary statistics exclude).
  double shade_until_x = 0;
  std::string shade_label;
  bool log_x = false;      // log2 x axis (message-size sweeps); REQUIRES x > 0
  bool log_y = false;      // log2 y axis (loss scales); REQUIRES y > 0
  std::string x_format;    // gnuplot `set format x`, e.g. "%.0b%BB" for bytes as 1kiB ... 64MiB; "" = default
  bool one_panel = false;  // never small multiples: points read against one reference line (a y = x scatter)
};

struct BarChart {
  std::string id;  // file stem, as LineChart::id
  std::string title;
  std::string y_label;                      // with unit, e.g. "throughput (tokens/s)"
  std::vector<std::string> categories;      // one group of bars per category (x axis)
  std::vector<std::string> series_names;    // one bar per series in each group; legend hidden if only one
  std::vector<std::vector<double>> values;  // values[series][category]
  bool stacked = false;                     // false: bars side by side; true: series stacked, the total labelled on top
  // y axis always starts at zero; each bar (or stack) is labelled with its value.
};

// The SVG size a chart is drawn at (gnuplot's svg terminal); small multiples are taller (ChartFiles says how tall).
inline constexpr int kChartSvgWidth = 880, kChartSvgHeight = 400;

// The report's small-multiples rule: a line chart with more legend entries than this, in two or more groups, is
// drawn as one panel per group on shared axes. A group is a measured series with its prediction, model and
// out-of-memory marks ("ddp", "ddp (predicted)", "ddp (model)", "ddp (formula)", ...); series marked in_every_panel
// are drawn in each panel.
inline constexpr int kMaxOverlaidSeries = 6;

struct ChartFiles {
  std::string id;
  std::filesystem::path dat;       // data, gnuplot blocks/columns
  std::filesystem::path script;    // <id>.gp
  std::filesystem::path svg;       // produced by run_gnuplot
  std::filesystem::path png;       // produced by run_gnuplot
  int svg_width = kChartSvgWidth;  // the box the SVG is drawn in (the report's <img> gets it)
  int svg_height = kChartSvgHeight;
  int panels = 1;                     // > 1: small multiples
  std::string rerun_command() const;  // "gnuplot <id>.gp" (run in the chart's dir)
};

// Write <dir>/<id>.dat and <dir>/<id>.gp (dir must exist). Validates the chart first.
ChartFiles write_chart(const LineChart& chart, const std::filesystem::path& dir);
ChartFiles write_chart(const BarChart& chart, const std::filesystem::path& dir);

// True if a `gnuplot` executable is on PATH.
bool gnuplot_available();

// Runs `gnuplot <id>.gp` with `dir` as working directory; checks the exit status and that both images exist.
// Throws AnalysisError with gnuplot's own stderr if it fails, or with an install hint if it is missing; the
// `cd ... && gnuplot <id>.gp` it suggests names `dir_display` when given (where the files will end up), else `dir`.
void run_gnuplot(const ChartFiles& files, const std::filesystem::path& dir, const std::string& dir_display = "");

}  // namespace dtlab::analysis
