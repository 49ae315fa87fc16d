// stats.hpp: the one set of order statistics for measured samples (step times, throughputs, repeats), used by
// result.json's summary (lab/), calibration, comm-bench, the cost-model fit and the report alike. Torch-free.
//
// Usage:
//   std::vector<double> step_ms = {412.3, 405.1, 430.0};
//   dtlab::Stats s = dtlab::summarize(step_ms);  // s.median == 412.3
//
// Definitions (result.json's, kept bit for bit):
//   median: the middle sample; for an even count 0.5 * (the two middle samples' sum).
//   p95:    nearest rank: the ceil(0.95 * n)-th smallest sample (1-based), always a measured value.
// REQUIRES: the sample is non-empty; every function throws std::invalid_argument otherwise, so a run
//           without measured steps fails loudly instead of reporting 0 (median_or_zero is the explicit
//           exception, for run summaries that report 0 when nothing was measured).
// NOTE: NaN samples are rejected (std::invalid_argument) -- a NaN step time is a writer bug, not data.
#pragma once

#include <cstddef>
#include <span>

namespace dtlab {

struct Stats {
  std::size_t count = 0;
  double min = 0;
  double max = 0;
  double mean = 0;  // sum of the sorted samples / count
  double median = 0;
  double p95 = 0;  // percentile(samples, 95): nearest rank
};

double min_of(std::span<const double> samples);
double max_of(std::span<const double> samples);
double mean(std::span<const double> samples);
double median(std::span<const double> samples);

// median(samples), or 0 when there are none (a run whose steps were all warm-up). Still rejects NaN.
double median_or_zero(std::span<const double> samples);

// Nearest rank: the ceil(pct/100 * n)-th smallest sample (1-based, at least the first). REQUIRES: 0 <= pct <= 100.
double percentile(std::span<const double> samples, double pct);
double p95(std::span<const double> samples);  // percentile(samples, 95)

Stats summarize(std::span<const double> samples);

}  // namespace dtlab
