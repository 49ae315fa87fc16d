// instrument_test.cpp: the instrumentation of real jobs (`dtlab launch -n W dtlab train ...`, Gloo on 127.0.0.1)
// for every strategy, with tracing on, checked against quantities measured or computed independently of the code
// that produced them:
//   - the number of training collectives per op in rank 0's records equals what the strategy's cost plan says it
//     issues per step, times the steps (the plan is the strategy's own description, not the recorder);
//   - every record's bytes are one of the sizes computed here by hand from tiny's shape (a unit of the FSDP family,
//     DDP's one bucket), in the dtype the run communicates;
//   - the six phases of every step sum to its step time, and all steps together fill the training loop's wall time
//     as the trainer's own clock outside the profiler measured it (summary.wall_s), which the test's clock bounds;
//   - each rank wrote timeline.json and a valid trace (Kineto-like keys, ProfilerStep#N per step, pid = rank);
//   - `dtlab trace merge` writes one trace holding every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "lab/instrument/trace.hpp"
#include "strategies/catalog.hpp"
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

// tiny (d 64, 2 blocks, 4 heads of 16, 2 KV heads, ffn 172, vocab 256, untied), elements per FSDP unit:
//   embedding  256·64                                                   = 16384
//   block      2·64 (norms) + 64·64 (wq) + 2·(32·64) (wk, wv) + 64·64 (wo) + 3·172·64 (MLP) = 45440
//   head       64 (final norm) + 256·64 (lm_head)                       = 16448
// None needs padding at world 2 or 4 (all divide by 4). DDP: 123,712 parameters in one bucket (494,848 fp32 bytes,
// under the 1 MiB first-bucket cap).
const std::set<int64_t> kUnitElements = {16384, 45440, 16448};
constexpr int64_t kModelElements = 16384 + 2 * 45440 + 16448;

struct InstrumentCase {
  std::string label, strategy;
  int world = 2;
  std::vector<std::string> extra = {};
  int64_t wire_bytes = 4;  // bytes per element of the parameter collectives
};

void PrintTo(const InstrumentCase& c, std::ostream* os) { *os << c.label; }

class Instrumented : public ::testing::TestWithParam<InstrumentCase> {};

