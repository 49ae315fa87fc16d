// launch.cpp: `dtlab launch` — starts N local ranks of one program, relays their output line by line
// with a "[rank r] " prefix, and supervises them (first failure stops the rest; no orphans).
//
// Process model: every rank is fork()ed, made the leader of its own session and process group (setsid,
// as torchrun does: with the kernel's autogroup scheduling each session gets its own CPU share, so ranks
// started here compete for cores exactly like ranks started by torchrun) and exec()ed with a
// torchrun-style environment. The launcher makes itself a child subreaper (Linux) so that grandchildren
// a rank leaves behind are re-parented to it and reaped here, not by init; stopping a rank always
// signals its whole group (kill(-pgid, ...)). The launcher is single-threaded: one poll() loop reads the
// rank pipes, wakes on signals through a self-pipe, reaps with waitpid(WNOHANG) and drives the stop
// sequence (SIGTERM to every group, SIGKILL after the grace period).
#include "lab/launch.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

extern char** environ;

namespace dtlab {
namespace {

// ---- small utilities ------------------------------------------------------------------------------

double monotonic_seconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Writes all of `text` to `fd`, retrying short writes and EINTR. Errors (e.g. a closed consumer) are
// dropped: losing output must never stop supervision.
void write_fully(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

// The launcher's own messages go to stderr in one write each, so they never split a rank's line.
[[gnu::format(printf, 1, 2)]] void launcher_message(const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  if (n < 0) return;
  std::string line = "dtlab launch: ";
  line.append(buffer, std::min<size_t>(static_cast<size_t>(n), sizeof buffer - 1));
  line += '\n';
  write_fully(STDERR_FILENO, line);
}

// "SIGKILL (9)" — the conventional name plus the number; unknown signals fall back to strsignal().
std::string signal_name(int signal_number) {
  struct Named {
    int number;
    const char* name;
  };
  static const Named kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},   {SIGTRAP, "SIGTRAP"},
      {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},
      {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"}, {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
      {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
  };
  for (const Named& entry : kNames) {
    if (entry.number == signal_number) return std::string(entry.name) + " (" + std::to_string(signal_number) + ")";
  }
  const char* description = strsignal(signal_number);
  return std::string(description ? description : "signal") + " (" + std::to_string(signal_number) + ")";
}

// Binds 127.0.0.1:0 and returns the port the kernel chose (then closes the socket). The port is free
// now, not reserved: rank 0's TCPStore binds it moments later, which is the usual launcher race.
int pick_free_port() {
  const int sock = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  int port = -1;
  socklen_t length = sizeof address;
  if (::bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(sock, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(sock);
  return port;
}

// ---- environment ----------------------------------------------------------------------------------

// Variables the launcher owns: an inherited value (e.g. from an outer torchrun) would contradict ours.
// TORCHELASTIC_* is dropped entirely so ranks never assume torchrun's agent hosts the store.
bool launcher_owns(const std::string& name) {
  static const char* const kOwned[] = {"RANK",
                                       "LOCAL_RANK",
                                       "WORLD_SIZE",
                                       "LOCAL_WORLD_SIZE",
                                       "GROUP_RANK",
                                       "GROUP_WORLD_SIZE",
                                       "ROLE_RANK",
                                       "ROLE_WORLD_SIZE",
                                       "ROLE_NAME",
                                       "MASTER_ADDR",
                                       "MASTER_PORT",
                                       "DTLAB_LAUNCHER",
                                       "DTLAB_JOB_COMMAND"};
  for (const char* owned : kOwned) {
    if (name == owned) return true;
  }
  return name.rfind("TORCHELASTIC_", 0) == 0;
}

std::vector<std::string> rank_environment(int rank, int world_size, const std::string& master_addr, int master_port) {
  std::vector<std::string> environment;
  bool omp_threads_set = false;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string assignment(*entry);
    const std::string name = assignment.substr(0, assignment.find('='));
    if (launcher_owns(name)) continue;
    if (name == "OMP_NUM_THREADS") omp_threads_set = true;
    environment.push_back(assignment);
  }
  auto set = [&](const char* name, const std::string& value) {
    environment.push_back(std::string(name) + "=" + value);
  };
  set("RANK", std::to_string(rank));
  set("LOCAL_RANK", std::to_string(rank));
  set("WORLD_SIZE", std::to_string(world_size));
  set("LOCAL_WORLD_SIZE", std::to_string(world_size));
  set("GROUP_RANK", "0");
  set("MASTER_ADDR", master_addr);
  set("MASTER_PORT", std::to_string(master_port));
  set("DTLAB_LAUNCHER", "dtlab");
  if (const char* job = std::getenv("DTLAB_JOB_COMMAND")) set("DTLAB_JOB_COMMAND", job);  // set by `dtlab launch`
  // N ranks on a few cores: one OpenMP thread each unless the user chose otherwise.
  if (!omp_threads_set) set("OMP_NUM_THREADS", "1");
  return environment;
}

// ---- signals --------------------------------------------------------------------------------------

// Written from signal handlers: the wake-up pipe (so poll() returns at once) and the last stop signal.
int g_wakeup_write_fd = -1;
volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_signal_count = 0;

void wake_supervisor() {
  const int saved_errno = errno;
  if (g_wakeup_write_fd >= 0) {
    const char byte = 0;
    [[maybe_unused]] const ssize_t ignored = ::write(g_wakeup_write_fd, &byte, 1);
  }
  errno = saved_errno;
}

void on_stop_signal(int signal_number) {
  g_stop_signal = signal_number;
  g_stop_signal_count = g_stop_signal_count + 1;
  wake_supervisor();
}

void on_child_signal(int) { wake_supervisor(); }

// Installs the launcher's handlers for the duration of run_launch and restores the previous ones.
class SignalScope {
 public:
  SignalScope() {
    install(SIGINT, on_stop_signal, 0);
    install(SIGTERM, on_stop_signal, 1);
    install(SIGHUP, on_stop_signal, 2);
    install(SIGCHLD, on_child_signal, 3);
    install(SIGPIPE, SIG_IGN, 4);  // a closed stdout must not kill the supervisor; ranks get SIG_DFL back
  }
  ~SignalScope() {
    const int numbers[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
    for (int i = 0; i < 5; ++i) sigaction(numbers[i], &previous_[i], nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  void install(int signal_number, void (*handler)(int), int slot) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(signal_number, &action, &previous_[slot]);
  }
  struct sigaction previous_[5]{};
};

// ---- ranks ----------------------------------------------------------------------------------------

// One output stream of one rank: the read end of its pipe and the bytes of the line not yet complete.
struct RankStream {
  int fd = -1;
  int destination_fd = STDOUT_FILENO;
  std::string pending;
};

struct Rank {
  int index = 0;
  pid_t pid = -1;  // also the process group id (each rank leads its own group)
  bool reaped = false;
  int wait_status = 0;
  RankStream out, err;
};

// Lines longer than this are emitted in pieces rather than buffered without bound.
constexpr size_t kMaxPendingLineBytes = 1 << 20;

// Emits every complete line in `stream.pending` (or everything, at EOF) with the rank prefix, as one
// write so that lines from different ranks never interleave mid-line.
void emit_lines(RankStream& stream, int rank, bool at_eof) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::string output;
  size_t line_start = 0;
  while (true) {
    const size_t newline = stream.pending.find('\n', line_start);
    if (newline == std::string::npos) break;
    output += prefix;
    output.append(stream.pending, line_start, newline - line_start + 1);
    line_start = newline + 1;
  }
  stream.pending.erase(0, line_start);
  if (!stream.pending.empty() && (at_eof || stream.pending.size() >= kMaxPendingLineBytes)) {
    output += prefix + stream.pending + "\n";
    stream.pending.clear();
  }
  if (!output.empty()) write_fully(stream.destination_fd, output);
}

// Reads what is available on `stream` (poll said it is readable); closes it at EOF or error.
void read_stream(RankStream& stream, int rank) {
  char buffer[65536];
  const ssize_t n = ::read(stream.fd, buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n > 0) {
    stream.pending.append(buffer, static_cast<size_t>(n));
    emit_lines(stream, rank, false);
    return;
  }
  emit_lines(stream, rank, true);
  ::close(stream.fd);
  stream.fd = -1;
}

// Runs in the child between fork and exec: only async-signal-safe calls, everything prepared before.
[[noreturn]] void exec_rank(int stdout_write_fd, int stderr_write_fd, char* const* argv, char* const* envp,
                            const char* program) {
  setsid();  // new session and process group, pgid = pid
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE})
    sigaction(signal_number, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // Ranks live in background process groups: reading a terminal would stop them, so stdin is empty.
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) {
    dup2(null_fd, STDIN_FILENO);
    if (null_fd != STDIN_FILENO) ::close(null_fd);
  }
  dup2(stdout_write_fd, STDOUT_FILENO);
  dup2(stderr_write_fd, STDERR_FILENO);  // dup2 clears close-on-exec on the targets only

  execvpe(program, argv, envp);

  const int exec_errno = errno;
  const char* reason = strerror(exec_errno);
  const char* parts[] = {"dtlab launch: cannot execute '", program, "': ", reason, "\n"};
  for (const char* part : parts) {
    [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, part, strlen(part));
  }
  // The shell's convention: 127 = not found, 126 = found but not executable.
  _exit(exec_errno == ENOENT || exec_errno == ENOTDIR ? 127 : 126);
}

// ---- the supervisor -------------------------------------------------------------------------------

class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, int master_port) : options_(options), master_port_(master_port) {}

