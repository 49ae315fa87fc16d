// cmd_export.cpp: `dtlab export csv RUN_OR_STUDY_DIR... [-o OUT_DIR]` — steps, summary and collective records as CSV
// tables with a header row, one file per table (analysis/export_csv.hpp).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "analysis/export_csv.hpp"
#include "lab/cli/command.hpp"

namespace dtlab::cli {

Command add_export_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> inputs;
    std::string out;
  };
  auto args = std::make_shared<Args>();
  auto* exp = app.add_subcommand("export", "results as CSV, for spreadsheets and pandas");
  exp->require_subcommand(1);
  exp->footer("example: dtlab export csv results/train/baseline   (into results/train/baseline/csv/)");
  auto* csv = exp->add_subcommand("csv", "steps.csv, summary.csv and collectives.csv of runs");
  csv->footer("example: dtlab export csv results/train/baseline   (into results/train/baseline/csv/)");
  csv->add_option("inputs", args->inputs, "run dirs, study dirs or results dirs")
      ->required()
      ->check(CLI::ExistingDirectory);
  csv->add_option("-o,--out", args->out, "directory for the CSV files (default: <first input>/csv)");
  return {csv, [args] {
            const std::string out =
                args->out.empty() ? (std::filesystem::path(args->inputs.front()) / "csv").string() : args->out;
            const analysis::CsvExport e = analysis::export_csv(args->inputs, out);
            for (size_t i = 0; i < e.files.size(); ++i) std::printf("%s: %zu rows\n", e.files[i].c_str(), e.rows[i]);
            return 0;
          }};
}

}  // namespace dtlab::cli
