// report_instrument.cpp: the report's instrumentation views -- one-step timelines (SVG), step time by phase,
// overlap of communication with compute, and the collective benchmark's bus bandwidth vs message size.
//
// Everything here reads keys added with the instrumentation layer (result.json steps[].phases_ms,
// summary.phases_ms, comm; rank<r>/timeline.json; comm_bench.json) and contributes nothing for results that
// predate them. Unreadable files become report problems, never a failed report.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kPhaseKeys[] = {"data", "forward", "backward", "comm_wait", "optimizer", "other"};
constexpr int kMaxTimelineRanks = 8;  // a 64-rank job would make a wall of rows; the first 8 show the pattern

// ---- reading ----------------------------------------------------------------------------------------------

json read_json_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw AnalysisError(p.string() + ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw AnalysisError(p.string() + ": not valid JSON: " + e.what());
  }
}

double number_at(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) throw AnalysisError(where + ": missing number \"" + key + "\"");
  return it->get<double>();
}

std::optional<double> optional_number(const json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Mean milliseconds per phase over the timed steps: summary.phases_ms.<phase>.mean, else the mean of
// steps[i].phases_ms over steps after warm-up. Means (not medians) so the phases add up to the mean step.
std::optional<std::map<std::string, double>> phase_means_ms(const RunResult& r) {
  const json& summary = r.raw.contains("summary") ? r.raw["summary"] : json();
  if (summary.is_object() && summary.contains("phases_ms") && summary["phases_ms"].is_object()) {
    std::map<std::string, double> out;
    for (const char* key : kPhaseKeys) {
      const json& stats = summary["phases_ms"].contains(key) ? summary["phases_ms"][key] : json();
      out[key] = optional_number(stats, "mean").value_or(0.0);
    }
    return out;
  }
  if (!r.raw.contains("steps") || !r.raw["steps"].is_array()) return std::nullopt;
  std::map<std::string, double> sum;
  int n = 0;
  for (const json& step : r.raw["steps"]) {
    if (!step.contains("phases_ms") || !step["phases_ms"].is_object()) continue;
    if (step.value("step", 0) <= r.warmup_steps()) continue;
    for (const char* key : kPhaseKeys) sum[key] += optional_number(step["phases_ms"], key).value_or(0.0);
    ++n;
  }
  if (n == 0) return std::nullopt;
  for (auto& [key, v] : sum) v /= n;
  return sum;
}

struct TimelineSpan {
  std::string lane;  // compute | comm | wait | optimizer | data (others drawn grey on the main row)
  std::string name;
  double start_us = 0, end_us = 0;
};

struct RankTimeline {
  int rank = 0;
  std::int64_t step = 0;
  double step_ms = 0;
  std::vector<TimelineSpan> spans;
};

struct RunTimeline {
  const RunResult* run = nullptr;
  std::vector<RankTimeline> ranks;
  int ranks_total = 0;  // world size; ranks may hold fewer (missing files, or capped at kMaxTimelineRanks)
};

RankTimeline parse_timeline(const json& doc, int rank, const std::string& source) {
  if (!doc.is_object()) throw AnalysisError(source + ": expected a JSON object");
  RankTimeline t;
  t.rank = doc.value("rank", rank);
  t.step = static_cast<std::int64_t>(number_at(doc, "step", source));
  t.step_ms = number_at(doc, "step_ms", source);
  if (!doc.contains("spans") || !doc["spans"].is_array()) throw AnalysisError(source + ": missing array \"spans\"");
  for (std::size_t i = 0; i < doc["spans"].size(); ++i) {
    const json& s = doc["spans"][i];
    const std::string where = source + ": spans[" + std::to_string(i) + "]";
    if (!s.is_object()) throw AnalysisError(where + ": expected an object");
    TimelineSpan span;
    span.lane = s.value("lane", "compute");
    span.name = s.value("name", span.lane);
    span.start_us = number_at(s, "start_us", where);
    span.end_us = number_at(s, "end_us", where);
    if (span.end_us < span.start_us) {
      throw AnalysisError(where + ": end_us " + fmt_fixed(span.end_us, 1) + " < start_us " +
                          fmt_fixed(span.start_us, 1));
    }
    t.spans.push_back(std::move(span));
  }
  return t;
}

std::vector<RunTimeline> load_timelines(const Scenario& sc, std::ostream& log, std::vector<std::string>& problems) {
  std::vector<RunTimeline> out;
  for (const RunResult& r : sc.runs) {
    RunTimeline rt;
    rt.run = &r;
    rt.ranks_total = std::max(1, r.world_size);
    for (int rank = 0; rank < std::min(rt.ranks_total, kMaxTimelineRanks); ++rank) {
      const fs::path file = fs::path(r.dir) / ("rank" + std::to_string(rank)) / "timeline.json";
      if (!fs::is_regular_file(file)) continue;
      try {
        rt.ranks.push_back(parse_timeline(read_json_file(file), rank, file.string()));
      } catch (const AnalysisError& e) {
        log << "error: " << e.what() << "\n";
        problems.push_back(e.what());
      }
    }
    if (!rt.ranks.empty()) out.push_back(std::move(rt));
  }
  return out;
}

// ---- (a) one-step timeline, drawn as SVG ------------------------------------------------------------------

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

// 1, 2 or 5 times a power of ten, giving about `target` intervals over `range`.
double nice_step(double range, int target) {
  const double raw = range / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

std::string fmt_svg(double v) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << v;
  return s.str();
}

// The whole figure: a legend, then one panel per run -- per rank a main-thread row (data, compute, optimizer,
// waits) and a comm row (collectives in flight) -- all on one time axis so step lengths compare directly.
std::string timeline_svg(const std::vector<RunTimeline>& runs) {
  constexpr double kWidth = 880, kLabelW = 150, kRight = 20, kRowH = 15, kRowGap = 3, kRankGap = 7;
  constexpr double kPanelHead = 24, kPanelGap = 12, kLegendH = 30, kAxisH = 30;
  const double plot_x = kLabelW, plot_w = kWidth - kLabelW - kRight;

  double t_max_us = 0;
  for (const RunTimeline& rt : runs) {
    for (const RankTimeline& t : rt.ranks) {
      t_max_us = std::max(t_max_us, t.step_ms * 1000.0);
      for (const TimelineSpan& s : t.spans) t_max_us = std::max(t_max_us, s.end_us);
    }
  }
  if (t_max_us <= 0) t_max_us = 1;
  const double tick_ms = nice_step(t_max_us / 1000.0, 8);
  t_max_us = std::ceil(t_max_us / 1000.0 / tick_ms) * tick_ms * 1000.0;
  auto x_of = [&](double us) { return plot_x + std::clamp(us, 0.0, t_max_us) / t_max_us * plot_w; };

  double height = kLegendH;
  for (const RunTimeline& rt : runs) {
    height += kPanelHead + static_cast<double>(rt.ranks.size()) * (2 * kRowH + kRowGap + kRankGap) + kPanelGap;
  }
  const double plot_top = kLegendH, plot_bottom = height;
  height += kAxisH;

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << fmt_svg(kWidth) << ' ' << fmt_svg(height)
      << "\" width=\"" << fmt_svg(kWidth) << "\" height=\"" << fmt_svg(height)
      << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\" role=\"img\">\n"
      << "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";

  // legend
  double lx = plot_x;
  for (const LaneStyle& s : kLaneStyles) {
    svg << "<rect x=\"" << fmt_svg(lx) << "\" y=\"9\" width=\"12\" height=\"12\" fill=\"" << s.colour << "\"/>"
        << "<text x=\"" << fmt_svg(lx + 16) << "\" y=\"19\" fill=\"#333\">" << s.label << "</text>\n";
    lx += 24 + 6.2 * static_cast<double>(std::string(s.label).size());
  }

  // grid and time axis
  const int ticks = static_cast<int>(std::floor((t_max_us / 1000.0 + 1e-9) / tick_ms));  // an integer counter
  for (int i = 0; i <= ticks; ++i) {
    const double t = i * tick_ms;
    const double x = x_of(t * 1000.0);
    svg << "<line x1=\"" << fmt_svg(x) << "\" y1=\"" << fmt_svg(plot_top) << "\" x2=\"" << fmt_svg(x) << "\" y2=\""
        << fmt_svg(plot_bottom) << "\" stroke=\"#e6e6e6\"/>"
        << "<text x=\"" << fmt_svg(x) << "\" y=\"" << fmt_svg(plot_bottom + 14)
        << "\" text-anchor=\"middle\" fill=\"#444\">" << html_escape(fmt_fixed(t, tick_ms < 1 ? 1 : 0)) << "</text>\n";
  }
  svg << "<text x=\"" << fmt_svg(plot_x + plot_w / 2) << "\" y=\"" << fmt_svg(plot_bottom + 27)
      << "\" text-anchor=\"middle\" fill=\"#333\">time since the start of the step (ms)</text>\n";

  double y = kLegendH;
  for (const RunTimeline& rt : runs) {
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
      svg << "<text x=\"" << fmt_svg(kLabelW - 8) << "\" y=\"" << fmt_svg(main_y + 11)
          << "\" text-anchor=\"end\" fill=\"#333\">rank " << t.rank << " main</text>"
          << "<text x=\"" << fmt_svg(kLabelW - 8) << "\" y=\"" << fmt_svg(comm_y + 11)
          << "\" text-anchor=\"end\" fill=\"#777\">comm</text>\n";
      // the step's own extent, so idle time inside it and the step's end show
      for (double row_y : {main_y, comm_y}) {
        svg << "<rect x=\"" << fmt_svg(plot_x) << "\" y=\"" << fmt_svg(row_y) << "\" width=\""
            << fmt_svg(x_of(t.step_ms * 1000.0) - plot_x) << "\" height=\"" << fmt_svg(kRowH)
            << "\" fill=\"#f4f4f4\" stroke=\"none\"/>";
      }
      svg << "<line x1=\"" << fmt_svg(x_of(t.step_ms * 1000.0)) << "\" y1=\"" << fmt_svg(main_y - 1) << "\" x2=\""
          << fmt_svg(x_of(t.step_ms * 1000.0)) << "\" y2=\"" << fmt_svg(comm_y + kRowH + 1)
          << "\" stroke=\"#555\" stroke-dasharray=\"2,2\"><title>"
          << html_escape("rank " + std::to_string(t.rank) + " step " + std::to_string(t.step) + ": " +
                         fmt_fixed(t.step_ms, 2) + " ms")
          << "</title></line>\n";

      std::vector<const TimelineSpan*> order;
      for (const TimelineSpan& s : t.spans) order.push_back(&s);
      std::stable_sort(order.begin(), order.end(), [](const TimelineSpan* a, const TimelineSpan* b) {
        return draw_rank(a->lane) < draw_rank(b->lane);
      });
      for (const TimelineSpan* s : order) {
        const double row_y = s->lane == "comm" ? comm_y : main_y;
        const double x0 = x_of(s->start_us), w = std::max(0.8, x_of(s->end_us) - x0);
        const std::string tip = s->name + " (" + s->lane + "): " + fmt_fixed(s->start_us / 1000.0, 2) + "–" +
                                fmt_fixed(s->end_us / 1000.0, 2) + " ms";
        svg << "<rect x=\"" << fmt_svg(x0) << "\" y=\"" << fmt_svg(row_y) << "\" width=\"" << fmt_svg(w)
            << "\" height=\"" << fmt_svg(kRowH) << "\" fill=\"" << lane_colour(s->lane) << "\""
            << (s->lane == "comm" ? " fill-opacity=\"0.8\"" : "") << " stroke=\"white\" stroke-width=\"0.5\"><title>"
            << html_escape(tip) << "</title></rect>";
        if (w > 6.0 * static_cast<double>(s->name.size()) + 6) {  // label only where it fits
          svg << "<text x=\"" << fmt_svg(x0 + 3) << "\" y=\"" << fmt_svg(row_y + 11)
              << "\" fill=\"white\" font-size=\"10\" pointer-events=\"none\">" << html_escape(s->name) << "</text>";
        }
        svg << "\n";
      }
      y += 2 * kRowH + kRowGap + kRankGap;
    }
    y += kPanelGap;
  }
  svg << "</svg>\n";
  return svg.str();
}

