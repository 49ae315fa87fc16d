// compare.cpp: the comparison kinds of study specs (see compare.hpp).
#include "scenarios/compare.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "lab/results_schema.hpp"

namespace dtlab {
namespace {

// summary.<key> of a finished run; NaN when it cannot be read.
double summary_value(const std::filesystem::path& run_dir, const char* key) {
  std::ifstream in(run_dir / "result.json");
  if (!in) return NAN;
  try {
    return nlohmann::json::parse(in).at(schema::kSummary).at(key).get<double>();
  } catch (const std::exception&) {
    return NAN;
  }
}

// The mean of summary.<key> over the named runs (NaN when one lacks it).
double mean_over(const std::filesystem::path& study_dir, const std::vector<std::string>& runs, const char* key) {
  double sum = 0;
  for (const auto& run : runs) sum += summary_value(study_dir / run, key);
  return sum / static_cast<double>(runs.size());
}

void tracing_overhead(const Comparison& comparison, const std::filesystem::path& study_dir) {
  nlohmann::json rows = nlohmann::json::array();
  for (const OnOffGroup& group : comparison.groups) {
    const double off = mean_over(study_dir, group.off, schema::kStepMsMedian);
    const double on = mean_over(study_dir, group.on, schema::kStepMsMedian);
    const double direct = mean_over(study_dir, group.on, schema::kTraceOverheadPct);
    if (!std::isfinite(off) || !std::isfinite(on)) continue;  // --only ran a subset
    // Two figures: the A/B difference of whole runs (includes run-to-run noise of a few %), and the direct cost
    // the trace-on runs measured in themselves (time spent writing trace events over the median step).
    const double pct = 100.0 * (on - off) / off;
    std::printf(
        "tracing overhead %-16s median step %.1f ms on vs %.1f ms off = %+.1f%%; time writing trace events = "
        "%.3f%% of a step (target <= %g%%: %s)\n",
        group.label.c_str(), on, off, pct, direct, comparison.target_pct,
        pct <= comparison.target_pct ? "met" : "missed by the A/B figure");
    rows.push_back({{"strategy", group.label},
                    {"step_ms_on", on},
                    {"step_ms_off", off},
                    {"overhead_pct", pct},
                    {"direct_trace_pct", direct}});
  }
  std::ofstream(study_dir / comparison.output) << rows.dump(2) << "\n";
}

}  // namespace

int run_comparisons(const Study& study, const std::filesystem::path& study_dir) {
  for (const Comparison& comparison : study.comparisons)
    if (comparison.kind == "tracing_overhead") tracing_overhead(comparison, study_dir);
  return 0;
}

}  // namespace dtlab
