// checkpoint_test.cpp: training checkpoints over real jobs (issue 14; docs/checkpointing.md).
//   Resume: for every strategy (and bf16 masters with stochastic rounding, fp16 with the loss scaler and offload,
//     accumulation, async saves), N steps straight vs k steps, stop (--stop-after), resume, N: the same losses and
//     gradient norms bit for bit, and the same final parameters byte for byte (read from the final checkpoints).
//   Resharding (reshard_test.cpp) and a resume over a token file's wrap (data_resume_test.cpp) share this suite's
//     helpers (checkpoint_jobs.hpp).
//   Bad input: a truncated or corrupted shard, a missing rank file, another model shape or optimizer, a dir that is a
//     file, a resume=never over existing checkpoints: one error naming the file (or key) and nothing overwritten; a
//     piece only one rank reads stops every rank at once, the others naming the rank that failed.
//   Restart: dtlab launch --max-restarts after a rank is killed ends with an uninterrupted run's parameters.
//   PyTorch: the cached venv's `safetensors` opens a sharded checkpoint and its parameters match a DDP run's.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/checkpoint/store.hpp"
#include "tests/strategy/checkpoint_jobs.hpp"
#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

using namespace ckpt_testing;  // NOLINT(google-build-using-namespace): the shared job helpers

struct ResumeCase {
  std::string name;
  int world;
  std::vector<std::string> overrides;
};

void PrintTo(const ResumeCase& c, std::ostream* os) { *os << c.name; }

