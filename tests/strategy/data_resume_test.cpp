// data_resume_test.cpp: a run over a token file, stopped (or killed) and resumed, is bit-identical to the straight
// run (docs/checkpointing.md; RELIABILITY B9), at world 2 under DDP and FULL_SHARD.
//   The data is a small token file (`dtlab data build` of a 1.5 KB text: 22 sequences of tiny's 64 tokens), read
//   through the shuffled sampler 16 sequences a step for 10 steps, so the run reads the file about 7 times over and
//   the part after the resume wraps around the file's end twice. That is asserted from the run's own records
//   (result.json's batch, sequence length and data path, and the file's header), not assumed.
//   ddp stops cleanly (--stop-after 5); fsdp_full_shard saves every 2 steps and rank 1 is SIGKILLed after step 7, so
//   the resumed run repeats step 7 from the step-6 checkpoint. Both compare every step's loss and pre-clip gradient
//   norm bit for bit, and the final parameters byte for byte.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/strategy/checkpoint_jobs.hpp"

namespace dtlab {
namespace {

using namespace ckpt_testing;  // NOLINT(google-build-using-namespace): the shared job helpers

constexpr int kDataSteps = 10;
constexpr int64_t kGlobalBatch = 16;

// A byte-level token file of about 1.5 KB of text, built by `dtlab data build` under `dir`.
std::string small_token_file(const std::string& dir) {
  const std::string text = dir + "/text.txt", out = dir + "/tokens.bin";
  {
    std::ofstream f(text);
    for (int i = 0; i < 30; ++i) f << "line " << i << ": the lab reads this file round and round.\n";
  }
  const auto job = testing::run_job({kBin + "dtlab", "data", "build", "--out", out, text}, 60);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  return out;
}

// The token count in a token file's header (lab/data/token_file.hpp: uint64 at offset 16).
int64_t token_count(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(16);
  uint64_t count = 0;
  in.read(reinterpret_cast<char*>(&count), sizeof count);
  return static_cast<int64_t>(count);
}

// How many whole passes over its token file the run in `out` had read after `steps` steps, from its result.json
// (data path, global batch, sequence length) and the file's header: tokens read / tokens in the file.
int64_t passes_after(const std::string& out, int64_t steps) {
  const nlohmann::json config = result_of(out).at("config");
  EXPECT_EQ(config.at("data").at("source"), "file");
  const int64_t tokens = token_count(config.at("data").at("path").get<std::string>());
  const int64_t per_step =
      config.at("train").at("global_batch").get<int64_t>() * config.at("model").at("seq_len").get<int64_t>();
  return steps * per_step / tokens;
}

struct DataResumeCase {
  std::string name;
  std::string strategy;
  bool kill;  // rank 1 SIGKILLed after step 7 (checkpoints every 2 steps); else --stop-after 5
};

void PrintTo(const DataResumeCase& c, std::ostream* os) { *os << c.name; }

class DataResume : public ::testing::TestWithParam<DataResumeCase> {};

TEST_P(DataResume, OverATokenFilesWrapTheResumedRunIsTheStraightRunBitForBit) {
  const DataResumeCase& c = GetParam();
  const std::string dir = fresh_dir("data_resume_" + c.name);
  const std::vector<std::string> common = {"parallel.strategy=" + c.strategy,
                                           "data.source=file",
                                           "data.path=" + small_token_file(dir),
                                           "data.seed=7",
                                           "train.global_batch=" + std::to_string(kGlobalBatch),
                                           "train.micro_batch=4"};
  auto with = [&](const std::string& extra) {
    std::vector<std::string> overrides = common;
    overrides.push_back(extra);
    if (c.kill) overrides.push_back("checkpoint.every=2");
    return overrides;
  };
  const auto straight = train(2, dir + "/straight", with("checkpoint.dir=" + dir + "/straight_ckpt"), {}, kDataSteps);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  int64_t resume_step = 5;
  if (c.kill) {
    const auto killed = train(2, dir + "/first", with("checkpoint.dir=" + dir + "/ckpt"), {}, kDataSteps,
                              {"DTLAB_INJECT_FAULT=1:7:sigkill"});
    ASSERT_NE(killed.exit_code, 0) << killed.output;
    EXPECT_NE(killed.output.find("rank 1 was killed by signal SIGKILL"), std::string::npos) << killed.output;
    resume_step = 6;  // the newest complete checkpoint
  } else {
    const auto first =
        train(2, dir + "/first", with("checkpoint.dir=" + dir + "/ckpt"), {"--stop-after", "5"}, kDataSteps);
    ASSERT_EQ(first.exit_code, 0) << first.output;
  }
  const auto second = train(2, dir + "/second", with("checkpoint.dir=" + dir + "/ckpt"), {}, kDataSteps);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resumed from " + dir + "/ckpt/step_0000000" + std::to_string(resume_step) + ": " +
                               std::to_string(resume_step) + " of 10 steps done"),
            std::string::npos)
      << second.output;

  // The part after the resume reads across the file's end at least twice: the data position is really restored.
  const int64_t passes_at_resume = passes_after(dir + "/second", resume_step);
  const int64_t passes_at_end = passes_after(dir + "/second", kDataSteps);
  EXPECT_GE(passes_at_resume, 1) << "the stopped part must already have read the whole file once";
  EXPECT_GE(passes_at_end - passes_at_resume, 2) << "the resumed part must wrap around the file's end twice";

  // A killed run writes no result.json: its steps are rank 0's steps.jsonl (the steps after the checkpoint, which
  // the resumed run repeats, must equal the straight run's too).
  const nlohmann::json first_steps = c.kill ? streamed_steps_of(dir + "/first") : steps_of(dir + "/first");
  ASSERT_GE(first_steps.size(), static_cast<size_t>(resume_step)) << first_steps.dump();
  nlohmann::json resumed;
  for (const auto& s : first_steps)
    if (s["step"].get<int64_t>() <= resume_step) resumed.push_back(s);
  for (const auto& s : steps_of(dir + "/second")) resumed.push_back(s);
  const nlohmann::json expected = steps_of(dir + "/straight");
  ASSERT_EQ(resumed.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(resumed[i]["step"], expected[i]["step"]);
    EXPECT_EQ(resumed[i]["loss"].get<double>(), expected[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(resumed[i]["grad_norm"].get<double>(), expected[i]["grad_norm"].get<double>()) << "step " << i + 1;
  }
  for (const auto& s : first_steps) {  // the killed run's steps past its checkpoint, redone after the resume
    const int64_t step = s["step"].get<int64_t>();
    if (step > resume_step) {
      EXPECT_EQ(s["loss"].get<double>(), expected[step - 1]["loss"].get<double>()) << "killed run, step " << step;
    }
  }
  expect_parameters_identical(dir + "/ckpt", dir + "/straight_ckpt");
}

INSTANTIATE_TEST_SUITE_P(World2, DataResume,
                         ::testing::Values(DataResumeCase{"ddp_stopped", "ddp", false},
                                           DataResumeCase{"full_shard_killed", "fsdp_full_shard", true}),
                         [](const ::testing::TestParamInfo<DataResumeCase>& info) { return info.param.name; });

}  // namespace
}  // namespace dtlab
