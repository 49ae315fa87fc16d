// launch_test.cpp: end-to-end tests of `dtlab launch` — the real binary is run as a child process with
// small /bin/sh programs as ranks; the tests check the rank environment, the "[rank r] " line relay,
// failure naming, and that stopping leaves no process behind (ranks, their background children).
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

constexpr double kTestTimeoutSeconds = 90.0;  // our own bound on one launcher run
const std::string kDtlab = std::string(DTLAB_BINARY_DIR) + "/bin/dtlab";

struct LaunchRun {
  int exit_code = -1;    // the launcher's exit code, or 128 + signal if it died by a signal
  std::string out, err;  // its stdout and stderr
  double seconds = 0.0;  // wall time until it exited
  bool timed_out = false;
};

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Runs `dtlab ARGS...` with extra environment entries, capturing stdout and stderr separately.
// `while_running(pid)` is called once right after the start (the launcher keeps running meanwhile;
// its output is collected only afterwards, pipes are large enough for what the callbacks wait on).
LaunchRun run_dtlab(const std::vector<std::string>& args, const std::map<std::string, std::string>& extra_env = {},
                    const std::function<void(pid_t)>& while_running = nullptr) {
  int out_pipe[2], err_pipe[2];
  EXPECT_EQ(pipe2(out_pipe, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(err_pipe, O_CLOEXEC), 0);
  std::vector<std::string> words = {kDtlab};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);

  const double start = now_seconds();
  const pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [name, value] : extra_env) setenv(name.c_str(), value.c_str(), 1);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  LaunchRun run;
  if (while_running) while_running(pid);

  int fds[2] = {out_pipe[0], err_pipe[0]};
  std::string* sinks[2] = {&run.out, &run.err};
  bool reaped = false;
  int status = 0;
  while (true) {
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    if (reaped && fds[0] < 0 && fds[1] < 0) break;
    if (now_seconds() - start > kTestTimeoutSeconds) {
      run.timed_out = true;
      if (!reaped) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
      break;
    }
    std::vector<pollfd> polled;
    for (int fd : fds) {
      if (fd >= 0) polled.push_back({fd, POLLIN, 0});
    }
    if (polled.empty()) {
      usleep(10000);
      continue;
    }
    poll(polled.data(), polled.size(), 50);
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      pollfd probe{fds[i], POLLIN, 0};
      if (poll(&probe, 1, 0) <= 0) continue;
      char buffer[65536];
      const ssize_t n = read(fds[i], buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  run.seconds = now_seconds() - start;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

// A fresh directory for pid files; removed with its contents at the end of the test.
class LaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dtlab_launch_test_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    // Survivors are reported by the tests, not killed here: a recycled pid could be anyone's.
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // The pid a rank wrote to `name`, or -1 if the file is missing or empty.
  pid_t read_pid(const std::string& name) {
    std::ifstream in(path(name));
    long pid = -1;
    if (!(in >> pid) || pid <= 0) return -1;
    return static_cast<pid_t>(pid);
  }

  // Waits until every named pid file exists and is non-empty (rank scripts write them via mv).
  bool wait_for_files(const std::vector<std::string>& names, double timeout_s = 20.0) {
    const double deadline = now_seconds() + timeout_s;
    while (now_seconds() < deadline) {
      bool all = true;
      for (const std::string& name : names) all = all && access(path(name).c_str(), F_OK) == 0;
      if (all) return true;
      usleep(20000);
    }
    return false;
  }

  // Shell snippet: atomically write PID to FILE (so a reader never sees it half-written). Names are
  // double-quoted so "pid$RANK" expands; mkdtemp paths hold no shell-special characters.
  std::string write_pid(const std::string& pid_expression, const std::string& name) const {
    const std::string file = "\"" + path(name) + "\"", temporary = "\"" + path(name) + ".tmp\"";
    return "echo " + pid_expression + " > " + temporary + " && mv " + temporary + " " + file;
  }
  // Shell snippet: wait until FILE exists.
  std::string wait_file(const std::string& name) const {
    return "while [ ! -e \"" + path(name) + "\" ]; do sleep 0.05; done";
  }

  std::string dir_;
};

bool process_gone(pid_t pid) { return pid > 0 && kill(pid, 0) == -1 && errno == ESRCH; }

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

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
       "${OMP_NUM_THREADS:-none} ${TORCHELASTIC_RUN_ID:-none} $INHERITED\""},
      {{"TORCHELASTIC_RUN_ID", "outer"}, {"RANK", "7"}, {"INHERITED", "kept"}});
  ASSERT_FALSE(run.timed_out);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::regex line_pattern(R"(\[rank (\d)\] (\d) (\d) 2 127\.0\.0\.1 (\d+) dtlab 2 0 1 none kept)");
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
