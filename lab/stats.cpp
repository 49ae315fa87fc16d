// stats.cpp: order statistics for measured samples; see stats.hpp for the contracts.
#include "lab/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtlab {
namespace {

void check(std::span<const double> samples, const char* what) {
  if (samples.empty()) {
    throw std::invalid_argument(std::string(what) + ": empty sample (no measured values)");
  }
  for (double v : samples) {
    if (std::isnan(v)) throw std::invalid_argument(std::string(what) + ": sample contains NaN");
  }
}

std::vector<double> sorted(std::span<const double> samples) {
  std::vector<double> v(samples.begin(), samples.end());
  std::sort(v.begin(), v.end());
  return v;
}

// REQUIRES: v sorted, non-empty, 0 <= pct <= 100. Nearest rank, 1-based; the form result.json's p95 has used.
double percentile_sorted(const std::vector<double>& v, double pct) {
  const std::size_t n = v.size();
  const auto rank = static_cast<std::size_t>(std::ceil(pct / 100.0 * static_cast<double>(n)));
  return v[std::clamp<std::size_t>(rank, 1, n) - 1];
}

// REQUIRES: v sorted, non-empty. The midpoint of the two middle samples for an even count.
double median_sorted(const std::vector<double>& v) {
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double min_of(std::span<const double> samples) {
  check(samples, "min_of");
  return *std::min_element(samples.begin(), samples.end());
}

double max_of(std::span<const double> samples) {
  check(samples, "max_of");
  return *std::max_element(samples.begin(), samples.end());
}

double mean(std::span<const double> samples) {
  check(samples, "mean");
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

double median(std::span<const double> samples) {
  check(samples, "median");
  return median_sorted(sorted(samples));
}

double median_or_zero(std::span<const double> samples) { return samples.empty() ? 0.0 : median(samples); }

double percentile(std::span<const double> samples, double pct) {
  check(samples, "percentile");
  if (!(pct >= 0.0 && pct <= 100.0)) {
    throw std::invalid_argument("percentile: pct=" + std::to_string(pct) + " is outside [0, 100]");
  }
  return percentile_sorted(sorted(samples), pct);
}

double p95(std::span<const double> samples) { return percentile(samples, 95.0); }

Stats summarize(std::span<const double> samples) {
  check(samples, "summarize");
  const std::vector<double> v = sorted(samples);
  Stats s;
  s.count = v.size();
  s.min = v.front();
  s.max = v.back();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = median_sorted(v);
  s.p95 = percentile_sorted(v, 95.0);
  return s;
}

}  // namespace dtlab
