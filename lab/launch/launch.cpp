// launch.cpp: `dtlab launch` — starts N local ranks of one program (on one node, or on each node of an emulated
// cluster), relays their output line by line with a "[rank r] " prefix, and supervises them (first failure stops the
// rest; no orphans; with --max-restarts, every rank is started again). This file checks the options, builds the
// cluster, picks the master port and runs the supervisor; lab/launch/launch_internal.hpp lists the other parts.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lab/launch.hpp"
#include "lab/launch/cluster.hpp"
#include "lab/launch/launch_internal.hpp"

namespace dtlab {

using launch_internal::hold_free_port;
using launch_internal::JobLayout;
using launch_internal::launcher_message;
using launch_internal::PortHold;
using launch_internal::SignalScope;
using launch_internal::supervise_job;

namespace {

constexpr int kTimedOutExitCode = 124;  // the supervisor's exit code when --timeout stopped the job

// "" and "none" mean an unshaped link.
std::optional<LinkRate> link_option(const std::string& text, const char* option) {
  if (text.empty() || text == "none") return std::nullopt;
  return parse_link_rate(text, option);
}

// `--cleanup`: what SIGKILLed launchers left behind; live launchers' clusters stay.
int run_cleanup() {
  std::string why;
  if (!can_build_clusters(&why)) {
    launcher_message("--cleanup: %s", why.c_str());
    return 2;
  }
  std::string problems;
  const std::vector<std::string> removed = remove_stale_clusters(&problems);
  for (const std::string& name : removed) launcher_message("removed network namespace %s", name.c_str());
  launcher_message("--cleanup: removed %zu namespace(s) of launchers that are gone; %zu of running launchers left",
                   removed.size(), cluster_namespaces().size());
  if (!problems.empty()) launcher_message("%s", problems.c_str());
  return problems.empty() ? 0 : 1;
}

// Builds the emulated cluster (after removing stale ones) and fills the layout's per-node fields; nullptr with a
// message when it cannot be built.
std::unique_ptr<EmulatedCluster> build_cluster(const LaunchOptions& options, JobLayout& layout, int& exit_code) {
  ClusterSpec spec;
  spec.nodes = options.nodes;
  spec.ranks_per_node = options.nproc;
  try {
    spec.inter_link = link_option(options.inter_link, "--inter-link");
    spec.intra_link = link_option(options.intra_link, "--intra-link");
  } catch (const std::invalid_argument& e) {
    launcher_message("%s", e.what());
    exit_code = 2;
    return nullptr;
  }
  std::string why;
  if (!can_build_clusters(&why)) {
    launcher_message("%s", why.c_str());
    exit_code = 2;
    return nullptr;
  }
  std::string problems;
  for (const std::string& name : remove_stale_clusters(&problems))
    launcher_message("removed network namespace %s (its launcher is gone)", name.c_str());
  if (!problems.empty()) launcher_message("%s", problems.c_str());

  std::unique_ptr<EmulatedCluster> cluster;
  try {
    cluster = std::make_unique<EmulatedCluster>(spec, ::getpid());
  } catch (const std::exception& e) {
    launcher_message("%s", e.what());
    exit_code = 1;
    return nullptr;
  }
  for (int node = 0; node < options.nodes; ++node) {
    layout.node_namespace_paths.push_back(cluster->node_namespace_path(node));
    layout.node_addresses.push_back(EmulatedCluster::node_address(node));
    layout.node_interfaces.push_back(cluster->node_interface(node));
  }
  layout.master_addr = EmulatedCluster::node_address(0);
  layout.inter_link = spec.inter_link ? spec.inter_link->tc_text : "none";
  layout.intra_link = spec.intra_link ? spec.intra_link->tc_text : "none";
  launcher_message("emulated cluster: %d nodes x %d ranks, namespaces %s..%s, inter-node link %s, intra-node %s",
                   options.nodes, options.nproc, cluster->node_namespace(0).c_str(),
                   cluster->node_namespace(options.nodes - 1).c_str(),
                   spec.inter_link ? describe_rate(spec.inter_link->bits_per_s).c_str() : "unshaped",
                   spec.intra_link ? describe_rate(spec.intra_link->bits_per_s).c_str() : "unshaped");
  return cluster;
}

}  // namespace

int run_launch(const LaunchOptions& options) {
  if (options.cleanup) return run_cleanup();
  if (options.nproc < 1) {
    launcher_message("-n must be at least 1 (got %d)", options.nproc);
    return 2;
  }
  if (options.nodes < 1 || options.nodes > kMaxNodes) {
    launcher_message("--nodes must be between 1 and %d (got %d)", kMaxNodes, options.nodes);
    return 2;
  }
  const auto shaped = [](const std::string& rate) { return !rate.empty() && rate != "none"; };
  if (options.nodes == 1 && (shaped(options.inter_link) || shaped(options.intra_link))) {
    launcher_message("--inter-link and --intra-link shape an emulated cluster's links: they need --nodes 2 or more");
    return 2;
  }
  // `--` only separates launch's options from the program; a CLI layer may pass it through.
  std::vector<std::string> command = options.command;
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) {
    launcher_message("no program given: dtlab launch [--nodes M] -n N [--] PROGRAM ARGS...");
    return 2;
  }

