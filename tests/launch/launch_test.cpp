// launch_test.cpp: end-to-end tests of `dtlab launch` — the real binary is run as a child process with
// small /bin/sh programs as ranks; the tests check the rank environment, the "[rank r] " line relay,
// failure naming, and that stopping leaves no process behind (ranks, their background children).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/launch/launch_fixture.hpp"

namespace {

using namespace dtlab_launch_tests;

// A two-rank program: rank 0 runs `rank0`, every other rank runs `others`.
std::vector<std::string> two_ranks(const std::string& rank0, const std::string& others,
                                   const std::vector<std::string>& launch_flags = {}) {
  std::vector<std::string> args = {"launch", "-n", "2"};
  args.insert(args.end(), launch_flags.begin(), launch_flags.end());
  const std::string script = "case \"$RANK\" in 0) " + rank0 + " ;; *) " + others + " ;; esac";
  args.insert(args.end(), {"/bin/sh", "-c", script});
  return args;
}

TEST_F(LaunchTest, EachRankGetsTorchrunStyleEnvironment) {
  const LaunchRun run = run_dtlab(
      {"launch", "-n", "2", "/bin/sh", "-c",
       "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $MASTER_ADDR $MASTER_PORT $DTLAB_LAUNCHER $LOCAL_WORLD_SIZE $GROUP_RANK "
       "$DTLAB_HOST_RANKS "
       "${OMP_NUM_THREADS:-none} ${TORCHELASTIC_RUN_ID:-none} $INHERITED\""},
      {{"TORCHELASTIC_RUN_ID", "outer"}, {"RANK", "7"}, {"INHERITED", "kept"}});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::regex line_pattern(R"(\[rank (\d)\] (\d) (\d) 2 127\.0\.0\.1 (\d+) dtlab 2 0 2 1 none kept)");
  std::map<int, std::string> port_by_rank;
  for (const std::string& line : split_lines(run.out)) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, line_pattern)) << "unexpected line: " << line;
    EXPECT_EQ(match[1], match[2]);  // prefix rank == RANK
    EXPECT_EQ(match[2], match[3]);  // RANK == LOCAL_RANK on one machine
    port_by_rank[std::stoi(match[1])] = match[4];
  }
  ASSERT_EQ(port_by_rank.size(), 2u) << run.out;
  EXPECT_EQ(port_by_rank[0], port_by_rank[1]);
  const int port = std::stoi(port_by_rank[0]);
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_NE(run.err.find("dtlab launch: 2 ranks, MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port_by_rank[0] + ": /bin/sh"),
            std::string::npos)
      << run.err;
}

TEST_F(LaunchTest, UserOmpThreadsAndMasterPortAreKept) {
  const LaunchRun run = run_dtlab(
      {"launch", "-n", "2", "--master-port", "29517", "/bin/sh", "-c", "echo \"$OMP_NUM_THREADS $MASTER_PORT\""},
      {{"OMP_NUM_THREADS", "3"}});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("[rank 0] 3 29517\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("[rank 1] 3 29517\n"), std::string::npos) << run.out;
}

// The port the launcher picks stays held while the job runs: a plain bind of MASTER_PORT (another program, or a job
// whose launcher was handed the same port) is refused, so nothing takes it before rank 0's store listens on it; the
// store itself binds with SO_REUSEADDR and listens (every strategy test shows that).
TEST_F(LaunchTest, ThePickedPortIsHeldWhileTheJobRuns) {
  const LaunchRun run = run_dtlab({"launch", "-n", "1", "python3", "-c",
                                   "import os, socket\n"
                                   "s = socket.socket()\n"
                                   "try:\n"
                                   "    s.bind(('127.0.0.1', int(os.environ['MASTER_PORT'])))\n"
                                   "    print('bound: the port was free for anyone')\n"
                                   "except OSError as e:\n"
                                   "    print('held:', e.strerror)\n"});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "[rank 0] held: Address already in use\n") << run.err;
}

// `[--]` is optional: the program's own options (even ones spelled like launch's) belong to it.
TEST_F(LaunchTest, ProgramOptionsPassThroughWithoutDoubleDash) {
  const LaunchRun run =
      run_dtlab({"launch", "-n", "1", "/bin/sh", "-c", "echo \"args: $*\"", "sh", "-n", "3", "--timeout"});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "[rank 0] args: -n 3 --timeout\n") << run.err;
}

