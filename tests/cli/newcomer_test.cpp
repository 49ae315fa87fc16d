// newcomer_test.cpp: the first commands a new user types, typed as the README and the help show them: the real
// `dtlab` binary, run from a scratch directory laid out like a fresh clone (scenarios/configs/ and nothing built:
// no data/corpus.bin, no results/). Each test is a stumble a newcomer hit (issue 49): training without a token file
// or without --out, advising without --profile beside this machine's calibrated profile, advising at a world size
// the config's micro-batch does not divide; and the help of every command, one screen each with an example.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

namespace fs = std::filesystem;
const std::string kDtlab = std::string(DTLAB_BINARY_DIR) + "/bin/dtlab";
const std::string kSource = DTLAB_SOURCE_DIR;
// What a screen holds: the help of a command must fit it.
constexpr size_t kScreenLines = 40, kScreenColumns = 100;
// A short run of the baseline config: its model and batch, a few steps of the tiny preset.
const std::string kShortRun = "model.preset=tiny train.steps=5 train.warmup_steps=1";

// A scratch directory laid out like a fresh clone: scenarios/configs/*.yaml copied, nothing built.
fs::path fresh_clone(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("dtlab_newcomer_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "scenarios");
  fs::copy(fs::path(kSource) / "scenarios" / "configs", dir / "scenarios" / "configs", fs::copy_options::recursive);
  return dir;
}

// `dtlab ARGS` typed in `dir` (the shell splits ARGS, as it would the newcomer's line).
testing::JobResult dtlab_in(const fs::path& dir, const std::string& args, double timeout_s = 300) {
  return testing::run_job({"/bin/sh", "-c", "cd '" + dir.string() + "' && '" + kDtlab + "' " + args}, timeout_s);
}

bool has(const std::string& output, const std::string& text) { return output.find(text) != std::string::npos; }

bool license_texts_present() {
  std::error_code error;
  return fs::is_directory("/usr/share/common-licenses", error) && !fs::is_empty("/usr/share/common-licenses", error);
}

// Stumble 1: the shipped configs read data/corpus.bin, which a fresh clone lacks. train builds it and says so.
TEST(Newcomer, TrainBuildsTheMissingCorpusAndSaysSo) {
  if (!license_texts_present()) GTEST_SKIP() << "no /usr/share/common-licenses to build data/corpus.bin from";
  const fs::path dir = fresh_clone("corpus");
  const auto job = dtlab_in(dir, "train --config scenarios/configs/baseline.yaml " + kShortRun + " --out x");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_TRUE(has(job.output, "data/corpus.bin was missing: built it from the")) << job.output;
  EXPECT_GT(fs::file_size(dir / "data" / "corpus.bin"), 100000u);  // the license texts: about 1.5 MB of tokens
  EXPECT_TRUE(fs::exists(dir / "x" / "result.json"));
  for (const auto& entry : fs::directory_iterator(dir / "data"))  // no temporary file left behind
    EXPECT_EQ(entry.path().filename(), "corpus.bin");
}

// A token file of the user's own that is missing is not built (dtlab cannot know its text): the error names the
// command that builds it.
TEST(Newcomer, AMissingTokenFileOfTheUsersOwnNamesTheCommandThatBuildsIt) {
  const fs::path dir = fresh_clone("own_corpus");
  const auto job =
      dtlab_in(dir, "train --config scenarios/configs/baseline.yaml data.path=data/mine.bin " + kShortRun, 60);
  EXPECT_NE(job.exit_code, 0) << job.output;
  EXPECT_TRUE(has(job.output, "data/mine.bin: cannot open token file")) << job.output;
  EXPECT_TRUE(has(job.output, "dtlab data build --out data/mine.bin")) << job.output;
  EXPECT_FALSE(fs::exists(dir / "data" / "mine.bin"));
}

// Stumble 2: --out was required. Without it the run goes to results/train/<config name>, and train says where.
TEST(Newcomer, TrainWithoutOutWritesUnderResultsTrainAndSaysWhere) {
  if (!license_texts_present()) GTEST_SKIP() << "no /usr/share/common-licenses to build data/corpus.bin from";
  const fs::path dir = fresh_clone("out");
  const auto job = dtlab_in(dir, "train --config scenarios/configs/baseline.yaml " + kShortRun);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_TRUE(has(job.output, "results: results/train/baseline (no --out given)")) << job.output;
  EXPECT_TRUE(has(job.output, "results in results/train/baseline")) << job.output;
  std::ifstream in(dir / "results" / "train" / "baseline" / "result.json");
  ASSERT_TRUE(in) << "no results/train/baseline/result.json\n" << job.output;
  EXPECT_EQ(nlohmann::json::parse(in)["steps"].size(), 5u);
}

// Stumble 3: advise required --profile even beside this machine's calibrated profile. It uses that one and says so.
TEST(Newcomer, AdviseUsesThisMachinesCalibratedProfileAndSaysSo) {
  const fs::path dir = fresh_clone("profile");
  fs::create_directories(dir / "results" / "calibration");
  fs::copy_file(fs::path(kSource) / "tests/analysis/fixtures/prediction/calibration/profile.json",
                dir / "results" / "calibration" / "profile.json");
  const auto job =
      dtlab_in(dir, "advise --config scenarios/configs/baseline.yaml --world-size 2 --memory-budget 1GiB", 120);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_TRUE(has(job.output, "using the calibrated profile results/calibration/profile.json")) << job.output;
  EXPECT_TRUE(has(job.output, "run it: dtlab train")) << job.output;
}

// ... and without one, the error names how to make it.
TEST(Newcomer, AdviseWithoutAnyProfileNamesMakeCalibrate) {
  const fs::path dir = fresh_clone("no_profile");
  const auto job =
      dtlab_in(dir, "advise --config scenarios/configs/baseline.yaml --world-size 2 --memory-budget 1GiB", 60);
  EXPECT_EQ(job.exit_code, 2) << job.output;
  EXPECT_TRUE(has(job.output, "results/calibration/profile.json does not exist")) << job.output;
  EXPECT_TRUE(has(job.output, "make calibrate")) << job.output;
}

// Stumble 4: baseline.yaml's micro-batch (8) does not divide its global batch (8) at 4 ranks (2 each). Choosing the
// micro-batch is the advisor's job: it starts from the largest that divides and ranks every one that does.
TEST(Newcomer, AdviseChoosesTheMicroBatchWhenTheConfigsDoesNotDivide) {
  const fs::path dir = fresh_clone("micro_batch");
  const std::string profile = kSource + "/tests/analysis/fixtures/prediction/calibration/profile.json";
  const auto job = dtlab_in(dir,
                            "advise --config scenarios/configs/baseline.yaml --world-size 4 --memory-budget 1GiB "
                            "--json --profile '" +
                                profile + "'",
                            120);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_TRUE(has(job.output,
                  "advise: train.micro_batch=8 does not divide train.global_batch=8 at 4 ranks (2 "
                  "sequences per rank)"))
      << job.output;
  EXPECT_TRUE(has(job.output, "its search starts from 2")) << job.output;
  const size_t json_at = job.output.find("\n{");  // the message went to stderr, before the JSON on stdout
  ASSERT_NE(json_at, std::string::npos) << job.output;
  const auto advice = nlohmann::json::parse(job.output.substr(json_at));
  ASSERT_FALSE(advice["ranked"].empty()) << job.output;
  // 2 sequences per data-parallel rank: 4 / (pp·tp) ranks are data parallel under pp pipeline stages and tp-way
  // tensor parallelism (8 / (4 / (pp·tp))).
  std::set<int64_t> micro_batches;
  for (const auto& c : advice["ranked"]) {
    const auto& s = c["settings"];
    const int64_t model_parallel = s["pp"].get<int64_t>() * s["tp"].get<int64_t>();
    EXPECT_EQ(s["micro_batch"].get<int64_t>() * s["accumulation"].get<int64_t>(), 2 * model_parallel) << c.dump();
    if (model_parallel == 1) micro_batches.insert(s["micro_batch"].get<int64_t>());
  }
  EXPECT_EQ(micro_batches, (std::set<int64_t>{1, 2}));
  // The winner's overrides train as they are at 4 ranks (the config refuses micro-batch 8 there).
  const auto overrides = advice["ranked"][0]["overrides"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(overrides.begin(), overrides.end(), "train.accumulation=0"), overrides.end());
}

// A rule the micro-batch does not explain still refuses the config, in the config's own words.
TEST(Newcomer, AdviseStillRefusesABatchThatDoesNotDivideAmongTheRanks) {
  const fs::path dir = fresh_clone("bad_batch");
  const std::string profile = kSource + "/tests/analysis/fixtures/prediction/calibration/profile.json";
  const auto job = dtlab_in(dir,
                            "advise --config scenarios/configs/baseline.yaml --world-size 3 --memory-budget 1GiB "
                            "--profile '" +
                                profile + "'",
                            60);
  EXPECT_EQ(job.exit_code, 2) << job.output;
  EXPECT_TRUE(has(job.output, "train.global_batch=8 is not divisible")) << job.output;
}

// The subcommands `dtlab --help` lists (the names under "Subcommands:").
std::vector<std::string> listed_subcommands(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream lines(help.substr(help.find("Subcommands:")));
  std::string line;
  std::getline(lines, line);
  std::smatch m;
  while (std::getline(lines, line) && std::regex_search(line, m, std::regex(R"(^  ([a-z][a-z-]*)\s)")))
    names.push_back(m[1]);
  return names;
}

// `dtlab --help` and each command's: one screen (kScreenLines x kScreenColumns) with an example of the command.
TEST(Newcomer, EveryHelpFitsOneScreenWithAnExample) {
  const fs::path dir = fresh_clone("help");
  auto check = [&](const std::string& command) {
    const auto job = dtlab_in(dir, command + " --help", 30);
    EXPECT_EQ(job.exit_code, 0) << command << "\n" << job.output;
    std::istringstream lines(job.output);
    std::string line;
    size_t count = 0;
    while (std::getline(lines, line)) {
      ++count;
      EXPECT_LE(line.size(), kScreenColumns) << "`dtlab " << command << " --help`, line " << count << ": " << line;
    }
    EXPECT_LE(count, kScreenLines) << "`dtlab " << command << " --help`:\n" << job.output;
    // "example: dtlab COMMAND" ends the line or goes on with the command's arguments.
    const std::string example = command.empty() ? "example: dtlab " : "example: dtlab " + command;
    const bool found =
        command.empty() ? has(job.output, example) : std::regex_search(job.output, std::regex(example + "( |\n|$)"));
    EXPECT_TRUE(found) << "`dtlab " << command << " --help` lacks '" << example << " ...':\n" << job.output;
    return job.output;
  };
  const std::vector<std::string> commands = listed_subcommands(check(""));
  ASSERT_GE(commands.size(), 15u) << "dtlab --help lists too few commands";
  // Commands whose work is a subcommand of theirs: both helps, each with an example.
  const std::map<std::string, std::string> inner = {
      {"data", "build"}, {"trace", "merge"}, {"checkpoint", "inspect"}, {"export", "csv"}};
  for (const std::string& command : commands) {
    check(command);
    if (inner.count(command)) check(command + " " + inner.at(command));
  }
}

}  // namespace
}  // namespace dtlab
