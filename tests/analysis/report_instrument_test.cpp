// report_instrument_test.cpp: the instrumentation views of the report from the real-run fixtures (by pattern, not
// bytes; expectations read from the fixture files): one-step timeline SVG, step time by phase, overlap table,
// collective benchmark; old results add nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::count;
using testing::read_text;
using testing::TempDir;

std::string fixture(const std::string& rel) { return testing::fixtures_dir() + "/instrument/" + rel; }

// Renders instrument_part for one scenario dir into `out`.
struct Rendered {
  std::string html;
  std::string log;
  std::vector<std::string> problems;
};

Rendered render_instrument(const std::string& scenario_dir, const fs::path& out) {
  const Scenario sc = load_scenario(scenario_dir);
  fs::create_directories(out);
  std::ostringstream log;
  Rendered r;
  SectionContext ctx{sc, "overlap", out, out.string(), log, r.problems};
  r.html = instrument_part(ctx);
  r.log = log.str();
  return r;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The runs of the overlap fixture that have timelines, and each one's rank<r>/timeline.json documents.
struct FixtureTimelines {
  std::vector<std::string> runs;  // run dir names, in scenario order
  std::map<std::string, std::vector<json>> ranks;
  std::size_t spans = 0, rank_files = 0;
};
FixtureTimelines fixture_timelines() {
  FixtureTimelines t;
  const json scenario = testing::fixture_json("instrument/overlap/scenario.json");
  for (const json& run : scenario["runs"]) {
    const std::string dir = run["dir"];
    for (int rank = 0; fs::exists(fixture("overlap/" + dir + "/rank" + std::to_string(rank) + "/timeline.json"));
         ++rank) {
      const json doc =
          testing::fixture_json("instrument/overlap/" + dir + "/rank" + std::to_string(rank) + "/timeline.json");
      if (rank == 0) t.runs.push_back(dir);
      t.spans += doc["spans"].size();
      ++t.rank_files;
      t.ranks[dir].push_back(doc);
    }
  }
  return t;
}

TEST(ReportInstrument, TimelineDrawsEveryRankAndSpan) {
  TempDir tmp;
  const Rendered r = render_instrument(fixture("overlap"), tmp.path());
  EXPECT_TRUE(r.problems.empty()) << r.log;
  const FixtureTimelines t = fixture_timelines();
  ASSERT_EQ(t.runs, (std::vector<std::string>{"ddp", "fsdp"})) << "the old run has no timeline";

  // one figure, its SVG a standalone file the page links (with the figure's size) rather than inlines
  EXPECT_EQ(count(r.html, "id=\"chart-timeline_overlap\""), 1u);
  EXPECT_TRUE(contains(r.html, "<img class=\"chart-svg\" src=\"timeline_overlap.svg\"")) << r.html;
  EXPECT_FALSE(contains(r.html, "<svg")) << r.html;
  const std::string file = read_text(tmp.path() / "timeline_overlap.svg");
  EXPECT_EQ(file.rfind("<?xml", 0), 0u);
  EXPECT_TRUE(contains(file, "xmlns=\"http://www.w3.org/2000/svg\""));

  // a panel per run with timelines, named by run, strategy and the step recorded; two rows per rank
  for (const std::string& run : t.runs) {
    const json result = testing::fixture_json("instrument/overlap/" + run + "/result.json");
    EXPECT_TRUE(contains(file, run + " — " + result["context"]["strategy"].get<std::string>() + ", step " +
                                   std::to_string(t.ranks.at(run)[0]["step"].get<int>())))
        << run;
  }
  EXPECT_FALSE(contains(file, "single (old result) —"));
  EXPECT_EQ(count(file, ">rank 0 main</text>"), 2u);
  EXPECT_EQ(count(file, ">rank 1 main</text>"), 2u);
  EXPECT_EQ(count(file, ">comm</text>"), t.rank_files);

  // one bar per span of every timeline.json, each with a tooltip naming it, its lane and its times
  EXPECT_EQ(count(file, "\"><title>"), t.spans + t.rank_files /* step-end markers */);
  for (const std::string& run : t.runs) {
    for (const json& span : t.ranks.at(run)[0]["spans"]) {
      const std::string tip = span["name"].get<std::string>() + " (" + span["lane"].get<std::string>() +
                              "): " + fixed(span["start_us"].get<double>() / 1000.0, 2) + "–" +
                              fixed(span["end_us"].get<double>() / 1000.0, 2) + " ms";
      EXPECT_TRUE(contains(file, "<title>" + html_escape(tip) + "</title>")) << tip;
    }
  }

  // x coordinates stay inside the plot area (150 .. 860)
  const std::regex rect_x("<rect x=\"([0-9.]+)\" y=\"[0-9.]+\" width=\"([0-9.]+)\"");
  std::size_t bars = 0;
  for (auto it = std::sregex_iterator(file.begin(), file.end(), rect_x); it != std::sregex_iterator(); ++it) {
    const double x = std::stod((*it)[1]), w = std::stod((*it)[2]);
    if (x < 100) continue;  // legend swatches
    EXPECT_GE(x, 150.0);
    EXPECT_LE(x + w, 860.0 + 1e-6);
    ++bars;
  }
  EXPECT_GT(bars, t.spans);
}

TEST(ReportInstrument, SpanNamesAreEscaped) {
  // A copy of the overlap fixture with markup in one span name: names from files reach the page escaped.
  TempDir tmp;
  const fs::path sc = testing::copy_fixture("instrument/overlap", tmp.path() / "overlap");
  const fs::path timeline = sc / "fsdp" / "rank0" / "timeline.json";
  json doc = json::parse(read_text(timeline));
  const std::string name = doc["spans"][0]["name"].get<std::string>() + " <&>";
  doc["spans"][0]["name"] = name;
  testing::write_text(timeline, doc.dump(1));
  const Rendered r = render_instrument(sc.string(), tmp.path() / "out");
  EXPECT_TRUE(r.problems.empty()) << r.log;
  const std::string file = read_text(tmp.path() / "out" / "timeline_overlap.svg");
  EXPECT_TRUE(contains(file, html_escape(name) + " (" + doc["spans"][0]["lane"].get<std::string>() + ")")) << name;
  EXPECT_TRUE(contains(html_escape(name), "&lt;&amp;&gt;"));
  EXPECT_FALSE(contains(file, "<&>"));
}

// The numbers after the quoted category `name` on its row of a bar chart's .dat file; empty when there is no row.
std::vector<double> dat_row(const std::string& dat, const std::string& name) {
  std::istringstream lines(dat);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("\"" + name + "\" ", 0) != 0) continue;
    std::istringstream values(line.substr(name.size() + 3));
    std::vector<double> out;
    for (double v; values >> v;) out.push_back(v);
    return out;
  }
  return {};
}

