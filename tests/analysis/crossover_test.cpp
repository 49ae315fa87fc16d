// crossover_test.cpp: the crossover of a link-rate sweep (analysis/crossover.hpp) — series from run names and
// result.json facts, and the rate where exposed communication falls under the threshold.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <utility>
#include <vector>

#include "analysis/crossover.hpp"
#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

RunResult swept_run(const std::string& name, double bps, double step_ms, double wait_ms, double predicted_step,
                    double predicted_exposed) {
  RunResult r;
  r.name = name;
  r.inter_link_bps = bps;
  r.step_ms_median = step_ms;
  r.comm_wait_ms_median = wait_ms;
  r.raw = {{"prediction", {{"step_ms", predicted_step}, {"comm", {{"exposed_ms", predicted_exposed}}}}}};
  return r;
}

TEST(Crossover, SeriesAreRunNamesBeforeTheAtSortedByRate) {
  Scenario sc;
  sc.runs.push_back(swept_run("ddp@1gbit", 1e9, 500, 50, 520, 40));
  sc.runs.push_back(swept_run("ddp@200mbit", 200e6, 1000, 600, 950, 500));
  sc.runs.push_back(swept_run("zero1@1gbit", 1e9, 600, 100, 610, 90));  // one rate: not a curve
  RunResult loopback;
  loopback.name = "single";
  loopback.step_ms_median = 400;
  sc.runs.push_back(loopback);
  const auto series = crossover_series(sc);
  ASSERT_EQ(series.size(), 1u);
  const auto& ddp = series.at("ddp");
  ASSERT_EQ(ddp.size(), 2u);
  EXPECT_DOUBLE_EQ(ddp[0].rate_mbps, 200);
  EXPECT_DOUBLE_EQ(ddp[0].exposed_pct, 60);
  EXPECT_DOUBLE_EQ(ddp[1].exposed_pct, 10);
  ASSERT_TRUE(ddp[0].predicted_exposed_pct.has_value());
  EXPECT_NEAR(*ddp[0].predicted_exposed_pct, 100.0 * 500 / 950, 1e-12);
}

// The overlap a CPU rank loses to the calls inside its node slows its compute, and no rank waits for it: the
// predicted exposed share leaves it out, as the measured one (the least wait) does. Older predictions have no such key.
TEST(Crossover, ThePredictedExposedLeavesOutTheOverlapLostInsideANode) {
  Scenario sc;
  sc.runs.push_back(swept_run("fsdp_hybrid@1gbit", 1e9, 1000, 100, 1000, 250));
  sc.runs.push_back(swept_run("fsdp_hybrid@4gbit", 4e9, 1000, 50, 1000, 130));
  sc.runs[0].raw["prediction"]["comm"]["overlap_lost_in_node_ms"] = 70.0;
  const auto points = crossover_series(sc).at("fsdp_hybrid");
  ASSERT_TRUE(points[0].predicted_exposed_ms.has_value());
  EXPECT_DOUBLE_EQ(*points[0].predicted_exposed_ms, 180);
  EXPECT_DOUBLE_EQ(*points[0].predicted_exposed_pct, 18);
  EXPECT_DOUBLE_EQ(*points[1].predicted_exposed_ms, 130) << "without the key, the prediction's exposed_ms";
}

// Each measured step's share is its least wait over its step time; a point keeps the lowest and the highest.
StepRecord step_with_least(std::int64_t n, double step_ms, double least_ms) {
  StepRecord s;
  s.step = n;
  s.step_ms = step_ms;
  s.comm_wait_least_ms = least_ms;
  return s;
}

TEST(Crossover, EachPointKeepsItsStepsLowestAndHighestShare) {
  Scenario sc;
  for (const auto& [name, bps] : {std::pair{"ddp@200mbit", 200e6}, std::pair{"ddp@1gbit", 1e9}}) {
    RunResult r = swept_run(name, bps, 500, 80, 500, 40);
    r.comm_wait_least_ms_median = 50;
    r.steps = {step_with_least(1, 400, std::nan("")), step_with_least(2, 400, 20), step_with_least(3, 500, 100),
               step_with_least(4, 600, 60)};  // step 1: a warm-up step, no least wait: 5%, 20%, 10%
    sc.runs.push_back(r);
  }
  const auto points = crossover_series(sc).at("ddp");
  ASSERT_TRUE(points[1].exposed_pct_low.has_value());
  EXPECT_DOUBLE_EQ(*points[1].exposed_pct_low, 5);
  EXPECT_DOUBLE_EQ(*points[1].exposed_pct_high, 20);
  EXPECT_DOUBLE_EQ(points[1].exposed_pct, 10) << "the point itself stays the median least wait";
  EXPECT_TRUE(series_crossings(points).measured_range.has_value());
  // Without the run's least wait the share is rank 0's, and the steps give no range for it.
  sc.runs[0].comm_wait_least_ms_median.reset();
  EXPECT_FALSE(crossover_series(sc).at("ddp")[0].exposed_pct_low.has_value());
  EXPECT_FALSE(series_crossings(crossover_series(sc).at("ddp")).measured_range.has_value());
}