std::string timeline_figure(SectionContext& ctx) {
  const std::vector<RunTimeline> runs = load_timelines(ctx.scenario, ctx.log, ctx.problems);
  if (runs.empty()) return "";
  const std::string id = "timeline_" + ctx.slug;
  const std::string svg = timeline_svg(runs);
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
  std::ostringstream h;
  h << "<figure class=\"chart\" id=\"chart-" << html_escape(id) << "\">\n"
    << svg << "<figcaption><span class=\"what\">One training step per run (the step named in each panel), every "
    << "rank on a common time axis: the <em>main</em> row is the training thread (data, forward and backward "
    << "compute, optimizer; red where it waits on a collective), the <em>comm</em> row shows collectives in flight. "
    << "Orange above blue is communication hidden behind compute; red is exposed. Hover a bar for its name and "
    << "times. From rank&lt;r&gt;/timeline.json.</span><a href=\"" << html_escape(id) << ".svg\">SVG</a></figcaption>\n"
    << "</figure>\n";
  return h.str();
}

// ---- (b) step time by phase ---------------------------------------------------------------------------------

std::optional<Chart> phase_chart(const Scenario& sc) {
  BarChart c;
  c.title = sc.title + ": where a step's time goes";
  c.y_label = "mean ms per step (rank 0, timed steps)";
  c.series_names = {"compute (forward + backward)", "exposed comm wait", "optimizer", "other (data, rest)"};
  c.stacked = true;
  c.values.resize(4);
  for (const RunResult& r : sc.runs) {
    const auto ms = phase_means_ms(r);
    if (!ms) continue;
    c.categories.push_back(r.name);
    c.values[0].push_back(ms->at("forward") + ms->at("backward"));
    c.values[1].push_back(ms->at("comm_wait"));
    c.values[2].push_back(ms->at("optimizer"));
    c.values[3].push_back(ms->at("data") + ms->at("other"));
  }
  if (c.categories.empty()) return std::nullopt;
  return c;
}

