// report_granularity_test.cpp: the granularity part (analysis/report_granularity.cpp) over the fixture
// fixtures/studies/granularity — real jobs of tiny at world 2: DDP with 0.25 MiB and 25 MiB buckets, FULL_SHARD with
// a unit per block and one unit for the whole model.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

Scenario granularity() { return load_scenario(std::filesystem::path(testing::fixtures_dir()) / "studies/granularity"); }

// Calls per step from result.json collectives[].count over train.steps.
double calls_per_step(const RunResult& r) {
  double calls = 0;
  for (const nlohmann::json& c : r.raw["collectives"]) calls += c["count"].get<double>();
  return calls / r.config["train"]["steps"].get<double>();
}

// What the part rests on, measured: smaller buckets and units mean more calls; one unit gathers the whole model.
TEST(Granularity, SmallerBucketsAndUnitsMakeMoreCallsAndOneUnitHoldsTheWholeModel) {
  const Scenario sc = granularity();
  EXPECT_GT(calls_per_step(testing::run_named(sc, "ddp@b0.25")), calls_per_step(testing::run_named(sc, "ddp@b25")));
  EXPECT_GT(calls_per_step(testing::run_named(sc, "fsdp_full_shard@block")),
            calls_per_step(testing::run_named(sc, "fsdp_full_shard@model")));
  EXPECT_GT(testing::run_named(sc, "fsdp_full_shard@model").memory->buffers,
            testing::run_named(sc, "fsdp_full_shard@block").memory->buffers);
}

TEST(Granularity, ThePartTabulatesEachSettingAndTeachesFromTheRuns) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  const Scenario sc = granularity();
  testing::TempDir tmp;
  std::ostringstream log;
  std::vector<std::string> problems;
  SectionContext ctx{sc, "gran", tmp.path(), tmp.path().string(), log, problems};
  const std::string html = granularity_part(ctx);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_NE(html.find("<strong>ddp</strong> over <code>parallel.bucket_cap_mb</code>"), std::string::npos) << html;
  EXPECT_NE(html.find("<strong>fsdp_full_shard</strong> over <code>parallel.wrap</code>"), std::string::npos) << html;
  char calls[32];
  std::snprintf(calls, sizeof calls, "%.0f", calls_per_step(testing::run_named(sc, "ddp@b0.25")));
  EXPECT_NE(html.find(std::string(calls) + " collective calls per step at 0.25"), std::string::npos) << html;
  for (const char* setting :
       {"parallel.bucket_cap_mb=0.25", "parallel.bucket_cap_mb=25", "parallel.wrap=block", "parallel.wrap=model"})
    EXPECT_NE(html.find(std::string("<code>") + setting + "</code>"), std::string::npos) << setting;
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "granularity_time_gran.png"));

  Scenario other = sc;  // a run that differs in more than the swept key is not part of a granularity series
  for (RunResult& r : other.runs)
    if (r.name == "ddp@b25") r.config["train"]["lr"] = 0.5;
  SectionContext mixed{other, "mixed", tmp.path(), tmp.path().string(), log, problems};
  EXPECT_EQ(granularity_part(mixed).find("<strong>ddp</strong>"), std::string::npos);
}

}  // namespace
}  // namespace dtlab::analysis