TEST(Crossover, TheRateIsInterpolatedInLogRate) {
  // 40% at 100, 20% at 400, 5% at 1600: 10% is two thirds of the way from 400 to 1600 in log rate.
  const Crossing c = crossing_rate({{100, 40}, {400, 20}, {1600, 5}}, 10);
  EXPECT_EQ(c.kind, Crossing::within);
  EXPECT_NEAR(c.rate_mbps, 400 * std::pow(4.0, 2.0 / 3.0), 1e-9);
  EXPECT_EQ(crossing_rate({{100, 8}, {400, 2}}, 10).kind, Crossing::below_range);
  const Crossing above = crossing_rate({{100, 80}, {400, 30}}, 10);
  EXPECT_EQ(above.kind, Crossing::above_range);
  EXPECT_DOUBLE_EQ(above.rate_mbps, 400);
  EXPECT_EQ(crossing_rate({}, 10).kind, Crossing::none);
  EXPECT_DOUBLE_EQ(crossing_rate({{100, 30}, {200, 10}}, 10).rate_mbps, 200) << "exactly at the threshold";
}

// The report part: two charts (measured and predicted curves) and a row per series with its crossing rates.
TEST(Crossover, ThePartDrawsBothChartsAndTabulatesTheCrossings) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  Scenario sc;
  sc.name = "sweep";
  // Exposed share 40% at 100 Mbit/s, 20% at 400, 5% at 1600 (measured); predicted 30%, 8%, 2%.
  sc.runs.push_back(swept_run("ddp@100mbit", 100e6, 1000, 400, 1000, 300));
  sc.runs.push_back(swept_run("ddp@400mbit", 400e6, 500, 100, 500, 40));
  sc.runs.push_back(swept_run("ddp@1600mbit", 1600e6, 400, 20, 400, 8));
  testing::TempDir tmp;
  std::ostringstream log;
  std::vector<std::string> problems;
  SectionContext ctx{sc, "sweep", tmp.path(), tmp.path().string(), log, problems};
  const std::string html = crossover_part(ctx);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_NE(html.find("Crossover: where communication stops hiding"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "crossover_step_sweep.png"));
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "crossover_exposed_sweep.png"));
  const std::string dat = testing::read_text(tmp.path() / "crossover_exposed_sweep.dat");
  EXPECT_NE(dat.find(": 10% of the step\n100 10\n1600 10"), std::string::npos) << "the threshold line\n" << dat;
  // measured: 400 * 4^(2/3) = 1008 Mbit/s -> "1.0 Gbit/s"; predicted: 30% -> 8% crosses between 100 and 400 at
  // t = 20/22 of the way: 100 * 4^(10/11) = 352.6 Mbit/s.
  EXPECT_NE(html.find("<tr><td>ddp</td><td>100 Mbit/s – 1.6 Gbit/s</td><td class=\"num\">40%</td><td "
                      "class=\"num\">5%</td><td>at 1.0 Gbit/s</td><td>at 353 Mbit/s</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_EQ(html.find("(steps: "), std::string::npos) << "runs without their steps' least waits give no range";

  // With each step's least wait: 30–50%, 8–30%, 2–12% of the steps, the table gives the range they allow.
  const std::vector<std::vector<double>> step_least = {{300, 400, 500}, {40, 100, 150}, {8, 20, 48}};
  for (size_t i = 0; i < sc.runs.size(); ++i) {
    RunResult& r = sc.runs[i];
    r.comm_wait_least_ms_median = r.comm_wait_ms_median;
    for (size_t k = 0; k < 3; ++k)
      r.steps.push_back(step_with_least(static_cast<std::int64_t>(k + 1), r.step_ms_median, step_least[i][k]));
  }
  const std::string with_steps = crossover_part(ctx);
  EXPECT_NE(with_steps.find("<td>at 1.0 Gbit/s (steps: 353 Mbit/s – over 1.6 Gbit/s)</td>"), std::string::npos)
      << with_steps;
  EXPECT_NE(with_steps.find("whatever the steps' distribution"), std::string::npos) << "the range is explained";
  Scenario loopback;
  loopback.runs.push_back(RunResult{});
  SectionContext none{loopback, "none", tmp.path(), tmp.path().string(), log, problems};
  EXPECT_EQ(crossover_part(none), "") << "no sweep, no part";
}

}  // namespace
}  // namespace dtlab::analysis