// ---- (c) overlap of communication with compute --------------------------------------------------------------

std::string overlap_table(const Scenario& sc) {
  struct Row {
    const RunResult* run = nullptr;
    std::optional<double> comm_ms, exposed_ms, overlap_pct;
    std::string per_rank;
    std::size_t records = 0;
    bool truncated = false;
  };
  std::vector<Row> rows;
  for (const RunResult& r : sc.runs) {
    Row row;
    row.run = &r;
    const json& comm = r.raw.contains("comm") ? r.raw["comm"] : json();
    const json& summary = r.raw.contains("summary") ? r.raw["summary"] : json();
    row.overlap_pct = optional_number(summary, "overlap_pct_median");
    if (comm.is_object()) {
      if (comm.contains("records") && comm["records"].is_array()) row.records = comm["records"].size();
      row.truncated = comm.value("records_truncated", false);
      if (comm.contains("ranks") && comm["ranks"].is_array()) {
        for (const json& rk : comm["ranks"]) {
          const int rank = rk.value("rank", -1);
          if (rank == 0) {
            row.comm_ms = optional_number(rk, "comm_ms_per_step");
            row.exposed_ms = optional_number(rk, "exposed_ms_per_step");
            if (!row.overlap_pct) row.overlap_pct = optional_number(rk, "overlap_pct");
          }
          if (const auto pct = optional_number(rk, "overlap_pct")) {
            row.per_rank += (row.per_rank.empty() ? "" : " · ") + std::string("r") + std::to_string(rank) + " " +
                            fmt_fixed(*pct, 0) + "%";
          }
        }
      }
    }
    if (!row.comm_ms || !row.exposed_ms) {  // older layout: medians of the per-step figures
      std::vector<double> comm_ms, exposed_ms;
      if (r.raw.contains("steps") && r.raw["steps"].is_array()) {
        for (const json& s : r.raw["steps"]) {
          if (s.value("step", 0) <= r.warmup_steps()) continue;
          if (auto v = optional_number(s, "comm_ms")) comm_ms.push_back(*v);
          if (auto v = optional_number(s, "exposed_comm_ms")) exposed_ms.push_back(*v);
        }
      }
      auto median = [](std::vector<double> v) -> std::optional<double> {
        if (v.empty()) return std::nullopt;
        std::sort(v.begin(), v.end());
        return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
      };
      if (!row.comm_ms) row.comm_ms = median(comm_ms);
      if (!row.exposed_ms) row.exposed_ms = median(exposed_ms);
    }
    if (row.comm_ms || row.overlap_pct || row.records > 0) rows.push_back(std::move(row));
  }
  const bool any_comm = std::any_of(rows.begin(), rows.end(), [](const Row& row) {
    return row.run->world_size > 1 || row.comm_ms.value_or(0.0) > 0;
  });
  if (rows.empty() || !any_comm) return "";

  auto cell = [](const std::optional<double>& v, int decimals, const char* unit = "") {
    return v ? html_escape(fmt_fixed(*v, decimals)) + unit : std::string("–");
  };
  std::ostringstream h;
  h << "<h3>Communication overlap</h3>\n<div class=\"table-wrap\"><table class=\"runs\">\n<thead><tr><th>run</th>"
    << "<th>strategy</th><th class=\"num\">comm ms / step</th><th class=\"num\">exposed ms / step</th>"
    << "<th class=\"num\">overlap % <span class=\"range\">(median)</span></th><th>overlap % per rank</th>"
    << "<th class=\"num\">collectives recorded</th></tr></thead>\n<tbody>\n";
  for (const Row& row : rows) {
    h << "<tr><td>" << html_escape(row.run->name) << "</td><td><code>" << html_escape(row.run->strategy)
      << "</code></td><td class=\"num\">" << cell(row.comm_ms, 2) << "</td><td class=\"num\">"
      << cell(row.exposed_ms, 2) << "</td><td class=\"num\">" << cell(row.overlap_pct, 1, "%") << "</td><td>"
      << (row.per_rank.empty() ? "–" : html_escape(row.per_rank)) << "</td><td class=\"num\">" << row.records
      << (row.truncated ? " (truncated)" : "") << "</td></tr>\n";
  }
  h << "</tbody></table></div>\n<p class=\"muted\" style=\"font-size:12.5px;margin:4px 0 0\">comm ms: time per step "
       "with at least one collective in flight (union of their intervals, rank 0); exposed: the part of it the "
       "training thread spent waiting; overlap % = (comm − exposed) / comm, the share hidden behind compute. "
       "Per rank from result.json <code>comm.ranks</code>.</p>\n";
  return h.str();
}

