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
  auto* launch = app.add_subcommand("launch", "start N local ranks of a program; if one fails, stop them all");
  launch->footer(
      "Each rank gets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ... as under torchrun.\n"
      "example: dtlab launch -n 2 dtlab train --config scenarios/configs/ddp.yaml parallel.strategy=ddp");
  auto* nproc =
      launch->add_option("-n,--nproc,--nproc-per-node", options->nproc, "ranks per node")->check(CLI::PositiveNumber);
  launch->add_option("--nodes", options->nodes, "M > 1: an emulated cluster, a network namespace per node (root)")
      ->check(CLI::PositiveNumber);
  launch->add_option("--inter-link", options->inter_link,
                     "each node's link to the others (200mbit, 1gbit; none = unshaped)");
  launch->add_option("--intra-link", options->intra_link, "rate inside a node, e.g. 20gbit (default none: unshaped)");
  launch->add_flag("--cleanup", options->cleanup, "remove emulated clusters whose launcher is gone, then exit");
  launch->add_option("--master-port", options->master_port, "rendezvous port (default: a free port)");
  launch->add_option("--grace", options->grace_s, "seconds from SIGTERM to SIGKILL when stopping ranks");
  launch->add_option("--timeout", options->timeout_s, "stop the job after this many seconds (0 = never)");
  launch
      ->add_option("--max-restarts", options->max_restarts,
                   "restart the job this many times when a rank fails (resumes\nfrom the latest checkpoint with "
                   "checkpoint.dir)")
      ->check(CLI::NonNegativeNumber);
  launch->add_option("command", options->command, "PROGRAM ARGS... (each rank's program and arguments)");
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
