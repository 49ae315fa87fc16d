// report_main.cpp: dtlab-report, the torch-free report tool (same renderer as `dtlab report`).
//
//   build/bin/dtlab-report results/baseline results/ddp_vs_fsdp -o reports/latest
//   build/bin/dtlab-report results -o reports/all          # every scenario below results/
//   build/bin/dtlab-report --accuracy results              # prediction accuracy against the targets (no report)
//   build/bin/dtlab-report --accuracy --enforce results    # the same, failing unless every target is met
//   build/bin/dtlab-report --accuracy --enforce-only state-bytes,peak-memory results   # only those targets gate
//   build/bin/dtlab-report --figures results > docs/performance.md   # the measured figures as markdown (make figures)
//
// Exit status: 0 report written (or accuracy printed); 1 inputs unreadable, output dir unwritable, or report
// written with problems; 2 bad usage; 3 --accuracy --enforce(-only) and an enforced target missed or not judged.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "analysis/accuracy.hpp"
#include "analysis/figures_doc.hpp"
#include "analysis/report.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "dtlab-report: render dtlab results (scenario dirs, run dirs or a parent dir such as results/) "
      "into an HTML report with gnuplot SVG/PNG charts"};
  std::vector<std::string> inputs;
  std::string out_dir;
  app.add_option("inputs", inputs, "scenario dirs, run dirs, or parent dirs to search")->required();
  bool accuracy = false, enforce = false, figures = false;
  app.add_option("-o,--out", out_dir, "report directory (created; index.html lands here); required without --accuracy");
  app.add_flag("--accuracy", accuracy,
               "print predicted-vs-measured accuracy of the runs found against the cost-model targets, no report");
  app.add_flag("--enforce", enforce,
               "with --accuracy: exit 3 unless every target is met (a missed or not-judged target fails)")
      ->needs("--accuracy");
  app.add_flag("--figures", figures,
               "print the measured figures of the runs found as markdown (docs/performance.md), no report")
      ->excludes("--accuracy");
  std::vector<std::string> enforce_only;
  app.add_option("--enforce-only", enforce_only,
                 "with --accuracy: exit 3 unless each of these targets is judged and met (comma-separated: "
                 "state-bytes, peak-memory, step-time, ranking, crossover)")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->needs("--accuracy");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (figures) return dtlab::analysis::run_figures_doc(inputs, std::cout, std::cerr);
  if (accuracy) return dtlab::analysis::run_accuracy(inputs, std::cout, std::cerr, enforce, enforce_only);
  if (out_dir.empty()) {
    std::cerr << "dtlab-report: -o,--out is required (or pass --accuracy)\n";
    return 2;
  }
  return dtlab::analysis::render_report(inputs, out_dir, std::cerr);
}