// ---- (d) collective benchmark -------------------------------------------------------------------------------

struct BenchPoint {
  double bytes = 0, busbw_gbps = 0, time_us = 0;
  std::int64_t wrong = 0;
};

struct CommBench {
  std::string path;
  std::string backend;
  int world_size = 0;
  std::map<std::string, std::vector<BenchPoint>> series;  // "op (algorithm)" -> points by size
  std::optional<double> avg_busbw_gbps, p2p_gbps, p2p_bytes;
};

CommBench parse_comm_bench(const json& doc, const std::string& path) {
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array()) {
    throw AnalysisError(path + ": missing array \"results\" (expected `dtlab comm-bench` JSON)");
  }
  CommBench b;
  b.path = path;
  b.backend = doc.value("backend", "");
  b.world_size = doc.value("world_size", 0);
  b.avg_busbw_gbps = optional_number(doc, "avg_busbw_GBps");
  if (doc.contains("p2p")) {
    b.p2p_gbps = optional_number(doc["p2p"], "GBps");
    b.p2p_bytes = optional_number(doc["p2p"], "bytes");
  }
  for (std::size_t i = 0; i < doc["results"].size(); ++i) {
    const json& r = doc["results"][i];
    const std::string where = path + ": results[" + std::to_string(i) + "]";
    if (!r.is_object() || !r.contains("out_of_place") || !r["out_of_place"].is_object()) {
      throw AnalysisError(where + ": missing object \"out_of_place\"");
    }
    BenchPoint p;
    p.bytes = number_at(r, "bytes", where);
    p.busbw_gbps = number_at(r["out_of_place"], "busbw_GBps", where + ".out_of_place");
    p.time_us = optional_number(r["out_of_place"], "time_us").value_or(NAN);
    for (const char* placement : {"out_of_place", "in_place"}) {
      if (r.contains(placement))
        p.wrong += static_cast<std::int64_t>(optional_number(r[placement], "wrong").value_or(0));
    }
    const std::string name = r.value("op", "?") + " (" + r.value("algorithm", "?") + ")";
    b.series[name].push_back(p);
  }
  for (auto& [name, points] : b.series) {
    std::sort(points.begin(), points.end(), [](const BenchPoint& a, const BenchPoint& c) { return a.bytes < c.bytes; });
  }
  return b;
}

