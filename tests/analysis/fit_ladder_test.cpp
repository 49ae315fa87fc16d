// fit_ladder_test.cpp: what fits under a memory cap (analysis/fit_ladder.hpp, analysis/report_fit.cpp) over the
// fixture fixtures/memory/fit — real jobs of tiny (16 blocks) at two widths under memory.limit=48MiB, world 2, in
// which DDP runs out of memory at the larger width (result.json status oom) and FULL_SHARD fits — and the scenario
// loader's handling of a run that stopped out of memory.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "analysis/fit_ladder.hpp"
#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kCap = 48.0 * 1024 * 1024;

Scenario fit_fixture() { return load_scenario(std::filesystem::path(testing::fixtures_dir()) / "memory/fit"); }

// The stopped run is kept apart, with its refusal read back; the completed runs load as before.
TEST(FitLadder, AnOutOfMemoryRunLoadsApartWithItsRefusal) {
  const Scenario sc = fit_fixture();
  ASSERT_EQ(sc.runs.size(), 3u);
  ASSERT_EQ(sc.oom_runs.size(), 1u);
  const RunResult& oom = sc.oom_runs.front();
  EXPECT_EQ(oom.name, "ddp@d128");
  ASSERT_TRUE(oom.oom.has_value());
  EXPECT_DOUBLE_EQ(oom.oom->limit_bytes, kCap);
  EXPECT_GT(oom.oom->in_use_bytes + oom.oom->requested_bytes, kCap);
  EXPECT_FALSE(oom.oom->category.empty());
  EXPECT_NE(oom.oom->message.find("ran out of memory"), std::string::npos) << oom.oom->message;
  for (const RunResult& r : sc.runs) EXPECT_FALSE(r.oom.has_value()) << r.name;
}

TEST(FitLadder, SeriesByNameCellsBySizeFitOrNotAgainstTheCap) {
  const std::optional<FitLadder> ladder = fit_ladder(fit_fixture());
  ASSERT_TRUE(ladder.has_value());
  EXPECT_DOUBLE_EQ(ladder->limit_bytes, kCap);
  ASSERT_EQ(ladder->series.size(), 2u);
  const FitSeries& ddp = ladder->series[0];
  const FitSeries& full_shard = ladder->series[1];
  EXPECT_EQ(ddp.name, "ddp");
  EXPECT_EQ(full_shard.name, "fsdp_full_shard");
  ASSERT_EQ(ddp.cells.size(), 2u);
  ASSERT_EQ(full_shard.cells.size(), 2u);
  EXPECT_EQ(ddp.cells[0].step, "d64");
  EXPECT_EQ(ddp.cells[1].step, "d128");
  EXPECT_LT(ddp.cells[0].params, ddp.cells[1].params);
  EXPECT_TRUE(ddp.cells[0].fits);
  EXPECT_FALSE(ddp.cells[1].fits);
  EXPECT_GT(ddp.cells[1].peak_bytes, kCap) << "in use + the refused request";
  EXPECT_TRUE(full_shard.cells[1].fits);
  EXPECT_LE(full_shard.cells[1].peak_bytes, kCap);
  EXPECT_GT(full_shard.cells[1].peak_bytes, 0);
  EXPECT_EQ(ddp.largest_fitting_params(), ddp.cells[0].params);
  EXPECT_EQ(full_shard.largest_fitting_params(), full_shard.cells[1].params);
  for (const FitSeries& s : ladder->series)
    for (const FitCell& c : s.cells) EXPECT_TRUE(c.predicted_peak_bytes.has_value()) << s.name << "@" << c.step;
  Scenario no_cap = fit_fixture();
  no_cap.oom_runs.clear();
  for (RunResult& r : no_cap.runs) r.raw["memory"].erase("limit_bytes");
  EXPECT_FALSE(fit_ladder(no_cap).has_value()) << "without a recorded cap there is no ladder";
}

// The report part: the takeaways name the strategy that trained the larger model and the width where they part,
// the table marks each cell, the chart carries the cap; the intro lists the stopped run.
TEST(FitLadder, ThePartTeachesFromTheRunsAndTheIntroListsTheStoppedRun) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  const Scenario sc = fit_fixture();
  testing::TempDir tmp;
  std::ostringstream log;
  std::vector<std::string> problems;
  SectionContext ctx{sc, "fit", tmp.path(), tmp.path().string(), log, problems};
  const std::string html = fit_part(ctx);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_NE(html.find("What fits under a memory cap"), std::string::npos);
  EXPECT_NE(html.find("Under 48 MiB per rank, <strong>fsdp_full_shard</strong> trained models up to"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("At d128 ("), std::string::npos) << html;
  EXPECT_NE(html.find("fit — fsdp_full_shard; out of memory — ddp"), std::string::npos) << html;
  EXPECT_NE(html.find("<td class=\"oom\">out of memory"), std::string::npos) << html;
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "fit_peak_fit.png"));
  const std::string dat = testing::read_text(tmp.path() / "fit_peak_fit.dat");
  EXPECT_NE(dat.find(": cap (memory.limit)\n"), std::string::npos) << dat;
  // The stopped run is marked where it stopped, in its series' colour (ddp's line comes first: lt 1).
  EXPECT_NE(dat.find(": ddp (out of memory)\n"), std::string::npos) << dat;
  const std::string gp = testing::read_text(tmp.path() / "fit_peak_fit.gp");
  EXPECT_NE(gp.find("with points lt 1 pt 2 ps 1.6 notitle"), std::string::npos) << gp;

  std::ostringstream report_log;
  const std::filesystem::path out = tmp.path() / "report";
  ASSERT_EQ(render_report({testing::fixtures_dir() + "/memory/fit"}, out.string(), report_log), 0) << report_log.str();
  const std::string page = testing::read_text(out / "index.html");
  EXPECT_NE(page.find("<strong>Out of memory.</strong>"), std::string::npos);
  EXPECT_NE(page.find("<tr><td>ddp@d128</td><td>ddp</td>"), std::string::npos) << "the stopped run's row";
}

}  // namespace
}  // namespace dtlab::analysis
