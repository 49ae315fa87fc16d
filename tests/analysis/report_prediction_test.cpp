// report_prediction_test.cpp: the "Predicted vs measured" report part -- charts and error table from the fixture
// study under fixtures/prediction/, nothing for results without predictions, projections labelled.
#include <gtest/gtest.h>

#include <sstream>

#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::contains;
using testing::read_text;
using testing::TempDir;

// Renders prediction_part alone for `sc` into `out_dir`.
std::string render_part(const Scenario& sc, const fs::path& out_dir, std::vector<std::string>& problems) {
  std::ostringstream log;
  SectionContext ctx{sc, sc.name, out_dir, out_dir.string(), log, problems};
  return prediction_part(ctx);
}

TEST(ReportPrediction, FixtureStudyChartsAndTable) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  TempDir tmp;
  const fs::path out = tmp.path() / "report";
  std::ostringstream log;
  ASSERT_EQ(render_report({testing::fixtures_dir() + "/prediction"}, out.string(), log), 0) << log.str();
  const std::string html = read_text(out / "index.html");
  EXPECT_TRUE(contains(html, "<h3>Predicted vs measured</h3>"));
  EXPECT_TRUE(contains(html, "3 of 4 runs carry a prediction. Machine profile: labbox_cpu, measured."));
  for (const char* kind : {"pred_step_time", "pred_memory", "pred_scatter_step", "pred_scatter_peak"}) {
    const std::string id = std::string(kind) + "_sharding";
    EXPECT_TRUE(contains(html, "id=\"chart-" + id + "\"")) << id;
    EXPECT_TRUE(fs::exists(out / (id + ".png"))) << id;
  }
  // twin bars: predicted and measured step time per run with a prediction (single has none)
  const std::string bars = read_text(out / "pred_step_time_sharding.dat");
  EXPECT_TRUE(contains(bars, "\"ddp\" 500 520")) << bars;
  EXPECT_TRUE(contains(bars, "\"fsdp_full_shard\" 600 525")) << bars;
  EXPECT_FALSE(contains(bars, "single")) << bars;
  // memory: a predicted and a measured stack per run
  const std::string mem = read_text(out / "pred_memory_sharding.dat");
  EXPECT_TRUE(contains(mem, "\"zero1 · predicted\"")) << mem;
  EXPECT_TRUE(contains(mem, "\"zero1 · measured\"")) << mem;
  // scatter: each run's error in its legend entry, and the y = x reference
  const std::string scatter = read_text(out / "pred_scatter_step_sharding.gp");
  EXPECT_TRUE(contains(scatter, "title 'fsdp_full_shard (+14.3%)'")) << scatter;
  EXPECT_TRUE(contains(scatter, "title 'y = x (exact)'")) << scatter;
  // error table: exact kept state, relative errors elsewhere
  EXPECT_TRUE(contains(html, "<span class=\"range\">(exact)</span>"));
  EXPECT_TRUE(contains(html, "<span class=\"range\">(+11.8%)</span>"));  // zero1's peak
  EXPECT_TRUE(contains(html, "<span class=\"range\">(-3.8%)</span>"));   // ddp's step time
  EXPECT_TRUE(contains(html, "fixture: numbers are synthetic"));         // prediction notes
  EXPECT_FALSE(contains(html, "(projection)"));
}

TEST(ReportPrediction, NothingWithoutPredictions) {
  TempDir tmp;
  std::vector<std::string> problems;
  const Scenario sc = load_scenario(testing::fixtures_dir() + "/results/baseline");
  EXPECT_EQ(render_part(sc, tmp.path(), problems), "");
  EXPECT_TRUE(problems.empty());
}

TEST(ReportPrediction, ProjectionsAreLabelled) {
  TempDir tmp;
  json doc = testing::minimal_result("fsdp_full_shard", 2);
  doc["prediction"] = {{"label", "projection"},          {"profile", "h100_sxm"},
                       {"profile_kind", "spec-sheet"},   {"rank", 0},
                       {"memory_bytes", json::object()}, {"step_ms", 12.5}};
  testing::write_run(tmp.path() / "s" / "big", doc);
  testing::write_scenario(tmp.path() / "s", "scaling", {"big"});
  std::vector<std::string> problems;
  const std::string html = render_part(load_scenario(tmp.path() / "s"), tmp.path(), problems);
  EXPECT_TRUE(contains(html, "<strong>Projection.</strong>")) << html;
  EXPECT_TRUE(contains(html, "h100_sxm, spec-sheet")) << html;
  EXPECT_TRUE(contains(html, "<td>projection</td>")) << html;
  // Chart data is written before gnuplot runs: checked with or without gnuplot.
  EXPECT_TRUE(contains(read_text(tmp.path() / "pred_step_time_scaling.dat"), "\"big (projection)\" 12.5 410"));
  if (!gnuplot_available())
    GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox): the charts were not rendered, so the "
                    "render is not checked for problems (the labels and chart data above were)";
  EXPECT_TRUE(problems.empty()) << (problems.empty() ? "" : problems[0]);
}

TEST(ReportPrediction, MalformedPredictionIsAProblemNotACrash) {
  TempDir tmp;
  json doc = testing::minimal_result("ddp", 2);
  doc["prediction"] = json::array();
  testing::write_run(tmp.path() / "s" / "bad", doc);
  testing::write_scenario(tmp.path() / "s", "broken", {"bad"});
  std::vector<std::string> problems;
  const std::string html = render_part(load_scenario(tmp.path() / "s"), tmp.path(), problems);
  EXPECT_TRUE(contains(html, "class=\"problem\"")) << html;
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(contains(problems[0], "\"prediction\"")) << problems[0];
}

}  // namespace
}  // namespace dtlab::analysis
