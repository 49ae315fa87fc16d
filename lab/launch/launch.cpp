// launch.cpp: `dtlab launch` — starts N local ranks of one program, relays their output line by line with a
// "[rank r] " prefix, and supervises them (first failure stops the rest; no orphans). This file checks the options
// and picks the master port; lab/launch/launch_internal.hpp lists the other parts.
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "lab/launch.hpp"
#include "lab/launch/launch_internal.hpp"

namespace dtlab {

using launch_internal::launcher_message;
using launch_internal::pick_free_port;
using launch_internal::SignalScope;
using launch_internal::supervise_job;

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
  return supervise_job(resolved, master_port);
}

}  // namespace dtlab
