// cmd_report.cpp: `dtlab report RESULT_DIR... -o reports/NAME` — the HTML + PNG report (analysis/report.hpp), or with
// --accuracy the cost models' predicted-vs-measured accuracy against their targets, or with --figures the page of
// measured figures that docs/performance.md is (analysis/figures_doc.hpp).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "analysis/accuracy.hpp"
#include "analysis/figures_doc.hpp"
#include "analysis/report.hpp"
#include "lab/cli/command.hpp"

namespace dtlab::cli {

Command add_report_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> inputs;
    std::string out = "reports/latest";
    bool accuracy = false, enforce = false, figures = false;
    std::vector<std::string> enforce_only;
  };
  auto args = std::make_shared<Args>();
  auto* report = app.add_subcommand("report", "render results as an HTML report with PNG charts");
  report->footer("example: dtlab report results -o reports/latest   (then open reports/latest/index.html)");
  report->add_option("inputs", args->inputs, "result, scenario or results directories")->required();
  report->add_option("-o,--out", args->out, "report directory (default reports/latest)");
  report->add_flag("--accuracy", args->accuracy, "print predicted-vs-measured accuracy against its targets instead");
  report->add_flag("--figures", args->figures, "print the figures page, docs/performance.md, instead");
  report->add_flag("--enforce", args->enforce, "with --accuracy: exit 3 unless every target is met")
      ->needs("--accuracy");
  report->add_option("--enforce-only", args->enforce_only, "with --accuracy: exit 3 unless the listed targets are met")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->needs("--accuracy");
  return {report, [args] {
            if (args->figures) return analysis::run_figures_doc(args->inputs, std::cout, std::cerr);
            if (args->accuracy)
              return analysis::run_accuracy(args->inputs, std::cout, std::cerr, args->enforce, args->enforce_only);
            return analysis::render_report(args->inputs, args->out, std::cout);
          }};
}

}  // namespace dtlab::cli