// Every comm_bench.json at or below the inputs, each once (by canonical path), named as found, in path order.
std::vector<fs::path> find_comm_bench_files(const std::vector<std::string>& inputs) {
  std::map<fs::path, fs::path> found;  // canonical -> as found
  auto add = [&found](const fs::path& p) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(p, ec);
    found.emplace(ec ? p : canonical, p);
  };
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::path p(input);
    if (fs::is_regular_file(p, ec)) {
      if (p.filename() == "comm_bench.json") add(p);
      continue;
    }
    if (!fs::is_directory(p, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->path().filename() == "comm_bench.json" && it->is_regular_file(ec)) add(it->path());
    }
  }
  std::vector<fs::path> out;
  for (const auto& [canonical, as_found] : found) out.push_back(as_found);
  return out;
}

// 1 KiB, 64 MiB, 1.5 GiB: message sizes as nccl-tests users read them.
std::string fmt_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  return fmt_fixed(bytes, bytes == std::floor(bytes) ? 0 : 1) + " " + units[u];
}

LineChart busbw_chart(const CommBench& b) {
  LineChart c;
  c.title = "Bus bandwidth vs message size (" + (b.backend.empty() ? std::string("?") : b.backend) + ", " +
            std::to_string(b.world_size) + " ranks)";
  c.x_label = "message size";
  c.y_label = "bus bandwidth (GB/s, out-of-place)";
  c.y_from_zero = true;
  c.log_x = true;
  c.x_format = "%.0b%BB";  // 1kiB ... 64MiB
  double min_x = INFINITY, max_x = 0;
  for (const auto& [name, points] : b.series) {
    Series s;
    s.name = name;
    for (const BenchPoint& p : points) {
      if (p.bytes <= 0) continue;  // no place on a log axis
      s.x.push_back(p.bytes);
      s.y.push_back(p.busbw_gbps);
      min_x = std::min(min_x, p.bytes);
      max_x = std::max(max_x, p.bytes);
    }
    c.series.push_back(std::move(s));
  }
  if (b.p2p_gbps && max_x > 0) {
    c.series.push_back(
        {.name = "point-to-point loopback (reference)", .x = {min_x, max_x}, .y = {*b.p2p_gbps, *b.p2p_gbps}});
  }
  return c;
}

