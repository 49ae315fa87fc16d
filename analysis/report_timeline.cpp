// report_timeline.cpp: the report's one-step timeline, drawn as SVG directly: per run a panel, per rank a
// main-thread row (data, compute, optimizer, waits) and a comm row (collectives in flight), on one time axis.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report_instrument.hpp"
#include "analysis/results_instrument.hpp"
#include "analysis/svg_util.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;

struct LaneStyle {
  const char* lane;
  const char* label;
  const char* colour;
};
// Draw order on the main row: later entries on top (a wait inside backward stays visible).
constexpr LaneStyle kLaneStyles[] = {
    {"data", "data", "#76b7b2"},
    {"compute", "compute", "#4e79a7"},
    {"optimizer", "optimizer", "#59a14f"},
    {"wait", "waiting on comm", "#e15759"},
    {"comm", "collective in flight", "#f28e2b"},
};
constexpr const char* kOtherColour = "#bab0ac";

const char* lane_colour(const std::string& lane) {
  for (const LaneStyle& s : kLaneStyles)
    if (lane == s.lane) return s.colour;
  return kOtherColour;
}

int draw_rank(const std::string& lane) {
  for (int i = 0; i < static_cast<int>(std::size(kLaneStyles)); ++i)
    if (lane == kLaneStyles[i].lane) return i;
  return -1;  // unknown lanes first, underneath
}

// Geometry of the figure (SVG user units).
constexpr double kWidth = 880, kLabelW = 150, kRight = 20, kRowH = 15, kRowGap = 3, kRankGap = 7;
constexpr double kPanelHead = 24, kPanelGap = 12, kLegendH = 30, kAxisH = 30;

// Where things go: the plot area, the time scale (rounded up to whole ticks) and the figure's height.
struct TimelineLayout {
  double plot_x = kLabelW, plot_w = kWidth - kLabelW - kRight;
  double t_max_us = 0, tick_ms = 0;
  double plot_top = kLegendH, plot_bottom = 0, height = 0;

  double x_of(double us) const { return plot_x + std::clamp(us, 0.0, t_max_us) / t_max_us * plot_w; }
};

TimelineLayout layout_of(const std::vector<RunTimeline>& runs) {
  TimelineLayout l;
  double t_max_us = 0;
  for (const RunTimeline& rt : runs) {
    for (const RankTimeline& t : rt.ranks) {
      t_max_us = std::max(t_max_us, t.step_ms * 1000.0);
      for (const TimelineSpan& s : t.spans) t_max_us = std::max(t_max_us, s.end_us);
    }
  }
  if (t_max_us <= 0) t_max_us = 1;
  l.tick_ms = nice_step(t_max_us / 1000.0, 8);
  l.t_max_us = std::ceil(t_max_us / 1000.0 / l.tick_ms) * l.tick_ms * 1000.0;

  double height = kLegendH;
  for (const RunTimeline& rt : runs) {
    height += kPanelHead + static_cast<double>(rt.ranks.size()) * (2 * kRowH + kRowGap + kRankGap) + kPanelGap;
  }
  l.plot_bottom = height;
  l.height = height + kAxisH;
  return l;
}

