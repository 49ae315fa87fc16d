// stats.hpp: small order statistics for measured samples (step times, throughputs).
//
// Usage:
//   std::vector<double> step_ms = {412.3, 405.1, 430.0};
//   dtlab::analysis::Stats s = dtlab::analysis::summarize(step_ms);  // s.median == 412.3
//
// REQUIRES: the sample is non-empty; every function throws std::invalid_argument otherwise, so a run
//           without measured steps fails loudly instead of reporting 0.
// NOTE: NaN samples are rejected (std::invalid_argument) -- a NaN step time is a writer bug, not data.
#pragma once

#include <cstddef>
#include <span>

namespace dtlab::analysis {

struct Stats {
  std::size_t count = 0;
  double min = 0;
  double max = 0;
  double mean = 0;
  double median = 0;  // midpoint of the two middle samples when count is even
  double p95 = 0;     // percentile(samples, 95)
};

double min_of(std::span<const double> samples);
double max_of(std::span<const double> samples);
double mean(std::span<const double> samples);
double median(std::span<const double> samples);

// Linear interpolation between closest ranks (numpy's default "linear" method):
// rank = pct/100 * (n-1). REQUIRES: 0 <= pct <= 100.
double percentile(std::span<const double> samples, double pct);

Stats summarize(std::span<const double> samples);

}  // namespace dtlab::analysis
