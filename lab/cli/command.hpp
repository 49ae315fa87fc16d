// command.hpp: how the `dtlab` tool is put together. Each subcommand lives in its own cmd_<name>.cpp: its
// add_<name>_command() declares the subcommand and its flags on the app and returns the function that runs it once
// the command line is parsed; main.cpp only wires them. Exit codes (every command): 0 done, 1 error, 2 bad
// configuration (ConfigError), 3 `report --accuracy --enforce` with a missed target, 4 `compare
// --fail-on-regression` with a regression.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace dtlab::cli {

// This process's command line, for commands that record or relaunch it.
struct CommandLine {
  int argc = 0;
  char** argv = nullptr;
};

struct Command {
  CLI::App* app = nullptr;   // the (sub)subcommand that selects it, e.g. `data build`
  std::function<int()> run;  // called once, when `app` was parsed
};

Command add_train_command(CLI::App& app, const CommandLine& line);
Command add_data_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_launch_command(CLI::App& app, const CommandLine& line);
Command add_export_reference_command(CLI::App& app);
Command add_trace_command(CLI::App& app);
Command add_comm_bench_command(CLI::App& app, const CommandLine& line);
Command add_calibrate_command(CLI::App& app, const CommandLine& line);
Command add_predict_command(CLI::App& app);
Command add_pp_schedule_command(CLI::App& app);
Command add_version_command(CLI::App& app);
Command add_checkpoint_command(CLI::App& app);
Command add_advise_command(CLI::App& app);
Command add_max_batch_command(CLI::App& app);
Command add_compare_command(CLI::App& app);
Command add_export_command(CLI::App& app);

// The command line as a shell would need it to run again (arguments quoted where needed; argv[0] relative to the
// working directory).
std::string reproduce_command(const CommandLine& line);
// Arguments joined as a shell would need them retyped (quoted where needed).
std::string shell_command(const std::vector<std::string>& argv);

}  // namespace dtlab::cli
