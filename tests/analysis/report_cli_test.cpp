// report_cli_test.cpp: dtlab-report run as a program -- the exit statuses its header promises (--accuracy with and
// without --enforce, bad usage) and the one-line errors a user sees for bad inputs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "test_util.hpp"

namespace dtlab::analysis {
namespace {
namespace fs = std::filesystem;
using testing::contains;
using testing::read_text;
using testing::TempDir;

struct CliResult {
  int status = -1;  // exit status, -1 when killed by a signal
  std::string out, err;
};

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Runs `dtlab-report <args>` (args already quoted) with stdout and stderr captured in files under `scratch`.
CliResult run_report_cli(const std::string& args, const fs::path& scratch) {
  const fs::path out = scratch / "cli_stdout.txt", err = scratch / "cli_stderr.txt";
  const std::string command =
      quoted(DTLAB_REPORT_BIN) + " " + args + " >" + quoted(out.string()) + " 2>" + quoted(err.string());
  const int raw = std::system(command.c_str());
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, read_text(out), read_text(err)};
}

TEST(ReportCli, AccuracyFailsOnMissedTargetsOnlyWithEnforce) {
  TempDir tmp;
  const std::string study = quoted(testing::fixtures_dir() + "/prediction");  // misses 3 targets (accuracy_test)
  const CliResult printed = run_report_cli("--accuracy " + study, tmp.path());
  EXPECT_EQ(printed.status, 0) << printed.err;
  EXPECT_TRUE(contains(printed.out, "targets: 1 met, 3 missed")) << printed.out;

  const CliResult enforced = run_report_cli("--accuracy --enforce " + study, tmp.path());
  EXPECT_EQ(enforced.status, 3) << enforced.err;
  EXPECT_TRUE(contains(enforced.out, "targets: 1 met, 3 missed")) << enforced.out;
  EXPECT_TRUE(contains(enforced.err, "--enforce: not every target was met")) << enforced.err;

  const CliResult missing =
      run_report_cli("--accuracy --enforce " + quoted((tmp.path() / "none").string()), tmp.path());
  EXPECT_EQ(missing.status, 1);  // an unreadable input is an error, enforced or not
  EXPECT_TRUE(contains(missing.err, "input does not exist")) << missing.err;

  const CliResult usage =
      run_report_cli("--enforce " + study + " -o " + quoted((tmp.path() / "r").string()), tmp.path());
  EXPECT_EQ(usage.status, 2) << "--enforce means nothing without --accuracy: bad usage";
  EXPECT_FALSE(fs::exists(tmp.path() / "r"));
}

}  // namespace
}  // namespace dtlab::analysis
