// report_saving_test.cpp: the training-checkpoints part (analysis/report_saving.cpp) over the fixture
// fixtures/studies/saving — real jobs of tiny at world 2: DDP and FULL_SHARD saving every 2 of 4 steps (blocking and
// async), and DDP loading FULL_SHARD's checkpoint. The runs' result.json carry checkpoints.saves and, for the load,
// checkpoints.resumed_from; their predictions carry the checkpoint model's bytes.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

Scenario saving() { return load_scenario(std::filesystem::path(testing::fixtures_dir()) / "studies/saving"); }

double save_field(const RunResult& r, const char* key) {
  return r.raw.at("checkpoints").at("saves").back().at(key).get<double>();
}

// What the part rests on: DDP's rank 0 writes the whole state, each FULL_SHARD rank about half, and the checkpoint
// model's bytes are exact for both.
TEST(Saving, ReplicasWriteOneFullCopyShardsWriteTheirShareAndTheModelIsExact) {
  const Scenario sc = saving();
  const RunResult& ddp = testing::run_named(sc, "ddp");
  const RunResult& fs = testing::run_named(sc, "full_shard");
  EXPECT_EQ(save_field(ddp, "bytes_here"), save_field(ddp, "total_bytes"));
  EXPECT_EQ(save_field(ddp, "total_bytes"), save_field(fs, "total_bytes")) << "the same state, however it is split";
  EXPECT_LT(save_field(fs, "bytes_here"), 0.6 * save_field(fs, "total_bytes"));
  EXPECT_GT(save_field(fs, "bytes_here"), 0.4 * save_field(fs, "total_bytes"));
  for (const RunResult* r : {&ddp, &fs}) {
    SCOPED_TRACE(r->name);
    EXPECT_EQ(*json_number_at(r->raw, {"prediction", "checkpoint", "bytes_this_rank"}), save_field(*r, "bytes_here"));
    EXPECT_EQ(*json_number_at(r->raw, {"prediction", "checkpoint", "total_bytes"}), save_field(*r, "total_bytes"));
  }
  const RunResult& async = testing::run_named(sc, "full_shard_async");
  EXPECT_EQ(save_field(async, "snapshot_bytes"), save_field(async, "bytes_here") + 5056)
      << "the snapshot copies this rank's state and its generator row";
  // The counting allocator's view of the same: an async save holds one more copy of the state (the generator row's
  // copy replaces the temporary it was read into, so it adds nothing); a blocking save writes the state in place.
  EXPECT_EQ(save_field(async, "extra_bytes"), save_field(async, "bytes_here"));
  EXPECT_EQ(save_field(ddp, "extra_bytes"), 0);
  EXPECT_EQ(save_field(fs, "extra_bytes"), 0);
}

TEST(Saving, ThePartComparesStrategiesAndModesAndNamesTheLoad) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  const Scenario sc = saving();
  testing::TempDir tmp;
  std::vector<std::string> problems;
  std::ostringstream log;
  SectionContext ctx{sc, "saving", tmp.path(), tmp.path().string(), log, problems};
  const std::string html = saving_part(ctx);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_NE(html.find("Rank 0 of ddp (ddp) writes 100% of a"), std::string::npos) << html;
  EXPECT_NE(html.find("were exact, for rank 0 and the whole checkpoint, in 3 of 3 runs"), std::string::npos) << html;
  EXPECT_NE(html.find("<strong>Async</strong> (full_shard_async)"), std::string::npos) << html;
  EXPECT_NE(html.find("<th>extra memory, allocator (MiB)</th>"), std::string::npos) << html;
  EXPECT_NE(html.find("ddp at world 2 loaded a checkpoint of fsdp_full_shard at world 2"), std::string::npos) << html;
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "checkpoint_save_saving.svg"));
}

TEST(Saving, AScenarioWithoutCheckpointsHasNoPart) {
  const Scenario sc = load_scenario(std::filesystem::path(testing::fixtures_dir()) / "studies/granularity");
  testing::TempDir tmp;
  std::vector<std::string> problems;
  std::ostringstream log;
  SectionContext ctx{sc, "g", tmp.path(), tmp.path().string(), log, problems};
  EXPECT_EQ(saving_part(ctx), "");
}

}  // namespace
}  // namespace dtlab::analysis
