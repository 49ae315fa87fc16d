// scaling_test.cpp: memory per rank vs world size (analysis/scaling.hpp, analysis/report_scaling.cpp) over the
// fixture fixtures/memory/scaling — real jobs of tiny (16 blocks, one sequence per rank) under DDP and FULL_SHARD
// at 1, 2 and 4 ranks — and the memory model's projection that result.json carries (prediction.memory_by_world).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "analysis/scaling.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

Scenario scaling_fixture() { return load_scenario(std::filesystem::path(testing::fixtures_dir()) / "memory/scaling"); }

const ScalingSeries& series_named(const ScalingStudy& study, const std::string& name) {
  for (const ScalingSeries& s : study.series)
    if (s.name == name) return s;
  throw std::runtime_error("no series " + name);
}

// DDP's state per rank does not fall with the ranks; FULL_SHARD's does; the model's state is the allocator's.
TEST(MemoryScaling, StatePerRankFallsOnlyWhereItIsShardedAndTheModelIsExact) {
  const std::optional<ScalingStudy> study = scaling_study(scaling_fixture());
  ASSERT_TRUE(study.has_value());
  ASSERT_EQ(study->series.size(), 2u);
  const ScalingSeries& ddp = series_named(*study, "ddp");
  const ScalingSeries& full = series_named(*study, "fsdp_full_shard");
  ASSERT_EQ(ddp.points.size(), 3u);
  ASSERT_EQ(full.points.size(), 3u);
  EXPECT_EQ(ddp.points[0].world, 1);
  EXPECT_EQ(ddp.points[2].world, 4);
  for (const ScalingPoint& p : ddp.points) {
    EXPECT_DOUBLE_EQ(p.measured.at("params"), ddp.points[0].measured.at("params")) << "world " << p.world;
    EXPECT_DOUBLE_EQ(p.measured.at("optimizer"), ddp.points[0].measured.at("optimizer")) << "world " << p.world;
  }
  for (size_t i = 1; i < full.points.size(); ++i) {
    EXPECT_LT(ScalingSeries::state(full.points[i].measured), ScalingSeries::state(full.points[i - 1].measured))
        << "world " << full.points[i].world;
    // optimizer state: the world's share of the padded flat parameters (within a unit's padding)
    const double ideal = full.points[0].measured.at("optimizer") / full.points[i].world;
    EXPECT_NEAR(full.points[i].measured.at("optimizer"), ideal, 0.02 * ideal) << "world " << full.points[i].world;
  }
  EXPECT_EQ(study->state_compared, 2 * 3 * 4) << "two series, three worlds, four state categories";
  EXPECT_EQ(study->state_exact, study->state_compared);
}

// The projection runs 1..1024 ranks and agrees with the prediction each run made at its own size; the model's
// line keeps falling for FULL_SHARD and stays flat for DDP.
TEST(MemoryScaling, TheProjectionAgreesWithEachRunsOwnPredictionAndReaches1024) {
  const std::optional<ScalingStudy> study = scaling_study(scaling_fixture());
  ASSERT_TRUE(study.has_value());
  for (const ScalingSeries& s : study->series) {
    ASSERT_EQ(s.projected.size(), 11u) << s.name << ": 1, 2, 4 ... 1024";
    EXPECT_EQ(s.projected.front().world, 1);
    EXPECT_EQ(s.projected.back().world, 1024);
    for (const ScalingPoint& p : s.points) {
      for (const ProjectedPoint& q : s.projected) {
        if (q.world != p.world) continue;
        for (const auto& [category, bytes] : p.predicted)
          EXPECT_DOUBLE_EQ(q.bytes.at(category), bytes) << s.name << " world " << p.world << " " << category;
      }
    }
  }
  const ScalingSeries& ddp = series_named(*study, "ddp");
  const ScalingSeries& full = series_named(*study, "fsdp_full_shard");
  EXPECT_DOUBLE_EQ(ScalingSeries::state(ddp.projected.back().bytes), ScalingSeries::state(ddp.projected[0].bytes));
  EXPECT_LT(ScalingSeries::state(full.projected.back().bytes), ScalingSeries::state(full.points.back().measured));
}

