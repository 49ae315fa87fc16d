// reliability_test.cpp: the strategy suite's own guards, over real processes (`dtlab launch -n W strategy_rank ...`,
// Gloo on 127.0.0.1): deliberate bugs the parity check must catch (with controls), RELIABILITY A2 (replica identity
// with a corrupted-rank control), A3 (activation checkpointing bit-identical), A5 (bucket-size invariance), A6 (delay
// injection), C14 (a rank killed mid-run), and ranks under torchrun. The parity matrices: parity_test.cpp.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/strategy/rank_launch.hpp"

namespace dtlab {
namespace {

using testing::kBin;
using testing::launch;

// The suite can fail: with a deliberate bug switched on (DTLAB_INJECT_MUTATION, lab/instrument/fault_injection.hpp)
// one representative parity case per bug must report a mismatch. If a mutation ever stops being caught, the
// checks above have gone blind to it. (The whole strategy suite under each mutation is recorded in
// docs/testing.md.)
struct MutationCase {
  std::string mutation;
  int world;
  std::vector<std::string> args;
};

void PrintTo(const MutationCase& c, std::ostream* os) { *os << c.mutation << " at world " << c.world; }

class Mutation : public ::testing::TestWithParam<MutationCase> {};

TEST_P(Mutation, IsCaughtByTheParityCheck) {
  const auto& c = GetParam();
  std::vector<std::string> args = {"train.optimizer=sgd", "train.grad_clip=0", "train.steps=4", "train.global_batch=8"};
  args.insert(args.end(), c.args.begin(), c.args.end());
  auto job = launch(c.world, args, 180, {"DTLAB_INJECT_MUTATION=" + c.mutation});
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("parity FAILED"), std::string::npos) << job.output;
  EXPECT_EQ(job.output.find("parity OK"), std::string::npos) << job.output;
  // Control: the same case without the mutation passes, so the failure above is the mutation's.
  auto control = launch(c.world, args);
  EXPECT_EQ(control.exit_code, 0) << control.output;
  EXPECT_NE(control.output.find("parity OK"), std::string::npos) << control.output;
}

INSTANTIATE_TEST_SUITE_P(
    Suite, Mutation,
    ::testing::Values(
        MutationCase{"drop_world_factor", 2, {"parallel.strategy=ddp", "train.micro_batch=2"}},
        MutationCase{"drop_world_factor", 2, {"parallel.strategy=fsdp_full_shard", "train.micro_batch=4"}},
        MutationCase{"sum_hybrid_replicas",
                     4,
                     {"parallel.strategy=fsdp_hybrid", "parallel.shard_size=2", "train.micro_batch=2"}},
        MutationCase{"skip_bucket", 2, {"parallel.strategy=ddp", "train.micro_batch=4"}},
        MutationCase{"drop_micro_batch_grad", 2, {"parallel.strategy=ddp", "parallel.pp=2", "train.micro_batch=2"}},
        MutationCase{
            "skip_weight_pass",
            2,
            {"parallel.strategy=ddp", "parallel.pp=2", "parallel.pp_schedule=zero_bubble", "train.micro_batch=2"}}),
    [](const auto& info) { return info.param.mutation + "_" + std::to_string(info.index); });

std::vector<std::string> digest_lines(const std::string& output);

// A3: activation checkpointing changes memory and time, never the numbers (bit-identical).
TEST(ActivationCheckpointing, LossesAndParametersAreBitIdenticalWithAndWithoutIt) {
  for (const std::string strategy : {"fsdp_full_shard", "ddp"}) {
    std::vector<std::string> first;
    for (const std::string ac : {"none", "full", "selective", "full_every_2"}) {
      const bool every_2 = ac == "full_every_2";
      auto job = launch(2, {"--digest", "--no-reference", "parallel.strategy=" + strategy, "train.micro_batch=4",
                            "train.steps=4", "parallel.activation_checkpointing=" + std::string(every_2 ? "full" : ac),
                            "parallel.checkpoint_every=" + std::string(every_2 ? "2" : "1")});
      ASSERT_EQ(job.exit_code, 0) << job.output;
      auto digests = digest_lines(job.output);
      ASSERT_EQ(digests.size(), 8u) << job.output;
      if (first.empty()) first = digests;
      EXPECT_EQ(digests, first) << strategy << " activation_checkpointing=" << ac;
    }
  }
}

// A2 control: a corrupted element on rank 1 makes the checker fail on every rank within that step.
TEST(ReplicaCheck, CorruptedRankIsNamedByEveryRank) {
  auto job = launch(2, {"--check-replicas", "--corrupt-step", "3", "parallel.strategy=ddp", "train.micro_batch=4"});
  EXPECT_NE(job.exit_code, 0);
  int ranks_reporting = 0;
  for (const std::string prefix :
       {"[rank 0] strategy_rank: replica check after step 3", "[rank 1] strategy_rank: replica check after step 3"})
    ranks_reporting += job.output.find(prefix) != std::string::npos;
  EXPECT_EQ(ranks_reporting, 2) << job.output;
  EXPECT_NE(job.output.find("on rank 1 differs from rank 0"), std::string::npos) << job.output;
  EXPECT_EQ(job.output.find("replica check after step 2"), std::string::npos) << job.output;
}

// The "digest <step> <hex>" and "loss-bits <step> <hex>" lines of a --digest run. Runs compared for
// bit-identity must also train: the parameter digest and the loss must change from step to step, so a
// frozen model (or a run that never updates) cannot pass a comparison of two identical non-runs.
std::vector<std::string> digest_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::regex re(R"((digest|loss-bits) \d+ [0-9a-f]+)");
  for (std::sregex_iterator it(output.begin(), output.end(), re), end; it != end; ++it) lines.push_back(it->str());
  std::set<std::string> param_digests, losses;
  for (const auto& l : lines) {
    const std::string value = l.substr(l.rfind(' ') + 1);
    (l.rfind("digest", 0) == 0 ? param_digests : losses).insert(value);
  }
  EXPECT_GE(param_digests.size(), 2u) << "parameters did not change between steps:\n" << output;
  EXPECT_GE(losses.size(), 2u) << "the loss did not change between steps:\n" << output;
  return lines;
}