TEST(ReportInstrument, PhaseChartStacksMeansOfTimedSteps) {
  TempDir tmp;
  const Rendered r = render_instrument(fixture("overlap"), tmp.path());
  const std::string dat = read_text(tmp.path() / "phases_overlap.dat");
  // per run: forward + backward, comm_wait, optimizer, data + other: the means summary.phases_ms holds
  for (const std::string run : {"ddp", "fsdp"}) {
    const json phases = testing::fixture_json("instrument/overlap/" + run + "/result.json")["summary"]["phases_ms"];
    auto mean = [&](const char* phase) { return phases[phase]["mean"].get<double>(); };
    const std::vector<double> want = {mean("forward") + mean("backward"), mean("comm_wait"), mean("optimizer"),
                                      mean("data") + mean("other")};
    const std::vector<double> row = dat_row(dat, run);
    ASSERT_EQ(row.size(), want.size()) << run << "\n" << dat;
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(row[i], want[i], 1e-6 * std::abs(want[i])) << run;
  }
  EXPECT_FALSE(contains(dat, "old result")) << "runs without phases are left out";
  EXPECT_TRUE(contains(r.html, "id=\"chart-phases_overlap\""));
}

TEST(ReportInstrument, OverlapTableFromCommRanks) {
  TempDir tmp;
  const Rendered r = render_instrument(fixture("overlap"), tmp.path());
  EXPECT_TRUE(contains(r.html, "<h3>Communication overlap</h3>"));
  // per run: rank 0's comm and exposed ms per step, the median overlap, every rank's overlap and the records, as
  // result.json holds them
  for (const std::string run : {"ddp", "fsdp"}) {
    const json doc = testing::fixture_json("instrument/overlap/" + run + "/result.json");
    const json& comm = doc["comm"];
    std::string per_rank;
    json rank0;
    for (const json& rk : comm["ranks"]) {
      if (rk["rank"] == 0) rank0 = rk;
      per_rank += (per_rank.empty() ? "" : " · ") + std::string("r") + std::to_string(rk["rank"].get<int>()) + " " +
                  fixed(rk["overlap_pct"], 0) + "%";
    }
    const std::string row = "<td>" + run + "</td><td><code>" + doc["context"]["strategy"].get<std::string>() +
                            "</code></td>" + "<td class=\"num\">" + fixed(rank0["comm_ms_per_step"], 2) +
                            "</td><td class=\"num\">" + fixed(rank0["exposed_ms_per_step"], 2) +
                            "</td><td class=\"num\">" + fixed(doc["summary"]["overlap_pct_median"], 1) + "%</td><td>" +
                            html_escape(per_rank) + "</td><td class=\"num\">" + std::to_string(comm["records"].size()) +
                            (comm.value("records_truncated", false) ? " (truncated)" : "") + "</td>";
    EXPECT_TRUE(contains(r.html, row)) << row << "\n" << r.html;
  }
  EXPECT_FALSE(contains(r.html, "<td>single (old result)</td>"));
}

