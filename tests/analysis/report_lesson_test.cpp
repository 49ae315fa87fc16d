// report_lesson_test.cpp: what makes the report read as a lesson beyond each study's own parts — the page's
// "Every strategy against the baseline" section (analysis/report_summary.cpp) and each section's question, setup and
// what to look for (analysis/report_sections.cpp), over real fixtures (studies/accumulation: DDP and FULL_SHARD at
// 1 and 4 micro-steps, both with context.baseline; studies/granularity: no run has a twin of the same label).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/plot.hpp"
#include "analysis/report.hpp"
#include "test_util.hpp"

namespace dtlab::analysis {
namespace {

namespace fs = std::filesystem;

std::string summary_of(const std::vector<Scenario>& scenarios, const testing::TempDir& tmp) {
  std::ostringstream log;
  std::vector<std::string> problems;
  const std::string html = strategy_summary_section(scenarios, tmp.path(), tmp.path().string(), log, problems);
  EXPECT_TRUE(problems.empty()) << problems.front() << "\n" << log.str();
  return html;
}

Scenario accumulation() { return load_scenario(fs::path(testing::fixtures_dir()) / "studies/accumulation"); }

// FULL_SHARD's row: the median over its two pairs (a1 with ddp@a1, a4 with ddp@a4) of each ratio, computed here
// from the files, and the catalogue's lines that the runs recorded.
TEST(Lesson, EveryStrategyIsSetAgainstItsBaselineTwin) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  const Scenario sc = accumulation();
  testing::TempDir tmp;
  const std::string html = summary_of({sc}, tmp);
  const RunResult& fs1 = testing::run_named(sc, "fsdp_full_shard@a1");
  const RunResult& fs4 = testing::run_named(sc, "fsdp_full_shard@a4");
  const RunResult& ddp1 = testing::run_named(sc, "ddp@a1");
  const RunResult& ddp4 = testing::run_named(sc, "ddp@a4");
  ASSERT_EQ(fs1.baseline, "ddp");
  const auto median2 = [](double a, double b) { return testing::fixed((a + b) / 2, 2); };
  const double bytes1 = *fs1.comm_bytes_per_step / *ddp1.comm_bytes_per_step;
  const double bytes4 = *fs4.comm_bytes_per_step / *ddp4.comm_bytes_per_step;
  const double peak1 = largest_rank_peak(fs1) / largest_rank_peak(ddp1);
  const double peak4 = largest_rank_peak(fs4) / largest_rank_peak(ddp4);
  EXPECT_NE(html.find("<h2>Every strategy against ddp</h2>"), std::string::npos) << html;
  EXPECT_NE(html.find(": 2 pairs."), std::string::npos) << html;
  EXPECT_NE(html.find("<td>×" + median2(peak1, peak4)), std::string::npos) << html;
  EXPECT_NE(html.find("<td>×" + median2(bytes1, bytes4)), std::string::npos) << html;
  EXPECT_NE(html.find("<td>2 (accumulation)</td><td>" + html_escape(fs1.choose_when) + "</td>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("<td>the baseline</td><td>" + html_escape(ddp1.choose_when) + "</td>"), std::string::npos)
      << html;
  EXPECT_TRUE(fs::exists(tmp.path() / "vs_baseline_summary.png"));
}

// A run whose config differs from the baseline's in more than the strategy has no twin; without any twin there is no
// section. Step times of ranks without a core each are left out of the time ratio.
TEST(Lesson, OnlyTrueTwinsArePairedAndOversubscribedTimesAreLeftOut) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  testing::TempDir tmp;
  Scenario other = accumulation();
  for (RunResult& r : other.runs)
    if (r.name.rfind("ddp@", 0) == 0) r.config["train"]["lr"] = 0.5;
  EXPECT_EQ(summary_of({other}, tmp), "");
  EXPECT_EQ(summary_of({load_scenario(fs::path(testing::fixtures_dir()) / "studies/granularity")}, tmp), "")
      << "granularity's runs differ in their labels (bucket sizes vs wrap policies): no pairs";

  Scenario crowded = accumulation();
  for (RunResult& r : crowded.runs) {
    ASSERT_TRUE(r.cpu.has_value());
    r.cpu->cores = 1;  // two ranks, one core
  }
  const std::string html = summary_of({crowded}, tmp);
  EXPECT_NE(html.find("<td><code>fsdp_full_shard</code></td><td>" +
                      html_escape(testing::run_named(crowded, "fsdp_full_shard@a1").strategy_doc)),
            std::string::npos);
  EXPECT_NE(html.find("</td><td>–</td><td>×"), std::string::npos) << "no time ratio, still memory and bytes: " << html;
}

// A section opens with the study's question, a setup sentence read from the runs' configs and what to look for; the
// page's table of contents leads with the summary.
TEST(Lesson, ASectionOpensWithItsQuestionSetupAndWhatToLookFor) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  testing::TempDir tmp;
  const fs::path study = testing::copy_fixture("studies/accumulation", tmp.path() / "accumulation");
  nlohmann::json manifest = testing::fixture_json("studies/accumulation/scenario.json");
  manifest["question"] = "Who communicates on every micro-step?";
  manifest["look_for"] = "Flat lines and rising ones.";
  std::ofstream(study / "scenario.json") << manifest.dump(2);
  std::ostringstream log;
  ASSERT_EQ(render_report({study.string()}, (tmp.path() / "out").string(), log), 0) << log.str();
  const std::string html = testing::read_text(tmp.path() / "out" / "index.html");
  EXPECT_NE(html.find("<strong>The question.</strong> Who communicates on every micro-step?"), std::string::npos);
  EXPECT_NE(html.find("<strong>What to look for.</strong> Flat lines and rising ones."), std::string::npos);
  EXPECT_NE(html.find("<strong>The setup.</strong> 4 runs of ddp, fsdp_full_shard; 2 rank(s); model tiny, d_model "
                      "64, 2 blocks, 64 tokens per sequence; 8 sequences per step, 4 steps; fp32 parameters."),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<nav class=\"toc\"><a href=\"#summary\">"), std::string::npos);
}