// Worlds with more one-thread ranks than the machine had cores are marked; the cores come from result.json.
TEST(MemoryScaling, RanksSharingCoresAreMarkedFromTheRecordedCpu) {
  const std::optional<ScalingStudy> study = scaling_study(scaling_fixture());
  ASSERT_TRUE(study.has_value());
  for (const ScalingSeries& s : study->series)
    for (const ScalingPoint& p : s.points) {
      ASSERT_TRUE(p.oversubscribed.has_value()) << "context.cpu is recorded";
      ASSERT_GT(p.cores, 0);
      EXPECT_EQ(*p.oversubscribed, p.world > p.cores) << s.name << " world " << p.world;
    }
  Scenario without_cpu = scaling_fixture();
  for (RunResult& r : without_cpu.runs) r.cpu.reset();
  const std::optional<ScalingStudy> unknown = scaling_study(without_cpu);
  ASSERT_TRUE(unknown.has_value());
  for (const ScalingSeries& s : unknown->series)
    for (const ScalingPoint& p : s.points) EXPECT_FALSE(p.oversubscribed.has_value()) << "unknown, not guessed";
}

// The report part: takeaways with this study's numbers, the three charts (the model dashed beside the points, the
// worlds that shared cores grey), the table by category.
TEST(MemoryScaling, ThePartDrawsMeasuredAndModelledAndTeachesFromTheRuns) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  const Scenario sc = scaling_fixture();
  testing::TempDir tmp;
  std::ostringstream log;
  std::vector<std::string> problems;
  SectionContext ctx{sc, "scaling", tmp.path(), tmp.path().string(), log, problems};
  const std::string html = memory_scaling_part(ctx);
  EXPECT_TRUE(problems.empty()) << problems.front();
  EXPECT_NE(html.find("Memory per rank as the job grows"), std::string::npos);
  EXPECT_NE(html.find("<strong>ddp</strong>: state per rank"), std::string::npos) << html;
  EXPECT_NE(html.find("it does not fall as ranks are added"), std::string::npos) << html;
  EXPECT_NE(html.find("The model at 1024 ranks: peak"), std::string::npos) << html;
  EXPECT_NE(html.find("matched the allocator's count exactly in 24 of 24"), std::string::npos) << html;
  for (const char* chart : {"scaling_state_scaling", "scaling_peak_scaling", "scaling_time_scaling"})
    EXPECT_TRUE(std::filesystem::exists(tmp.path() / (std::string(chart) + ".png"))) << chart;
  const std::string gp = testing::read_text(tmp.path() / "scaling_peak_scaling.gp");
  EXPECT_NE(gp.find("lt 1 dt 2 lw 1.5 title 'ddp (model)'"), std::string::npos) << gp;
  EXPECT_NE(gp.find("set logscale x 2"), std::string::npos);
  const bool shared = std::any_of(sc.runs.begin(), sc.runs.end(), [](const RunResult& r) {
    return r.cpu && r.world_size * std::max(1, r.threads) > r.cpu->cores;
  });
  const std::string time_gp = testing::read_text(tmp.path() / "scaling_time_scaling.gp");
  EXPECT_EQ(time_gp.find("lc rgb '#b0b0b0'") != std::string::npos, shared) << time_gp;
  EXPECT_NE(html.find("<table class=\"runs scaling\">"), std::string::npos);

  Scenario one_world = sc;
  one_world.runs.erase(std::remove_if(one_world.runs.begin(), one_world.runs.end(),
                                      [](const RunResult& r) { return r.world_size != 2; }),
                       one_world.runs.end());
  EXPECT_FALSE(scaling_study(one_world).has_value()) << "one world size is not a sweep";
}

}  // namespace
}  // namespace dtlab::analysis
