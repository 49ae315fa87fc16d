// report_cli_test.cpp: dtlab-report run as a program -- the exit statuses its header promises (--accuracy with and
// without --enforce, bad usage) and the one-line errors a user sees for a malformed result.json or an -o that
// cannot be created.
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
  // the real study modified to miss 2 targets (testing::crafted_prediction_study, accuracy_test)
  const std::string study = quoted(testing::crafted_prediction_study(tmp.path() / "study").string());
  const CliResult printed = run_report_cli("--accuracy " + study, tmp.path());
  EXPECT_EQ(printed.status, 0) << printed.err;
  EXPECT_TRUE(contains(printed.out, "targets: 2 met, 2 missed")) << printed.out;

  const CliResult enforced = run_report_cli("--accuracy --enforce " + study, tmp.path());
  EXPECT_EQ(enforced.status, 3) << enforced.err;
  EXPECT_TRUE(contains(enforced.out, "targets: 2 met, 2 missed")) << enforced.out;
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

TEST(ReportCli, MalformedResultOrUnwritableOutputIsOneErrorLine) {
  TempDir tmp;
  nlohmann::json doc = testing::minimal_result("ddp", 2);
  doc["summary"]["tokens_per_s"] = "fast";
  const fs::path run = tmp.path() / "runs" / "bad";
  testing::write_run(run, doc);
  const fs::path out = tmp.path() / "report";
  testing::write_text(out / "index.html", "earlier report");

  const CliResult bad = run_report_cli(quoted(run.string()) + " -o " + quoted(out.string()), tmp.path());
  EXPECT_EQ(bad.status, 1);
  EXPECT_EQ(bad.err, "error: " + (run / "result.json").string() +
                         ": key \"summary.tokens_per_s\" must be a number, got string (\"fast\")\n");
  EXPECT_EQ(read_text(out / "index.html"), "earlier report");

  testing::write_text(tmp.path() / "a_file", "x");
  const fs::path below_file = tmp.path() / "a_file" / "report";
  const CliResult unwritable = run_report_cli(
      quoted(testing::fixtures_dir() + "/results/baseline") + " -o " + quoted(below_file.string()), tmp.path());
  EXPECT_EQ(unwritable.status, 1);
  EXPECT_EQ(testing::count(unwritable.err, "\n"), 1u) << unwritable.err;
  EXPECT_EQ(unwritable.err.rfind("error: cannot create report dir " + below_file.string() + ": ", 0), 0u)
      << unwritable.err;
}

}  // namespace
}  // namespace dtlab::analysis