TEST(ReportInstrument, OldResultsContributeNothing) {
  TempDir tmp;
  const fs::path sc = tmp.path() / "old_only";
  testing::write_scenario(sc, "old_only", {"single", "ddp"});
  testing::write_run(sc / "single", testing::minimal_result("single", 1));
  testing::write_run(sc / "ddp", testing::minimal_result("ddp", 2));
  const Rendered r = render_instrument(sc.string(), tmp.path() / "out");
  EXPECT_EQ(r.html, "");
  EXPECT_TRUE(r.problems.empty());
}

TEST(ReportInstrument, BadTimelineIsAProblemNotAFailure) {
  TempDir tmp;
  const fs::path sc = tmp.path() / "bad";
  testing::write_scenario(sc, "bad", {"ddp"});
  testing::write_run(sc / "ddp", testing::minimal_result("ddp", 2));
  testing::write_text(sc / "ddp" / "rank0" / "timeline.json",
                      R"({"rank": 0, "step": 3, "step_ms": 10, "spans": [{"lane": "comm", "name": "x"}]})");
  testing::write_text(sc / "ddp" / "rank1" / "timeline.json", "{ not json");
  const Rendered r = render_instrument(sc.string(), tmp.path() / "out");
  ASSERT_EQ(r.problems.size(), 2u) << r.log;
  EXPECT_TRUE(contains(r.problems[0], "rank0/timeline.json: spans[0]: missing number \"start_us\"")) << r.problems[0];
  EXPECT_TRUE(contains(r.problems[1], "rank1/timeline.json: not valid JSON")) << r.problems[1];
  EXPECT_EQ(r.html, "");
}

