// instrument_test.cpp: the instrumentation of real 2-rank jobs (`dtlab launch -n 2 dtlab train ...`, Gloo on
// 127.0.0.1) for DDP, FULL_SHARD and ZeRO-1 with tracing on:
//   - every training collective of rank 0 has a record in result.json "comm", and their number per op equals
//     what the strategy's cost plan says it issues per step (tag "metric" is the trainer's own loss sum);
//   - records and per-step figures are self-consistent (exposed + overlapped = time, overlap in [0, 100],
//     phases sum to the step);
//   - each rank wrote timeline.json and a valid trace (Kineto-like keys, ProfilerStep#N per step, pid = rank);
//   - `dtlab trace merge` writes one trace holding both ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "lab/instrument/trace.hpp"
#include "strategies/cost_plan.hpp"
#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kConfig = std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml";
constexpr int kSteps = 6;

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << "cannot read " << p;
  return nlohmann::json::parse(in);
}

class Instrumented : public ::testing::TestWithParam<std::string> {};

TEST_P(Instrumented, RecordsPhasesTimelineAndTraces) {
  const std::string strategy = GetParam();
  const auto dir = std::filesystem::temp_directory_path() / ("dtlab_instrument_" + strategy);
  std::filesystem::remove_all(dir);
  const std::vector<std::string> overrides = {"parallel.strategy=" + strategy, "train.steps=" + std::to_string(kSteps),
                                              "instrument.trace=true", "instrument.warmup_steps=1"};
  std::vector<std::string> args = {kBin + "dtlab", "launch", "-n", "2", kBin + "dtlab", "train", "--config", kConfig};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.insert(args.end(), {"--out", dir.string()});
  const auto job = testing::run_job(args, 180);
  ASSERT_EQ(job.exit_code, 0) << job.output;

  const nlohmann::json result = read_json(dir / "result.json");
  // Records per op vs the cost plan.
  const Config config = load_config(kConfig, overrides, 2);
  std::map<std::string, int64_t> planned, recorded;
  for (const auto& c : cost_plan(config, 0).collectives)
    if (c.phase != "setup") planned[c.op] += c.count * kSteps;
  const auto& records = result.at("comm").at("records");
  for (const auto& r : records) {
    if (r.at("tag") != "metric") ++recorded[r.at("op").get<std::string>()];
    const double time = r.at("time_us"), exposed = r.at("exposed_us"), overlapped = r.at("overlapped_us");
    EXPECT_NEAR(exposed + overlapped, time, 1e-6 * std::max(1.0, time));
    EXPECT_GE(overlapped, 0.0);
    EXPECT_GE(r.at("busbw_GBps").get<double>(), 0.0);
    EXPECT_GE(r.at("step").get<int64_t>(), 1);
  }
  EXPECT_EQ(recorded, planned) << "records per op differ from the cost plan";
  EXPECT_FALSE(result["comm"]["records_truncated"].get<bool>());
  ASSERT_EQ(result["comm"]["ranks"].size(), 2u);

  for (const auto& s : result.at("steps")) {
    double sum = 0;
    for (const auto& [phase, ms] : s.at("phases_ms").items()) sum += ms.get<double>();
    EXPECT_NEAR(sum, s.at("step_ms").get<double>(), 0.01 * s.at("step_ms").get<double>() + 0.01);
    EXPECT_GE(s.at("overlap_pct").get<double>(), 0.0);
    EXPECT_LE(s.at("overlap_pct").get<double>(), 100.0);
    EXPECT_GT(s.at("comm_ms").get<double>(), 0.0);
  }
  const auto& summary = result.at("summary");
  for (const char* key : {"step_ms_mean", "step_ms_p95", "tokens_per_s_per_rank", "mfu_pct", "gemm_tflops",
                          "cpu_util_pct", "memory_max_allocated_bytes", "overlap_pct_median"})
    EXPECT_TRUE(summary.contains(key)) << key;
  for (const char* phase : {"data", "forward", "backward", "comm_wait", "optimizer", "other"})
    EXPECT_TRUE(summary.at("phases_ms").at(phase).contains("p95")) << phase;
  EXPECT_TRUE(result.contains("prediction"));

  std::vector<nlohmann::json> traces;
  for (int r = 0; r < 2; ++r) {
    const auto rank_dir = dir / ("rank" + std::to_string(r));
    const auto timeline = read_json(rank_dir / "timeline.json");
    EXPECT_EQ(timeline.at("rank"), r);
    EXPECT_EQ(timeline.at("step"), kSteps);
    EXPECT_FALSE(timeline.at("spans").empty());
    const auto trace = read_trace((rank_dir / "trace.json.gz").string());
    EXPECT_TRUE(trace.contains("schemaVersion"));
    EXPECT_EQ(trace.at("distributedInfo").at("rank"), r);
    EXPECT_EQ(trace.at("distributedInfo").at("world_size"), 2);
    int profiler_steps = 0;
    for (const auto& e : trace.at("traceEvents")) {
      EXPECT_EQ(e.at("pid"), r);
      if (e.value("name", "").rfind("ProfilerStep#", 0) == 0) ++profiler_steps;
    }
    EXPECT_EQ(profiler_steps, kSteps);
    traces.push_back(trace);
  }

  const auto merged_path = dir / "merged.json.gz";
  const auto merge = testing::run_job({kBin + "dtlab", "trace", "merge", dir.string(), "-o", merged_path.string()}, 60);
  ASSERT_EQ(merge.exit_code, 0) << merge.output;
  std::set<int> pids;
  const nlohmann::json merged = read_trace(merged_path.string());
  for (const auto& e : merged.at("traceEvents")) pids.insert(e.at("pid").get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1}));
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Strategies, Instrumented, ::testing::Values("ddp", "fsdp_full_shard", "zero1"));

}  // namespace
}  // namespace dtlab
