// main.cpp: the `dtlab` command-line tool — wires the subcommands (one cmd_<name>.cpp each, see command.hpp),
// parses, runs the chosen one and maps errors to exit codes.
//
//   dtlab train --config FILE [section.key=value ...] [--out DIR] one training run (one rank of a job)
//   dtlab data build --out FILE [TEXT_FILE ...]                    byte-level token file from text
//   dtlab report RESULT_DIR... -o reports/NAME                     HTML + PNG report
//   dtlab launch -n N [--] PROGRAM ARGS...                         N local ranks, torchrun-style env
//   dtlab export-reference --config FILE --out DIR                 a run's exact inputs for an outside reference
//   dtlab trace merge RUN_DIR_OR_FILES... -o OUT.json.gz           one Perfetto/HTA trace for all ranks
//   dtlab comm-bench [-b 1K -e 256M -f 4 -n 10 -w 3 --op all --json FILE --model FILE]   nccl-tests-style table
//   dtlab calibrate --out FILE [--ranks 2] [--quick] [--config FILE key=value ...]   machine profile JSON
//   dtlab predict --config FILE [key=value ...] [--world-size N] [--profile FILE]   prediction JSON
//   dtlab advise --config FILE --world-size N --memory-budget B [--profile FILE] [--verify K]   ranked advice
//   dtlab max-batch --config FILE --world-size N --memory-budget B [--verify]      the largest micro-batch that fits
//   dtlab compare A B [--threshold 5] [--fail-on-regression PCT] [--json FILE]   faster / slower / no change
//   dtlab export csv RUN_OR_STUDY_DIR... [-o OUT_DIR]               steps, summary, collectives as CSV
//   dtlab version
//
// `dtlab --help` and every command's fit one screen, each with an example (tests/cli/newcomer_test.cpp).
#include <cstdio>
#include <exception>
#include <vector>

#include "lab/cli/command.hpp"
#include "lab/config.hpp"

int main(int argc, char** argv) {
  namespace cli = dtlab::cli;
  CLI::App app{"dtlab: one GPT model, many distributed training strategies — measured, explained, predicted"};
  app.require_subcommand(1);
  app.footer(
      "`dtlab COMMAND --help`: its options and an example. The whole lab: make benchmark (README.md).\n"
      "example: dtlab train --config scenarios/configs/baseline.yaml   (results in results/train/baseline)");
  const cli::CommandLine line{argc, argv};
  const std::vector<cli::Command> commands = {
      cli::add_train_command(app, line),      cli::add_data_command(app),
      cli::add_report_command(app),           cli::add_launch_command(app, line),
      cli::add_export_reference_command(app), cli::add_trace_command(app),
      cli::add_comm_bench_command(app, line), cli::add_calibrate_command(app, line),
      cli::add_predict_command(app),          cli::add_pp_schedule_command(app),
      cli::add_version_command(app),          cli::add_checkpoint_command(app),
      cli::add_advise_command(app),           cli::add_max_batch_command(app),
      cli::add_compare_command(app),          cli::add_export_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (const cli::Command& command : commands)
      if (command.app->parsed()) return command.run();
  } catch (const dtlab::ConfigError& e) {
    std::fprintf(stderr, "dtlab: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtlab: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
