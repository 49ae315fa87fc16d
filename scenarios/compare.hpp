// compare.hpp: the comparisons a study spec's `compare` section asks for, made over the finished runs' result.json
// files (read through the results schema's key names, lab/results_schema.hpp).
//
// Kinds:
//   tracing_overhead  per group: the mean summary.step_ms_median of the `on` runs over that of the `off` runs (the
//                     A/B figure, percent), next to the trace-on runs' own summary.trace_overhead_pct; printed one
//                     line per group against target_pct and written to <out>/<study>/<output> as a JSON array.
//                     A group with a run missing a step time (e.g. after --only) is left out.
#pragma once

#include <filesystem>

#include "scenarios/study.hpp"

namespace dtlab {

// Makes every comparison of `study` over the runs under `study_dir` (<out>/<study>/); returns 0.
int run_comparisons(const Study& study, const std::filesystem::path& study_dir);

}  // namespace dtlab