std::string comm_bench_table(const CommBench& b) {
  constexpr double k64MiB = 64.0 * 1024 * 1024;
  std::ostringstream h;
  h << "<div class=\"table-wrap\"><table class=\"runs\">\n<thead><tr><th>op (algorithm)</th>"
    << "<th class=\"num\">sizes</th><th class=\"num\">busbw at the largest size (GB/s)</th>"
    << "<th class=\"num\">busbw at 64 MiB (GB/s)</th><th class=\"num\">% of point-to-point</th>"
    << "<th class=\"num\">#wrong</th></tr></thead>\n<tbody>\n";
  for (const auto& [name, points] : b.series) {
    if (points.empty()) continue;
    const BenchPoint& largest = points.back();
    std::optional<double> at_64;
    for (const BenchPoint& p : points)
      if (p.bytes == k64MiB) at_64 = p.busbw_gbps;
    const double ref = at_64.value_or(largest.busbw_gbps);
    std::int64_t wrong = 0;
    for (const BenchPoint& p : points) wrong += p.wrong;
    h << "<tr><td><code>" << html_escape(name) << "</code></td><td class=\"num\">" << points.size()
      << "</td><td class=\"num\">" << html_escape(fmt_fixed(largest.busbw_gbps, 3)) << " <span class=\"range\">("
      << html_escape(fmt_bytes(largest.bytes)) << ")</span></td><td class=\"num\">"
      << (at_64 ? html_escape(fmt_fixed(*at_64, 3)) : "–") << "</td><td class=\"num\">"
      << (b.p2p_gbps && *b.p2p_gbps > 0 ? html_escape(fmt_fixed(100.0 * ref / *b.p2p_gbps, 0)) + "%" : "–")
      << "</td><td class=\"num\">" << wrong << "</td></tr>\n";
  }
  h << "</tbody></table></div>\n<p class=\"muted\" style=\"font-size:12.5px;margin:4px 0 0\">";
  if (b.avg_busbw_gbps) h << "Avg bus bandwidth: " << html_escape(fmt_fixed(*b.avg_busbw_gbps, 3)) << " GB/s. ";
  if (b.p2p_gbps) {
    h << "Point-to-point loopback: " << html_escape(fmt_fixed(*b.p2p_gbps, 3)) << " GB/s"
      << (b.p2p_bytes ? " (" + html_escape(fmt_bytes(*b.p2p_bytes)) + ")" : "")
      << ", the physical reference; the target is an all-reduce bus bandwidth at 64 MiB of at least 80% of it. ";
  }
  h << "% of point-to-point uses the 64 MiB figure when measured, else the largest size. Source: <code>"
    << html_escape(b.path) << "</code></p>\n";
  return h.str();
}

}  // namespace

