// report_pipeline_test.cpp: the "Pipeline parallelism" part (analysis/report_pipeline.cpp) over crafted results of the
// study's shape: two stages under GPipe and 1F1B at m = 4 and 8, with each stage's phase medians and activations. The
// expected bubbles, formulas and ratios are computed here from the numbers written, not read from the part.
#include <gtest/gtest.h>

#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

namespace fs = std::filesystem;

struct Stage {
  double forward_ms, backward_ms, comm_wait_ms, activations_mib;
};
struct Run {
  std::string name, schedule;
  int m;
  double step_ms;
  std::vector<Stage> stages;
  double predicted_step_ms = 0;  // 0: the run has no step prediction (no profile)
};

constexpr double kMiB = 1024.0 * 1024.0;

// `world` 0: one rank per stage (world = pp).
Scenario pipeline_study(const testing::TempDir& tmp, const std::vector<Run>& runs, int pp = 2, int world = 0) {
  const fs::path dir = tmp.path() / "pipeline";
  std::vector<std::string> names;
  for (const Run& r : runs) {
    nlohmann::json doc = testing::minimal_result("ddp", world > 0 ? world : pp);
    doc["config"]["parallel"]["pp"] = pp;
    doc["config"]["parallel"]["pp_schedule"] = r.schedule;
    doc["config"]["train"]["accumulation"] = r.m;
    doc["config"]["train"]["micro_batch"] = 16 / r.m;
    doc["config"]["train"]["global_batch"] = 16;
    doc["summary"]["step_ms_median"] = r.step_ms;
    doc["summary"]["phases_by_rank"] = nlohmann::json::array();
    doc["memory"]["ranks"] = nlohmann::json::array();
    for (size_t s = 0; s < r.stages.size(); ++s) {
      const Stage& st = r.stages[s];
      doc["summary"]["phases_by_rank"].push_back({{"rank", s},
                                                  {"forward_ms", st.forward_ms},
                                                  {"backward_ms", st.backward_ms},
                                                  {"comm_wait_ms", st.comm_wait_ms}});
      doc["memory"]["ranks"].push_back({{"rank", s}, {"activations_bytes", st.activations_mib * kMiB}});
    }
    doc["prediction"] = {{"memory_bytes", {{"activations", r.stages.front().activations_mib * 1.02 * kMiB}}}};
    if (r.predicted_step_ms > 0) doc["prediction"]["step_ms"] = r.predicted_step_ms;
    testing::write_run(dir / r.name, doc);
    names.push_back(r.name);
  }
  testing::write_scenario(dir, "pipeline", names);
  return load_scenario(dir);
}

std::string render(const Scenario& sc, const testing::TempDir& tmp, const SectionPart& part = pipeline_part) {
  std::ostringstream log;
  std::vector<std::string> problems;
  SectionContext ctx{sc, "pipeline", tmp.path(), tmp.path().string(), log, problems};
  return part(ctx);
}

// pp 2 x dp 2 (the tensor-parallel study's pipeline across nodes): its four ranks are not four stages, so the bubble
// part leaves it to that study's table.
TEST(PipelineReport, ARunWithSeveralRanksPerStageIsLeftToItsOwnStudy) {
  testing::TempDir tmp;
  const Scenario sc =
      pipeline_study(tmp,
                     {{"pp2_dp2",
                       "1f1b",
                       4,
                       900,
                       {{200, 400, 180, 98}, {200, 400, 180, 98}, {210, 420, 150, 51}, {210, 420, 150, 51}}}},
                     2, 4);
  EXPECT_EQ(render(sc, tmp), "");
}

