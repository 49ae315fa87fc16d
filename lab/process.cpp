// process.cpp: fork + exec with everything prepared before fork, waiting, and output capture; see process.hpp.
#include "lab/process.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <system_error>

extern char** environ;

namespace dtlab {
namespace {

// What the child needs, as plain pointers into memory the parent owns until fork returns.
struct ChildPlan {
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  bool search_path = false;
  const char* working_directory = nullptr;  // nullptr = stay
  bool new_session = false;
  bool default_signals = false;
  int stdio_fds[3] = {kInherit, kInherit, kInherit};  // resolved: kInherit or a real descriptor
  const char* exec_error_before = "";
  const char* exec_error_after = "";
  int network_namespace_fd = -1;  // opened before fork; -1 = stay
  int parent_death_signal = 0;
  pid_t parent = 0;
};

void write_all(int fd, const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(fd, text, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

// Runs in the child between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const ChildPlan& plan) {
#ifdef __linux__
  if (plan.parent_death_signal != 0) {
    prctl(PR_SET_PDEATHSIG, plan.parent_death_signal, 0, 0, 0);
    if (getppid() != plan.parent) _exit(128 + plan.parent_death_signal);  // the parent died before prctl
  }
#endif
  if (plan.new_session) setsid();  // new session and process group, pgid = pid
  if (plan.default_signals) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE})
      sigaction(signal_number, &default_action, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
  }
  for (int target = 0; target < 3; ++target) {
    const int fd = plan.stdio_fds[target];
    if (fd == kInherit) continue;
    if (fd == target)
      fcntl(fd, F_SETFD, 0);  // already in place: only drop close-on-exec
    else
      dup2(fd, target);  // dup2 clears close-on-exec on the target only
  }
  if (plan.working_directory && chdir(plan.working_directory) != 0) _exit(126);
  if (plan.network_namespace_fd >= 0 && setns(plan.network_namespace_fd, CLONE_NEWNET) != 0) {
    const int setns_errno = errno;
    for (const char* part : {"cannot enter the network namespace for ", static_cast<const char*>(plan.argv[0]), ": ",
                             static_cast<const char*>(strerror(setns_errno)), "\n"})
      write_all(STDERR_FILENO, part);
    _exit(126);
  }

  const char* program = plan.argv[0];
  if (plan.search_path)
    execvpe(program, plan.argv, plan.envp);
  else
    execve(program, plan.argv, plan.envp);

