// crossover.hpp: where communication stops hiding — a study's runs swept over inter-node link rates, as one curve per
// strategy, and the rate at which exposed communication falls under a share of the step (torch-free). The report's
// crossover part (analysis/report_crossover.cpp) draws and tabulates them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/results.hpp"

namespace dtlab::analysis {

inline constexpr double kCrossoverThresholdPct = 10.0;

// One run of a series: its link rate and its measured and predicted step and exposed communication.
// Measured exposed communication is the least wait of any rank per step (summary.comm_wait_least_ms_median): the
// rank that reaches the collectives last waits for the communication alone, while the others also wait for it, which
// is compute, not communication (on an emulated cluster whose ranks outnumber the cores, a peer that is not running).
// Results without that figure fall back to rank 0's wait (least_wait false). Predicted exposed communication is the
// prediction's comm.exposed_ms less its overlap_lost_in_node_ms: on a CPU host the overlapped calls inside a node
// slow the compute they share cores with (forward and backward take longer), and no rank waits for that.
struct CrossoverPoint {
  double rate_mbps = 0;
  double step_ms = 0, exposed_ms = 0, exposed_pct = 0;  // measured: median step, exposed communication (above)
  double rank0_wait_ms = 0;                             // rank 0's median comm wait
  bool least_wait = false;                              // exposed_ms is the least wait of any rank
  std::optional<double> predicted_step_ms, predicted_exposed_ms, predicted_exposed_pct;  // result.json prediction
  std::optional<double> predicted_comm_ms;  // every collective back to back; minus the exposed: what compute hides
  // The lowest and highest share of a single measured step (its least wait over its step time), where every measured
  // step recorded its least wait (result.json steps[i].comm_wait_least_ms).
  std::optional<double> exposed_pct_low, exposed_pct_high;
};

// The scenario's runs with a set inter-node rate, grouped by the run name before '@' and sorted by rate; series of
// fewer than two rates are left out.
std::map<std::string, std::vector<CrossoverPoint>> crossover_series(const Scenario& scenario);

// The rate at which a share falls to `threshold_pct` or below, from (rate, share) points sorted by rate: linear in
// log(rate) between the two points around it. below_range: already at or under it at the slowest rate; above_range:
// still over it at the fastest; none: no points.
struct Crossing {
  enum Kind { none, within, below_range, above_range } kind = none;
  double rate_mbps = 0;  // within: the interpolated rate; below/above: the slowest/fastest rate measured
};
Crossing crossing_rate(const std::vector<std::pair<double, double>>& rate_and_pct, double threshold_pct);

// A series' crossings at kCrossoverThresholdPct: measured, predicted (kind none unless every run carries a
// prediction) and, where every run has its steps' range, the crossings of the lowest and of the highest shares: the
// range the measured crossing can take from the steps' spread. With n measured steps the median share lies between
// the lowest and the highest step with probability 1 - 2^(1-n) (94% at 5 steps), whatever the steps' distribution.
struct SeriesCrossings {
  Crossing measured, predicted;
  std::optional<std::pair<Crossing, Crossing>> measured_range;  // {from the lowest shares, from the highest}
};
SeriesCrossings series_crossings(const std::vector<CrossoverPoint>& points);

// "700 Mbit/s – 1.9 Gbit/s" for a measured_range; an end outside the swept rates reads "under 100 Mbit/s" or
// "over 16 Gbit/s".
std::string describe_crossing_range(const std::pair<Crossing, Crossing>& range);

}  // namespace dtlab::analysis
