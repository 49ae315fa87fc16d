// reshard_test.cpp: a checkpoint of one strategy, world size or model-parallel layout (pipeline stages, tensor-parallel
// slices) continues under another (docs/checkpointing.md, "Resharding"; RELIABILITY B10), over real jobs.
//   Reshard: strategy S at world W runs 3 of 6 steps and saves; S' at W' loads it and runs to 6. Every step's loss
//     and pre-clip gradient norm, and every final parameter (read from both runs' final checkpoints through the
//     torch-free store reader), match the single-process reference within fp32 tolerance.
//   MasterDtypeOnLoad: bf16 masters load into fp32 masters (widened, exact) and fp32 into bf16 (rounded to nearest).
//     The first step after the load computes with the same bf16 weights as a run that never converted, so its loss
//     and gradient norm equal that run's bit for bit; the whole run then matches the same conversion at world 1
//     (FULL_SHARD of one rank under the launcher: the single strategy keeps fp32 masters only).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/strategy/checkpoint_jobs.hpp"

namespace dtlab {
namespace {

using namespace ckpt_testing;  // NOLINT(google-build-using-namespace): the shared job helpers

// fp32 tolerance of the parity suite (docs/testing.md): another strategy or world size sums in another order, which
// changes the last bits only. A missing 1/world or a wrong piece moves losses by 1e-3 and parameters by 1e-4 or more.
constexpr double kRtol = 1.3e-6, kAtol = 1e-5;

// 12 sequences split evenly at worlds 1, 2, 3 and 4.
const std::vector<std::string> kBatch = {"train.global_batch=12", "train.micro_batch=1"};

std::vector<std::string> with_batch(std::vector<std::string> overrides) {
  overrides.insert(overrides.end(), kBatch.begin(), kBatch.end());
  return overrides;
}

struct ReshardCase {
  std::string name;
  int from_world;
  std::vector<std::string> from;  // the saving run's overrides (strategy, shard size, precision)
  int to_world;
  std::vector<std::string> to;  // the loading run's
};

void PrintTo(const ReshardCase& c, std::ostream* os) { *os << c.name; }

// The saving run (steps 1-3, then --stop-after) and the loading run (4-6) of `c`, checkpointing under `dir`/ckpt;
// returns their step records, joined.
nlohmann::json save_then_load(const ReshardCase& c, const std::string& dir) {
  std::vector<std::string> from = c.from, to = c.to;
  from.push_back("checkpoint.dir=" + dir + "/ckpt");
  to.push_back("checkpoint.dir=" + dir + "/ckpt");
  const auto first = train(c.from_world, dir + "/first", with_batch(from), {"--stop-after", "3"});
  EXPECT_EQ(first.exit_code, 0) << first.output;
  const auto second = train(c.to_world, dir + "/second", with_batch(to));
  EXPECT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from " + dir + "/ckpt/step_00000003: 3 of 6 steps done"), std::string::npos)
      << second.output;
  if (first.exit_code != 0 || second.exit_code != 0) return nlohmann::json::array();
  nlohmann::json steps = steps_of(dir + "/first");
  for (const auto& s : steps_of(dir + "/second")) steps.push_back(s);
  return steps;
}

class Reshard : public ::testing::TestWithParam<ReshardCase> {};

TEST_P(Reshard, LossGradNormAndFinalParametersMatchTheReference) {
  const ReshardCase& c = GetParam();
  const std::string dir = fresh_dir("reshard_" + c.name);
  const auto ref =
      train(1, dir + "/ref", with_batch({"parallel.strategy=single", "checkpoint.dir=" + dir + "/ref_ckpt"}));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  const nlohmann::json got = save_then_load(c, dir);
  ASSERT_FALSE(got.empty());
  expect_steps_close(got, steps_of(dir + "/ref"), kRtol, kAtol);
  const double largest = expect_parameters_close(dir + "/ckpt", dir + "/ref_ckpt", kRtol, kAtol);
  std::printf("%s: largest parameter difference from the reference %.3g\n", c.name.c_str(), largest);
}

// "parallel.shard_size=0" where the strategy has none (the default); HYBRID 2x2: two replicas of two shards.
const std::vector<std::string> kFullShard = {"parallel.strategy=fsdp_full_shard"};
const std::vector<std::string> kHybrid2x2 = {"parallel.strategy=fsdp_hybrid", "parallel.shard_size=2"};
const std::vector<std::string> kTp2 = {"parallel.strategy=ddp", "parallel.tp=2"};

INSTANTIATE_TEST_SUITE_P(
    IssueCases, Reshard,
    ::testing::Values(
        ReshardCase{"fs2_to_fs4", 2, kFullShard, 4, kFullShard},
        ReshardCase{"fs2_to_fs3", 2, kFullShard, 3, kFullShard},
        ReshardCase{"fs2_to_single", 2, kFullShard, 1, {"parallel.strategy=single"}},
        ReshardCase{"fs4_to_fs2", 4, kFullShard, 2, kFullShard},
        ReshardCase{"fs4_to_single", 4, kFullShard, 1, {"parallel.strategy=single"}},
        ReshardCase{"fs2_to_ddp2", 2, kFullShard, 2, {"parallel.strategy=ddp"}},
        ReshardCase{"ddp2_to_fs2", 2, {"parallel.strategy=ddp"}, 2, kFullShard},
        ReshardCase{"hybrid4_to_fs2", 4, kHybrid2x2, 2, kFullShard},
        ReshardCase{"hybrid4_to_fs4", 4, kHybrid2x2, 4, kFullShard},
        ReshardCase{"zero1_2_to_sgo3", 2, {"parallel.strategy=zero1"}, 3, {"parallel.strategy=fsdp_shard_grad_op"}},
        // A pipeline checkpoint (each stage's parameters, written by that stage) loads without stages, and back.
        ReshardCase{"pp2_to_single", 2, {"parallel.strategy=ddp", "parallel.pp=2"}, 1, {"parallel.strategy=single"}},
        ReshardCase{"pp2_to_fs2", 2, {"parallel.strategy=ddp", "parallel.pp=2"}, 2, kFullShard},
        ReshardCase{"fs2_to_pp2", 2, kFullShard, 2, {"parallel.strategy=ddp", "parallel.pp=2"}},
        // Tensor-parallel slices (N-D chunks) load without tensor parallelism and under FULL_SHARD, and back; a tp 2
        // x FULL_SHARD checkpoint (ranges of chunks) at tp 2 under DDP; pp 2 x tp 2 under FULL_SHARD.
        ReshardCase{"tp2_to_single", 2, kTp2, 1, {"parallel.strategy=single"}},
        ReshardCase{"tp2_to_fs2", 2, kTp2, 2, kFullShard}, ReshardCase{"fs2_to_tp2", 2, kFullShard, 2, kTp2},
        ReshardCase{"tp2_fs2_to_tp2", 4, {"parallel.strategy=fsdp_full_shard", "parallel.tp=2"}, 2, kTp2},
        ReshardCase{"pp2_tp2_to_fs2", 4, {"parallel.strategy=ddp", "parallel.pp=2", "parallel.tp=2"}, 2, kFullShard}),
    [](const ::testing::TestParamInfo<ReshardCase>& info) { return info.param.name; });

class MasterDtypeOnLoad : public ::testing::TestWithParam<ReshardCase> {};

TEST_P(MasterDtypeOnLoad, ConvertsSoTheNextStepIsTheUnconvertedRunsAndTheRunMatchesWorld1) {
  const ReshardCase& c = GetParam();
  const std::string dir = fresh_dir("master_dtype_" + c.name);
  // The saving configuration, never converted: its step 4 is what the converted run's step 4 must be.
  const auto unconverted = train(c.from_world, dir + "/unconverted", with_batch(c.from), {"--stop-after", "4"});
  ASSERT_EQ(unconverted.exit_code, 0) << unconverted.output;
  const nlohmann::json got = save_then_load(c, dir);
  ASSERT_EQ(got.size(), 6u);
  const nlohmann::json step4 = steps_of(dir + "/unconverted").at(3);
  EXPECT_EQ(got[3]["loss"].get<double>(), step4["loss"].get<double>()) << "step 4 after converting the masters";
  EXPECT_EQ(got[3]["grad_norm"].get<double>(), step4["grad_norm"].get<double>()) << "step 4 after converting";

  // The same conversion at world 1 (the single strategy keeps fp32 masters only, so FULL_SHARD of one rank): the
  // whole run and its final parameters.
  ReshardCase at_world1 = c;
  at_world1.from_world = at_world1.to_world = 1;
  const nlohmann::json want = save_then_load(at_world1, dir + "/world1");
  ASSERT_EQ(want.size(), 6u);
  expect_steps_close(got, want, kRtol, kAtol);
  const double largest = expect_parameters_close(dir + "/ckpt", dir + "/world1/ckpt", kRtol, kAtol);
  std::printf("%s: largest parameter difference from world 1 %.3g\n", c.name.c_str(), largest);
}

// bf16 compute weights under both master dtypes; no stochastic rounding, so a rounding is to nearest.
const std::vector<std::string> kBf16Masters = {"parallel.strategy=fsdp_full_shard", "precision.param_dtype=bf16",
                                               "precision.master_dtype=bf16"};
const std::vector<std::string> kFp32Masters = {"parallel.strategy=fsdp_full_shard", "precision.param_dtype=bf16",
                                               "precision.master_dtype=fp32"};

INSTANTIATE_TEST_SUITE_P(BothWays, MasterDtypeOnLoad,
                         ::testing::Values(ReshardCase{"bf16_masters_to_fp32", 2, kBf16Masters, 2, kFp32Masters},
                                           ReshardCase{"fp32_masters_to_bf16", 2, kFp32Masters, 2, kBf16Masters}),
                         [](const ::testing::TestParamInfo<ReshardCase>& info) { return info.param.name; });

}  // namespace
}  // namespace dtlab
