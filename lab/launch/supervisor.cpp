// supervisor.cpp: starts the ranks of `dtlab launch` and supervises them — the first failure, stop signal or timeout
// stops the rest (SIGTERM to every rank's process group, SIGKILL after the grace period) and nothing is orphaned.
//
// Process model: every rank is started (lab/process.hpp) as the leader of its own session and process group
// (setsid, as torchrun does: with the kernel's autogroup scheduling each session gets its own CPU share, so ranks
// started here compete for cores exactly like ranks started by torchrun) with a torchrun-style environment. The
// launcher makes itself a child subreaper (Linux) so that grandchildren a rank leaves behind are re-parented to it
// and reaped here, not by init; stopping a rank always signals its whole group (kill(-pgid, ...)). The launcher is
// single-threaded: one poll() loop reads the rank pipes, wakes on signals through a self-pipe, reaps with
// waitpid(WNOHANG) and drives the stop sequence.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "lab/launch/launch_internal.hpp"
#include "lab/process.hpp"

namespace dtlab::launch_internal {
namespace {

double monotonic_seconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

struct Rank {
  int index = 0;
  pid_t pid = -1;  // also the process group id (each rank leads its own group)
  bool reaped = false;
  int wait_status = 0;
  RankStream out, err;
};

class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, const JobLayout& layout) : options_(options), layout_(layout) {}

  ~Supervisor() {
    for (Rank& rank : ranks_) {
      if (rank.out.fd >= 0) ::close(rank.out.fd);
      if (rank.err.fd >= 0) ::close(rank.err.fd);
    }
    set_wakeup_fd(-1);
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
    set_wakeup_fd(wakeup_write_fd_);  // stop signals since run_launch began count: it reset them
#ifdef __linux__
    // Orphaned grandchildren come to us, so we can reap them and know they are gone.
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
#endif

    start_time_ = monotonic_seconds();
    for (int r = 0; r < layout_.world_size(); ++r) {
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
  // Rank `index`: its own session and process group, default signal handling, stdin empty (ranks live in
  // background process groups: reading a terminal would stop them), stdout and stderr into the launcher's pipes,
  // its node's network namespace on an emulated cluster, and SIGKILL should the launcher die (a SIGKILLed launcher
  // cannot stop its ranks itself).
  ProcessSpec rank_spec(int index, int stdout_fd, int stderr_fd) const {
    ProcessSpec spec;
    spec.argv = options_.command;
    spec.search_path = true;
    spec.environment = rank_environment(index, layout_);
    if (!layout_.node_namespace_paths.empty())
      spec.network_namespace = layout_.node_namespace_paths[static_cast<size_t>(index / layout_.ranks_per_node)];
    spec.parent_death_signal = SIGKILL;
    spec.new_session = true;
    spec.default_signals = true;  // the launcher ignores SIGPIPE and handles INT, TERM, HUP, CHLD
    spec.stdin_fd = kNullDevice;
    spec.stdout_fd = stdout_fd;
    spec.stderr_fd = stderr_fd;
    spec.exec_error_before = "dtlab launch: cannot execute '";
    spec.exec_error_after = "': ";
    return spec;
  }

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
    pid_t pid = -1;
    try {
      pid = spawn(rank_spec(index, out_pipe[1], err_pipe[1]));
    } catch (const ProcessError& e) {
      launcher_message("rank %d: %s", index, e.what());
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
      return false;
    }

    // No setpgid from the parent: it would make the child a group leader and its setsid() fail. A stop
    // that races the child's setsid() falls back to signalling the pid itself (see kill_all_groups).
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

      if (last_stop_signal() != 0 && handled_stop_signals_ != stop_signal_count()) {
        const bool first = handled_stop_signals_ == 0;
        handled_stop_signals_ = stop_signal_count();
        if (first && !stopping_) {
          launcher_message("received %s, stopping all ranks", signal_name(last_stop_signal()).c_str());
          exit_code_ = 128 + last_stop_signal();
          begin_stop();
        } else if (first) {
          exit_code_ = 128 + last_stop_signal();  // already stopping for another reason; the signal still wins
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
            // The first failed rank's own status when it exited (dtlab train's 3 = out of memory), else 1.
            exit_code_ = WIFEXITED(rank.wait_status) ? WEXITSTATUS(rank.wait_status) : 1;
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
  const JobLayout& layout_;
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

int supervise_job(const LaunchOptions& options, const JobLayout& layout) {
  Supervisor supervisor(options, layout);
  return supervisor.run();
}

}  // namespace dtlab::launch_internal
