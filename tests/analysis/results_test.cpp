// results_test.cpp: loading result.json / steps.jsonl / scenario.json, the errors they give, and discovery.
#include "analysis/results.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "test_util.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;
using testing::minimal_result;
using testing::TempDir;
using testing::write_run;
using testing::write_scenario;
using testing::write_text;

// Runs `f`, expects AnalysisError, returns its message.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const AnalysisError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected AnalysisError";
  return "";
}

TEST(LoadRun, ReadsEveryField) {
  TempDir tmp;
  write_run(tmp.path() / "single", minimal_result());
  const RunResult r = load_run(tmp.path() / "single");
  EXPECT_EQ(r.name, "single");
  EXPECT_EQ(r.git_sha, "abc123");
  EXPECT_EQ(r.torch_version, "2.11.0");
  EXPECT_EQ(r.host, "box");
  EXPECT_EQ(r.world_size, 1);
  EXPECT_EQ(r.launcher, "none");
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.strategy, "single");
  EXPECT_NE(r.command.find("dtlab train"), std::string::npos);
  EXPECT_EQ(r.params, 4849920);
  EXPECT_DOUBLE_EQ(r.flops_per_token, 3.1e7);
  EXPECT_EQ(r.preset, "small");
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.steps[2].step, 3);
  EXPECT_DOUBLE_EQ(r.steps[0].loss, 4.0);
  EXPECT_DOUBLE_EQ(r.steps[1].step_ms, 402.0);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 9950.0);
  EXPECT_DOUBLE_EQ(r.step_ms_median, 410.0);
  EXPECT_DOUBLE_EQ(r.final_loss, 2.1);
  EXPECT_EQ(r.measured_steps, 2);
  EXPECT_FALSE(r.mfu_pct.has_value());
  EXPECT_EQ(r.param_dtype(), "fp32");  // config has no precision section
  EXPECT_EQ(r.config["model"]["d_model"], 256);
  EXPECT_TRUE(r.rank_steps.empty());
}

TEST(LoadRun, OptionalSummaryKeysAndPrecision) {
  TempDir tmp;
  auto doc = minimal_result();
  doc["summary"]["mfu_pct"] = 41.0;
  doc["summary"]["gemm_tflops"] = 0.7;
  doc["config"]["precision"] = {{"param_dtype", "bf16"}};
  write_run(tmp.path() / "r", doc);
  const RunResult r = load_run(tmp.path() / "r", "custom name");
  EXPECT_EQ(r.name, "custom name");
  ASSERT_TRUE(r.mfu_pct.has_value());
  EXPECT_DOUBLE_EQ(*r.mfu_pct, 41.0);
  EXPECT_DOUBLE_EQ(*r.gemm_tflops, 0.7);
  EXPECT_EQ(r.param_dtype(), "bf16");
}

TEST(LoadRun, MemoryCategoriesAndCollectiveBytes) {
  TempDir tmp;
  auto doc = minimal_result();
  doc["memory"] = {
      {"rank", 0},           {"params_bytes", 100},    {"grads_bytes", 200},       {"optimizer_bytes", 300},
      {"buffers_bytes", 40}, {"activations_bytes", 5}, {"tensor_peak_bytes", 645}, {"hwm_bytes", 9000}};
  doc["collectives"] = nlohmann::json::array({{{"op", "all_gather"}, {"bytes_per_step", 1000.0}},
                                              {{"op", "reduce_scatter"}, {"bytes_per_step", 500.0}},
                                              {{"op", "all_gather"}, {"bytes_per_step", 24.0}}});
  doc["summary"]["comm_wait_ms_median"] = 3.5;
  write_run(tmp.path() / "r", doc);
  const RunResult r = load_run(tmp.path() / "r");
  ASSERT_TRUE(r.memory.has_value());
  EXPECT_DOUBLE_EQ(r.memory->params, 100);
  EXPECT_DOUBLE_EQ(r.memory->grads, 200);
  EXPECT_DOUBLE_EQ(r.memory->optimizer, 300);
  EXPECT_DOUBLE_EQ(r.memory->buffers, 40);
  EXPECT_DOUBLE_EQ(r.memory->activations.value(), 5);
  EXPECT_DOUBLE_EQ(r.memory->tensor_peak.value(), 645);
  ASSERT_TRUE(r.comm_bytes_per_step.has_value());
  EXPECT_DOUBLE_EQ(*r.comm_bytes_per_step, 1524.0);
  EXPECT_DOUBLE_EQ(r.comm_bytes_per_step_by_op.at("all_gather"), 1024.0);
  EXPECT_DOUBLE_EQ(r.comm_bytes_per_step_by_op.at("reduce_scatter"), 500.0);
  EXPECT_DOUBLE_EQ(r.comm_wait_ms_median.value(), 3.5);
  // A "memory" section of another shape (older results) is ignored, not an error.
  doc["memory"] = {{"something_else", 1}};
  write_run(tmp.path() / "old", doc);
  EXPECT_FALSE(load_run(tmp.path() / "old").memory.has_value());
}

