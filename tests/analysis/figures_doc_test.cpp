// figures_doc_test.cpp: docs/performance.md's generator (analysis/figures_doc.cpp) over real study fixtures
// (studies/granularity and studies/accumulation): the page's header from what the runs recorded (commit, cpuid,
// dates), a section per study in the course's order, each run's figures as its result.json holds them, and the
// accuracy over the same runs; no run, no page.
#include "analysis/figures_doc.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "analysis/course.hpp"
#include "analysis/html.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

namespace fs = std::filesystem;

std::vector<Scenario> two_studies() {
  const fs::path studies = fs::path(testing::fixtures_dir()) / "studies";
  // Given in file-name order; the page follows the course (accumulation comes before granularity there).
  return in_course_order({load_scenario(studies / "granularity"), load_scenario(studies / "accumulation")});
}

TEST(FiguresDoc, EveryRunsFiguresUnderItsStudyWithTheMachineAndCommit) {
  const std::vector<Scenario> scenarios = two_studies();
  const std::string md = figures_doc(scenarios, {"results"});
  const RunResult& r = testing::run_named(scenarios[0], "fsdp_full_shard@a4");
  EXPECT_NE(md.find("make figures    # build/bin/dtlab-report --figures results > docs/performance.md"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| commit | " + r.git_sha.substr(0, 12)), std::string::npos) << md;
  ASSERT_TRUE(r.cpu.has_value());
  EXPECT_NE(md.find("| machine (cpuid) | " + r.cpu->model + ", " + std::to_string(r.cpu->cores) + " cores, AVX-512"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| dates | " + r.started_at.substr(0, 10)), std::string::npos) << md;
  const std::size_t accumulation = md.find("## Gradient accumulation (`accumulation`)");
  const std::size_t granularity = md.find("## Granularity (`granularity`)");
  ASSERT_NE(accumulation, std::string::npos) << md;
  ASSERT_NE(granularity, std::string::npos) << md;
  EXPECT_LT(accumulation, granularity) << "the course's order, not the order given";
  const std::string row = "| fsdp_full_shard@a4 | " + r.strategy + " | " + std::to_string(r.world_size) + " | " +
                          fmt_fixed(r.step_ms_median, 1) + " | ";
  const std::size_t at = md.find(row);
  ASSERT_NE(at, std::string::npos) << md;
  const std::string line = md.substr(at, md.find('\n', at) - at);
  EXPECT_NE(line.find(" | " + fmt_fixed(largest_rank_device_side_peak(r) / (1024.0 * 1024.0), 1) + " | "),
            std::string::npos)
      << line;
  EXPECT_NE(line.find(" | " + fmt_fixed(r.final_loss, 4) + " |"), std::string::npos) << line;
  if (const std::optional<double> p = json_number_at(r.raw, {"prediction", "step_ms"})) {
    EXPECT_NE(line.find(" | " + fmt_fixed(*p, 1) + " | "), std::string::npos) << line;
  }
  EXPECT_NE(md.find("Rerun: `build/bin/scenario_accumulation --out results`"), std::string::npos);
  EXPECT_NE(md.find("## The cost model against these runs"), std::string::npos);
  // The accuracy block is the summary: the targets' verdicts, no run's own line (the page stays short).
  EXPECT_NE(md.find("State bytes (target"), std::string::npos) << md;
  EXPECT_NE(md.find("\ntargets: "), std::string::npos) << md;
  EXPECT_EQ(md.find("  " + scenarios[0].name + "/"), std::string::npos) << md;
  EXPECT_NE(md.find("runs | " + std::to_string(scenarios[0].runs.size() + scenarios[1].runs.size()) +
                    " completed in 2 studies"),
            std::string::npos)
      << md;
}

TEST(FiguresDoc, NoRunsNoPage) {
  testing::TempDir tmp;
  std::ostringstream out, log;
  EXPECT_EQ(run_figures_doc({tmp.path().string()}, out, log), 1);
  EXPECT_TRUE(out.str().empty());
  EXPECT_FALSE(log.str().empty());
}

}  // namespace
}  // namespace dtlab::analysis
