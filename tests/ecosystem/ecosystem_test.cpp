// ecosystem_test.cpp: dtlab's outputs read by the tools users already have (issue 16), on real runs: TensorBoard's
// reader on instrument.tensorboard's event files, Holistic Trace Analysis and Perfetto's trace processor on the
// traces, pandas on `dtlab export csv`, and `dtlab compare` on identical and deliberately slowed runs. The readers are
// Python packages of the cached venv, driven by check_tools.py; a case whose tool is missing skips saying which.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/input_stamp.hpp"
#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

namespace fs = std::filesystem;
const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kSource = DTLAB_SOURCE_DIR;
const std::string kChecker = kSource + "/tests/ecosystem/check_tools.py";
const std::string kConfigFile = "tests/strategy/tiny_ddp.yaml";  // tiny, DDP, one thread per rank
const std::string kConfig = kSource + "/" + kConfigFile;
constexpr int kSkip = 77;

fs::path work_dir() { return fs::path(::testing::TempDir()) / "dtlab_ecosystem"; }

// `dtlab train` of kConfig (world 1 without the launcher) with `overrides`, into `out`.
testing::JobResult train(int world, const fs::path& out, const std::vector<std::string>& overrides,
                         const std::vector<std::string>& env = {}) {
  std::vector<std::string> args;
  if (world > 1) args = {kBin + "dtlab", "launch", "-n", std::to_string(world)};
  for (const std::string& a :
       {kBin + "dtlab", std::string("train"), std::string("--config"), kConfig, std::string("--out"), out.string()})
    args.push_back(a);
  args.insert(args.end(), overrides.begin(), overrides.end());
  return testing::run_job(args, 300, env);
}

// One traced DDP job at world 2 with TensorBoard scalars, made once per build of dtlab and content of the config it
// reads, and shared by the cases (ctest runs each case as its own process). No warm-up steps, so the trace and
// result.json's overlap cover the same steps.
fs::path traced_run() {
  const fs::path run = work_dir() / "ddp_traced";
  const nlohmann::json stamp = {{"dtlab", fs::last_write_time(kBin + "dtlab").time_since_epoch().count()},
                                {"inputs", testing::content_stamp(kSource, {kConfigFile})}};
  if (fs::exists(run / "merged.trace.json.gz") && fs::exists(run / "stamp.json") &&
      nlohmann::json::parse(std::ifstream(run / "stamp.json")) == stamp)
    return run;
  fs::remove_all(run);
  const auto job = train(
      2, run,
      {"parallel.strategy=ddp", "parallel.bucket_cap_mb=1", "train.steps=6", "train.global_batch=8",
       "train.micro_batch=4", "instrument.warmup_steps=0", "instrument.trace=true", "instrument.tensorboard=true"});
  if (job.exit_code != 0) throw std::runtime_error("the traced run failed:\n" + job.output);
  const auto merge = testing::run_job(
      {kBin + "dtlab", "trace", "merge", run.string(), "-o", (run / "merged.trace.json.gz").string()}, 60);
  if (merge.exit_code != 0) throw std::runtime_error("dtlab trace merge failed:\n" + merge.output);
  std::ofstream(run / "stamp.json") << stamp.dump();
  return run;
}

// Runs check_tools.py; skips the case with the script's reason when its tool is not installed.
#define CHECK_WITH_TOOL(...)                                                                            \
  do {                                                                                                  \
    const auto check = testing::run_job({testing::venv_program("python"), kChecker, __VA_ARGS__}, 300); \
    if (check.exit_code == kSkip) GTEST_SKIP() << check.output;                                         \
    EXPECT_EQ(check.exit_code, 0) << check.output;                                                      \
    std::printf("%s", check.output.c_str());                                                            \
  } while (0)

TEST(Ecosystem, TensorBoardReadsBackEveryScalarAsTheStepLinesHaveIt) {
  const fs::path run = traced_run();
  ASSERT_TRUE(fs::exists(run / "tensorboard" / "rank0")) << "instrument.tensorboard wrote nothing";
  ASSERT_TRUE(fs::exists(run / "tensorboard" / "rank1"));
  CHECK_WITH_TOOL("tensorboard", run.string());
}

