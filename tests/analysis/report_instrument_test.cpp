// report_instrument_test.cpp: the instrumentation views of the report from small fixtures (by pattern, not
// bytes): one-step timeline SVG, step time by phase, overlap table, collective benchmark; old results add nothing.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;
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

TEST(ReportInstrument, TimelineDrawsEveryRankAndSpan) {
  TempDir tmp;
  const Rendered r = render_instrument(fixture("overlap"), tmp.path());
  EXPECT_TRUE(r.problems.empty()) << r.log;

  // one figure, also written as a standalone file
  EXPECT_EQ(count(r.html, "id=\"chart-timeline_overlap\""), 1u);
  const std::string file = read_text(tmp.path() / "timeline_overlap.svg");
  EXPECT_EQ(file.rfind("<?xml", 0), 0u);
  EXPECT_TRUE(contains(file, "xmlns=\"http://www.w3.org/2000/svg\""));

  // panels for the two runs with timelines (the old run has none), two rows per rank
  EXPECT_TRUE(contains(r.html, "ddp — ddp, step 4"));
  EXPECT_TRUE(contains(r.html, "fsdp — fsdp_full_shard, step 4"));
  EXPECT_FALSE(contains(r.html, "single (old result) —"));
  EXPECT_EQ(count(file, ">rank 0 main</text>"), 2u);
  EXPECT_EQ(count(file, ">rank 1 main</text>"), 2u);
  EXPECT_EQ(count(file, ">comm</text>"), 4u);

  // one bar per span (7 per ddp rank, 10 per fsdp rank), each with a tooltip naming it and its lane
  EXPECT_EQ(count(file, "\"><title>"), 2u * 7u + 2u * 10u + 4u /* step-end markers */);
  EXPECT_TRUE(contains(file, "<title>grads-all-reduce bucket0 (comm): 20.00–27.00 ms</title>"));
  EXPECT_TRUE(contains(file, "<title>optimizer-step (optimizer): 45.00–46.50 ms</title>"));

  // names from files are escaped; no raw markup from the fixture reaches the page
  EXPECT_TRUE(contains(file, "params-all-gather fsdp.unit1 &lt;&amp;&gt; (comm)"));
  EXPECT_FALSE(contains(file, "unit1 <&>"));

  // x coordinates stay inside the plot area (150 .. 860)
  const std::regex rect_x("<rect x=\"([0-9.]+)\" y=\"[0-9.]+\" width=\"([0-9.]+)\"");
  int bars = 0;
  for (auto it = std::sregex_iterator(file.begin(), file.end(), rect_x); it != std::sregex_iterator(); ++it) {
    const double x = std::stod((*it)[1]), w = std::stod((*it)[2]);
    if (x < 100) continue;  // legend swatches
    EXPECT_GE(x, 150.0);
    EXPECT_LE(x + w, 860.0 + 1e-6);
    ++bars;
  }
  EXPECT_GT(bars, 34);
}

TEST(ReportInstrument, PhaseChartStacksMeansOfTimedSteps) {
  TempDir tmp;
  const Rendered r = render_instrument(fixture("overlap"), tmp.path());
  const std::string dat = read_text(tmp.path() / "phases_overlap.dat");
  // ddp: forward 10 + backward 20; comm_wait 4; optimizer 3; data 0.5 + other mean over steps 3..6 (1.45)
  EXPECT_TRUE(contains(dat, "\"ddp\" 30 4 3 1.95")) << dat;
  EXPECT_TRUE(contains(dat, "\"fsdp\" 36 9 1.5 1.95")) << dat;
  EXPECT_FALSE(contains(dat, "old result")) << "runs without phases are left out";
  EXPECT_TRUE(contains(r.html, "id=\"chart-phases_overlap\""));
}

TEST(ReportInstrument, OverlapTableFromCommRanks) {
  TempDir tmp;
  const Rendered r = render_instrument(fixture("overlap"), tmp.path());
  EXPECT_TRUE(contains(r.html, "<h3>Communication overlap</h3>"));
  const std::regex ddp_row(
      "<td>ddp</td><td><code>ddp</code></td><td class=\"num\">8\\.00</td><td class=\"num\">3\\.00</td>"
      "<td class=\"num\">62\\.5%</td><td>r0 63% · r1 61%</td><td class=\"num\">12</td>");
  EXPECT_TRUE(std::regex_search(r.html, ddp_row)) << r.html;
  EXPECT_TRUE(contains(r.html, "<td class=\"num\">40.0%</td>"));
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

  const std::string dat = read_text(out / "busbw_comm_bench.dat");
  EXPECT_TRUE(contains(dat, "# series 0: all_gather (backend)"));
  EXPECT_TRUE(contains(dat, "# series 1: all_reduce (backend)"));
  EXPECT_TRUE(contains(dat, "# series 2: all_reduce (ring)"));
  EXPECT_TRUE(contains(dat, "# series 3: point-to-point loopback (reference)\n1024 2.237\n67108864 2.237\n")) << dat;
  const std::string gp = read_text(out / "busbw_comm_bench.gp");
  EXPECT_TRUE(contains(gp, "set logscale x 2"));
  EXPECT_TRUE(contains(gp, "set format x '%.0b%BB'"));

  // table: largest size and % of the point-to-point figure (all_reduce backend at 64 MiB: 1.997 / 2.237)
  EXPECT_TRUE(contains(html, "<code>all_reduce (backend)</code>"));
  EXPECT_TRUE(contains(html, "89%")) << html;
  EXPECT_TRUE(contains(html, "Avg bus bandwidth:"));
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