class Resume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(Resume, StoppingAndResumingGivesTheStraightRunBitForBit) {
  const ResumeCase& c = GetParam();
  const std::string dir = fresh_dir("resume_" + c.name);
  std::vector<std::string> straight_overrides = c.overrides, split_overrides = c.overrides;
  straight_overrides.push_back("checkpoint.dir=" + dir + "/straight_ckpt");  // its final save holds the parameters
  split_overrides.push_back("checkpoint.dir=" + dir + "/ckpt");
  const auto straight = train(c.world, dir + "/straight", straight_overrides);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto first = train(c.world, dir + "/first", split_overrides, {"--stop-after", "3"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto second = train(c.world, dir + "/second", split_overrides);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from " + dir + "/ckpt/step_00000003: 3 of 6 steps done"), std::string::npos)
      << second.output;
  if (std::count(c.overrides.begin(), c.overrides.end(), "checkpoint.async=true") > 0) {
    // An async save's snapshot is host memory (as DCP stages it to the host): counted, but outside the device side.
    std::ifstream in(dir + "/straight/result.json");
    const nlohmann::json memory = nlohmann::json::parse(in).at("memory");
    ASSERT_TRUE(memory.contains("host_measured")) << memory.dump();
    EXPECT_GT(memory.at("host_measured").at("buffers").at("peak_bytes").get<int64_t>(), 0) << memory.dump();
    EXPECT_EQ(memory.at("host_bytes"), 0) << "no offload: no host state";
  }

  nlohmann::json resumed = steps_of(dir + "/first");
  for (const auto& s : steps_of(dir + "/second")) resumed.push_back(s);
  const nlohmann::json expected = steps_of(dir + "/straight");
  ASSERT_EQ(resumed.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(resumed[i]["step"], expected[i]["step"]);
    EXPECT_EQ(resumed[i]["loss"].get<double>(), expected[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(resumed[i]["grad_norm"].get<double>(), expected[i]["grad_norm"].get<double>()) << "step " << i + 1;
  }
  const auto want = parameters_of(dir + "/straight_ckpt");
  const auto got = parameters_of(dir + "/ckpt");
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, bytes] : want) EXPECT_TRUE(got.at(name) == bytes) << name << " differs after resuming";
}

INSTANTIATE_TEST_SUITE_P(
    EveryStrategy, Resume,
    ::testing::Values(
        ResumeCase{"single", 1, {"parallel.strategy=single"}}, ResumeCase{"ddp", 2, {"parallel.strategy=ddp"}},
        ResumeCase{"ddp_sgd_accumulation", 2, {"parallel.strategy=ddp", "train.optimizer=sgd", "train.micro_batch=2"}},
        ResumeCase{"zero1", 2, {"parallel.strategy=zero1"}},
        // Pipeline stages: each stage's data-parallel rank 0 writes its stage's parameters and moments.
        ResumeCase{"ddp_pp2_1f1b", 2, {"parallel.strategy=ddp", "parallel.pp=2", "train.micro_batch=2"}},
        ResumeCase{"ddp_pp2_dp2_interleaved",
                   4,
                   {"parallel.strategy=ddp", "parallel.pp=2", "train.micro_batch=1", "model.n_layers=4",
                    "parallel.pp_schedule=interleaved_1f1b", "parallel.pp_virtual_stages=2"}},
        ResumeCase{"zero1_pp2_dp2", 4, {"parallel.strategy=zero1", "parallel.pp=2", "train.micro_batch=2"}},
        // Tensor-parallel slices, stored as N-D chunks (a row-parallel weight's columns): each tp rank writes its
        // own; under FULL_SHARD the shard group cuts each slice into ranges; pp x tp writes a stage's slices.
        ResumeCase{"ddp_tp2_sp", 2, {"parallel.strategy=ddp", "parallel.tp=2", "parallel.sequence_parallel=true"}},
        ResumeCase{"full_shard_tp2_dp2", 4, {"parallel.strategy=fsdp_full_shard", "parallel.tp=2"}},
        ResumeCase{
            "ddp_pp2_tp2", 4, {"parallel.strategy=ddp", "parallel.pp=2", "parallel.tp=2", "train.micro_batch=2"}},
        ResumeCase{"full_shard", 2, {"parallel.strategy=fsdp_full_shard"}},
        ResumeCase{"full_shard_async",
                   2,
                   {"parallel.strategy=fsdp_full_shard", "checkpoint.async=true", "checkpoint.every=1",
                    "train.micro_batch=2"}},
        ResumeCase{"full_shard_bf16_sr",
                   2,
                   {"parallel.strategy=fsdp_full_shard", "precision.param_dtype=bf16", "precision.master_dtype=bf16",
                    "precision.stochastic_rounding=true"}},
        ResumeCase{"full_shard_fp16_offload_ac",
                   2,
                   {"parallel.strategy=fsdp_full_shard", "precision.param_dtype=fp16", "precision.loss_scale=dynamic",
                    "parallel.offload=true", "parallel.activation_checkpointing=full"}},
        ResumeCase{"shard_grad_op", 2, {"parallel.strategy=fsdp_shard_grad_op"}},
        ResumeCase{"no_shard", 2, {"parallel.strategy=fsdp_no_shard"}},
        ResumeCase{"hybrid", 4, {"parallel.strategy=fsdp_hybrid", "parallel.shard_size=2", "train.micro_batch=2"}},
        ResumeCase{"single_bf16", 1, {"parallel.strategy=single", "precision.param_dtype=bf16"}}),
    [](const ::testing::TestParamInfo<ResumeCase>& info) { return info.param.name; });

// A saved checkpoint of tiny under FULL_SHARD at world 2, 3 steps, for the bad-input cases.
std::string saved_checkpoint(const std::string& dir) {
  const auto job = train(2, dir + "/first", {"parallel.strategy=fsdp_full_shard", "checkpoint.dir=" + dir + "/ckpt"},
                         {"--stop-after", "3"});
  EXPECT_EQ(job.exit_code, 0) << job.output;
  return dir + "/ckpt/step_00000003";
}

testing::JobResult resume_from(const std::string& dir, std::vector<std::string> overrides = {}) {
  overrides.push_back("parallel.strategy=fsdp_full_shard");
  overrides.push_back("checkpoint.dir=" + dir + "/ckpt");
  return train(2, dir + "/second", overrides);
}

TEST(CheckpointBadInput, ATruncatedShardIsNamedAndNothingIsOverwritten) {
  const std::string dir = fresh_dir("truncated");
  const std::string step = saved_checkpoint(dir);
  fs::resize_file(step + "/rank00001.safetensors", fs::file_size(step + "/rank00001.safetensors") - 100);
  const auto job = resume_from(dir);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find(step + "/rank00001.safetensors: is truncated"), std::string::npos) << job.output;
  EXPECT_TRUE(fs::exists(step + "/metadata.json"));
  EXPECT_FALSE(fs::exists(dir + "/ckpt/step_00000006"));
}

TEST(CheckpointBadInput, AFlippedByteFailsItsChecksumNamingTheFileAndTensor) {
  const std::string dir = fresh_dir("checksum");
  const std::string step = saved_checkpoint(dir);
  const std::string file = step + "/rank00000.safetensors";
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-5, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-5, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  const auto job = resume_from(dir);
  EXPECT_NE(job.exit_code, 0);
  EXPECT_NE(job.output.find("checkpoint " + file + ": tensor '"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("fails its checksum"), std::string::npos) << job.output;
  // Only rank 0 reads that piece; rank 1 read its own and learns from the agreement that rank 0 failed, instead of
  // waiting in restore_state's collective until the launcher stops it.
  EXPECT_NE(job.output.find("rank 0 failed to load it (that rank's error says why), so rank 1 stops too"),
            std::string::npos)
      << job.output;
  const auto inspect = testing::run_job({kBin + "dtlab", "checkpoint", "inspect", step}, 60);
  EXPECT_EQ(inspect.exit_code, 1) << inspect.output;
  EXPECT_NE(inspect.output.find("CHECKSUM MISMATCH: rank00000.safetensors"), std::string::npos) << inspect.output;
}

TEST(CheckpointBadInput, AMissingRankFileAnotherModelShapeOrOptimizerAndADirThatIsAFileAreRefused) {
  const std::string dir = fresh_dir("refusals");
  const std::string step = saved_checkpoint(dir);
  const auto inspect = testing::run_job({kBin + "dtlab", "checkpoint", "inspect", step}, 60);
  EXPECT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("all checksums match"), std::string::npos) << inspect.output;

  const auto wider = resume_from(dir, {"model.d_model=96", "model.n_heads=4"});
  EXPECT_NE(wider.exit_code, 0);
  EXPECT_NE(wider.output.find("holds a model with model.d_model=64, this run's is 96"), std::string::npos)
      << wider.output;

  const auto sgd = resume_from(dir, {"train.optimizer=sgd"});  // saved with AdamW's moments
  EXPECT_NE(sgd.exit_code, 0);
  EXPECT_NE(sgd.output.find("holds \"adamw\" optimizer state; this run's train.optimizer is sgd"), std::string::npos)
      << sgd.output;

  const auto never = resume_from(dir, {"checkpoint.resume=never"});
  EXPECT_NE(never.exit_code, 0);
  EXPECT_NE(never.output.find("already holds checkpoints"), std::string::npos) << never.output;

  fs::rename(step + "/rank00001.safetensors", dir + "/moved.safetensors");
  const auto missing = resume_from(dir);
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("rank file rank00001.safetensors is missing"), std::string::npos) << missing.output;
  EXPECT_TRUE(fs::exists(step + "/metadata.json")) << "the refused checkpoint must stay";

