// stats.cpp: order statistics for measured samples; see stats.hpp for the contracts.
#include "analysis/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtlab::analysis {
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

// REQUIRES: v sorted, non-empty, 0 <= pct <= 100.
double percentile_sorted(const std::vector<double>& v, double pct) {
  const double rank = pct / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = std::min(lo + 1, v.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
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
  return percentile_sorted(sorted(samples), 50.0);
}

double percentile(std::span<const double> samples, double pct) {
  check(samples, "percentile");
  if (!(pct >= 0.0 && pct <= 100.0)) {
    throw std::invalid_argument("percentile: pct=" + std::to_string(pct) + " is outside [0, 100]");
  }
  return percentile_sorted(sorted(samples), pct);
}

Stats summarize(std::span<const double> samples) {
  check(samples, "summarize");
  const std::vector<double> v = sorted(samples);
  Stats s;
  s.count = v.size();
  s.min = v.front();
  s.max = v.back();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  s.median = percentile_sorted(v, 50.0);
  s.p95 = percentile_sorted(v, 95.0);
  return s;
}

}  // namespace dtlab::analysis
