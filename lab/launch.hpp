// launch.hpp: `dtlab launch -n N [--] PROGRAM ARGS...` — the local job spawner.
//
// Starts N copies of PROGRAM with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=<free port>, plus DTLAB_LAUNCHER=dtlab and
// OMP_NUM_THREADS=1 unless set), prefixes every output line with "[rank r] ", and supervises: when a
// rank exits non-zero or is killed by a signal, the others get SIGTERM, then SIGKILL after a grace
// period, and launch exits non-zero naming the first failed rank and its exit code or signal.
// Every rank runs in its own process group so no grandchild is orphaned.
#pragma once

#include <string>
#include <vector>

namespace dtlab {

struct LaunchOptions {
  int nproc = 1;                     // ranks to start (>= 1)
  std::vector<std::string> command;  // PROGRAM ARGS...
  std::string master_addr = "127.0.0.1";
  int master_port = 0;     // 0 = pick a free loopback port
  double grace_s = 5.0;    // SIGTERM -> SIGKILL delay when stopping the others
  double timeout_s = 0.0;  // 0 = none; else stop everything after this long (exit non-zero)
};

// Runs the job; returns the process exit code for `dtlab launch` (0 = every rank exited 0).
int run_launch(const LaunchOptions& options);

}  // namespace dtlab