TEST_P(Instrumented, RecordsPhasesTimelineAndTraces) {
  const InstrumentCase& c = GetParam();
  const std::string strategy = c.strategy;
  const auto dir = std::filesystem::temp_directory_path() / ("dtlab_instrument_" + c.label);
  std::filesystem::remove_all(dir);
  std::vector<std::string> overrides = {"parallel.strategy=" + strategy, "train.steps=" + std::to_string(kSteps),
                                        "instrument.trace=true", "instrument.warmup_steps=1",
                                        "train.micro_batch=" + std::to_string(8 / c.world)};
  overrides.insert(overrides.end(), c.extra.begin(), c.extra.end());
  std::vector<std::string> args = {kBin + "dtlab", "launch", "-n",       std::to_string(c.world),
                                   kBin + "dtlab", "train",  "--config", kConfig};
  args.insert(args.end(), overrides.begin(), overrides.end());
  args.insert(args.end(), {"--out", dir.string()});
  const auto job = testing::run_job(args, 180);
  ASSERT_EQ(job.exit_code, 0) << job.output;

  const nlohmann::json result = read_json(dir / "result.json");
  // Records per op vs the cost plan.
  const Config config = load_config(kConfig, overrides, c.world);
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
    // Bytes: a whole unit (gathered size, or a reduce-scatter's input) or DDP's bucket, in the wire dtype.
    const std::string op = r.at("op"), tag = r.at("tag");
    const int64_t bytes = r.at("bytes");
    if (tag.rfind("ddp.bucket.", 0) == 0) {
      EXPECT_EQ(bytes, kModelElements * c.wire_bytes) << tag;
    } else if (tag.rfind("fsdp.params.", 0) == 0 || tag.rfind("zero1.params.", 0) == 0) {
      EXPECT_TRUE(bytes % c.wire_bytes == 0 && kUnitElements.count(bytes / c.wire_bytes)) << tag << " " << bytes;
    } else if (tag.rfind("fsdp.grads.", 0) == 0) {  // reduced in fp32 in every case here
      EXPECT_TRUE(bytes % 4 == 0 && kUnitElements.count(bytes / 4)) << tag << " " << bytes;
    } else if (tag.rfind("fsdp.replicas.", 0) == 0) {  // a shard of a unit across the replica group
      EXPECT_TRUE(bytes % 4 == 0 && kUnitElements.count(bytes / 4 * 2)) << tag << " " << bytes;
    }
  }
  EXPECT_EQ(recorded, planned) << "records per op differ from the cost plan";
  EXPECT_FALSE(result["comm"]["records_truncated"].get<bool>());
  ASSERT_EQ(result["comm"]["ranks"].size(), static_cast<size_t>(c.world));

  double all_steps_ms = 0;
  for (const auto& s : result.at("steps")) {
    double sum = 0;
    for (const auto& [phase, ms] : s.at("phases_ms").items()) sum += ms.get<double>();
    EXPECT_NEAR(sum, s.at("step_ms").get<double>(), 0.01 * s.at("step_ms").get<double>() + 0.01);
    all_steps_ms += s.at("step_ms").get<double>();
    EXPECT_GE(s.at("overlap_pct").get<double>(), 0.0);
    EXPECT_LE(s.at("overlap_pct").get<double>(), 100.0);
    EXPECT_GT(s.at("comm_ms").get<double>(), 0.0);
  }
  // The loop's wall time, measured by the trainer's steady clock outside the profiler, is the steps plus the
  // bookkeeping between them (records, step lines): the steps fill most of it, and the job as the test timed it
  // holds all of it.
  const double wall_ms = result.at("summary").at("wall_s").get<double>() * 1000.0;
  EXPECT_LE(all_steps_ms, wall_ms);
  EXPECT_GE(all_steps_ms, 0.7 * wall_ms) << "steps " << all_steps_ms << " ms of a " << wall_ms << " ms loop";
  EXPECT_LE(wall_ms, job.seconds * 1000.0);
  const auto& summary = result.at("summary");
  for (const char* key : {"step_ms_mean", "step_ms_p95", "tokens_per_s_per_rank", "mfu_pct", "gemm_tflops",
                          "cpu_util_pct", "memory_max_allocated_bytes", "overlap_pct_median"})
    EXPECT_TRUE(summary.contains(key)) << key;
  for (const char* phase : {"data", "forward", "backward", "comm_wait", "optimizer", "other"})
    EXPECT_TRUE(summary.at("phases_ms").at(phase).contains("p95")) << phase;
  // The least comm wait of any rank, per measured step, median over the steps: from every rank's steps.jsonl.
  {
    const int64_t measured = summary.at("measured_steps").get<int64_t>();
    std::vector<double> least(static_cast<size_t>(measured), std::numeric_limits<double>::infinity());
    for (int r = 0; r < c.world; ++r) {
      const std::filesystem::path file = dir / ("rank" + std::to_string(r)) / "steps.jsonl";
      std::ifstream lines(file);
      ASSERT_TRUE(lines) << file << ": every rank writes its steps";
      std::string line;
      int64_t measured_here = 0;  // every rank holds every measured step, or its wait is missing from the least
      while (std::getline(lines, line)) {
        const auto step = nlohmann::json::parse(line);
        const int64_t i = step.at("step").get<int64_t>() - (kSteps - measured) - 1;  // the last `measured` steps
        if (i >= 0) {
          ++measured_here;
          least[static_cast<size_t>(i)] =
              std::min(least[static_cast<size_t>(i)], step.at("comm_wait_ms").get<double>());
        }
      }
      EXPECT_EQ(measured_here, measured) << file;
    }
    // result.json's measured steps carry their own least wait; the warm-up steps none.
    for (const auto& step : result.at("steps")) {
      const int64_t i = step.at("step").get<int64_t>() - (kSteps - measured) - 1;
      if (i < 0) {
        EXPECT_FALSE(step.contains("comm_wait_least_ms")) << step.dump();
      } else {
        ASSERT_TRUE(step.contains("comm_wait_least_ms")) << step.dump();
        EXPECT_DOUBLE_EQ(step.at("comm_wait_least_ms").get<double>(), least[static_cast<size_t>(i)]) << step.dump();
      }
    }
    std::sort(least.begin(), least.end());
    const size_t n = least.size();
    ASSERT_GT(n, 0u);
    const double median = n % 2 ? least[n / 2] : 0.5 * (least[n / 2 - 1] + least[n / 2]);
    EXPECT_NEAR(summary.at("comm_wait_least_ms_median").get<double>(), median, 1e-9);
    EXPECT_LE(summary.at("comm_wait_least_ms_median").get<double>(), summary.at("comm_wait_ms_median").get<double>());
  }
  EXPECT_TRUE(result.contains("prediction"));

  std::vector<nlohmann::json> traces;
  for (int r = 0; r < c.world; ++r) {
    const auto rank_dir = dir / ("rank" + std::to_string(r));
    const auto timeline = read_json(rank_dir / "timeline.json");
    EXPECT_EQ(timeline.at("rank"), r);
    EXPECT_EQ(timeline.at("step"), kSteps);
    EXPECT_FALSE(timeline.at("spans").empty());
    const auto trace = read_trace((rank_dir / "trace.json.gz").string());
    EXPECT_TRUE(trace.contains("schemaVersion"));
    EXPECT_EQ(trace.at("distributedInfo").at("rank"), r);
    EXPECT_EQ(trace.at("distributedInfo").at("world_size"), c.world);
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
  std::set<int> ranks;
  for (int r = 0; r < c.world; ++r) ranks.insert(r);
  EXPECT_EQ(pids, ranks);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, Instrumented,
    ::testing::Values(InstrumentCase{"ddp", "ddp"}, InstrumentCase{"fsdp_full_shard", "fsdp_full_shard"},
                      InstrumentCase{"fsdp_shard_grad_op", "fsdp_shard_grad_op"},
                      InstrumentCase{"fsdp_no_shard", "fsdp_no_shard"}, InstrumentCase{"zero1", "zero1"},
                      InstrumentCase{"fsdp_hybrid_2x2", "fsdp_hybrid", 4, {"parallel.shard_size=2"}},
                      InstrumentCase{"full_shard_bf16", "fsdp_full_shard", 2, {"precision.param_dtype=bf16"}, 2}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace dtlab