// With `--` everything after it is the program's, even a second `--`.
TEST_F(LaunchTest, DoubleDashSeparatesTheProgram) {
  const LaunchRun run = run_dtlab(
      {"launch", "-n", "1", "--grace", "1", "--", "/bin/sh", "-c", "echo \"args: $*\"", "sh", "-n", "3", "--", "x"});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "[rank 0] args: -n 3 -- x\n") << run.err;
}

TEST_F(LaunchTest, AllRanksSucceedExitsZero) {
  const LaunchRun run = run_dtlab({"launch", "-n", "3", "/bin/sh", "-c", "echo ok; exit 0"});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  for (int r = 0; r < 3; ++r) EXPECT_NE(run.out.find("[rank " + std::to_string(r) + "] ok\n"), std::string::npos);
}

TEST_F(LaunchTest, FailingRankStopsTheOthersAndIsNamed) {
  const LaunchRun run = run_dtlab(two_ranks(write_pid("$$", "pid0") + "; sleep 300", wait_file("pid0") + "; exit 1"));
  ASSERT_FALSE(run.timed_out);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_LT(run.seconds, 60.0);
  EXPECT_NE(run.err.find("dtlab launch: rank 1 exited with code 1"), std::string::npos) << run.err;
  const pid_t rank0 = read_pid("pid0");
  ASSERT_GT(rank0, 0);
  EXPECT_TRUE(process_gone(rank0)) << "rank 0 (pid " << rank0 << ") survived the launcher";
}

TEST_F(LaunchTest, RankKilledBySigkillIsNamed) {
  const LaunchRun run =
      run_dtlab(two_ranks(write_pid("$$", "pid0") + "; sleep 300", wait_file("pid0") + "; kill -9 $$"));
  ASSERT_FALSE(run.timed_out);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("dtlab launch: rank 1 was killed by signal SIGKILL (9)"), std::string::npos) << run.err;
  EXPECT_TRUE(process_gone(read_pid("pid0")));
}

TEST_F(LaunchTest, RankKilledBySigtermIsNamed) {
  const LaunchRun run =
      run_dtlab(two_ranks(write_pid("$$", "pid0") + "; sleep 300", wait_file("pid0") + "; kill -TERM $$"));
  ASSERT_FALSE(run.timed_out);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("dtlab launch: rank 1 was killed by signal SIGTERM (15)"), std::string::npos) << run.err;
  EXPECT_TRUE(process_gone(read_pid("pid0")));
}

// Rank 0 leaves a background child and exits 0 (its group outlives its leader); rank 1 leaves one and
// fails. Both grandchildren must be gone because whole process groups are stopped.
TEST_F(LaunchTest, BackgroundGrandchildrenAreStoppedWithTheirGroups) {
  const LaunchRun run =
      run_dtlab(two_ranks("sleep 300 & " + write_pid("$!", "grandchild0") + "; exit 0",
                          wait_file("grandchild0") + "; sleep 300 & " + write_pid("$!", "grandchild1") + "; exit 1"));
  ASSERT_FALSE(run.timed_out);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("dtlab launch: rank 1 exited with code 1"), std::string::npos) << run.err;
  const pid_t grandchild0 = read_pid("grandchild0"), grandchild1 = read_pid("grandchild1");
  ASSERT_GT(grandchild0, 0);
  ASSERT_GT(grandchild1, 0);
  EXPECT_TRUE(process_gone(grandchild0)) << "rank 0's background child survived";
  EXPECT_TRUE(process_gone(grandchild1)) << "rank 1's background child survived";
}