// A5: the bucket layout must not change the math (world 2: every element is one a + b).
TEST(DdpBuckets, ReducedResultsAreBitIdenticalAcrossBucketCaps) {
  // tiny: lm_head is 256*64*4 = 65536 bytes; 2 parameters ~ 2 * 65536.
  const std::vector<std::string> caps = {"1000000", std::to_string(65536.0 / 1048576.0),
                                         std::to_string(65540.0 / 1048576.0), std::to_string(65532.0 / 1048576.0),
                                         std::to_string(131072.0 / 1048576.0)};
  std::vector<std::string> first;
  for (const auto& cap : caps) {
    auto job = launch(2, {"--digest", "--no-reference", "parallel.strategy=ddp", "train.micro_batch=4", "train.steps=4",
                          "parallel.bucket_cap_mb=" + cap});
    ASSERT_EQ(job.exit_code, 0) << job.output;
    auto digests = digest_lines(job.output);
    ASSERT_EQ(digests.size(), 8u) << job.output;
    if (first.empty()) first = digests;
    EXPECT_EQ(digests, first) << "bucket_cap_mb=" << cap;
  }
}

// A6: delays before collectives, after forward and before the optimizer change nothing, for DDP's buckets and for
// FULL_SHARD's prefetched gathers and reduce-scatters. The delayed run must say it slept at every point asked.
struct DelayCase {
  std::string strategy, spec;
  std::vector<std::string> points;  // "RANK POINT" pairs the run must announce
};

class Delays : public ::testing::TestWithParam<DelayCase> {};

TEST_P(Delays, DoNotChangeResults) {
  const auto& c = GetParam();
  const std::vector<std::string> args = {"--digest", "--no-reference", "parallel.strategy=" + c.strategy,
                                         "train.micro_batch=2", "train.steps=4"};
  auto plain = launch(2, args);
  auto delayed = launch(2, args, 180, {"DTLAB_INJECT_DELAY=" + c.spec});
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(delayed.exit_code, 0) << delayed.output;
  for (const auto& p : c.points) {
    const std::string rank = p.substr(0, p.find(' ')), point = p.substr(p.find(' ') + 1);
    EXPECT_NE(delayed.output.find("fault injection: rank " + rank + " sleeps"), std::string::npos) << delayed.output;
    EXPECT_NE(delayed.output.find("at " + point + " (first"), std::string::npos) << point << "\n" << delayed.output;
  }
  EXPECT_EQ(plain.output.find("fault injection"), std::string::npos) << plain.output;
  EXPECT_EQ(digest_lines(plain.output), digest_lines(delayed.output));
  EXPECT_EQ(digest_lines(plain.output).size(), 8u);
}

INSTANTIATE_TEST_SUITE_P(Points, Delays,
                         ::testing::Values(DelayCase{"ddp",
                                                     "before_all_reduce=15,after_forward@1=20,before_optimizer@0=10",
                                                     {"0 before_all_reduce", "1 after_forward", "0 before_optimizer"}},
                                           DelayCase{
                                               "fsdp_full_shard",
                                               "before_all_gather@1=15,before_reduce_scatter@0=10,after_forward@0=20",
                                               {"1 before_all_gather", "0 before_reduce_scatter", "0 after_forward"}}),
                         [](const auto& info) { return info.param.strategy; });

