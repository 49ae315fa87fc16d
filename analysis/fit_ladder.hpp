// fit_ladder.hpp: what fits under a memory cap — a study's runs over a ladder of model sizes (runs named
// <series>@<step>, scenarios/studies/fit.yaml) under memory.limit, as one row per series: at each size, whether the
// run completed or stopped out of memory, its peak against the cap, and what the memory model predicted (torch-free).
// The report's fit part (analysis/report_fit.cpp) draws and tabulates it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/results.hpp"

namespace dtlab::analysis {

struct FitCell {
  std::string step;       // the ladder step: the run name after '@'
  double params = 0;      // the model's parameters
  bool fits = false;      // measured: the run completed under the cap
  double peak_bytes = 0;  // fits: the largest device-side peak of any rank; out of memory: in use + the refused request
  std::int64_t oom_step = 0;                   // out of memory: the step it stopped at (0 = setup)
  std::string oom_category;                    // out of memory: what asked
  std::optional<double> predicted_peak_bytes;  // prediction.memory_bytes.device_peak (rank 0; older results: .peak)
  std::optional<bool> predicted_fits() const;  // predicted peak <= the cap
  double limit_bytes = 0;
};

struct FitSeries {
  std::string name;            // the run name before '@'
  std::vector<FitCell> cells;  // by model size, smallest first
  // The largest model that fit, measured and predicted (nullopt: none did).
  std::optional<double> largest_fitting_params() const;
  std::optional<double> largest_predicted_params() const;
};

struct FitLadder {
  double limit_bytes = 0;  // the cap per rank (every run of the ladder has the same one)
  std::vector<FitSeries> series;
};

// The scenario's runs (completed and out of memory) whose name has a ladder step and whose memory cap is recorded,
// grouped by series; nullopt when there are none, or when no series has two steps.
std::optional<FitLadder> fit_ladder(const Scenario& scenario);

}  // namespace dtlab::analysis