  JobLayout layout;
  layout.nodes = options.nodes;
  layout.ranks_per_node = options.nproc;
  layout.master_addr = options.master_addr;
  layout.master_port = options.master_port;
  // Stop signals are caught from here on: one that arrives while the cluster is built stops the job before any rank
  // starts, and the cluster is still removed.
  SignalScope signal_scope;
  launch_internal::reset_stop_signals();
  std::unique_ptr<EmulatedCluster> cluster;
  if (options.nodes > 1) {
    int exit_code = 0;
    cluster = build_cluster(options, layout, exit_code);
    if (!cluster) return exit_code;
    if (const int signal_number = launch_internal::last_stop_signal(); signal_number != 0) {
      launcher_message("received %s while building the cluster; nothing was started",
                       launch_internal::signal_name(signal_number).c_str());
      return 128 + signal_number;  // the cluster's destructor removes it
    }
  }
  PortHold port_hold;  // a port the launcher picked stays held until the job has ended (launch_internal.hpp)
  if (layout.master_port == 0) {
    port_hold = hold_free_port();
    layout.master_port = port_hold.port();
  }
  if (layout.master_port <= 0 || layout.master_port > 65535) {
    launcher_message("no usable master port (%d): %s", layout.master_port,
                     layout.master_port < 0 ? strerror(errno) : "out of range");
    return 1;
  }

  std::string command_line;
  for (const std::string& word : command) command_line += (command_line.empty() ? "" : " ") + word;
  launcher_message("%d ranks, MASTER_ADDR=%s MASTER_PORT=%d: %s", layout.world_size(), layout.master_addr.c_str(),
                   layout.master_port, command_line.c_str());

  LaunchOptions resolved = options;
  resolved.command = std::move(command);
  int exit_code = supervise_job(resolved, layout);
  // Restarts: every rank again, on a fresh port (the old store's port may linger in TIME_WAIT).
  while (exit_code != 0 && layout.restart_count < options.max_restarts && launch_internal::last_stop_signal() == 0 &&
         exit_code != kTimedOutExitCode) {
    ++layout.restart_count;
    if (options.master_port == 0) {
      port_hold = hold_free_port();
      layout.master_port = port_hold.port();
    }
    launcher_message("restart %d of %d: the job failed (exit %d); starting all %d ranks again, MASTER_PORT=%d",
                     layout.restart_count, options.max_restarts, exit_code, layout.world_size(), layout.master_port);
    exit_code = supervise_job(resolved, layout);
  }
  if (cluster) {
    const std::string problems = cluster->tear_down();
    if (!problems.empty()) launcher_message("could not remove the emulated cluster completely:\n%s", problems.c_str());
  }
  return exit_code;
}

}  // namespace dtlab