// A section closes with its runs in numbers, checked here against the files: the fastest against the slowest, the
// least and the most memory on a rank, the spread of final losses among runs of one model, batch and step count (the
// four accumulation runs train the same tiny model on the same batches for 4 steps). A study whose own part answers
// (pipeline) gets none.
TEST(Lesson, ASectionClosesWithItsAnswerInNumbers) {
  Scenario sc = accumulation();
  testing::TempDir tmp;
  std::ostringstream log;
  std::vector<std::string> problems;
  SectionContext ctx{sc, "accumulation", tmp.path(), tmp.path().string(), log, problems};
  const std::string html = answer_part(ctx);
  const auto by = [&](auto key) {
    return std::minmax_element(sc.runs.begin(), sc.runs.end(),
                               [&](const RunResult& a, const RunResult& b) { return key(a) < key(b); });
  };
  const auto [fast, slow] = by([](const RunResult& r) { return r.step_ms_median; });
  const auto [least, most] = by([](const RunResult& r) { return largest_rank_peak(r); });
  const auto [lo, hi] = by([](const RunResult& r) { return r.final_loss; });
  const auto ms = [](double v) { return testing::fixed(v, v < 10 ? 1 : 0) + " ms"; };
  EXPECT_NE(html.find("<strong>The answer, in this run's numbers.</strong>"), std::string::npos) << html;
  EXPECT_NE(html.find("Fastest: <strong>" + fast->name + "</strong> at " + ms(fast->step_ms_median)), std::string::npos)
      << html;
  EXPECT_NE(html.find("slowest: <strong>" + slow->name + "</strong> at " + ms(slow->step_ms_median) + ", " +
                      testing::fixed(slow->step_ms_median / fast->step_ms_median, 2) + "&times; as long"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("Least memory: <strong>" + least->name + "</strong>, a peak of " +
                      testing::fixed(largest_rank_peak(*least) / (1024.0 * 1024.0), 1) + " MiB"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("most: <strong>" + most->name + "</strong>"), std::string::npos) << html;
  const double spread = hi->final_loss - lo->final_loss;
  std::ostringstream spread_text;
  if (spread < 1e-3)
    spread_text << std::scientific << std::setprecision(1) << spread;
  else
    spread_text << std::fixed << std::setprecision(4) << spread;
  EXPECT_NE(html.find(spread == 0 ? "(4 runs) end at the same loss, to the last digit."
                                  : "(4 runs) end within " + spread_text.str() + " nats"),
            std::string::npos)
      << html;
  sc.name = "pipeline";
  EXPECT_EQ(answer_part(ctx), "") << "the pipeline study's own part closes its section";
}

// Results whose configs hold fewer facts (an older dtlab's) get a shorter setup sentence, never an empty slot.
TEST(Lesson, TheSetupLeavesOutWhatTheConfigsDoNotHold) {
  if (!gnuplot_available()) GTEST_SKIP() << "gnuplot not installed (apt-get install gnuplot-nox)";
  testing::TempDir tmp;
  const fs::path study = tmp.path() / "old";
  testing::write_scenario(study, "old", {"r1"});
  testing::write_run(study / "r1", testing::minimal_result("single"));  // model preset and d_model, train steps
  std::ostringstream log;
  ASSERT_EQ(render_report({study.string()}, (tmp.path() / "out").string(), log), 0) << log.str();
  const std::string html = testing::read_text(tmp.path() / "out" / "index.html");
  EXPECT_NE(html.find("<strong>The setup.</strong> 1 run of single; 1 rank(s); model small, d_model 256; 8 sequences "
                      "per step, 3 steps.</p>"),
            std::string::npos)
      << html;
}

}  // namespace
}  // namespace dtlab::analysis
