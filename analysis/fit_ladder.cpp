// fit_ladder.cpp: a ladder of model sizes under a memory cap (see fit_ladder.hpp).
#include "analysis/fit_ladder.hpp"

#include <algorithm>
#include <map>

namespace dtlab::analysis {
namespace {

// The cap a run recorded: memory.limit_bytes of a completed run, oom.limit_bytes of one that stopped.
std::optional<double> limit_of(const RunResult& r) {
  if (r.oom) return r.oom->limit_bytes;
  const std::optional<double> limit = json_number_at(r.raw, {"memory", "limit_bytes"});
  if (!limit || *limit <= 0) return std::nullopt;
  return limit;
}

}  // namespace

std::optional<bool> FitCell::predicted_fits() const {
  if (!predicted_peak_bytes || limit_bytes <= 0) return std::nullopt;
  return *predicted_peak_bytes <= limit_bytes;
}

std::optional<double> FitSeries::largest_fitting_params() const {
  std::optional<double> largest;
  for (const FitCell& c : cells)
    if (c.fits) largest = std::max(largest.value_or(0), c.params);
  return largest;
}

std::optional<double> FitSeries::largest_predicted_params() const {
  std::optional<double> largest;
  for (const FitCell& c : cells)
    if (c.predicted_fits().value_or(false)) largest = std::max(largest.value_or(0), c.params);
  return largest;
}

std::optional<FitLadder> fit_ladder(const Scenario& sc) {
  FitLadder ladder;
  std::map<std::string, size_t> index;  // series name -> position, in the order runs appear
  const auto add = [&](const RunResult& r) {
    const size_t at = r.name.find('@');
    const std::optional<double> limit = limit_of(r);
    if (at == std::string::npos || !limit) return;
    FitCell c;
    c.step = r.name.substr(at + 1);
    c.params = static_cast<double>(r.params);
    c.limit_bytes = *limit;
    c.fits = !r.oom;
    // What the cap holds: the device-side bytes (offload's host buffers are outside it, lab/memory.hpp).
    c.peak_bytes = r.oom ? r.oom->in_use_bytes + r.oom->requested_bytes : largest_rank_device_side_peak(r);
    if (r.oom) c.oom_step = r.oom->step, c.oom_category = r.oom->category;
    c.predicted_peak_bytes = json_number_at(r.raw, {"prediction", "memory_bytes", "device_peak"});
    if (!c.predicted_peak_bytes) c.predicted_peak_bytes = json_number_at(r.raw, {"prediction", "memory_bytes", "peak"});
    ladder.limit_bytes = std::max(ladder.limit_bytes, *limit);
    const std::string name = r.name.substr(0, at);
    if (!index.count(name)) {
      index[name] = ladder.series.size();
      ladder.series.push_back({name, {}});
    }
    ladder.series[index[name]].cells.push_back(std::move(c));
  };
  for (const RunResult& r : sc.runs) add(r);
  for (const RunResult& r : sc.oom_runs) add(r);
  bool any_ladder = false;
  for (FitSeries& s : ladder.series) {
    std::sort(s.cells.begin(), s.cells.end(), [](const FitCell& a, const FitCell& b) { return a.params < b.params; });
    any_ladder = any_ladder || s.cells.size() >= 2;
  }
  if (!any_ladder) return std::nullopt;
  return ladder;
}

}  // namespace dtlab::analysis
