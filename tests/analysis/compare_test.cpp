// compare_test.cpp: `dtlab compare`'s statistics and matching (analysis/compare.hpp) on known samples and on the
// real-run fixtures: the verdict rule (the whole bootstrap interval beyond the threshold), one-number metrics,
// matching by <study>/<run>, the regression gate.
#include "analysis/compare.hpp"

#include <gtest/gtest.h>

#include <random>

#include "tests/analysis/test_util.hpp"

namespace dtlab::analysis {
namespace {

using testing::TempDir;

// n samples around `center` with a relative spread of `spread` (uniform), reproducibly.
std::vector<double> samples(double center, double spread, int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(1.0 - spread, 1.0 + spread);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(center * u(rng));
  return v;
}

TEST(Compare, TheSameDistributionIsNoSignificantChange) {
  const auto m = compare_metric("step_ms", false, samples(100, 0.05, 20, 1), samples(100, 0.05, 20, 2), {});
  EXPECT_EQ(m.verdict, Verdict::no_change) << m.verdict_text;
  ASSERT_TRUE(m.ci_low && m.ci_high);
  EXPECT_LT(*m.ci_low, 1.0);
  EXPECT_GT(*m.ci_high, 1.0);
  EXPECT_FALSE(m.regressed_by(5.0));
}

TEST(Compare, ALargeShiftIsSlowerAndItsIntervalHoldsTheTrueRatio) {
  const auto m = compare_metric("step_ms", false, samples(100, 0.05, 20, 1), samples(150, 0.05, 20, 2), {});
  EXPECT_EQ(m.verdict, Verdict::worse);
  EXPECT_EQ(m.verdict_text, "slower");
  EXPECT_LT(*m.ci_low, 1.5);
  EXPECT_GT(*m.ci_high, 1.5);
  EXPECT_GT(*m.ci_low, 1.05);
  EXPECT_TRUE(m.regressed_by(10.0));
  EXPECT_FALSE(m.regressed_by(80.0));  // 50% slower is no regression "by 80%"
}

TEST(Compare, ASignificantChangeSmallerThanTheThresholdDoesNotCount) {
  // 3% slower with almost no noise: significant, but under the 5% threshold.
  const auto m = compare_metric("step_ms", false, samples(100, 0.001, 20, 1), samples(103, 0.001, 20, 2), {});
  EXPECT_GT(*m.ci_low, 1.0);
  EXPECT_EQ(m.verdict, Verdict::no_change);
  CompareOptions strict;
  strict.threshold_pct = 1.0;
  EXPECT_EQ(compare_metric("step_ms", false, samples(100, 0.001, 20, 1), samples(103, 0.001, 20, 2), strict).verdict,
            Verdict::worse);
}

TEST(Compare, HigherIsBetterMetricsTurnTheVerdictAround) {
  const auto m = compare_metric("tokens_per_s", true, samples(1000, 0.02, 10, 1), samples(500, 0.02, 10, 2), {});
  EXPECT_EQ(m.verdict, Verdict::worse);
  EXPECT_EQ(m.verdict_text, "slower");
  EXPECT_TRUE(m.regressed_by(10.0));
  const auto up = compare_metric("tokens_per_s", true, samples(500, 0.02, 10, 1), samples(1000, 0.02, 10, 2), {});
  EXPECT_EQ(up.verdict, Verdict::better);
  EXPECT_EQ(up.verdict_text, "faster");
}

TEST(Compare, TheThresholdIsTheSameFactorBothWays) {
  // Half the step time is a 2x change, as twice the step time is: both count at a 90% threshold, and neither at 110%.
  CompareOptions factor_two;
  factor_two.threshold_pct = 90.0;
  const auto a = samples(100, 0.01, 20, 1);
  EXPECT_EQ(compare_metric("step_ms", false, a, samples(50, 0.01, 20, 2), factor_two).verdict_text, "faster");
  EXPECT_EQ(compare_metric("step_ms", false, a, samples(200, 0.01, 20, 2), factor_two).verdict_text, "slower");
  const auto halved_tokens = compare_metric("tokens_per_s", true, a, samples(50, 0.01, 20, 2), {});
  EXPECT_TRUE(halved_tokens.regressed_by(90.0));
  EXPECT_FALSE(halved_tokens.regressed_by(110.0));
  factor_two.threshold_pct = 110.0;
  EXPECT_EQ(compare_metric("step_ms", false, a, samples(50, 0.01, 20, 2), factor_two).verdict, Verdict::no_change);
}

TEST(Compare, OneNumberMetricsHaveNoIntervalAndCompareTheRatio) {
  const auto m = compare_metric("peak_memory_bytes", false, {1000.0}, {1200.0}, {});
  EXPECT_FALSE(m.ci_low.has_value());
  EXPECT_EQ(m.verdict_text, "more memory");
  EXPECT_TRUE(m.regressed_by(10.0));
  EXPECT_EQ(compare_metric("peak_memory_bytes", false, {1000.0}, {1000.0}, {}).verdict, Verdict::no_change);
  EXPECT_EQ(compare_metric("comm_wait_ms", false, {0.0, 0.0}, {0.0, 0.0}, {}).verdict, Verdict::not_measured);
}

TEST(Compare, TheBootstrapIsRepeatableForTheSameSeed) {
  const auto a = samples(100, 0.2, 15, 3), b = samples(110, 0.2, 15, 4);
  EXPECT_EQ(bootstrap_median_ratio_ci(a, b, 500, 7), bootstrap_median_ratio_ci(a, b, 500, 7));
}

TEST(Compare, AStudyComparedWithItselfHasNoChangeAnywhere) {
  const std::string study = testing::fixtures_dir() + "/results/baseline";
  const ResultsComparison c = compare_results({study}, {study}, {});
  ASSERT_EQ(c.runs.size(), 2u);  // ddp and single, matched by name
  for (const ComparedRun& r : c.runs) {
    for (const ComparedMetric& m : r.metrics) {
      if (m.verdict == Verdict::not_measured) continue;
      EXPECT_DOUBLE_EQ(m.ratio, 1.0) << r.key << " " << m.metric;
      EXPECT_EQ(m.verdict, Verdict::no_change) << r.key << " " << m.metric;
    }
  }
  EXPECT_EQ(c.regressions(0.0), 0);
  EXPECT_TRUE(testing::contains(format_comparison(c, "A", "B"), "baseline/ddp"));
}

TEST(Compare, RunsAreMatchedByNameAndTheRestListed) {
  TempDir tmp;
  const auto a = testing::copy_fixture("results/baseline", tmp.path() / "a");
  const auto b = testing::copy_fixture("results/baseline", tmp.path() / "b");
  // B's ddp run is slowed 2x in every step: only that run regresses.
  for (const auto& e : std::filesystem::directory_iterator(b / "ddp")) {
    if (!e.is_directory()) continue;
    std::ifstream in(e.path() / "steps.jsonl");
    std::string line, out;
    while (std::getline(in, line)) {
      nlohmann::json j = nlohmann::json::parse(line);
      j["step_ms"] = j["step_ms"].get<double>() * 2;
      out += j.dump() + "\n";
    }
    testing::write_text(e.path() / "steps.jsonl", out);
  }
  const ResultsComparison c = compare_results({a.string()}, {b.string()}, {});
  ASSERT_EQ(c.runs.size(), 2u);
  EXPECT_EQ(c.regressions(10.0), 1);
  for (const ComparedRun& r : c.runs)
    EXPECT_EQ(r.metrics[0].verdict_text, r.key == "baseline/ddp" ? "slower" : "no significant change") << r.key;

  std::filesystem::rename(b / "single", b / "single_renamed");
  nlohmann::json manifest = nlohmann::json::parse(testing::read_text(b / "scenario.json"));
  for (auto& run : manifest["runs"])
    if (run["name"] == "single") run["name"] = "single_renamed", run["dir"] = "single_renamed";
  testing::write_text(b / "scenario.json", manifest.dump());
  const ResultsComparison partial = compare_results({a.string()}, {b.string()}, {});
  EXPECT_EQ(partial.runs.size(), 1u);
  EXPECT_EQ(partial.only_in_a, std::vector<std::string>{"baseline/single"});
  EXPECT_EQ(partial.only_in_b, std::vector<std::string>{"baseline/single_renamed"});
}

TEST(Compare, NothingToMatchIsAnErrorNamingBothSides) {
  const std::string baseline = testing::fixtures_dir() + "/results/baseline";
  const std::string precision = testing::fixtures_dir() + "/results/mixed_precision";
  std::string message = "(no exception)";
  try {
    compare_results({baseline}, {precision}, {});
  } catch (const AnalysisError& e) {
    message = e.what();
  }
  EXPECT_TRUE(testing::contains(message, "no run of")) << message;
  EXPECT_TRUE(testing::contains(message, "baseline/")) << message;
}

}  // namespace
}  // namespace dtlab::analysis
