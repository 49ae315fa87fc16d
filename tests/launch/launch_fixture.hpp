// launch_fixture.hpp: what the end-to-end tests of `dtlab launch` share (launch_test.cpp, cluster_test.cpp): running
// the real dtlab binary as a child with its stdout and stderr captured, and a fixture with a scratch directory for the
// pid files rank scripts write.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dtlab_launch_tests {

inline constexpr double kTestTimeoutSeconds = 90.0;  // our own bound on one launcher run
inline const std::string kDtlab = std::string(DTLAB_BINARY_DIR) + "/bin/dtlab";

struct LaunchRun {
  int exit_code = -1;    // the launcher's exit code, or 128 + signal if it died by a signal
  std::string out, err;  // its stdout and stderr
  double seconds = 0.0;  // wall time until it exited
  bool timed_out = false;
};

inline double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Runs `dtlab ARGS...` with extra environment entries, capturing stdout and stderr separately.
// `while_running(pid)` is called once right after the start (the launcher keeps running meanwhile;
// its output is collected only afterwards, pipes are large enough for what the callbacks wait on).
inline LaunchRun run_dtlab(const std::vector<std::string>& args,
                           const std::map<std::string, std::string>& extra_env = {},
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

inline bool process_gone(pid_t pid) { return pid > 0 && kill(pid, 0) == -1 && errno == ESRCH; }

inline std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace dtlab_launch_tests
