// cmd_trace.cpp: `dtlab trace merge RUN_DIR_OR_FILES... -o OUT.json.gz` — every rank's trace in one Perfetto/HTA file.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "lab/cli/command.hpp"
#include "lab/instrument/trace.hpp"

namespace dtlab::cli {

Command add_trace_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> inputs;
    std::string out;
  };
  auto args = std::make_shared<Args>();
  auto* trace = app.add_subcommand("trace", "merge every rank's Chrome/Perfetto trace into one");
  trace->require_subcommand(1);
  trace->footer("example: dtlab trace merge results/mine -o merged.json.gz   (a run with instrument.trace=true)");
  auto* merge = trace->add_subcommand("merge", "merge every rank's trace.json.gz into one file");
  merge->footer("example: dtlab trace merge results/mine -o merged.json.gz   (a run with instrument.trace=true)");
  merge->add_option("inputs", args->inputs, "run dirs (their rank*/trace.json.gz) or trace files")->required();
  merge->add_option("-o,--out", args->out, "merged trace to write (.json.gz: gzip)")->required();
  return {merge, [args] {
            std::printf("%s\n", merge_trace_files(args->inputs, args->out).c_str());
            return 0;
          }};
}

}  // namespace dtlab::cli
