// checkpoint_crash_test.cpp: checkpoints survive a real crash (RELIABILITY B8; docs/checkpointing.md "Crash safety").
// For each fault point inside a save (lab/instrument/fault_injection.hpp: ckpt_*), a 2-rank FULL_SHARD job of tiny that
// saves every 2 of 6 steps has one rank killed with SIGKILL inside the save of step 4, and the job exits non-zero.
// The same command again (checkpoint.resume=auto) resumes from the newest complete checkpoint: step 2, or step 4 when
// the kill came after the commit. It never loads the step_00000004.partial directory the crash left, even one that
// already holds its metadata.json (asked for by path it is refused). It prints that it removed that directory and
// removes it, and ends at step 6 with the losses and gradient norms of a straight run bit for bit and its final
// parameters byte for byte.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/checkpoint/safetensors.hpp"
#include "lab/checkpoint/store.hpp"
#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

namespace fs = std::filesystem;

const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kConfig = std::string(DTLAB_SOURCE_DIR) + "/tests/strategy/tiny_ddp.yaml";
constexpr int kSteps = 6;
constexpr int kCrashedSave = 4;  // saves at steps 2, 4 and 6; the kill comes inside the save of step 4

std::string fresh_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "dtlab_ckpt_crash_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// `dtlab launch -n 2 dtlab train` of tiny for kSteps steps under FULL_SHARD (every rank writes its shard), saving
// every 2 steps to `checkpoint_dir`, with `overrides` and `env` (the fault).
testing::JobResult train(const std::string& out, const std::string& checkpoint_dir, std::vector<std::string> overrides,
                         const std::vector<std::string>& env = {}) {
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
                                   "train.steps=" + std::to_string(kSteps),
                                   "parallel.strategy=fsdp_full_shard",
                                   "checkpoint.every=2",
                                   "checkpoint.dir=" + checkpoint_dir};
  args.insert(args.end(), overrides.begin(), overrides.end());
  return testing::run_job(args, 120, env);
}

nlohmann::json steps_of(const std::string& out) {
  std::ifstream in(out + "/result.json");
  return nlohmann::json::parse(in).at("steps");
}

// Every "param.*" tensor of the newest checkpoint under `checkpoint_dir`, assembled from its pieces, as raw bytes.
std::map<std::string, std::vector<char>> parameters_of(const std::string& checkpoint_dir) {
  std::string dir;
  const checkpoint::Metadata meta = checkpoint::read_metadata(checkpoint_dir, &dir);
  std::map<std::string, std::vector<char>> out;
  for (const auto& [name, info] : meta.tensors) {
    if (name.rfind("param.", 0) != 0) continue;
    std::vector<char>& bytes = out[name];
    for (const checkpoint::Piece& p : info.pieces) {
      const safetensors::Header h = safetensors::read_header(dir + "/" + p.file);
      const std::vector<char> piece = safetensors::read_bytes(h, h.tensor(p.key));
      bytes.insert(bytes.end(), piece.begin(), piece.end());
    }
  }
  return out;
}

// The ".partial" directories under `dir`.
std::vector<std::string> partials_in(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().extension() == ".partial") found.push_back(entry.path().string());
  return found;
}

struct CrashCase {
  std::string name;
  int rank;                            // the rank killed
  std::string point;                   // where, inside the save of kCrashedSave
  std::vector<std::string> overrides;  // beyond FULL_SHARD at world 2, saving every 2 steps
  int64_t resumed_step;                // the newest complete checkpoint after the crash
  bool partial_has_metadata = false;   // the crash left metadata.json inside the .partial directory
};

void PrintTo(const CrashCase& c, std::ostream* os) { *os << c.name; }

class CheckpointCrash : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CheckpointCrash, ARankKilledInASaveLeavesThePreviousCheckpointAndTheResumedRunEndsAsAStraightOne) {
  const CrashCase& c = GetParam();
  const std::string dir = fresh_dir(c.name);
  const std::string ckpt = dir + "/ckpt";
  const std::string partial = checkpoint::partial_dir(ckpt, kCrashedSave);
  const auto straight = train(dir + "/straight", dir + "/straight_ckpt", c.overrides);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  const std::string fault = std::to_string(c.rank) + ":" + std::to_string(kCrashedSave) + ":sigkill@" + c.point;
  const auto crashed = train(dir + "/crashed", ckpt, c.overrides, {"DTLAB_INJECT_FAULT=" + fault});
  EXPECT_NE(crashed.exit_code, 0) << crashed.output;
  ASSERT_NE(crashed.output.find("fault injection: rank " + std::to_string(c.rank) + " at step " +
                                std::to_string(kCrashedSave) + ", " + c.point + ": sigkill"),
            std::string::npos)
      << "the fault never fired:\n"
      << crashed.output;
  EXPECT_NE(crashed.output.find("rank " + std::to_string(c.rank) + " was killed by signal SIGKILL"), std::string::npos)
      << crashed.output;