std::string instrument_part(SectionContext& ctx) {
  std::ostringstream h;
  h << timeline_figure(ctx);
  h << chart_part("phases",
                  "Mean step time of each run split by phase (rank 0, timed steps): forward and backward compute, "
                  "time blocked on communication that compute did not hide, the optimizer step, and the rest "
                  "(data loading and everything unaccounted). Phases are exclusive, so the stack is the mean step.",
                  phase_chart)(ctx);
  h << overlap_table(ctx.scenario);
  return h.str();
}

std::string comm_bench_section(const std::vector<std::string>& inputs, const fs::path& out_dir,
                               const std::string& out_dir_display, std::ostream& log,
                               std::vector<std::string>& problems) {
  std::vector<CommBench> benches;
  for (const fs::path& file : find_comm_bench_files(inputs)) {
    try {
      benches.push_back(parse_comm_bench(read_json_file(file), file.string()));
    } catch (const AnalysisError& e) {
      log << "error: " << e.what() << "\n";
      problems.push_back(e.what());
    }
  }
  if (benches.empty()) return "";
  log << "collective benchmark: " << benches.size() << " file(s)\n";

  std::ostringstream h;
  h << "<section class=\"scenario\" id=\"scenario-comm-bench\">\n<h2>Collective benchmark<span class=\"id\">"
       "comm_bench</span></h2>\n<p class=\"desc\">Bus bandwidth of each collective against message size, measured "
       "by <code>dtlab comm-bench</code> in the manner of nccl-tests (busbw = algbw × the op's bus factor, so "
       "collectives compare with each other and with the link). The flat line is the point-to-point loopback "
       "bandwidth of the same run: what the wire can do.</p>\n";
  for (std::size_t i = 0; i < benches.size(); ++i) {
    Scenario synthetic;  // chart_part renders per "scenario"; this one only names the chart files
    synthetic.name = "comm_bench";
    synthetic.title = "Collective benchmark";
    SectionContext ctx{synthetic, i == 0 ? "comm_bench" : "comm_bench_" + std::to_string(i + 1),
                       out_dir,   out_dir_display,
                       log,       problems};
    const LineChart chart = busbw_chart(benches[i]);
    h << chart_part("busbw",
                    "Out-of-place bus bandwidth per op and algorithm (log-scale sizes) with the point-to-point "
                    "reference.",
                    [&chart](const Scenario&) -> std::optional<Chart> { return chart; })(ctx);
    h << comm_bench_table(benches[i]);
  }
  h << "</section>\n";
  return h.str();
}

}  // namespace dtlab::analysis
