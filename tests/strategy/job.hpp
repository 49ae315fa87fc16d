// job.hpp: runs a command (typically `dtlab launch -n W ...`) as a child process for tests, with its
// output captured and a deadline; kills the child's process group on timeout.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

namespace dtlab::testing {

struct JobResult {
  int exit_code = -1;  // 128 + signal when killed, -1 on timeout
  bool timed_out = false;
  double seconds = 0;
  std::string output;  // stdout and stderr interleaved
};

inline JobResult run_job(const std::vector<std::string>& args, double timeout_s,
                         const std::vector<std::string>& extra_env = {}) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    for (const auto& kv : extra_env) putenv(const_cast<char*>(kv.c_str()));
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  JobResult result;
  char buf[4096];
  ssize_t n;
  // Read until EOF (all writers gone) or the deadline; a watchdog kills the group at the deadline.
  const pid_t watchdog = fork();
  if (watchdog == 0) {
    usleep(static_cast<useconds_t>(timeout_s * 1e6));
    kill(-pid, SIGKILL);
    _exit(0);
  }
  while ((n = read(fds[0], buf, sizeof buf)) > 0) result.output.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  kill(watchdog, SIGKILL);
  waitpid(watchdog, nullptr, 0);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
    result.timed_out = WTERMSIG(status) == SIGKILL && result.seconds >= timeout_s;
  }
  return result;
}

// A program of the cached virtual environment `make setup` made: $DTLAB_CACHE/venv/bin/NAME, by default
// ~/.cache/dtlab/venv/bin/NAME (as in the Makefile).
inline std::string venv_program(const std::string& name) {
  const char* cache = std::getenv("DTLAB_CACHE");
  const char* home = std::getenv("HOME");
  const std::string root = cache && *cache ? std::string(cache) : std::string(home ? home : "") + "/.cache/dtlab";
  return root + "/venv/bin/" + name;
}

}  // namespace dtlab::testing