// A rank that ignores SIGTERM is killed after the grace period.
TEST_F(LaunchTest, RankIgnoringSigtermIsKilledAfterGrace) {
  const LaunchRun run = run_dtlab(two_ranks("trap '' TERM; " + write_pid("$$", "pid0") + "; sleep 300",
                                            wait_file("pid0") + "; exit 3", {"--grace", "1"}));
  ASSERT_FALSE(run.timed_out);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_LT(run.seconds, 30.0);
  EXPECT_NE(run.err.find("dtlab launch: rank 1 exited with code 3"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("SIGKILL"), std::string::npos) << run.err;
  EXPECT_TRUE(process_gone(read_pid("pid0")));
}

TEST_F(LaunchTest, MissingProgramIsNamed) {
  const LaunchRun run = run_dtlab({"launch", "-n", "2", "dtlab-no-such-program-4711", "--flag"});
  ASSERT_FALSE(run.timed_out);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("cannot execute 'dtlab-no-such-program-4711'"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("exited with code 127"), std::string::npos) << run.err;
}

// Two ranks write 200 lines each as fast as they can, every line in two pieces, plus a last line
// without a newline: each relayed line must be whole, prefixed, and in the rank's own order.
TEST_F(LaunchTest, OutputLinesAreWholeAndPrefixed) {
  const std::string payload(120, 'x');
  const LaunchRun run = run_dtlab({"launch", "-n", "2", "/bin/sh", "-c",
                                   "i=0; while [ $i -lt 200 ]; do printf 'line %d of rank %s ' $i $RANK; printf '" +
                                       payload + "\\n'; i=$((i+1)); done; printf 'tail of rank %s' $RANK"});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::regex line_pattern(R"(\[rank ([01])\] line (\d+) of rank ([01]) x{120})");
  const std::regex tail_pattern(R"(\[rank ([01])\] tail of rank ([01]))");
  int next_line[2] = {0, 0};
  int tails = 0;
  for (const std::string& line : split_lines(run.out)) {
    std::smatch match;
    if (std::regex_match(line, match, tail_pattern)) {
      EXPECT_EQ(match[1], match[2]);
      ++tails;
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, match, line_pattern)) << "broken line: " << line;
    ASSERT_EQ(match[1], match[3]) << line;
    const int rank = std::stoi(match[1]);
    EXPECT_EQ(std::stoi(match[2]), next_line[rank]) << line;
    next_line[rank] = std::stoi(match[2]) + 1;
  }
  EXPECT_EQ(next_line[0], 200);
  EXPECT_EQ(next_line[1], 200);
  EXPECT_EQ(tails, 2);
  EXPECT_EQ(run.out.back(), '\n');
}

TEST_F(LaunchTest, StderrIsRelayedToStderr) {
  const LaunchRun run = run_dtlab({"launch", "-n", "1", "/bin/sh", "-c", "echo to-out; echo to-err >&2"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_NE(run.out.find("[rank 0] to-out\n"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("to-err"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("[rank 0] to-err\n"), std::string::npos) << run.err;
}

TEST_F(LaunchTest, SigtermToLauncherStopsRanksAndExits143) {
  bool started = false;
  const LaunchRun run = run_dtlab({"launch", "-n", "2", "/bin/sh", "-c", write_pid("$$", "pid$RANK") + "; sleep 300"},
                                  {}, [&](pid_t launcher) {
                                    started = wait_for_files({"pid0", "pid1"});
                                    kill(launcher, SIGTERM);
                                  });
  ASSERT_TRUE(started);
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 143) << run.err;
  EXPECT_LT(run.seconds, 60.0);
  EXPECT_NE(run.err.find("received SIGTERM"), std::string::npos) << run.err;
  EXPECT_TRUE(process_gone(read_pid("pid0")));
  EXPECT_TRUE(process_gone(read_pid("pid1")));
}

// Ctrl-C reaches only the launcher (ranks are in their own groups); it stops them with SIGTERM.
TEST_F(LaunchTest, SigintToLauncherStopsRanksAndExits130) {
  bool started = false;
  const LaunchRun run = run_dtlab({"launch", "-n", "2", "/bin/sh", "-c", write_pid("$$", "pid$RANK") + "; sleep 300"},
                                  {}, [&](pid_t launcher) {
                                    started = wait_for_files({"pid0", "pid1"});
                                    kill(launcher, SIGINT);
                                  });
  ASSERT_TRUE(started);
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 130) << run.err;
  EXPECT_NE(run.err.find("received SIGINT"), std::string::npos) << run.err;
  EXPECT_TRUE(process_gone(read_pid("pid0")));
  EXPECT_TRUE(process_gone(read_pid("pid1")));
}

TEST_F(LaunchTest, TimeoutStopsTheJobWithExit124) {
  const LaunchRun run =
      run_dtlab({"launch", "-n", "2", "--timeout", "2", "/bin/sh", "-c", write_pid("$$", "pid$RANK") + "; sleep 300"});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 124) << run.err;
  EXPECT_LT(run.seconds, 30.0);
  EXPECT_NE(run.err.find("dtlab launch: timed out after 2 s"), std::string::npos) << run.err;
  EXPECT_TRUE(process_gone(read_pid("pid0")));
  EXPECT_TRUE(process_gone(read_pid("pid1")));
}

}  // namespace