// A malformed DTLAB_INJECT_DELAY is an error naming the variable and the item, not silently ignored.
TEST(Delays, MalformedSpecIsAnErrorNamingTheItem) {
  auto job = testing::run_job(
      {kBin + "dtlab", "train", "--config", std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml",
       "parallel.strategy=single", "train.steps=2", "--out", ::testing::TempDir() + "dtlab_bad_delay"},
      60, {"DTLAB_INJECT_DELAY=before_allreduce=5"});
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("DTLAB_INJECT_DELAY: 'before_allreduce=5' names no point"), std::string::npos)
      << job.output;
}

// A5 at world 4: Gloo's ring reduces an element in an order set by where it falls in the bucket, so caps may change
// the last bits; every cap must still match the single-process reference at fp32 tolerance (loss, grad norm and
// every parameter, SGD without clipping).
TEST(DdpBuckets, EveryCapMatchesTheReferenceAtWorldFour) {
  for (const std::string& cap :
       {std::string("1000000"), std::to_string(65536.0 / 1048576.0), std::to_string(131072.0 / 1048576.0)}) {
    auto job = launch(4, {"--check-replicas", "parallel.strategy=ddp", "train.optimizer=sgd", "train.grad_clip=0",
                          "train.micro_batch=2", "parallel.bucket_cap_mb=" + cap});
    EXPECT_EQ(job.exit_code, 0) << "bucket_cap_mb=" << cap << "\n" << job.output;
    EXPECT_NE(job.output.find("parity OK"), std::string::npos) << job.output;
  }
}

// C14: rank 1 dies mid-run; the launcher and every rank exit non-zero within 60 s naming rank 1.
class RankDeath : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(RankDeath, JobStopsNamingRankOne) {
  const auto& [kind, expected] = GetParam();
  const std::string out_dir = ::testing::TempDir() + "dtlab_fault_" + kind;
  std::vector<std::string> args = {kBin + "dtlab",
                                   "launch",
                                   "-n",
                                   "2",
                                   kBin + "dtlab",
                                   "train",
                                   "--config",
                                   std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml",
                                   "train.steps=200",
                                   "--out",
                                   out_dir,
                                   "--timeout",
                                   "30"};
  auto job = testing::run_job(args, 90, {"DTLAB_INJECT_FAULT=1:3:" + kind});
  EXPECT_FALSE(job.timed_out) << job.output;
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_LT(job.seconds, 60.0) << job.output;
  EXPECT_NE(job.output.find("rank 1 " + expected), std::string::npos) << job.output;
}

INSTANTIATE_TEST_SUITE_P(Faults, RankDeath,
                         ::testing::Values(std::make_pair("exit", "exited with code 1"),
                                           std::make_pair("sigkill", "was killed by signal SIGKILL"),
                                           std::make_pair("sigterm", "was killed by signal SIGTERM")),
                         [](const auto& info) { return info.param.first; });

}  // namespace
}  // namespace dtlab

namespace dtlab {
namespace {

// dtlab ranks under torchrun --no-python (agent store: every rank a store client under its prefix)
// train exactly like under `dtlab launch`.
TEST(Torchrun, RanksRunUnderTorchrunAndMatchDtlabLaunch) {
  const std::string torchrun = testing::venv_program("torchrun");
  if (access(torchrun.c_str(), X_OK) != 0) GTEST_SKIP() << "torchrun not found at " << torchrun << " (make setup)";
  const std::string config = std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml";
  const std::string dir = ::testing::TempDir() + "dtlab_torchrun";
  auto tr = testing::run_job({torchrun, "--standalone", "--nproc-per-node=2", "--no-python", kBin + "dtlab", "train",
                              "--config", config, "train.steps=4", "--out", dir + "/tr"},
                             120);
  ASSERT_EQ(tr.exit_code, 0) << tr.output;
  auto dl = testing::run_job({kBin + "dtlab", "launch", "-n", "2", kBin + "dtlab", "train", "--config", config,
                              "train.steps=4", "--out", dir + "/dl"},
                             120);
  ASSERT_EQ(dl.exit_code, 0) << dl.output;
  // The same job under either launcher computes the same thing: every step's loss and grad norm, bit for bit.
  auto steps_of = [](const std::string& path) {
    std::ifstream in(path);
    std::vector<std::pair<double, double>> out;
    const nlohmann::json doc = nlohmann::json::parse(in);  // named: the loop must not walk into a temporary
    for (const auto& step : doc.at("steps"))
      out.emplace_back(step.at("loss").get<double>(), step.at("grad_norm").get<double>());
    return out;
  };
  const auto tr_steps = steps_of(dir + "/tr/result.json"), dl_steps = steps_of(dir + "/dl/result.json");
  ASSERT_GE(tr_steps.size(), 4u);
  EXPECT_EQ(tr_steps, dl_steps);
  std::ifstream result(dir + "/tr/result.json");
  std::stringstream text;
  text << result.rdbuf();
  EXPECT_NE(text.str().find("\"launcher\": \"torchrun\""), std::string::npos);
}

}  // namespace
}  // namespace dtlab