  // What the crash left: the newest complete checkpoint, and the interrupted save (unless it was committed).
  const auto complete = checkpoint::complete_checkpoints(ckpt);
  ASSERT_FALSE(complete.empty()) << "no complete checkpoint survived the crash";
  EXPECT_EQ(complete.back().first, c.resumed_step);
  const bool committed = c.resumed_step == kCrashedSave;
  EXPECT_EQ(fs::exists(partial), !committed) << partial;
  if (!committed) {
    EXPECT_EQ(fs::exists(partial + "/" + checkpoint::kMetadataFile), c.partial_has_metadata);
  }

  if (c.partial_has_metadata) {  // it looks complete, yet asked for by path it is refused, naming it
    const auto explicit_load = train(dir + "/explicit", ckpt, {"checkpoint.resume=" + partial});
    EXPECT_NE(explicit_load.exit_code, 0) << explicit_load.output;
    EXPECT_NE(explicit_load.output.find("checkpoint " + partial +
                                        " is a save that was never committed (.partial): a .partial save is never "
                                        "loaded"),
              std::string::npos)
        << explicit_load.output;
  }

  const auto resumed = train(dir + "/resumed", ckpt, c.overrides);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + checkpoint::step_dir(ckpt, c.resumed_step) + ": " +
                                std::to_string(c.resumed_step) + " of " + std::to_string(kSteps) + " steps done"),
            std::string::npos)
      << resumed.output;
  const std::string removed_line = "checkpoint: removed " + partial +
                                   ", a save a crash interrupted before its commit (a .partial save is never "
                                   "loaded)";
  EXPECT_EQ(resumed.output.find(removed_line) != std::string::npos, !committed) << resumed.output;
  EXPECT_TRUE(partials_in(ckpt).empty()) << "the interrupted save is still there";
  std::vector<int64_t> steps_saved;
  for (const auto& [step, path] : checkpoint::complete_checkpoints(ckpt)) steps_saved.push_back(step);
  EXPECT_EQ(steps_saved, (std::vector<int64_t>{2, 4, 6}));

  const nlohmann::json want = steps_of(dir + "/straight");
  const nlohmann::json got = steps_of(dir + "/resumed");
  ASSERT_EQ(static_cast<int64_t>(got.size()), kSteps - c.resumed_step) << got.dump();
  for (const auto& s : got) {
    const int64_t step = s.at("step").get<int64_t>();
    ASSERT_GT(step, c.resumed_step);
    const nlohmann::json& w = want.at(static_cast<size_t>(step - 1));
    ASSERT_EQ(w.at("step"), step);
    EXPECT_EQ(s.at("loss").get<double>(), w.at("loss").get<double>()) << "step " << step;
    EXPECT_EQ(s.at("grad_norm").get<double>(), w.at("grad_norm").get<double>()) << "step " << step;
  }
  const auto want_params = parameters_of(dir + "/straight_ckpt");
  const auto got_params = parameters_of(ckpt);
  ASSERT_FALSE(want_params.empty());
  ASSERT_EQ(got_params.size(), want_params.size());
  for (const auto& [name, bytes] : want_params)
    EXPECT_TRUE(got_params.at(name) == bytes) << name << " differs from the straight run's";
}

INSTANTIATE_TEST_SUITE_P(
    EveryPointOfASave, CheckpointCrash,
    ::testing::Values(
        // Rank 1 dies with its shard in step_00000004.partial/, before the ranks agree every file is written.
        CrashCase{"shards_written", 1, "ckpt_shards_written", {}, 2},
        // Rank 0 dies with every shard written, before metadata.json.
        CrashCase{"before_commit", 0, "ckpt_before_commit", {}, 2},
        // Rank 0 dies with metadata.json written inside step_00000004.partial/, before the rename commits it.
        CrashCase{"metadata_written", 0, "ckpt_metadata_written", {}, 2, true},
        // Rank 0 dies after the rename, before keep prunes: step 4 is complete and is the one resumed from.
        CrashCase{"after_commit", 0, "ckpt_after_commit", {}, 4},
        // An async save: rank 0's background thread dies with its shard written, before it commits.
        CrashCase{"async_written", 0, "ckpt_async_written", {"checkpoint.async=true"}, 2}),
    [](const ::testing::TestParamInfo<CrashCase>& info) { return info.param.name; });

}  // namespace
}  // namespace dtlab