TEST(ReportInstrument, CommBenchSectionFromCalibrationFile) {
  TempDir tmp;
  std::ostringstream log;
  std::vector<std::string> problems;
  const fs::path out = tmp.path() / "out";
  fs::create_directories(out);
  // found by searching below the input, as `dtlab report results` finds results/calibration/comm_bench.json
  const std::string html = comm_bench_section({testing::fixtures_dir() + "/instrument"}, out, "out", log, problems);
  EXPECT_TRUE(problems.empty()) << log.str();
  EXPECT_TRUE(contains(html, "<h2>Collective benchmark"));
  EXPECT_TRUE(contains(html, "id=\"chart-busbw_comm_bench\""));

  // what `dtlab comm-bench --json` measured: one series per "op (algorithm)" in name order, then the p2p line
  // across the sizes measured
  const json bench = testing::fixture_json("instrument/calibration/comm_bench.json");
  std::map<std::string, std::vector<json>> series;  // "op (algorithm)" -> rows
  double min_bytes = INFINITY, max_bytes = 0;
  for (const json& row : bench["results"]) {
    series[row["op"].get<std::string>() + " (" + row["algorithm"].get<std::string>() + ")"].push_back(row);
    min_bytes = std::min(min_bytes, row["bytes"].get<double>());
    max_bytes = std::max(max_bytes, row["bytes"].get<double>());
  }
  ASSERT_TRUE(series.count("all_reduce (backend)")) << "calibration's comm-bench runs every op";
  const std::string dat = read_text(out / "busbw_comm_bench.dat");
  std::size_t i = 0;
  for (const auto& [name, rows] : series)
    EXPECT_TRUE(contains(dat, "# series " + std::to_string(i++) + ": " + name + "\n")) << name << "\n" << dat;
  auto g9 = [](double v) {  // the .dat files' number format
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return std::string(buf);
  };
  const double p2p = bench["p2p"]["GBps"];
  EXPECT_TRUE(contains(dat, "# series " + std::to_string(i) + ": point-to-point loopback (reference)\n" +
                                g9(min_bytes) + " " + g9(p2p) + "\n" + g9(max_bytes) + " " + g9(p2p) + "\n"))
      << dat;
  const std::string gp = read_text(out / "busbw_comm_bench.gp");
  EXPECT_TRUE(contains(gp, "set logscale x 2"));
  EXPECT_TRUE(contains(gp, "set format x '%.0b%BB'"));

  // table: busbw at the largest size (64 MiB when measured) as a % of the point-to-point figure
  const std::vector<json>& all_reduce = series.at("all_reduce (backend)");
  auto bytes_less = [](const json& a, const json& b) { return a["bytes"].get<double>() < b["bytes"].get<double>(); };
  const json* ref = &*std::max_element(all_reduce.begin(), all_reduce.end(), bytes_less);
  for (const json& row : all_reduce)
    if (row["bytes"] == 64 * 1024 * 1024) ref = &row;
  const double ref_pct = 100.0 * (*ref)["out_of_place"]["busbw_GBps"].get<double>() / p2p;
  EXPECT_TRUE(contains(html, "<code>all_reduce (backend)</code>"));
  EXPECT_TRUE(contains(html, "<td class=\"num\">" + fixed(ref_pct, 0) + "%</td>")) << html;
  EXPECT_TRUE(contains(html, "Avg bus bandwidth: " + fixed(bench["avg_busbw_GBps"], 3) + " GB/s"));
  EXPECT_TRUE(contains(html, "calibration/comm_bench.json"));
}

TEST(ReportInstrument, NoCommBenchNoSectionAndBadFileIsAProblem) {
  TempDir tmp;
  std::ostringstream log;
  std::vector<std::string> problems;
  EXPECT_EQ(comm_bench_section({testing::fixtures_dir() + "/results"}, tmp.path(), "x", log, problems), "");
  EXPECT_TRUE(problems.empty());

  testing::write_text(tmp.path() / "in" / "comm_bench.json", R"({"tool": "dtlab comm-bench"})");
  EXPECT_EQ(comm_bench_section({(tmp.path() / "in").string()}, tmp.path(), "x", log, problems), "");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(contains(problems[0], "comm_bench.json: missing array \"results\"")) << problems[0];
}

TEST(ReportInstrument, FullReportIncludesEverything) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  std::ostringstream log;
  const fs::path out = tmp.path() / "report";
  ASSERT_EQ(render_report({testing::fixtures_dir() + "/instrument"}, out.string(), log), 0) << log.str();
  const std::string html = read_text(out / "index.html");
  EXPECT_TRUE(contains(html, "id=\"chart-timeline_overlap\""));
  EXPECT_TRUE(contains(html, "id=\"chart-phases_overlap\""));
  EXPECT_TRUE(contains(html, "<h3>Communication overlap</h3>"));
  EXPECT_TRUE(contains(html, "id=\"chart-busbw_comm_bench\""));
  EXPECT_TRUE(fs::exists(out / "busbw_comm_bench.png"));
  EXPECT_LT(html.find("id=\"scenario-overlap\""), html.find("id=\"scenario-comm-bench\""))
      << "the benchmark section follows the scenarios";
}

}  // namespace
}  // namespace dtlab::analysis
