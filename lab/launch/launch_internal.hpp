// launch_internal.hpp: what the parts of `dtlab launch` (lab/launch/*.cpp) share; not for use outside them.
//
//   launch_env.cpp   the ranks' torchrun-style environment and the free master port
//   rank_output.cpp  the launcher's messages and each rank's output relayed line by line with "[rank r] "
//   signals.cpp      stop signals (INT, TERM, HUP) and SIGCHLD waking the supervisor; signal names
//   supervisor.cpp   starts the ranks and supervises them until every one is gone
//   cluster.cpp      the emulated cluster of --nodes M (its own header, cluster.hpp)
//   launch.cpp       run_launch: checks the options, builds the cluster, picks the port, runs the supervisor
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include <unistd.h>

#include "lab/launch.hpp"

namespace dtlab::launch_internal {

// ---- the job's layout ----

// Where the ranks run and what they are told. One node: the launcher's own namespace, loopback rendezvous. An
// emulated cluster: rank r runs in node r / ranks_per_node's namespace.
struct JobLayout {
  int nodes = 1;
  int ranks_per_node = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::vector<std::string> node_namespace_paths;         // per node; empty = the launcher's own namespace
  std::vector<std::string> node_addresses;               // per node; empty on one node
  std::vector<std::string> node_interfaces;              // per node; empty on one node
  std::string inter_link = "none", intra_link = "none";  // told to the ranks: tc's rate text, or "none"
  int restart_count = 0;                                 // this attempt (LaunchOptions::max_restarts)
  int world_size() const { return nodes * ranks_per_node; }
};

// ---- environment (launch_env.cpp) ----

// The environment of rank `rank`: ours without the variables the launcher owns, plus RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, GROUP_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, DTLAB_LAUNCHER=dtlab,
// DTLAB_RESTART_COUNT and OMP_NUM_THREADS=1 unless set; on an emulated cluster also DTLAB_NODE_ADDR,
// GLOO_SOCKET_IFNAME, DTLAB_INTER_LINK and DTLAB_INTRA_LINK (see lab/launch.hpp).
std::vector<std::string> rank_environment(int rank, const JobLayout& layout);

// A loopback port the kernel chose, held by a socket bound to it (SO_REUSEADDR, never listening) for the hold's
// lifetime: meanwhile no other bind to port 0 and no outgoing connection is given that port, so no other job can
// take it between the pick and rank 0's bind; rank 0's store binds it with SO_REUSEADDR too and listens on it.
// port() is -1, with errno set, if none could be found.
class PortHold {
 public:
  PortHold() = default;
  ~PortHold();
  PortHold(PortHold&& other) noexcept;
  PortHold& operator=(PortHold&& other) noexcept;
  PortHold(const PortHold&) = delete;
  PortHold& operator=(const PortHold&) = delete;
  int port() const { return port_; }

 private:
  friend PortHold hold_free_port();
  int fd_ = -1, port_ = -1;
};
PortHold hold_free_port();

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

// Starts layout.world_size() ranks of options.command (already without a leading "--") where the layout says, and
// supervises them; returns the exit code of `dtlab launch`. A stop signal received since reset_stop_signals() stops
// the job at once. REQUIRES: a SignalScope is alive.
int supervise_job(const LaunchOptions& options, const JobLayout& layout);

}  // namespace dtlab::launch_internal
