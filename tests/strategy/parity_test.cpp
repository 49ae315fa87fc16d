// parity_test.cpp: every strategy against the single-process reference, over real processes
// (`dtlab launch -n W strategy_rank ...`, Gloo on 127.0.0.1), plus RELIABILITY A2 (replica identity
// with a corrupted-rank control), A5 (bucket-size invariance), A6 (delay injection) and C14 (a rank
// killed mid-run).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";

testing::JobResult launch(int world, std::vector<std::string> rank_args, double timeout_s = 180,
                          const std::vector<std::string>& env = {}) {
  std::vector<std::string> args = {kBin + "dtlab", "launch", "-n", std::to_string(world), kBin + "strategy_rank"};
  args.insert(args.end(), rank_args.begin(), rank_args.end());
  return testing::run_job(args, timeout_s, env);
}

struct ParityCase {
  std::string strategy;
  int world;
  std::string optimizer;
  int accumulation;
  std::vector<std::string> extra = {};  // modifiers and shape overrides
  std::string label = "";               // appended to the test name
};

// Readable parameters in test logs (instead of gtest's byte dump).
void PrintTo(const ParityCase& c, std::ostream* os) {
  *os << c.strategy << " world " << c.world << " " << c.optimizer << " accumulation " << c.accumulation;
}

std::string case_name(const ::testing::TestParamInfo<ParityCase>& info) {
  const auto& c = info.param;
  return c.strategy + "_w" + std::to_string(c.world) + "_" + c.optimizer + "_acc" + std::to_string(c.accumulation) +
         (c.label.empty() ? "" : "_" + c.label);
}

class Parity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(Parity, LossAndEveryParameterMatchTheReferenceAtEveryStep) {
  const auto& c = GetParam();
  const int micro = 8 / (c.world * c.accumulation);
  std::vector<std::string> args = {"parallel.strategy=" + c.strategy, "train.optimizer=" + c.optimizer,
                                   "train.micro_batch=" + std::to_string(micro), "train.steps=10"};
  const bool replicated = c.strategy == "ddp" || c.strategy == "fsdp_no_shard";
  if (replicated) args.insert(args.begin(), "--check-replicas");
  args.insert(args.end(), c.extra.begin(), c.extra.end());
  auto job = launch(c.world, args);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("parity OK"), std::string::npos) << job.output;
}

INSTANTIATE_TEST_SUITE_P(Ddp, Parity,
                         ::testing::Values(ParityCase{"ddp", 2, "sgd", 1}, ParityCase{"ddp", 2, "adamw", 1},
                                           ParityCase{"ddp", 2, "sgd", 2}, ParityCase{"ddp", 2, "adamw", 2},
                                           ParityCase{"ddp", 4, "sgd", 1}, ParityCase{"ddp", 4, "adamw", 1},
                                           ParityCase{"ddp", 4, "sgd", 2}, ParityCase{"ddp", 4, "adamw", 2},
                                           ParityCase{
                                               "ddp", 2, "adamw", 1, {"parallel.activation_checkpointing=full"}, "ac"}),
                         case_name);