TEST(LoadRun, UnknownKeysAreTolerated) {
  TempDir tmp;
  auto doc = minimal_result();
  doc["comm"] = {{"all_reduce", {{"calls", 3}}}};
  doc["prediction"] = {{"step_ms", 400}};
  doc["memory"] = {{"rank0", {{"params_bytes", 1}}}};
  doc["context"]["new_field"] = "x";
  doc["summary"]["something_new"] = {1, 2};
  doc["steps"][0]["tokens_seen"] = 512;
  write_run(tmp.path() / "r", doc);
  const RunResult r = load_run(tmp.path() / "r");
  EXPECT_EQ(r.steps.size(), 3u);
  EXPECT_TRUE(r.raw.contains("comm"));  // later sections can still read them
}

TEST(LoadRun, MissingRequiredKeyNamesFileAndKey) {
  TempDir tmp;
  auto doc = minimal_result();
  doc["summary"].erase("tokens_per_s");
  write_run(tmp.path() / "r", doc);
  const std::string msg = error_of([&] { load_run(tmp.path() / "r"); });
  EXPECT_NE(msg.find((tmp.path() / "r" / "result.json").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"summary.tokens_per_s\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing required key"), std::string::npos) << msg;
}

TEST(LoadRun, MissingKeyInsideAStepNamesTheIndex) {
  TempDir tmp;
  auto doc = minimal_result();
  doc["steps"][1].erase("loss");
  write_run(tmp.path() / "r", doc);
  const std::string msg = error_of([&] { load_run(tmp.path() / "r"); });
  EXPECT_NE(msg.find("\"steps[1].loss\""), std::string::npos) << msg;
}

TEST(LoadRun, MissingTopLevelSectionAndWrongType) {
  TempDir tmp;
  auto doc = minimal_result();
  doc.erase("context");
  write_run(tmp.path() / "a", doc);
  EXPECT_NE(error_of([&] { load_run(tmp.path() / "a"); }).find("\"context\""), std::string::npos);

  auto doc2 = minimal_result();
  doc2["context"]["world_size"] = "two";
  write_run(tmp.path() / "b", doc2);
  const std::string msg = error_of([&] { load_run(tmp.path() / "b"); });
  EXPECT_NE(msg.find("\"context.world_size\" must be an integer"), std::string::npos) << msg;
}