void svg_open(std::ostream& svg, const TimelineLayout& l) {
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << fmt_svg(kWidth) << ' ' << fmt_svg(l.height)
      << "\" width=\"" << fmt_svg(kWidth) << "\" height=\"" << fmt_svg(l.height)
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\" role=\"img\">\n"
      << "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

void svg_legend(std::ostream& svg, const TimelineLayout& l) {
  double lx = l.plot_x;
  for (const LaneStyle& s : kLaneStyles) {
    svg << "<rect x=\"" << fmt_svg(lx) << "\" y=\"9\" width=\"12\" height=\"12\" fill=\"" << s.colour << "\"/>"
        << "<text x=\"" << fmt_svg(lx + 16) << "\" y=\"19\" fill=\"#333\">" << s.label << "</text>\n";
    lx += 24 + 6.2 * static_cast<double>(std::string(s.label).size());
  }
}

// Vertical grid lines with their tick labels under the plot, and the axis title.
void svg_time_axis(std::ostream& svg, const TimelineLayout& l) {
  const int ticks = static_cast<int>(std::floor((l.t_max_us / 1000.0 + 1e-9) / l.tick_ms));  // an integer counter
  for (int i = 0; i <= ticks; ++i) {
    const double t = i * l.tick_ms;
    const double x = l.x_of(t * 1000.0);
    svg << "<line x1=\"" << fmt_svg(x) << "\" y1=\"" << fmt_svg(l.plot_top) << "\" x2=\"" << fmt_svg(x) << "\" y2=\""
        << fmt_svg(l.plot_bottom) << "\" stroke=\"#e6e6e6\"/>"
        << "<text x=\"" << fmt_svg(x) << "\" y=\"" << fmt_svg(l.plot_bottom + 14)
        << "\" text-anchor=\"middle\" fill=\"#444\">" << html_escape(fmt_fixed(t, l.tick_ms < 1 ? 1 : 0))
        << "</text>\n";
  }
  svg << "<text x=\"" << fmt_svg(l.plot_x + l.plot_w / 2) << "\" y=\"" << fmt_svg(l.plot_bottom + 27)
      << "\" text-anchor=\"middle\" fill=\"#333\">time since the start of the step (ms)</text>\n";
}

// A rank's two row labels, the step's own extent (so idle time inside it and the step's end show) and its end line.
void svg_rank_frame(std::ostream& svg, const TimelineLayout& l, const RankTimeline& t, double main_y, double comm_y) {
  svg << "<text x=\"" << fmt_svg(kLabelW - 8) << "\" y=\"" << fmt_svg(main_y + 11)
      << "\" text-anchor=\"end\" fill=\"#333\">rank " << t.rank << " main</text>"
      << "<text x=\"" << fmt_svg(kLabelW - 8) << "\" y=\"" << fmt_svg(comm_y + 11)
      << "\" text-anchor=\"end\" fill=\"#777\">comm</text>\n";
  for (double row_y : {main_y, comm_y}) {
    svg << "<rect x=\"" << fmt_svg(l.plot_x) << "\" y=\"" << fmt_svg(row_y) << "\" width=\""
        << fmt_svg(l.x_of(t.step_ms * 1000.0) - l.plot_x) << "\" height=\"" << fmt_svg(kRowH)
        << "\" fill=\"#f4f4f4\" stroke=\"none\"/>";
  }
  svg << "<line x1=\"" << fmt_svg(l.x_of(t.step_ms * 1000.0)) << "\" y1=\"" << fmt_svg(main_y - 1) << "\" x2=\""
      << fmt_svg(l.x_of(t.step_ms * 1000.0)) << "\" y2=\"" << fmt_svg(comm_y + kRowH + 1)
      << "\" stroke=\"#555\" stroke-dasharray=\"2,2\"><title>"
      << html_escape("rank " + std::to_string(t.rank) + " step " + std::to_string(t.step) + ": " +
                     fmt_fixed(t.step_ms, 2) + " ms")
      << "</title></line>\n";
}

// A rank's spans as bars, in draw order (kLaneStyles), comm on its own row, labelled where the name fits.
void svg_rank_spans(std::ostream& svg, const TimelineLayout& l, const RankTimeline& t, double main_y, double comm_y) {
  std::vector<const TimelineSpan*> order;
  for (const TimelineSpan& s : t.spans) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const TimelineSpan* a, const TimelineSpan* b) {
    return draw_rank(a->lane) < draw_rank(b->lane);
  });
  for (const TimelineSpan* s : order) {
    const double row_y = s->lane == "comm" ? comm_y : main_y;
    const double x0 = l.x_of(s->start_us), w = std::max(0.8, l.x_of(s->end_us) - x0);
    const std::string tip = s->name + " (" + s->lane + "): " + fmt_fixed(s->start_us / 1000.0, 2) + "–" +
                            fmt_fixed(s->end_us / 1000.0, 2) + " ms";
    svg << "<rect x=\"" << fmt_svg(x0) << "\" y=\"" << fmt_svg(row_y) << "\" width=\"" << fmt_svg(w) << "\" height=\""
        << fmt_svg(kRowH) << "\" fill=\"" << lane_colour(s->lane) << "\""
        << (s->lane == "comm" ? " fill-opacity=\"0.8\"" : "") << " stroke=\"white\" stroke-width=\"0.5\"><title>"
        << html_escape(tip) << "</title></rect>";
    if (w > 6.0 * static_cast<double>(s->name.size()) + 6) {  // label only where it fits
      svg << "<text x=\"" << fmt_svg(x0 + 3) << "\" y=\"" << fmt_svg(row_y + 11)
          << "\" fill=\"white\" font-size=\"10\" pointer-events=\"none\">" << html_escape(s->name) << "</text>";
    }
    svg << "\n";
  }
}

