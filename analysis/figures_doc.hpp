// figures_doc.hpp: docs/performance.md as the current state of main, written from one `make benchmark` run's results:
//
//   build/bin/dtlab-report --figures results > docs/performance.md
//
// One section per study in the report's learning order (course.cpp): its question, the command that reruns it, and a
// table of its runs' measured figures beside the cost model's; the machine (cpuid), commit and dates the runs
// recorded; at the end, the prediction accuracy over every run (`dtlab report --accuracy`). Nothing in it is typed by
// hand, so the page cannot drift from what the lab measures.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "analysis/results.hpp"

namespace dtlab::analysis {

// The whole page for `scenarios` (in the order given); `inputs` are named in its regenerate command.
std::string figures_doc(const std::vector<Scenario>& scenarios, const std::vector<std::string>& inputs);

// The `--figures` command: discover(inputs) in course order, print figures_doc() to out. Returns 1 (the reason on
// log) when the inputs cannot be loaded or hold no completed run, else 0.
int run_figures_doc(const std::vector<std::string>& inputs, std::ostream& out, std::ostream& log);

}  // namespace dtlab::analysis
