// report_accumulation_test.cpp: the gradient-accumulation part (analysis/report_accumulation.cpp) over the fixture
// fixtures/studies/accumulation — real jobs of tiny at world 2, one global batch of 8 in 1 and 4 micro-steps, under
// DDP (synchronises once per optimizer step) and FULL_SHARD (gathers and reduce-scatters every micro-step).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

Scenario accumulation() {
  return load_scenario(std::filesystem::path(testing::fixtures_dir()) / "studies/accumulation");
}

// The fixture itself: what the part's lesson rests on, measured (DDP's bytes per step flat, FULL_SHARD's x4).
TEST(Accumulation, DdpSendsTheSameBytesPerStepAndFullShardSendsThemPerMicroStep) {
  const Scenario sc = accumulation();
  const RunResult& ddp1 = testing::run_named(sc, "ddp@a1");
  const RunResult& ddp4 = testing::run_named(sc, "ddp@a4");
  const RunResult& fs1 = testing::run_named(sc, "fsdp_full_shard@a1");
  const RunResult& fs4 = testing::run_named(sc, "fsdp_full_shard@a4");
  EXPECT_EQ(ddp4.config["train"]["accumulation"], 4);
  ASSERT_TRUE(ddp1.comm_bytes_per_step && ddp4.comm_bytes_per_step && fs1.comm_bytes_per_step &&
              fs4.comm_bytes_per_step);
  EXPECT_DOUBLE_EQ(*ddp4.comm_bytes_per_step, *ddp1.comm_bytes_per_step);
  EXPECT_NEAR(*fs4.comm_bytes_per_step / *fs1.comm_bytes_per_step, 4.0, 0.05);
}

TEST(Accumulation, ThePartSaysWhoCommunicatesPerMicroStepFromTheRuns) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  const Scenario sc = accumulation();
  testing::TempDir tmp;
  std::ostringstream log;
  std::vector<std::string> problems;
  SectionContext ctx{sc, "acc", tmp.path(), tmp.path().string(), log, problems};
  const std::string html = accumulation_part(ctx);
  EXPECT_TRUE(problems.empty()) << problems.front();
  const double mib = 1024.0 * 1024.0;
  const RunResult& ddp1 = testing::run_named(sc, "ddp@a1");
  EXPECT_NE(html.find("<strong>ddp</strong>: " + testing::fixed(*ddp1.comm_bytes_per_step / mib, 2) +
                      " MiB sent per optimizer step at 1 micro-step"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("it communicates once per optimizer step, whatever the accumulation"), std::string::npos);
  EXPECT_NE(html.find("<strong>fsdp_full_shard</strong>"), std::string::npos);
  EXPECT_NE(html.find("it communicates on every micro-step"), std::string::npos) << html;
  EXPECT_NE(html.find("matched the measured within 1% for 4 of 4 runs"), std::string::npos) << html;
  for (const char* chart : {"accum_bytes_acc", "accum_peak_acc", "accum_time_acc"})
    EXPECT_TRUE(std::filesystem::exists(tmp.path() / (std::string(chart) + ".png"))) << chart;

  Scenario one_split = sc;
  one_split.runs.erase(std::remove_if(one_split.runs.begin(), one_split.runs.end(),
                                      [](const RunResult& r) { return r.name.find("@a4") != std::string::npos; }),
                       one_split.runs.end());
  SectionContext none{one_split, "none", tmp.path(), tmp.path().string(), log, problems};
  EXPECT_EQ(accumulation_part(none), "") << "one accumulation is not a sweep";
}

}  // namespace
}  // namespace dtlab::analysis