  const int exec_errno = errno;
  if (*plan.exec_error_before || *plan.exec_error_after) {
    for (const char* part :
         {plan.exec_error_before, program, plan.exec_error_after, static_cast<const char*>(strerror(exec_errno)), "\n"})
      write_all(STDERR_FILENO, part);
  }
  // The shell's convention: 127 = not found, 126 = found but not executable.
  _exit(exec_errno == ENOENT || exec_errno == ENOTDIR ? 127 : 126);
}

std::vector<char*> pointers_to(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// /dev/null opened before fork (close-on-exec: only the dup2()ed copy reaches the program); -1 if it cannot be.
int open_null_device(int flags) { return ::open("/dev/null", flags | O_CLOEXEC); }

// Waits for `pid`, retrying on EINTR; the raw wait status, or nullopt when `pid` is not our child.
std::optional<int> wait_status(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return std::nullopt;
  }
  return status;
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

pid_t spawn(const ProcessSpec& spec) {
  if (spec.argv.empty()) throw std::invalid_argument("spawn: no program given (empty argv)");
  // Everything exec needs is built before fork: the child may only make async-signal-safe calls.
  std::vector<std::string> arguments = spec.argv;
  const std::vector<char*> argv = pointers_to(arguments);
  std::vector<std::string> environment = spec.environment.value_or(std::vector<std::string>{});
  const std::vector<char*> envp = pointers_to(environment);

  ChildPlan plan;
  plan.argv = argv.data();
  plan.envp = spec.environment ? envp.data() : environ;
  plan.search_path = spec.search_path;
  plan.working_directory = spec.working_directory.empty() ? nullptr : spec.working_directory.c_str();
  plan.new_session = spec.new_session;
  plan.default_signals = spec.default_signals;
  plan.exec_error_before = spec.exec_error_before.c_str();
  plan.exec_error_after = spec.exec_error_after.c_str();
  plan.parent_death_signal = spec.parent_death_signal;
  plan.parent = ::getpid();
  std::vector<int> fds_to_close;
  if (!spec.network_namespace.empty()) {
    plan.network_namespace_fd = ::open(spec.network_namespace.c_str(), O_RDONLY | O_CLOEXEC);
    if (plan.network_namespace_fd < 0) {
      const int open_errno = errno;
      throw ProcessError("cannot open network namespace " + spec.network_namespace + ": " + std::strerror(open_errno),
                         open_errno);
    }
    fds_to_close.push_back(plan.network_namespace_fd);
  }
  const int requested[3] = {spec.stdin_fd, spec.stdout_fd, spec.stderr_fd};
  for (int target = 0; target < 3; ++target) {
    plan.stdio_fds[target] = requested[target];
    if (requested[target] != kNullDevice) continue;
    const int null_fd = open_null_device(target == STDIN_FILENO ? O_RDONLY : O_WRONLY);
    plan.stdio_fds[target] = null_fd < 0 ? kInherit : null_fd;  // no /dev/null: keep the parent's stream
    if (null_fd >= 0) fds_to_close.push_back(null_fd);
  }

  std::fflush(nullptr);  // buffered output of ours must come before the child's
  const pid_t pid = ::fork();
  const int fork_errno = errno;
  if (pid == 0) exec_child(plan);
  for (int fd : fds_to_close) ::close(fd);
  if (pid < 0) throw ProcessError(std::string("fork() failed: ") + std::strerror(fork_errno), fork_errno);
  return pid;
}

namespace {

// Starts the child with stdout and stderr on one pipe and reads it into `output` until the child (and anything it
// left holding the pipe) closes it; returns the pid, not yet reaped.
pid_t spawn_capturing(const ProcessSpec& spec, std::string& output) {
  int output_pipe[2];
  if (::pipe2(output_pipe, O_CLOEXEC) != 0)
    throw ProcessError(std::string("pipe() failed: ") + std::strerror(errno), errno);
  ProcessSpec capturing = spec;
  capturing.stdout_fd = capturing.stderr_fd = output_pipe[1];
  pid_t pid = -1;
  try {
    pid = spawn(capturing);
  } catch (...) {
    ::close(output_pipe[0]);
    ::close(output_pipe[1]);
    throw;
  }
  ::close(output_pipe[1]);
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(output_pipe[0], buffer, sizeof buffer);
    if (got > 0)
      output.append(buffer, static_cast<size_t>(got));
    else if (got == 0 || errno != EINTR)
      break;
  }
  ::close(output_pipe[0]);
  return pid;
}

}  // namespace

int wait_for_exit(pid_t pid) {
  const std::optional<int> status = wait_status(pid);
  return status ? exit_code_of(*status) : -1;
}

ProcessResult run_process(const ProcessSpec& spec, bool capture_output) {
  ProcessResult result;
  const pid_t pid = capture_output ? spawn_capturing(spec, result.output) : spawn(spec);
  const std::optional<int> status = wait_status(pid);
  result.exit_code = status ? exit_code_of(*status) : -1;
  result.signal = status && WIFSIGNALED(*status) ? WTERMSIG(*status) : 0;
  return result;
}

std::optional<std::filesystem::path> find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::istringstream directories(path);
  std::string directory;
  while (std::getline(directories, directory, ':')) {
    const std::filesystem::path candidate = std::filesystem::path(directory.empty() ? "." : directory) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

std::filesystem::path this_executable(const std::string& who) {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error(who + ": cannot find this executable (/proc/self/exe): " + ec.message());
  return self;
}

}  // namespace dtlab