TEST(LoadRun, WrongOrMissingSchemaVersion) {
  TempDir tmp;
  auto doc = minimal_result();
  doc["schema_version"] = 2;
  write_run(tmp.path() / "v2", doc);
  const std::string msg = error_of([&] { load_run(tmp.path() / "v2"); });
  EXPECT_NE(msg.find("schema_version"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("result.json"), std::string::npos) << msg;

  doc.erase("schema_version");
  write_run(tmp.path() / "v0", doc);
  EXPECT_NE(error_of([&] { load_run(tmp.path() / "v0"); }).find("missing required key \"schema_version\""),
            std::string::npos);
}

TEST(LoadRun, NotJsonAndMissingFile) {
  TempDir tmp;
  write_text(tmp.path() / "bad" / "result.json", "{ not json");
  EXPECT_NE(error_of([&] { load_run(tmp.path() / "bad"); }).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([&] { load_run(tmp.path() / "nothing"); }).find("result.json: not found"), std::string::npos);
}

TEST(LoadRun, NullLossIsNaN) {  // nlohmann::json writes a NaN loss as null
  TempDir tmp;
  auto doc = minimal_result();
  doc["steps"][2]["loss"] = nullptr;
  write_run(tmp.path() / "r", doc);
  EXPECT_TRUE(std::isnan(load_run(tmp.path() / "r").steps[2].loss));
}

TEST(LoadRun, ReadsPerRankStepsJsonl) {
  TempDir tmp;
  write_run(tmp.path() / "ddp", minimal_result("ddp", 2));
  write_text(tmp.path() / "ddp" / "rank0" / "steps.jsonl",
             "{\"step\":1,\"loss\":5.0,\"step_ms\":400.0,\"lr\":0.0003,\"grad_norm\":1.0,\"tokens_per_s\":100}\n"
             "\n"
             "{\"step\":2,\"loss\":4.5,\"step_ms\":390.0,\"extra\":true}\n");
  write_text(tmp.path() / "ddp" / "rank1" / "steps.jsonl", "{\"step\":1,\"loss\":5.1,\"step_ms\":401.0}\n");
  write_text(tmp.path() / "ddp" / "rankx" / "steps.jsonl", "ignored: not a rank dir");
  const RunResult r = load_run(tmp.path() / "ddp");
  ASSERT_EQ(r.rank_steps.size(), 2u);
  ASSERT_EQ(r.rank_steps.at(0).size(), 2u);
  EXPECT_DOUBLE_EQ(r.rank_steps.at(0)[1].step_ms, 390.0);
  EXPECT_TRUE(std::isnan(r.rank_steps.at(0)[1].lr));  // optional per-step keys
  EXPECT_DOUBLE_EQ(r.rank_steps.at(1)[0].loss, 5.1);
}

TEST(LoadRun, StepsJsonlErrorsNameFileAndLine) {
  std::istringstream in("{\"step\":1,\"loss\":5.0,\"step_ms\":1}\n{\"step\":2,\"step_ms\":1}\n");
  std::string msg;
  try {
    parse_steps_jsonl(in, "run/rank0/steps.jsonl");
  } catch (const AnalysisError& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("run/rank0/steps.jsonl:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"loss\""), std::string::npos) << msg;

  std::istringstream bad("{\"step\":1,\"loss\":5.0,\"step_ms\":1}\nnot json\n");
  try {
    parse_steps_jsonl(bad, "s.jsonl");
    ADD_FAILURE() << "expected AnalysisError";
  } catch (const AnalysisError& e) {
    EXPECT_NE(std::string(e.what()).find("s.jsonl:2: not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(LoadRun, ChartStepsFallBackToRankZero) {
  TempDir tmp;
  auto doc = minimal_result();
  doc["steps"] = nlohmann::json::array();
  write_run(tmp.path() / "r", doc);
  write_text(tmp.path() / "r" / "rank0" / "steps.jsonl", "{\"step\":1,\"loss\":5.0,\"step_ms\":400.0}\n");
  const RunResult r = load_run(tmp.path() / "r");
  EXPECT_TRUE(r.steps.empty());
  EXPECT_EQ(r.chart_steps().size(), 1u);
}

TEST(LoadScenario, ReadsScenarioAndRuns) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "baseline";
  write_scenario(dir, "baseline", {"single", "ddp"}, "Baseline", {"note one"});
  write_run(dir / "single", minimal_result("single"));
  write_run(dir / "ddp", minimal_result("ddp", 2));
  const Scenario s = load_scenario(dir);
  EXPECT_EQ(s.name, "baseline");
  EXPECT_EQ(s.title, "Baseline");
  EXPECT_EQ(s.description, "what it shows");
  ASSERT_EQ(s.notes.size(), 1u);
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.runs[0].name, "single");
  EXPECT_EQ(s.runs[1].name, "ddp");
  EXPECT_EQ(s.runs[1].world_size, 2);
}

TEST(LoadScenario, MissingRunDirNamesIt) {
  TempDir tmp;
  write_scenario(tmp.path(), "s", {"gone"});
  const std::string msg = error_of([&] { load_scenario(tmp.path()); });
  EXPECT_NE(msg.find("gone"), std::string::npos) << msg;
  EXPECT_NE(msg.find("result.json"), std::string::npos) << msg;
}

TEST(LoadScenario, MissingScenarioKey) {
  TempDir tmp;
  write_text(tmp.path() / "scenario.json", R"({"title": "x", "runs": []})");
  const std::string msg = error_of([&] { load_scenario(tmp.path()); });
  EXPECT_NE(msg.find("scenario.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"scenario\""), std::string::npos) << msg;
}

TEST(Discover, ParentDirFindsEveryScenarioSorted) {
  TempDir tmp;
  const fs::path results = tmp.path() / "results";
  write_scenario(results / "zeta", "zeta", {"a"});
  write_run(results / "zeta" / "a", minimal_result());
  write_scenario(results / "nested" / "alpha", "alpha", {"b"});
  write_run(results / "nested" / "alpha" / "b", minimal_result());
  const auto scenarios = discover({results.string()});
  ASSERT_EQ(scenarios.size(), 2u);
  EXPECT_EQ(scenarios[0].name, "alpha");  // "nested" < "zeta"
  EXPECT_EQ(scenarios[1].name, "zeta");
}

TEST(Discover, ScenarioDirRunDirAndDuplicates) {
  TempDir tmp;
  const fs::path sc = tmp.path() / "results" / "baseline";
  write_scenario(sc, "baseline", {"single"});
  write_run(sc / "single", minimal_result());
  write_run(tmp.path() / "loose" / "x" / "single", minimal_result());
  write_run(tmp.path() / "loose" / "y" / "single", minimal_result());

  // the same scenario twice (directly and through its parent) is loaded once
  const auto a = discover({sc.string(), (tmp.path() / "results").string()});
  ASSERT_EQ(a.size(), 1u);

  // loose run dirs are gathered into one ad-hoc scenario; same basenames get their parent as prefix
  const auto b =
      discover({(tmp.path() / "loose" / "x" / "single").string(), (tmp.path() / "loose" / "y" / "single/").string()});
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].name, "runs");
  ASSERT_EQ(b[0].runs.size(), 2u);
  EXPECT_EQ(b[0].runs[0].name, "single");
  EXPECT_EQ(b[0].runs[1].name, "y/single");

  // a result.json file works as an input too
  const auto c = discover({(sc / "single" / "result.json").string()});
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].runs.size(), 1u);
}

TEST(Discover, ErrorsForMissingOrEmptyInputs) {
  TempDir tmp;
  EXPECT_NE(error_of([&] { discover({(tmp.path() / "nope").string()}); }).find("does not exist"), std::string::npos);
  fs::create_directories(tmp.path() / "empty" / "sub");
  EXPECT_NE(error_of([&] { discover({(tmp.path() / "empty").string()}); }).find("no scenario.json or result.json"),
            std::string::npos);
}

TEST(Discover, CommittedFixtures) {
  const auto scenarios = discover({testing::fixtures_dir() + "/results"});
  ASSERT_EQ(scenarios.size(), 2u);
  EXPECT_EQ(scenarios[0].name, "baseline");
  EXPECT_EQ(scenarios[1].name, "mixed_precision");
  const RunResult& ddp = scenarios[0].runs[1];
  EXPECT_EQ(ddp.world_size, 2);
  ASSERT_EQ(ddp.rank_steps.size(), 2u);  // rank0/steps.jsonl and rank1/steps.jsonl
  for (const auto& [rank, steps] : ddp.rank_steps) EXPECT_EQ(steps.size(), ddp.steps.size()) << "rank " << rank;
}

}  // namespace
}  // namespace dtlab::analysis
