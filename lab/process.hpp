// process.hpp: the one way dtlab starts a child program (fork + exec), torch-free.
//
// Everything the child needs (argv, environment, /dev/null, the exec-failure message) is built before fork, so the
// child makes only async-signal-safe calls. Exit codes follow the shell: 127 when the program is not found (exec
// fails with ENOENT or ENOTDIR), 126 when it cannot be executed (any other exec error, or cwd cannot be entered),
// 128 + N for a child killed by signal N.
//
//   ProcessSpec spec{.argv = {"gnuplot", "chart.gp"}, .search_path = true, .working_directory = dir};
//   const ProcessResult r = run_process(spec, /*capture_output=*/true);   // r.exit_code, r.signal, r.output
//
//   const pid_t pid = spawn(spec);   // start only; the caller reaps (waitpid, or wait_for_exit)
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtlab {

// A child could not be started (pipe or fork failed). what(): "fork() failed: <strerror>"; `error_number` is errno.
struct ProcessError : std::runtime_error {
  ProcessError(const std::string& what, int error_number) : std::runtime_error(what), error_number(error_number) {}
  int error_number;
};

// Where a standard stream of the child goes: kInherit (the parent's), kNullDevice (/dev/null) or a file descriptor.
constexpr int kInherit = -1;
constexpr int kNullDevice = -2;

struct ProcessSpec {
  std::vector<std::string> argv{};                        // argv[0] is the program. REQUIRES: non-empty
  bool search_path = false;                               // look argv[0] up on PATH (execvpe) when it has no '/'
  std::optional<std::vector<std::string>> environment{};  // "NAME=value" entries; nullopt = this process's environ
  std::string working_directory{};                        // "" = this process's
  bool new_session = false;  // setsid(): the child leads its own session and process group (pgid = pid)
  // Reset SIGINT, SIGTERM, SIGHUP, SIGCHLD and SIGPIPE to their defaults and unblock every signal: a parent that
  // ignores some of them (SIG_IGN survives exec) must not hand that on.
  bool default_signals = false;
  int stdin_fd = kInherit, stdout_fd = kInherit, stderr_fd = kInherit;  // dup2()ed onto 0, 1, 2
  // A network namespace to enter before exec: its file, e.g. "/run/netns/dtlab-123-n0" (`ip netns add` makes one);
  // "" = this process's. When it cannot be opened spawn() throws ProcessError (nothing is started); when setns()
  // fails in the child, the child reports it like an exec failure and exits 126.
  std::string network_namespace{};
  // Linux: the signal the child gets when this process dies (PR_SET_PDEATHSIG), e.g. SIGKILL so that no rank outlives a
  // killed launcher; 0 = none. NOTE: "dies" is the thread that called spawn() exiting.
  int parent_death_signal = 0;
  // When exec fails the child writes exec_error_before + argv[0] + exec_error_after + strerror(errno) + "\n" to
  // its stderr, e.g. {"dtlab launch: cannot execute '", "': "}; nothing when both are empty.
  std::string exec_error_before{}, exec_error_after{};
};

// Starts the child (after flushing this process's stdio buffers) and returns its pid; the caller must reap it.
// Throws ProcessError if fork fails or the network namespace cannot be opened (nothing was started).
pid_t spawn(const ProcessSpec& spec);

// Waits for child `pid` (retrying on EINTR): its exit code, or 128 + signal if a signal killed it; -1 if `pid` is
// not a child of this process.
int wait_for_exit(pid_t pid);

struct ProcessResult {
  int exit_code = 0;     // as wait_for_exit: 128 + signal when killed by one
  int signal = 0;        // the signal that killed the child; 0 when it exited
  std::string output{};  // with capture_output: stdout and stderr, interleaved as written
};

// Starts the child and waits for it. With capture_output its stdout and stderr go to one pipe read into `output`
// (the spec's stdout_fd and stderr_fd are ignored). Throws ProcessError if a pipe or fork fails.
ProcessResult run_process(const ProcessSpec& spec, bool capture_output = false);

// The first executable `name` in a directory of PATH (an empty entry is the working directory); nullopt if none.
std::optional<std::filesystem::path> find_on_path(const std::string& name);

// This program's own executable (/proc/self/exe), for commands that start copies of it. Throws std::runtime_error
// "<who>: cannot find this executable (/proc/self/exe): <reason>".
std::filesystem::path this_executable(const std::string& who);

}  // namespace dtlab