// RELIABILITY A3: every sharded strategy x {offload off, on} x {AC none, full}, world 2 and 4 (HYBRID
// 2x2). World 4 uses a shape whose units do not divide by 4 (d_model 42, ffn 113), so shards are padded.
std::vector<ParityCase> sharded_matrix() {
  const std::vector<std::string> padded_shape = {"model.d_model=42", "model.n_heads=3", "model.n_kv_heads=1",
                                                 "model.ffn_hidden=113"};
  std::vector<ParityCase> cases;
  for (const int world : {2, 4}) {
    std::vector<std::string> strategies = {"fsdp_full_shard", "fsdp_shard_grad_op", "fsdp_no_shard", "zero1"};
    if (world == 4) strategies.push_back("fsdp_hybrid");
    for (const auto& strategy : strategies)
      for (const bool offload : {false, true})
        for (const std::string ac : {"none", "full"}) {
          ParityCase c{strategy, world, offload ? "sgd" : "adamw", world == 2 ? 2 : 1};
          c.extra = {"parallel.offload=" + std::string(offload ? "true" : "false"),
                     "parallel.activation_checkpointing=" + ac};
          if (strategy == "fsdp_hybrid") c.extra.push_back("parallel.shard_size=2");
          if (world == 4) c.extra.insert(c.extra.end(), padded_shape.begin(), padded_shape.end());
          c.label = std::string(offload ? "offload" : "device") + "_ac_" + ac + (world == 4 ? "_padded" : "");
          cases.push_back(c);
        }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Sharded, Parity, ::testing::ValuesIn(sharded_matrix()), case_name);

// Wrap policies and the backend's reduce-scatter give the same training too.
INSTANTIATE_TEST_SUITE_P(
    Wrap, Parity,
    ::testing::Values(ParityCase{"fsdp_full_shard", 2, "adamw", 1, {"parallel.wrap=every_2"}, "every_2"},
                      ParityCase{"fsdp_full_shard", 2, "adamw", 1, {"parallel.wrap=model"}, "whole_model"},
                      ParityCase{"fsdp_full_shard", 2, "sgd", 1, {"parallel.reduce_scatter=backend"}, "backend_rs"},
                      ParityCase{"fsdp_full_shard", 2, "adamw", 1, {"parallel.prefetch=false"}, "no_prefetch"}),
    case_name);

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
  const std::regex named("rank [01].*replica check after step 3: parameter 'tok_embedding' on rank 1 differs");
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

// A6: delays before collectives, after forward and before the optimizer change nothing.
TEST(DdpTiming, DelaysDoNotChangeResults) {
  const std::vector<std::string> args = {"--digest", "--no-reference", "parallel.strategy=ddp", "train.micro_batch=2",
                                         "train.steps=4"};
  auto plain = launch(2, args);
  auto delayed =
      launch(2, args, 180, {"DTLAB_INJECT_DELAY=before_all_reduce=15,after_forward@1=20,before_optimizer@0=10"});
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(delayed.exit_code, 0) << delayed.output;
  EXPECT_EQ(digest_lines(plain.output), digest_lines(delayed.output));
  EXPECT_EQ(digest_lines(plain.output).size(), 8u);
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
  const std::string torchrun =
      std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/dtlab/venv/bin/torchrun";
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
  const std::regex final_loss(R"(final loss ([0-9.]+))");
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(tr.output, a, final_loss)) << tr.output;
  ASSERT_TRUE(std::regex_search(dl.output, b, final_loss)) << dl.output;
  EXPECT_EQ(a[1].str(), b[1].str());
  std::ifstream result(dir + "/tr/result.json");
  std::stringstream text;
  text << result.rdbuf();
  EXPECT_NE(text.str().find("\"launcher\": \"torchrun\""), std::string::npos);
}

}  // namespace
}  // namespace dtlab

