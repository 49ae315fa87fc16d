// report_phases.cpp: the report's "where a step's time goes" chart: each run's mean step stacked by phase
// (compute, exposed comm wait, optimizer, the rest), from result.json's phases_ms.
#include "analysis/report_instrument.hpp"
#include "analysis/results_instrument.hpp"

namespace dtlab::analysis {

std::optional<Chart> phase_chart(const Scenario& sc) {
  BarChart c;
  c.title = sc.title + ": where a step's time goes";
  c.y_label = "mean ms per step (rank 0, timed steps)";
  c.series_names = {"compute (forward + backward)", "exposed comm wait", "optimizer", "other (data, rest)"};
  c.stacked = true;
  c.values.resize(4);
  for (const RunResult& r : sc.runs) {
    const auto ms = phase_means_ms(r);
    if (!ms) continue;
    c.categories.push_back(r.name);
    c.values[0].push_back(ms->at("forward") + ms->at("backward"));
    c.values[1].push_back(ms->at("comm_wait"));
    c.values[2].push_back(ms->at("optimizer"));
    c.values[3].push_back(ms->at("data") + ms->at("other"));
  }
  if (c.categories.empty()) return std::nullopt;
  return c;
}

}  // namespace dtlab::analysis
