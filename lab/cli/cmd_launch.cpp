// cmd_launch.cpp: `dtlab launch [--nodes M] -n N [--] PROGRAM ARGS...` — N local ranks (per node of an emulated
// cluster of M nodes) with a torchrun-style environment; if one fails, the others are stopped and the failing rank
// named (lab/launch.hpp). `dtlab launch --cleanup` removes what killed launchers left.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "lab/cli/command.hpp"
#include "lab/launch.hpp"

namespace dtlab::cli {

Command add_launch_command(CLI::App& app, const CommandLine& line) {
  auto options = std::make_shared<LaunchOptions>();
  auto* launch = app.add_subcommand("launch",
                                    "start N local ranks of PROGRAM (torchrun-style environment), on one node or on "
                                    "each node of an emulated cluster; if one fails, stop the others and name it");
  auto* nproc =
      launch->add_option("-n,--nproc,--nproc-per-node", options->nproc, "ranks per node")->check(CLI::PositiveNumber);
  launch
      ->add_option("--nodes", options->nodes,
                   "nodes: 1 = this machine as it is; M > 1 = an emulated cluster, a network namespace per node "
                   "joined by shaped links (needs CAP_NET_ADMIN)")
      ->check(CLI::PositiveNumber);
  launch->add_option(
      "--inter-link", options->inter_link,
      "rate of each node's link to the others, as tc writes it (200mbit, 1gbit, 4gbit); none = unshaped");
  launch->add_option("--intra-link", options->intra_link,
                     "rate inside a node (its loopback), e.g. 20gbit; none = unshaped (the default)");
  launch->add_flag("--cleanup", options->cleanup,
                   "remove the emulated clusters of launchers that are gone (killed with SIGKILL), then exit");
  launch->add_option("--master-port", options->master_port, "rendezvous port (default: a free port)");
  launch->add_option("--grace", options->grace_s, "seconds between SIGTERM and SIGKILL when stopping ranks");
  launch->add_option("--timeout", options->timeout_s, "stop the job after this many seconds (0 = never)");
  launch
      ->add_option("--max-restarts", options->max_restarts,
                   "when a rank fails, start every rank again up to this many times (a program with "
                   "checkpoint.dir resumes from its latest checkpoint)")
      ->check(CLI::NonNegativeNumber);
  launch->add_option("command", options->command, "PROGRAM ARGS... (each rank's program and its arguments)");
  launch->prefix_command();      // everything from PROGRAM on belongs to the program, even -n or --timeout
  launch->positionals_at_end();  // ... and `--` may separate it explicitly
  return {launch, [options, line, nproc] {
            if (!options->cleanup && nproc->count() == 0) {
              std::fprintf(stderr, "dtlab launch: -n N (ranks per node) is required\n");
              return 2;
            }
            // Each rank records the command that reruns the whole job (result.json context.command), not its own.
            ::setenv("DTLAB_JOB_COMMAND", reproduce_command(line).c_str(), 1);
            return run_launch(*options);
          }};
}

}  // namespace dtlab::cli
