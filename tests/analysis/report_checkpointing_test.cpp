// report_checkpointing_test.cpp: the activation-checkpointing part (analysis/report_checkpointing.cpp) over the
// fixture fixtures/studies/checkpointing — real jobs of tiny at world 2 under DDP, 64 and 256 tokens per sequence,
// without checkpointing, selective and full.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

Scenario checkpointing() {
  return load_scenario(std::filesystem::path(testing::fixtures_dir()) / "studies/checkpointing");
}

double activations(const Scenario& sc, const char* name) { return *testing::run_named(sc, name).memory->activations; }

// What the part rests on, measured: recomputing holds fewer activations, and the longer sequence holds more.
TEST(Checkpointing, RecomputingHoldsLessAndLongerSequencesHoldMore) {
  const Scenario sc = checkpointing();
  for (const char* seq : {"seq64", "seq256"}) {
    SCOPED_TRACE(seq);
    const std::string s = seq;
    EXPECT_LT(activations(sc, (s + "@full").c_str()), activations(sc, (s + "@none").c_str()));
    EXPECT_LT(activations(sc, (s + "@selective").c_str()), activations(sc, (s + "@none").c_str()));
  }
  EXPECT_GT(activations(sc, "seq256@none"), 2 * activations(sc, "seq64@none"));
}

std::string render(const Scenario& sc, const testing::TempDir& tmp, std::vector<std::string>& problems) {
  std::ostringstream log;
  SectionContext ctx{sc, "ac", tmp.path(), tmp.path().string(), log, problems};
  return checkpointing_part(ctx);
}

TEST(Checkpointing, ThePartDrawsTheTradeAndTeachesFromTheRuns) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  const Scenario sc = checkpointing();
  testing::TempDir tmp;
  std::vector<std::string> problems;
  const std::string html = render(sc, tmp, problems);
  EXPECT_TRUE(problems.empty()) << problems.front();
  // The takeaway of the longer series, with its numbers from the runs.
  const std::string full = testing::fixed(activations(sc, "seq256@full") / kMiB, 1);
  const std::string none = testing::fixed(activations(sc, "seq256@none") / kMiB, 1);
  EXPECT_NE(html.find("<strong>seq256 (256 tokens)</strong>: full checkpointing holds " + full +
                      " MiB of activations against " + none + " MiB without"),
            std::string::npos)
      << html;
  const double saved_long = activations(sc, "seq256@none") - activations(sc, "seq256@full");
  EXPECT_NE(html.find("Checkpointing saves " + testing::fixed(saved_long / kMiB, 1) + " MiB at seq256"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td>selective"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "ac_pareto_ac.png"));
  const std::string dat = testing::read_text(tmp.path() / "ac_pareto_ac.dat");
  EXPECT_NE(dat.find("\"selective\""), std::string::npos) << "points are labelled by setting: " << dat;
}

// A setting with more memory than another of its series and every step slower is marked as beaten on both; with
// none beaten (or step ranges that overlap), the takeaway says none is.
TEST(Checkpointing, ASettingBeatenOnBothMemoryAndTimeIsNamed) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  Scenario sc = checkpointing();
  for (RunResult& r : sc.runs) {  // less memory, more time: a frontier
    r.step_ms_median = 1e9 / *r.memory->activations;
    r.step_ms_min = 0.9 * r.step_ms_median;
    r.step_ms_max = 1.1 * r.step_ms_median;
  }
  testing::TempDir tmp;
  std::vector<std::string> problems;
  EXPECT_EQ(render(sc, tmp, problems).find("(beaten on both)"), std::string::npos);
  const RunResult& none = testing::run_named(sc, "seq64@none");
  const double none_min = none.step_ms_min;
  for (RunResult& r : sc.runs)
    if (r.name == "seq64@selective") {
      r.memory->activations = activations(sc, "seq64@none") * 2;  // more memory than none, slower, ranges overlap
      r.step_ms_min = none_min * 0.99;
      r.step_ms_max = r.step_ms_min * 1.3;
    }
  EXPECT_EQ(render(sc, tmp, problems).find("(beaten on both)"), std::string::npos);
  for (RunResult& r : sc.runs)
    if (r.name == "seq64@selective") r.step_ms_min = none.step_ms_max * 1.01;  // every step slower than none's
  const std::string html = render(sc, tmp, problems);
  EXPECT_NE(html.find("Beaten on both memory and time (fewer activations, every step faster): selective (by none)."),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("selective <span class=\"range\">(beaten on both)</span>"), std::string::npos);
}

}  // namespace
}  // namespace dtlab::analysis