TEST(Ecosystem, HolisticTraceAnalysisLoadsEveryRankAndAgreesOnOverlap) {
  // The tolerance: HTA and dtlab merge the same intervals; HTA rounds times to whole microseconds and its percentage
  // to 2 decimals (seen: 0.006 pp apart).
  CHECK_WITH_TOOL("hta", traced_run().string(), "0.1");
}

TEST(Ecosystem, PerfettoCountsTheTraceSlicesOfEveryLane) { CHECK_WITH_TOOL("perfetto", traced_run().string()); }

TEST(Ecosystem, CsvExportReadsBackInPandasAsTheRunsOwnNumbers) {
  const fs::path run = traced_run();
  const fs::path csv = work_dir() / "csv";
  fs::remove_all(csv);
  const auto exported = testing::run_job({kBin + "dtlab", "export", "csv", run.string(), "-o", csv.string()}, 60);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_NE(exported.output.find("steps.csv: 12 rows"), std::string::npos) << exported.output;  // 6 steps x 2 ranks
  CHECK_WITH_TOOL("csv", csv.string(), run.string());
}

TEST(Ecosystem, CompareSaysNoChangeForIdenticalRunsAndSlowerForADelayedOne) {
  const fs::path dir = work_dir() / "compare";
  fs::remove_all(dir);
  // Steps of ~40-60 ms: long enough that scheduling jitter (about 10% step to step here) stays inside the interval.
  const std::vector<std::string> config = {"parallel.strategy=single", "train.steps=16", "train.global_batch=32",
                                           "train.micro_batch=32", "instrument.warmup_steps=2"};
  ASSERT_EQ(train(1, dir / "a", config).exit_code, 0);
  ASSERT_EQ(train(1, dir / "same", config).exit_code, 0);
  // 400 ms of sleep before every optimizer step: about 10x the step, far beyond any run-to-run noise.
  const auto slow = train(1, dir / "slow", config, {"DTLAB_INJECT_DELAY=before_optimizer=400"});
  ASSERT_EQ(slow.exit_code, 0) << slow.output;

  // The threshold sits far above run-to-run noise, which the bootstrap over one run's steps does not see: two identical
  // runs measured 0.90 apart (interval [0.83, 0.95]), 0.76 ([0.72, 0.81], in a CI run) and 1.43 ([1.40, 1.45]) on
  // this shared machine. A 100% threshold counts only a 2x change either way; the delayed run is about 10x.
  const std::vector<std::string> gate = {"--threshold", "100", "--fail-on-regression", "100"};
  std::vector<std::string> args = {kBin + "dtlab", "compare", (dir / "a").string(), (dir / "same").string()};
  args.insert(args.end(), gate.begin(), gate.end());
  const auto same = testing::run_job(args, 60);
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("step_ms"), std::string::npos) << same.output;
  EXPECT_EQ(same.output.find("slower"), std::string::npos) << same.output;
  EXPECT_EQ(same.output.find("faster"), std::string::npos) << same.output;

  const fs::path json = dir / "comparison.json";
  args = {kBin + "dtlab", "compare", (dir / "a").string(), (dir / "slow").string(), "--json", json.string()};
  args.insert(args.end(), gate.begin(), gate.end());
  const auto slower = testing::run_job(args, 60);
  EXPECT_EQ(slower.exit_code, 4) << "a regression gates with exit 4\n" << slower.output;
  const nlohmann::json c = nlohmann::json::parse(std::ifstream(json));
  const nlohmann::json& step = c["runs"][0]["metrics"][0];
  ASSERT_EQ(step["metric"], "step_ms");
  EXPECT_EQ(step["verdict_text"], "slower") << step.dump();
  EXPECT_GT(step["ci95"][0].get<double>(), 2.0) << step.dump();

  // The report shows the comparison next to the runs it compared.
  const auto report = testing::run_job({kBin + "dtlab", "report", dir.string(), "-o", (dir / "report").string()}, 120);
  ASSERT_EQ(report.exit_code, 0) << report.output;
  std::ifstream page(dir / "report" / "index.html");
  const std::string html((std::istreambuf_iterator<char>(page)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("id=\"comparison\""), std::string::npos);
  EXPECT_NE(html.find("slower"), std::string::npos);
}

}  // namespace
}  // namespace dtlab