namespace dtlab {
namespace {

// RELIABILITY A4: mixed precision against the emulated single-process reference (bf16 compute, fp32
// reduce, fp32 master) at bf16 tolerance, with the dtype of every collective intercepted.
struct PrecisionCase {
  std::string strategy;
  int world;
  std::vector<std::string> overrides;
  std::vector<std::string> expect_dtypes;  // OP=DTYPE
  std::string label;
};

void PrintTo(const PrecisionCase& c, std::ostream* os) { *os << c.label << " world " << c.world; }

class MixedPrecision : public ::testing::TestWithParam<PrecisionCase> {};

TEST_P(MixedPrecision, MatchesTheEmulatedReferenceAtBf16ToleranceWithTheRightWireDtypes) {
  const auto& c = GetParam();
  std::vector<std::string> args = {"--tolerance", "bf16", "parallel.strategy=" + c.strategy,
                                   "train.micro_batch=" + std::to_string(8 / c.world / 2)};
  for (const auto& d : c.expect_dtypes) args.insert(args.begin(), {"--expect-dtype", d});
  args.insert(args.end(), c.overrides.begin(), c.overrides.end());
  auto job = launch(c.world, args);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("parity OK"), std::string::npos) << job.output;
  for (const auto& d : c.expect_dtypes) EXPECT_NE(job.output.find("dtype check: "), std::string::npos) << job.output;
}

const std::vector<std::string> kBf16 = {"precision.param_dtype=bf16"};
INSTANTIATE_TEST_SUITE_P(
    Policies, MixedPrecision,
    ::testing::Values(
        PrecisionCase{"fsdp_full_shard", 2, kBf16, {"all_gather=bfloat16", "reduce_scatter=float32"}, "full_shard"},
        PrecisionCase{
            "fsdp_shard_grad_op", 2, kBf16, {"all_gather=bfloat16", "reduce_scatter=float32"}, "shard_grad_op"},
        PrecisionCase{"zero1", 2, kBf16, {"reduce_scatter=float32"}, "zero1"},
        PrecisionCase{"fsdp_no_shard", 2, kBf16, {"all_reduce=float32"}, "no_shard"},
        PrecisionCase{"fsdp_hybrid",
                      4,
                      {"precision.param_dtype=bf16", "parallel.shard_size=2"},
                      {"all_gather=bfloat16", "reduce_scatter=float32"},
                      "hybrid_2x2"},
        PrecisionCase{"fsdp_full_shard",
                      2,
                      {"precision.param_dtype=bf16", "precision.reduce_dtype=bf16"},
                      {"all_gather=bfloat16", "reduce_scatter=bfloat16"},
                      "bf16_reduce"},
        PrecisionCase{
            "fsdp_full_shard",
            2,
            {"precision.param_dtype=bf16", "precision.master_dtype=bf16", "precision.stochastic_rounding=true"},
            {"all_gather=bfloat16"},
            "bf16_master_stochastic_rounding"},
        PrecisionCase{"ddp", 2, {"precision.reduce_dtype=bf16"}, {"all_reduce=bfloat16"}, "ddp_bf16_reduce"}),
    [](const auto& info) { return info.param.label; });

// RELIABILITY D21: fp16 with dynamic loss scaling; an inf on rank 1's gradients at step 3 makes every
// rank skip that step (parameters and optimizer state unchanged) and halves the scale.
TEST(LossScaler, NonFiniteGradientOnOneRankSkipsTheStepEverywhereAndHalvesTheScale) {
  auto job =
      launch(2,
             {"--no-reference", "--expect-skip", "3", "parallel.strategy=fsdp_full_shard", "precision.param_dtype=fp16",
              "precision.loss_scale=dynamic", "train.micro_batch=4", "train.steps=6"},
             180, {"DTLAB_INJECT_INF=1:3"});
  EXPECT_EQ(job.exit_code, 0) << job.output;
  for (const std::string rank : {"0", "1"})
    EXPECT_NE(job.output.find("rank " + rank + " step 3: skipped=1, parameters unchanged"), std::string::npos)
        << job.output;
}

// The scale grows again after precision.loss_scale_growth_interval good steps: with interval 2 and an
// initial 1024, steps 1-2 use 1024, steps 3-4 use 2048, steps 5-6 use 4096 (read back from result.json).
TEST(LossScaler, ScaleDoublesAfterTheGrowthInterval) {
  const std::string out = ::testing::TempDir() + "dtlab_loss_scale_growth";
  auto job = testing::run_job(
      {kBin + "dtlab", "launch", "-n", "2", kBin + "dtlab", "train", "--config",
       std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml", "parallel.strategy=zero1",
       "precision.param_dtype=fp16", "precision.loss_scale=dynamic", "precision.loss_scale_growth_interval=2",
       "precision.loss_scale_init=1024", "train.steps=6", "--out", out},
      120);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  std::ifstream in(out + "/result.json");
  std::stringstream text;
  text << in.rdbuf();
  std::vector<double> scales;
  const std::string json = text.str();
  const std::regex scale_re(R"("loss_scale":\s*([0-9.]+))");
  for (std::sregex_iterator it(json.begin(), json.end(), scale_re), end; it != end; ++it)
    scales.push_back(std::stod((*it)[1].str()));
  EXPECT_EQ(scales, (std::vector<double>{1024, 1024, 2048, 2048, 4096, 4096})) << json.substr(0, 2000);
}

}  // namespace
}  // namespace dtlab
