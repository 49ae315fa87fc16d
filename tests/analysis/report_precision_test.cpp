// report_precision_test.cpp: the precision part (analysis/report_precision.cpp) over the fixture
// fixtures/results/mixed_precision — real single-process runs of tiny in fp32, bf16 and fp16 under a dynamic loss
// scale: each reduced-precision run against its fp32 twin, the loss difference per step, the loss scale over time.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

Scenario mixed_precision() {
  return load_scenario(std::filesystem::path(testing::fixtures_dir()) / "results/mixed_precision");
}

// The twin is the run whose config differs only in precision; a run with another difference has none.
TEST(Precision, EachReducedRunIsPairedWithTheFp32RunThatDiffersOnlyInPrecision) {
  const Scenario sc = mixed_precision();
  const RunResult& fp32 = testing::run_named(sc, "fp32");
  EXPECT_EQ(fp32_twin(sc, testing::run_named(sc, "bf16")), &fp32);
  EXPECT_EQ(fp32_twin(sc, testing::run_named(sc, "fp16")), &fp32);
  Scenario other = sc;
  for (RunResult& r : other.runs)
    if (r.name == "fp32") r.config["train"]["lr"] = 0.5;
  EXPECT_EQ(fp32_twin(other, testing::run_named(other, "bf16")), nullptr) << "another learning rate is not a twin";
}

// A reduced-precision run that trains fewer steps (a slow bf16 run given a shorter schedule) has no twin for its losses
// but keeps one for its step time; any other difference leaves it without either.
TEST(Precision, AShorterRunIsTimedAgainstItsFp32TwinButNotComparedInLoss) {
  Scenario sc = mixed_precision();
  for (RunResult& r : sc.runs)
    if (r.name == "bf16") r.config["train"]["steps"] = 3;
  const RunResult& fp32 = testing::run_named(sc, "fp32");
  const RunResult& bf16 = testing::run_named(sc, "bf16");
  EXPECT_EQ(fp32_twin(sc, bf16), nullptr) << "another schedule length is not a twin for losses";
  EXPECT_EQ(fp32_time_twin(sc, bf16), &fp32);
  EXPECT_EQ(fp32_time_twin(sc, testing::run_named(sc, "fp16")), &fp32) << "the same-length twin, as before";
  for (RunResult& r : sc.runs)
    if (r.name == "bf16") r.config["train"]["lr"] = 0.5;
  EXPECT_EQ(fp32_time_twin(sc, testing::run_named(sc, "bf16")), nullptr) << "another learning rate is not a twin";
}

// The part: takeaways with the largest loss difference computed from the steps, the loss-difference and loss-scale
// charts, a table row per reduced-precision run.
TEST(Precision, ThePartComparesLossesMemoryAndTimeAndDrawsTheLossScale) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  const Scenario sc = mixed_precision();
  testing::TempDir tmp;
  std::ostringstream log;
  std::vector<std::string> problems;
  SectionContext ctx{sc, "mixed", tmp.path(), tmp.path().string(), log, problems};
  const std::string html = precision_part(ctx);
  EXPECT_TRUE(problems.empty()) << problems.front();
  const RunResult& fp32 = testing::run_named(sc, "fp32");
  for (const char* name : {"bf16", "fp16"}) {
    const RunResult& r = testing::run_named(sc, name);
    double largest = 0;
    for (const StepRecord& s : r.steps)
      for (const StepRecord& t : fp32.steps)
        if (s.step == t.step) largest = std::max(largest, std::fabs(s.loss - t.loss));
    EXPECT_NE(html.find("<strong>" + std::string(name) + "</strong> (params " + name), std::string::npos) << html;
    EXPECT_NE(html.find("losses within " + testing::fixed(largest, 4) + " nats of fp32's over " +
                        std::to_string(r.steps.size()) + " steps"),
              std::string::npos)
        << name << ": " << html;
    EXPECT_NE(html.find("<tr><td>" + std::string(name) + "</td>"), std::string::npos) << name;
  }
  const RunResult& fp16 = testing::run_named(sc, "fp16");
  ASSERT_FALSE(fp16.steps.empty());
  EXPECT_TRUE(std::isfinite(fp16.steps.front().loss_scale)) << "fp16 records its loss scale per step";
  EXPECT_FALSE(std::isfinite(testing::run_named(sc, "bf16").steps.front().loss_scale)) << "bf16 has none";
  EXPECT_NE(html.find("loss scale " + testing::fixed(fp16.steps.front().loss_scale, 0) + " → " +
                      testing::fixed(fp16.steps.back().loss_scale, 0)),
            std::string::npos)
      << html;
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "precision_delta_mixed.png"));
  const std::string gp = testing::read_text(tmp.path() / "precision_loss_scale_mixed.gp");
  EXPECT_NE(gp.find("set logscale y 2"), std::string::npos);
  EXPECT_NE(gp.find("title 'fp16'"), std::string::npos) << gp;
  EXPECT_EQ(gp.find("title 'bf16'"), std::string::npos) << "no loss scale, no line";

  Scenario fp32_only = sc;
  fp32_only.runs.erase(fp32_only.runs.begin() + 1, fp32_only.runs.end());
  SectionContext none{fp32_only, "none", tmp.path(), tmp.path().string(), log, problems};
  EXPECT_EQ(precision_part(none), "");
}

}  // namespace
}  // namespace dtlab::analysis
