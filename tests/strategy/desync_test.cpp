// desync_test.cpp: instrument.check_collectives on training jobs (RELIABILITY C16; lab/comm/desync_check.hpp), over
// real processes: `dtlab launch -n 2 dtlab train` on tiny.
//   * the check does not change the math: ddp and fsdp_full_shard (ring reduce-scatters, backend all-gathers) give
//     bit-identical losses and gradient norms with the check on and off;
//   * a rank that skips a DDP bucket's all-reduce (DTLAB_INJECT_DESYNC=1:ddp.bucket.0:skip) and a rank that gathers
//     FSDP parameters of another shape (1:fsdp.params.block.0:shape) stop every rank, within a bound far below the
//     collective timeout, each rank printing the same error: the group, the call number, each rank's op, dtype, shape
//     and tag.
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kConfig = std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml";
constexpr double kCollectiveTimeoutS = 30;

// A `dtlab train` of tiny under `dtlab launch -n 2`, DTLAB_INJECT_DESYNC set to `injection` ("": none).
testing::JobResult launched_job(const std::string& out, const std::string& strategy, bool check,
                                const std::string& injection, int steps, const std::string& extra = "") {
  std::vector<std::string> args = {kBin + "dtlab",
                                   "launch",
                                   "-n",
                                   "2",
                                   kBin + "dtlab",
                                   "train",
                                   "--config",
                                   kConfig,
                                   "--out",
                                   out,
                                   "--timeout",
                                   std::to_string(static_cast<int>(kCollectiveTimeoutS)),
                                   "parallel.strategy=" + strategy,
                                   "train.steps=" + std::to_string(steps),
                                   std::string("instrument.check_collectives=") + (check ? "true" : "false")};
  if (!extra.empty()) args.push_back(extra);
  std::vector<std::string> env;
  if (!injection.empty()) env.push_back("DTLAB_INJECT_DESYNC=" + injection);
  return testing::run_job(args, 120, env);
}

nlohmann::json steps_of(const std::string& out) {
  std::ifstream in(out + "/result.json");
  return nlohmann::json::parse(in).at("steps");
}

// Every "[rank r] " line that carries the desync error, for r = 0 and 1 (each rank prints its own).
std::vector<std::string> desync_lines(const std::string& output, int rank) {
  std::vector<std::string> lines;
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  size_t begin = 0;
  while (begin < output.size()) {
    size_t end = output.find('\n', begin);
    if (end == std::string::npos) end = output.size();
    const std::string line = output.substr(begin, end - begin);
    if (line.rfind(prefix, 0) == 0 && line.find("collective desync on group") != std::string::npos)
      lines.push_back(line.substr(prefix.size()));
    begin = end + 1;
  }
  return lines;
}

// Every rank stopped non-zero, well before the collective timeout, and printed exactly one desync error, the same on
// both ranks. Returns that line ("" when not so).
std::string expect_every_rank_stopped(const testing::JobResult& job) {
  EXPECT_FALSE(job.timed_out) << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_LT(job.seconds, kCollectiveTimeoutS) << "nobody may wait in the mismatched collective\n" << job.output;
  const auto rank0 = desync_lines(job.output, 0), rank1 = desync_lines(job.output, 1);
  if (rank0.size() != 1 || rank1.size() != 1) {
    ADD_FAILURE() << "each rank must print one desync error; rank 0 printed " << rank0.size() << ", rank 1 "
                  << rank1.size() << "\n"
                  << job.output;
    return "";
  }
  EXPECT_EQ(rank0[0], rank1[0]) << "both ranks must report the same desync";
  return rank0[0];
}

class DesyncCheckMath : public ::testing::TestWithParam<std::string> {};

TEST_P(DesyncCheckMath, LossesAndGradNormsAreBitIdenticalWithTheCheckOnAndOff) {
  const std::string dir = ::testing::TempDir() + "dtlab_desync_math_" + GetParam();
  const auto on = launched_job(dir + "/on", GetParam(), true, "", 6);
  ASSERT_EQ(on.exit_code, 0) << on.output;
  const auto off = launched_job(dir + "/off", GetParam(), false, "", 6);
  ASSERT_EQ(off.exit_code, 0) << off.output;
  const nlohmann::json checked = steps_of(dir + "/on"), plain = steps_of(dir + "/off");
  ASSERT_EQ(checked.size(), 6u);
  ASSERT_EQ(plain.size(), 6u);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(checked[i]["loss"].get<double>(), plain[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(checked[i]["grad_norm"].get<double>(), plain[i]["grad_norm"].get<double>()) << "step " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, DesyncCheckMath, ::testing::Values("ddp", "fsdp_full_shard"));

// Rank 1 skips the all-reduce of DDP's first bucket (of several: 64 KiB buckets) in step 1: its second bucket's
// all-reduce takes that call's number.
TEST(DesyncCheckTraining, ASkippedBucketAllReduceStopsEveryRank) {
  const std::string out = ::testing::TempDir() + "dtlab_desync_skip";
  const auto job = launched_job(out, "ddp", true, "1:ddp.bucket.0:skip", 20, "parallel.bucket_cap_mb=0.0625");
  const std::string line = expect_every_rank_stopped(job);
  EXPECT_TRUE(std::regex_search(
      line,
      std::regex(
          "^dtlab: error: collective desync on group 'world' \\(2 ranks\\) at call #\\d+: rank 0 all_reduce sum "
          "float32\\[(\\d+)\\] 'ddp\\.bucket\\.0' vs rank 1 all_reduce sum float32\\[(\\d+)\\] 'ddp\\.bucket\\.1' ")))
      << line;
  EXPECT_NE(job.output.find("fault injection: rank 1 skips call #"), std::string::npos) << job.output;
}

// Rank 1 gathers one FSDP unit's parameters with a shard one element longer (so a whole one 2 longer).
TEST(DesyncCheckTraining, AReshapedParameterAllGatherStopsEveryRank) {
  const std::string out = ::testing::TempDir() + "dtlab_desync_shape";
  const auto job = launched_job(out, "fsdp_full_shard", true, "1:fsdp.params.block.0:shape", 20);
  const std::string line = expect_every_rank_stopped(job);
  std::smatch m;
  EXPECT_TRUE(std::regex_search(
      line, m,
      std::regex("^dtlab: error: collective desync on group 'world' \\(2 ranks\\) at call #\\d+: "
                 "rank 0 all_gather float32\\[(\\d+)\\] -> (\\d+) '(fsdp\\.params\\.[^']+)' vs rank 1 "
                 "all_gather float32\\[(\\d+)\\] -> (\\d+) '(fsdp\\.params\\.[^']+)' ")))
      << line;
  if (m.size() == 7) {
    EXPECT_EQ(std::stoll(m[4].str()), std::stoll(m[1].str()) + 1) << m[0];
    EXPECT_EQ(std::stoll(m[5].str()), std::stoll(m[2].str()) + 2) << m[0];
    EXPECT_EQ(m[3].str(), m[6].str()) << "the same unit on both ranks, only the shape differs";
  }
}

}  // namespace
}  // namespace dtlab