  ~Supervisor() {
    for (Rank& rank : ranks_) {
      if (rank.out.fd >= 0) ::close(rank.out.fd);
      if (rank.err.fd >= 0) ::close(rank.err.fd);
    }
    g_wakeup_write_fd = -1;
    if (wakeup_read_fd_ >= 0) ::close(wakeup_read_fd_);
    if (wakeup_write_fd_ >= 0) ::close(wakeup_write_fd_);
  }

  int run() {
    int wakeup_fds[2];
    if (::pipe2(wakeup_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      launcher_message("cannot create a pipe: %s", strerror(errno));
      return 1;
    }
    wakeup_read_fd_ = wakeup_fds[0];
    wakeup_write_fd_ = wakeup_fds[1];
    g_wakeup_write_fd = wakeup_write_fd_;
    g_stop_signal = 0;
    g_stop_signal_count = 0;
#ifdef __linux__
    // Orphaned grandchildren come to us, so we can reap them and know they are gone.
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif

    start_time_ = monotonic_seconds();
    for (int r = 0; r < options_.nproc; ++r) {
      if (!start_rank(r)) {
        exit_code_ = 1;
        begin_stop();
        break;
      }
    }
    supervise();
#ifdef __linux__
    prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
#endif
    return exit_code_;
  }

 private:
  bool start_rank(int index) {
    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
      launcher_message("rank %d: cannot create a pipe: %s", index, strerror(errno));
      return false;
    }
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      launcher_message("rank %d: cannot create a pipe: %s", index, strerror(errno));
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
      return false;
    }
    // Everything exec needs is built before fork: the child may only make async-signal-safe calls.
    std::vector<std::string> environment = rank_environment(index, options_.nproc, options_.master_addr, master_port_);
    std::vector<char*> envp;
    for (std::string& entry : environment) envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::vector<std::string> arguments = options_.command;
    std::vector<char*> argv;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);