// One run's panel: its heading, then two rows per rank. Returns the y below the panel.
double svg_run_panel(std::ostream& svg, const TimelineLayout& l, const RunTimeline& rt, double y) {
  const RunResult& r = *rt.run;
  std::ostringstream head;
  head << r.name << " — " << r.strategy << ", step " << rt.ranks.front().step;
  if (rt.ranks_total > static_cast<int>(rt.ranks.size())) {
    head << " (" << rt.ranks.size() << " of " << rt.ranks_total << " ranks shown)";
  }
  svg << "<text x=\"4\" y=\"" << fmt_svg(y + 16) << "\" font-weight=\"bold\" font-size=\"12\" fill=\"#222\">"
      << html_escape(head.str()) << "</text>\n";
  y += kPanelHead;
  for (const RankTimeline& t : rt.ranks) {
    const double main_y = y, comm_y = y + kRowH + kRowGap;
    svg_rank_frame(svg, l, t, main_y, comm_y);
    svg_rank_spans(svg, l, t, main_y, comm_y);
    y += 2 * kRowH + kRowGap + kRankGap;
  }
  return y + kPanelGap;
}

// The whole figure: a legend, then one panel per run, all on one time axis so step lengths compare directly.
std::string timeline_svg(const std::vector<RunTimeline>& runs, const TimelineLayout& layout) {
  std::ostringstream svg;
  svg_open(svg, layout);
  svg_legend(svg, layout);
  svg_time_axis(svg, layout);
  double y = kLegendH;
  for (const RunTimeline& rt : runs) y = svg_run_panel(svg, layout, rt, y);
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace

std::string timeline_figure(SectionContext& ctx) {
  const std::vector<RunTimeline> runs = load_timelines(ctx.scenario, ctx.log, ctx.problems);
  if (runs.empty()) return "";
  const std::string id = "timeline_" + ctx.slug;
  const TimelineLayout layout = layout_of(runs);
  const std::string svg = timeline_svg(runs, layout);
  const fs::path file = ctx.out_dir / (id + ".svg");
  std::ofstream out(file, std::ios::binary);
  out << "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n" << svg;
  if (!out) {
    const std::string why = file.string() + ": cannot write the timeline";
    ctx.log << "error: " << why << "\n";
    ctx.problems.push_back(why);
  } else {
    ctx.log << "  chart " << id << ": " << file.filename().string() << "\n";
  }
  // Linked, not inlined (a timeline of many runs is megabytes of SVG), in the figure's own box.
  std::ostringstream h;
  h << "<figure class=\"chart\" id=\"chart-" << html_escape(id) << "\">\n"
    << "<img class=\"chart-svg\" src=\"" << html_escape(id) << ".svg\" alt=\"timeline of one step per run\" width=\""
    << fmt_svg(kWidth) << "\" height=\"" << fmt_svg(layout.height) << "\" loading=\"lazy\">\n"
    << "<figcaption><span class=\"what\">One training step per run (the step named in each panel), every "
    << "rank on a common time axis: the <em>main</em> row is the training thread (data, forward and backward "
    << "compute, optimizer; red where it waits on a collective), the <em>comm</em> row shows collectives in flight. "
    << "Orange above blue is communication hidden behind compute; red is exposed. Open the SVG and hover a bar for "
    << "its name and times. From rank&lt;r&gt;/timeline.json.</span><a href=\"" << html_escape(id)
    << ".svg\">SVG</a></figcaption>\n</figure>\n";
  return h.str();
}

}  // namespace dtlab::analysis
