// launch_internal.hpp: what the parts of `dtlab launch` (lab/launch/*.cpp) share; not for use outside them.
//
//   launch_env.cpp   the ranks' torchrun-style environment and the free master port
//   rank_output.cpp  the launcher's messages and each rank's output relayed line by line with "[rank r] "
//   signals.cpp      stop signals (INT, TERM, HUP) and SIGCHLD waking the supervisor; signal names
//   supervisor.cpp   starts the ranks and supervises them until every one is gone
//   launch.cpp       run_launch: checks the options, picks the port, runs the supervisor
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include <unistd.h>

#include "lab/launch.hpp"

namespace dtlab::launch_internal {

// ---- environment (launch_env.cpp) ----

// The environment of rank `rank`: ours without the variables the launcher owns, plus RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, DTLAB_LAUNCHER=dtlab and OMP_NUM_THREADS=1 unless set.
std::vector<std::string> rank_environment(int rank, int world_size, const std::string& master_addr, int master_port);

// A loopback port that is free now (not reserved); -1 with errno set if none could be found.
int pick_free_port();

// ---- output (rank_output.cpp) ----

// Writes all of `text` to `fd`, retrying short writes and EINTR; errors are dropped.
void write_fully(int fd, const std::string& text);

// "dtlab launch: <message>\n" on stderr in one write, so it never splits a rank's line.
[[gnu::format(printf, 1, 2)]] void launcher_message(const char* format, ...);

// One output stream of one rank: the read end of its pipe and the bytes of the line not yet complete.
struct RankStream {
  int fd = -1;
  int destination_fd = STDOUT_FILENO;
  std::string pending;
};

// Emits every complete line in `stream.pending` (or everything, at EOF) with the rank prefix in one write.
void emit_lines(RankStream& stream, int rank, bool at_eof);

// Reads what is available on `stream` (poll said it is readable) and relays it; closes it at EOF or error.
void read_stream(RankStream& stream, int rank);

// ---- signals (signals.cpp) ----

// "SIGKILL (9)": the conventional name plus the number; unknown signals fall back to strsignal().
std::string signal_name(int signal_number);

// The pipe the signal handlers write a byte to, so that the supervisor's poll() returns at once; -1 = none.
void set_wakeup_fd(int fd);
// The last stop signal received (0 = none) and how many arrived since reset_stop_signals().
int last_stop_signal();
sig_atomic_t stop_signal_count();
void reset_stop_signals();

// Installs the launcher's handlers (INT, TERM, HUP stop the job; CHLD wakes; PIPE ignored) for its lifetime and
// restores the previous ones.
class SignalScope {
 public:
  SignalScope();
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  void install(int signal_number, void (*handler)(int), int slot);
  struct sigaction previous_[5]{};
};

// ---- supervision (supervisor.cpp) ----

// Starts options.nproc ranks of options.command (already without a leading "--") and supervises them; returns the
// exit code of `dtlab launch`. REQUIRES: a SignalScope is alive.
int supervise_job(const LaunchOptions& options, int master_port);

}  // namespace dtlab::launch_internal
