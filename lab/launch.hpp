// launch.hpp: `dtlab launch [--nodes M] -n N [--] PROGRAM ARGS...` — the local job spawner.
//
// Starts N copies of PROGRAM with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=<free port>, plus DTLAB_LAUNCHER=dtlab and
// OMP_NUM_THREADS=1 unless set), prefixes every output line with "[rank r] ", and supervises: when a
// rank exits non-zero or is killed by a signal, the others get SIGTERM, then SIGKILL after a grace
// period, and launch exits naming the first failed rank and its exit code or signal, with that rank's exit code
// (so `dtlab train`'s out-of-memory status 3 reaches the caller), or 1 when a signal killed it.
// Every rank runs in its own process group so no grandchild is orphaned, and gets SIGKILL if the launcher dies.
//
// With --nodes M > 1 it first builds an emulated cluster (lab/launch/cluster.hpp: a network namespace per node,
// shaped links between them) and starts N ranks in each node's namespace, M x N in all, rank r on node r / N.
// Each rank also gets GROUP_RANK = NODE_RANK = its node, GROUP_WORLD_SIZE = M, MASTER_ADDR = node 0's address,
// DTLAB_NODE_ADDR (its node's address: `dtlab train` binds there), GLOO_SOCKET_IFNAME (its node's interface, for
// PyTorch's own scripts), DTLAB_INTER_LINK and DTLAB_INTRA_LINK (the rates, or "none"). The cluster is removed when
// the job ends, however it ends; a launcher killed with SIGKILL leaves it behind, and the next launch (or
// `dtlab launch --cleanup`) removes it.
#pragma once

#include <string>
#include <vector>

namespace dtlab {

struct LaunchOptions {
  int nproc = 1;                     // ranks to start per node (>= 1)
  int nodes = 1;                     // 1 = the launcher's own network namespace; > 1 = an emulated cluster
  std::string inter_link;            // with nodes > 1: the rate between nodes ("1gbit"); "" or "none" = unshaped
  std::string intra_link;            // with nodes > 1: the rate inside a node (its loopback); "" or "none" = unshaped
  bool cleanup = false;              // remove what SIGKILLed launchers left, then exit (no program)
  std::vector<std::string> command;  // PROGRAM ARGS...
  std::string master_addr = "127.0.0.1";
  int master_port = 0;     // 0 = pick a free loopback port
  double grace_s = 5.0;    // SIGTERM -> SIGKILL delay when stopping the others
  double timeout_s = 0.0;  // 0 = none; else stop everything after this long (exit non-zero)
  // When a rank fails, stop the others and start every rank again, up to this many times (torchrun's
  // --max-restarts). Each attempt gets DTLAB_RESTART_COUNT (0, 1, ...) and a fresh master port; a program that
  // checkpoints (checkpoint.dir, checkpoint.resume=auto) continues from its latest complete checkpoint. A stop
  // signal to the launcher, or the timeout, ends the job without a restart.
  int max_restarts = 0;
};

// Runs the job; returns the process exit code for `dtlab launch` (0 = every rank exited 0).
int run_launch(const LaunchOptions& options);

}  // namespace dtlab
