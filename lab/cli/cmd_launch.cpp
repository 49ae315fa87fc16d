// cmd_launch.cpp: `dtlab launch -n N [--] PROGRAM ARGS...` — N local ranks with a torchrun-style environment; if
// one fails, the others are stopped and the failing rank named (lab/launch.hpp).
#include <cstdlib>
#include <memory>

#include "lab/cli/command.hpp"
#include "lab/launch.hpp"

namespace dtlab::cli {

Command add_launch_command(CLI::App& app, const CommandLine& line) {
  auto options = std::make_shared<LaunchOptions>();
  auto* launch = app.add_subcommand("launch",
                                    "start N local ranks of PROGRAM (torchrun-style environment); "
                                    "if one fails, stop the others and name it");
  launch->add_option("-n,--nproc", options->nproc, "number of ranks")->required()->check(CLI::PositiveNumber);
  launch->add_option("--master-port", options->master_port, "rendezvous port (default: a free port)");
  launch->add_option("--grace", options->grace_s, "seconds between SIGTERM and SIGKILL when stopping ranks");
  launch->add_option("--timeout", options->timeout_s, "stop the job after this many seconds (0 = never)");
  launch->add_option("command", options->command, "PROGRAM ARGS... (each rank's program and its arguments)")
      ->required();
  launch->prefix_command();      // everything from PROGRAM on belongs to the program, even -n or --timeout
  launch->positionals_at_end();  // ... and `--` may separate it explicitly
  return {launch, [options, line] {
            // Each rank records the command that reruns the whole job (result.json context.command), not its own.
            ::setenv("DTLAB_JOB_COMMAND", reproduce_command(line).c_str(), 1);
            return run_launch(*options);
          }};
}

}  // namespace dtlab::cli