  std::ofstream(dir + "/a_file") << "not a directory";
  const auto file_dir = train(2, dir + "/third", {"parallel.strategy=ddp", "checkpoint.dir=" + dir + "/a_file"});
  EXPECT_NE(file_dir.exit_code, 0);
  EXPECT_NE(file_dir.output.find("checkpoint.dir=" + dir + "/a_file is a file"), std::string::npos) << file_dir.output;
}

TEST(CheckpointKeep, KeepsTheNewestKAndNeverTheLastComplete) {
  const std::string dir = fresh_dir("keep");
  const auto job =
      train(2, dir + "/run",
            {"parallel.strategy=ddp", "checkpoint.dir=" + dir + "/ckpt", "checkpoint.every=1", "checkpoint.keep=2"});
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const auto kept = checkpoint::complete_checkpoints(dir + "/ckpt");
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].first, 5);
  EXPECT_EQ(kept[1].first, 6);
}

// torchrun's elastic semantics: a rank killed mid-run, every rank started again from the latest complete checkpoint,
// and the final parameters equal an uninterrupted run's.
TEST(CheckpointRestart, AKilledRankRestartsTheJobFromTheLatestCheckpointAndEndsWhereAStraightRunDoes) {
  const std::string dir = fresh_dir("restart");
  const std::vector<std::string> overrides = {"parallel.strategy=fsdp_full_shard", "checkpoint.every=2"};
  std::vector<std::string> straight_overrides = overrides;
  straight_overrides.push_back("checkpoint.dir=" + dir + "/straight_ckpt");
  const auto straight = train(2, dir + "/straight", straight_overrides);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  std::vector<std::string> args = {kBin + "dtlab",
                                   "launch",
                                   "-n",
                                   "2",
                                   "--max-restarts",
                                   "2",
                                   kBin + "dtlab",
                                   "train",
                                   "--config",
                                   kConfig,
                                   "--out",
                                   dir + "/restarted",
                                   "train.steps=" + std::to_string(kSteps),
                                   "checkpoint.dir=" + dir + "/ckpt"};
  args.insert(args.end(), overrides.begin(), overrides.end());
  // Rank 1 dies after step 5; the newest checkpoint then is step 4.
  const auto job = testing::run_job(args, 120, {"DTLAB_INJECT_FAULT=1:5:sigkill"});
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("rank 1 was killed by signal SIGKILL"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("restart 1 of 2: the job failed"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("restart 1: resumed from " + dir + "/ckpt/step_00000004: 4 of 6 steps done"),
            std::string::npos)
      << job.output;
  std::ifstream in(dir + "/restarted/result.json");
  const nlohmann::json result = nlohmann::json::parse(in);
  EXPECT_EQ(result["checkpoints"]["restart_count"], 1);
  EXPECT_EQ(result["checkpoints"]["resumed_from"]["step"], 4);
  ASSERT_EQ(result["steps"].size(), 2u);
  EXPECT_EQ(result["steps"][1]["loss"].get<double>(), steps_of(dir + "/straight")[5]["loss"].get<double>());
  const auto want = parameters_of(dir + "/straight_ckpt");
  const auto got = parameters_of(dir + "/ckpt");
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, bytes] : want) EXPECT_TRUE(got.at(name) == bytes) << name << " differs after the restart";
}

// PyTorch users open a dtlab checkpoint with the `safetensors` package: the full parameters of a sharded checkpoint,
// assembled in Python from its pieces, equal those of a DDP checkpoint of the same training (fp32 tolerance).
TEST(CheckpointInPyTorch, SafetensorsOpensAShardedCheckpointAndItsParametersMatchDdp) {
  const std::string python = testing::venv_program("python");
  const auto probe = testing::run_job({python, "-c", "import safetensors.torch"}, 60);
  if (probe.exit_code != 0) GTEST_SKIP() << "the venv has no safetensors package (make setup installs it)";
  const std::string dir = fresh_dir("pytorch");
  for (const std::string s : {"fsdp_full_shard", "ddp"}) {
    const auto job = train(2, dir + "/" + s, {"parallel.strategy=" + s, "checkpoint.dir=" + dir + "/" + s + "_ckpt"});
    ASSERT_EQ(job.exit_code, 0) << job.output;
  }
  const auto check = testing::run_job({python, std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/open_checkpoint.py",
                                       dir + "/fsdp_full_shard_ckpt/step_00000006", dir + "/ddp_ckpt/step_00000006"},
                                      120);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("parameters match"), std::string::npos) << check.output;
}

}  // namespace
}  // namespace dtlab