    const pid_t pid = ::fork();
    if (pid < 0) {
      launcher_message("rank %d: fork failed: %s", index, strerror(errno));
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
      return false;
    }
    if (pid == 0) exec_rank(out_pipe[1], err_pipe[1], argv.data(), envp.data(), argv[0]);

    // No setpgid from the parent: it would make the child a group leader and its setsid() fail. A stop
    // that races the child's setsid() falls back to signalling the pid itself (see signal_all).
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    Rank rank;
    rank.index = index;
    rank.pid = pid;
    rank.out.fd = out_pipe[0];
    rank.out.destination_fd = STDOUT_FILENO;
    rank.err.fd = err_pipe[0];
    rank.err.destination_fd = STDERR_FILENO;
    ranks_.push_back(std::move(rank));
    return true;
  }

  // The main loop: relay output, react to signals / failures / timeout, reap, and finish once every
  // rank is reaped and no member of any rank's process group remains (or the hard deadline passed).
  void supervise() {
    while (true) {
      pump_output(0.1);
      reap_children();
      const double now = monotonic_seconds();

      if (g_stop_signal != 0 && handled_stop_signals_ != g_stop_signal_count) {
        const bool first = handled_stop_signals_ == 0;
        handled_stop_signals_ = g_stop_signal_count;
        if (first && !stopping_) {
          launcher_message("received %s, stopping all ranks", signal_name(g_stop_signal).c_str());
          exit_code_ = 128 + g_stop_signal;
          begin_stop();
        } else if (first) {
          exit_code_ = 128 + g_stop_signal;  // already stopping for another reason; the signal still wins
        } else {
          kill_all_groups(SIGKILL);  // a second interrupt: do not wait for the grace period
        }
      }
      if (!stopping_ && options_.timeout_s > 0 && now - start_time_ >= options_.timeout_s) {
        launcher_message("timed out after %g s, stopping all ranks", options_.timeout_s);
        exit_code_ = 124;
        begin_stop();
      }
      if (!stopping_) {
        for (const Rank& rank : ranks_) {
          if (rank.reaped && !(WIFEXITED(rank.wait_status) && WEXITSTATUS(rank.wait_status) == 0)) {
            report_failure(rank);
            exit_code_ = 1;
            begin_stop();
            break;
          }
        }
      }

      const bool all_reaped = all_ranks_reaped();
      if (all_reaped && !stopping_) {
        // Every rank exited 0. Leftover members of their groups (background children) are stopped
        // the same way, so a successful job leaves nothing behind either.
        if (!any_group_alive()) break;
        launcher_message("every rank exited 0; stopping processes they left running");
        begin_stop();
      }
      if (stopping_) {
        if (!sent_sigkill_ && now >= kill_deadline_) {
          if (any_group_alive()) launcher_message("grace period over, sending SIGKILL");
          kill_all_groups(SIGKILL);
        }
        if (all_reaped && !any_group_alive()) break;
        // Beyond SIGKILL only processes stuck in the kernel (D state) or escaped groups can delay us.
        if (sent_sigkill_ && now >= kill_deadline_ + kAfterKillWaitSeconds) {
          if (all_reaped) {
            launcher_message("some processes of the rank groups did not exit after SIGKILL");
            break;
          }
        }
      }
    }
    drain_output();
  }

  void report_failure(const Rank& rank) {
    if (WIFSIGNALED(rank.wait_status)) {
      launcher_message("rank %d was killed by signal %s", rank.index, signal_name(WTERMSIG(rank.wait_status)).c_str());
    } else {
      launcher_message("rank %d exited with code %d", rank.index, WEXITSTATUS(rank.wait_status));
    }
  }

  void begin_stop() {
    if (stopping_) return;
    stopping_ = true;
    kill_deadline_ = monotonic_seconds() + std::max(0.0, options_.grace_s);
    kill_all_groups(SIGTERM);
    kill_all_groups(SIGCONT);  // a stopped (stalled) rank handles its SIGTERM only once it runs again
  }

  // Signals every rank's process group, including groups whose leader already exited (they may
  // still hold background children). ESRCH simply means the group is already empty.
  void kill_all_groups(int signal_number) {
    if (signal_number == SIGKILL) sent_sigkill_ = true;
    for (const Rank& rank : ranks_)
      if (::kill(-rank.pid, signal_number) != 0 && errno == ESRCH && !rank.reaped) ::kill(rank.pid, signal_number);
  }

  bool any_group_alive() const {
    for (const Rank& rank : ranks_) {
      if (::kill(-rank.pid, 0) == 0 || errno == EPERM) return true;
    }
    return false;
  }

  bool all_ranks_reaped() const {
    for (const Rank& rank : ranks_) {
      if (!rank.reaped) return false;
    }
    return true;
  }

  // Reaps every exited child: ranks get their status recorded; anything else is a re-parented
  // grandchild (we are the subreaper) and is simply collected.
  void reap_children() {
    while (true) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      for (Rank& rank : ranks_) {
        if (rank.pid == pid) {
          rank.reaped = true;
          rank.wait_status = status;
        }
      }
    }
  }

  // Waits up to `timeout_s` for output or a wake-up, then relays whatever is readable.
  void pump_output(double timeout_s) {
    std::vector<pollfd> fds;
    std::vector<RankStream*> streams;
    std::vector<int> stream_ranks;
    fds.push_back({wakeup_read_fd_, POLLIN, 0});
    for (Rank& rank : ranks_) {
      for (RankStream* stream : {&rank.out, &rank.err}) {
        if (stream->fd < 0) continue;
        fds.push_back({stream->fd, POLLIN, 0});
        streams.push_back(stream);
        stream_ranks.push_back(rank.index);
      }
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(timeout_s * 1000));
    if (ready <= 0) return;
    if (fds[0].revents & POLLIN) {
      char discard[256];
      while (::read(wakeup_read_fd_, discard, sizeof discard) > 0) {
      }
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_stream(*streams[i - 1], stream_ranks[i - 1]);
    }
  }

  // After every process is gone the pipes reach EOF promptly; a process that escaped its group
  // (setsid) could hold one open forever, so draining is bounded.
  void drain_output() {
    const double deadline = monotonic_seconds() + kDrainSeconds;
    while (monotonic_seconds() < deadline) {
      bool any_open = false;
      for (const Rank& rank : ranks_) any_open = any_open || rank.out.fd >= 0 || rank.err.fd >= 0;
      if (!any_open) return;
      pump_output(0.05);
    }
    for (Rank& rank : ranks_) {
      for (RankStream* stream : {&rank.out, &rank.err}) {
        if (stream->fd < 0) continue;
        emit_lines(*stream, rank.index, true);
        ::close(stream->fd);
        stream->fd = -1;
      }
    }
  }

  static constexpr double kAfterKillWaitSeconds = 10.0;
  static constexpr double kDrainSeconds = 2.0;

  const LaunchOptions& options_;
  const int master_port_;
  std::vector<Rank> ranks_;
  int wakeup_read_fd_ = -1, wakeup_write_fd_ = -1;
  double start_time_ = 0.0;
  bool stopping_ = false;
  bool sent_sigkill_ = false;
  double kill_deadline_ = 0.0;
  sig_atomic_t handled_stop_signals_ = 0;
  int exit_code_ = 0;
};

}  // namespace

int run_launch(const LaunchOptions& options) {
  if (options.nproc < 1) {
    launcher_message("-n must be at least 1 (got %d)", options.nproc);
    return 2;
  }
  // `--` only separates launch's options from the program; a CLI layer may pass it through.
  std::vector<std::string> command = options.command;
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) {
    launcher_message("no program given: dtlab launch -n N [--] PROGRAM ARGS...");
    return 2;
  }
  int master_port = options.master_port;
  if (master_port == 0) master_port = pick_free_port();
  if (master_port <= 0 || master_port > 65535) {
    launcher_message("no usable master port (%d): %s", master_port, master_port < 0 ? strerror(errno) : "out of range");
    return 1;
  }

  std::string command_line;
  for (const std::string& word : command) command_line += (command_line.empty() ? "" : " ") + word;
  launcher_message("%d ranks, MASTER_ADDR=%s MASTER_PORT=%d: %s", options.nproc, options.master_addr.c_str(),
                   master_port, command_line.c_str());

  LaunchOptions resolved = options;
  resolved.command = std::move(command);
  SignalScope signal_scope;
  Supervisor supervisor(resolved, master_port);
  return supervisor.run();
}

}  // namespace dtlab