TEST(PipelineReport, EachRunsBubbleStandsBesideItsScheduleFormula) {
  testing::TempDir tmp;
  const Scenario sc = pipeline_study(tmp, {{"gpipe@m4", "gpipe", 4, 900, {{200, 400, 180, 190}, {210, 420, 150, 195}}},
                                           {"gpipe@m8", "gpipe", 8, 850, {{200, 400, 80, 188}, {210, 420, 70, 193}}},
                                           {"1f1b@m4", "1f1b", 4, 880, {{200, 400, 150, 98}, {210, 420, 160, 51}}},
                                           {"1f1b@m8", "1f1b", 8, 820, {{200, 400, 72, 50}, {210, 420, 80, 27}}}});
  const std::string html = render(sc, tmp);
  // gpipe@m4: (180 + 150) / (600 + 630) against (P - 1)/m = 1/4.
  const double gpipe4 = (180.0 + 150.0) / (600.0 + 630.0);
  EXPECT_NE(html.find("<td>gpipe</td><td>2</td><td>4</td><td>900</td><td>-</td><td>" +
                      testing::fixed(180.0 / 600.0, 3) + " / " + testing::fixed(150.0 / 630.0, 3) +
                      "</td><td>600 / 630</td><td>" + testing::fixed(gpipe4, 3) + " / 0.250</td>"),
            std::string::npos)
      << html;
  // m = 8: 1f1b idles (72 + 80) / 1230, gpipe (80 + 70) / 1230: gpipe least; 1f1b fastest.
  EXPECT_NE(html.find("At P = 2, m = 8 gpipe idled least (" + testing::fixed(150.0 / 1230.0, 3) +
                      " of its busy time; formula 0.125) and 1f1b ran fastest (820 ms per step)."),
            std::string::npos)
      << html;
  // At m >= 2P = 4: every run; within 15% of the formula: gpipe@m4 (+7.3%), 1f1b@m4 (0.252: +0.8%), gpipe@m8
  // (0.122: -2.4%), 1f1b@m8 (0.124: -1.1%) -> 4 of 4.
  EXPECT_NE(html.find("within 15% of its formula for 4 of 4 runs."), std::string::npos) << html;
  EXPECT_NE(html.find("At m = 8 GPipe's first stage kept 188.0 MiB of activations, 1F1B's 50.0 MiB (×" +
                      testing::fixed(188.0 / 50.0, 1) + ")"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("pp_bubble_pipeline"), std::string::npos) << "the bubble chart";
}

// A run far from its formula is named with its error and the effects the formula lacks, the stages' imbalance in
// numbers.
TEST(PipelineReport, ARunOffItsFormulaIsNamedWithTheImbalance) {
  testing::TempDir tmp;
  const Scenario sc = pipeline_study(tmp, {{"1f1b@m8", "1f1b", 8, 820, {{200, 400, 250, 50}, {300, 600, 100, 27}}}});
  const std::string html = render(sc, tmp);
  const double bubble = (250.0 + 100.0) / (600.0 + 900.0);
  EXPECT_NE(html.find("within 15% of its formula for 0 of 1 runs; outside it: 1f1b at P = 2, m = 8 (+" +
                      testing::fixed(100 * (bubble - 0.125) / 0.125, 0) + "%)"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("busy times differ by up to ×1.50"), std::string::npos) << html;
}

// The step model's prediction stands beside each measured step, and the answer gives its error in numbers.
TEST(PipelineReport, ThePredictedStepStandsBesideTheMeasuredOne) {
  testing::TempDir tmp;
  const Scenario sc =
      pipeline_study(tmp, {{"gpipe@m4", "gpipe", 4, 900, {{200, 400, 180, 190}, {210, 420, 150, 195}}, 720},
                           {"1f1b@m4", "1f1b", 4, 880, {{200, 400, 150, 98}, {210, 420, 160, 51}}, 836},
                           {"1f1b@m8", "1f1b", 8, 820, {{200, 400, 72, 50}, {210, 420, 80, 27}}, 902}});
  const std::string html = render(sc, tmp);
  EXPECT_NE(html.find("<td>1f1b</td><td>2</td><td>4</td><td>880</td><td>836</td>"), std::string::npos) << html;
  // Errors -20% (720 vs 900), -5% (836 vs 880), +10% (902 vs 820): the median magnitude 10%.
  EXPECT_NE(html.find("came within 10% of the measured step at the median, from -20% to +10% over 3 runs"),
            std::string::npos)
      << html;
}

// Without stages the part stays out; with them the accumulation part leaves the runs to it.
TEST(PipelineReport, OnlyRunsWithStagesAndNotAsAccumulation) {
  testing::TempDir tmp;
  const Scenario staged = pipeline_study(tmp, {{"1f1b@m4", "1f1b", 4, 880, {{200, 400, 150, 98}, {210, 420, 160, 51}}},
                                               {"1f1b@m8", "1f1b", 8, 820, {{200, 400, 72, 50}, {210, 420, 80, 27}}}});
  EXPECT_EQ(render(staged, tmp, accumulation_part), "");
  testing::TempDir other;
  const Scenario flat = pipeline_study(other, {{"ddp@m4", "1f1b", 4, 880, {{200, 400, 150, 98}}}}, 1);
  EXPECT_EQ(render(flat, other), "");
}

// The step grid: 1F1B at P = 2, m = 2 with F = 100 ms and B = 200 ms per block, each transfer taking 50 ms as it ran.
// The plan (the same order, free transfers) takes (m + P - 1)(F + B) = 900 ms; the run, written here block by block
// with its waits, 1000 ms. Without the stages' timelines the grid stays out.
TEST(PipelineReport, TheGridSetsTheRunsBlocksAboveTheSchedulesPlan) {
  testing::TempDir tmp;
  const Scenario sc = pipeline_study(tmp, {{"1f1b@m2", "1f1b", 2, 1000, {{200, 400, 100, 98}, {200, 400, 100, 51}}}});
  EXPECT_EQ(render(sc, tmp, pipeline_grid_figure), "") << "no timelines: no grid";
  const auto span = [](const std::string& name, double start_ms, double end_ms) {
    return nlohmann::json{{"lane", "compute"}, {"name", name}, {"start_us", start_ms * 1e3}, {"end_us", end_ms * 1e3}};
  };
  const fs::path run = tmp.path() / "pipeline" / "1f1b@m2";
  const nlohmann::json stage0 = {span("forward-compute F c0.0", 0, 100), span("forward-compute F c0.1", 100, 200),
                                 span("backward-compute B c0.0", 500, 700), span("backward-compute B c0.1", 800, 1000)};
  const nlohmann::json stage1 = {span("forward-compute F c0.0", 150, 250), span("backward-compute B c0.0", 250, 450),
                                 span("forward-compute F c0.1", 450, 550), span("backward-compute B c0.1", 550, 750)};
  testing::write_text(run / "rank0" / "timeline.json",
                      nlohmann::json{{"rank", 0}, {"step", 3}, {"step_ms", 1000}, {"spans", stage0}}.dump());
  testing::write_text(run / "rank1" / "timeline.json",
                      nlohmann::json{{"rank", 1}, {"step", 3}, {"step_ms", 1000}, {"spans", stage1}}.dump());
  const std::string html = render(sc, tmp, pipeline_grid_figure);
  EXPECT_NE(html.find("1f1b: 1000 ms from the first block to the last, against 900 ms planned (+11%)"),
            std::string::npos)
      << html;
  const std::string svg = testing::read_text(tmp.path() / "pp_grid_pipeline.svg");
  size_t planned = 0;
  for (size_t at = svg.find("(planned)"); at != std::string::npos; at = svg.find("(planned)", at + 1)) ++planned;
  EXPECT_EQ(planned, 8u) << "every action of the plan drawn once";
  EXPECT_NE(svg.find("B chunk 0 micro-batch 1 (planned): 700.0–900.0 ms"), std::string::npos)
      << "stage 0's last backward waits for stage 1's, with no transfer time";
  EXPECT_NE(svg.find("B chunk 0 micro-batch 1: 800.0–1000.0 ms"), std::string::npos) << "as it ran";
  EXPECT_NE(render(sc, tmp).find("pp_grid_pipeline.svg"), std::string::npos) << "the pipeline part shows it";
}

}  // namespace
}  // namespace dtlab::analysis
