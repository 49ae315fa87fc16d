// compare.hpp: `dtlab compare A B` — two result sets, run by run, metric by metric, with a verdict (torch-free).
//
// Usage:
//   ResultsComparison c = compare_results({"results/before"}, {"results/after"}, CompareOptions{});
//   std::cout << format_comparison(c);           // one table per matched run
//   if (c.regressions(5.0) > 0) return 1;        // --fail-on-regression 5
//
// Matching: A and B are run or study directories (anything analysis::discover takes). Runs are matched by
// "<scenario>/<run name>"; when each side holds exactly one run, those two are compared whatever their names.
// Runs found on one side only are listed, not compared.
//
// Metrics, per matched run (measured steps only: the warm-up steps of each run's config are left out):
//   step_ms, tokens_per_s, comm_wait_ms      distributions over steps, every rank's steps.jsonl pooled (rank 0's
//                                            result.json steps when there is no steps.jsonl)
//   peak_memory_bytes                        one number per run (the largest rank peak): ratio only, no interval
// For each: the medians of A and B, ratio = median(B) / median(A), and a 95% bootstrap confidence interval of that
// ratio (resampling the steps of A and of B independently, kBootstrapResamples times, with a fixed seed so a
// comparison is repeatable). Verdict: "slower" / "faster" (or "more" / "less" memory) when the interval lies
// entirely above 1 + threshold or below 1 / (1 + threshold) (the same factor either way), i.e. the change is both
// significant and at least the threshold; else "no significant change". A metric whose median is 0 on both sides (no
// communication) is "not measured". The interval sees step-to-step spread within each run, not run-to-run spread
// (a cold machine, a noisy neighbour): choose a threshold above the machine's run-to-run noise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtlab::analysis {

struct CompareOptions {
  double threshold_pct = 5.0;  // the smallest change that counts, percent
  int resamples = 2000;        // bootstrap resamples
  uint64_t seed = 12345;       // bootstrap seed (fixed: the same inputs give the same interval)
};

enum class Verdict { no_change, better, worse, not_measured };

struct ComparedMetric {
  std::string metric;  // step_ms | tokens_per_s | comm_wait_ms | peak_memory_bytes
  bool higher_is_better = false;
  size_t n_a = 0, n_b = 0;  // samples (steps, or 1 for one-number metrics)
  double median_a = 0, median_b = 0;
  double ratio = 0;                       // median_b / median_a (0 when median_a is 0)
  std::optional<double> ci_low, ci_high;  // the ratio's 95% interval; nullopt for one-number metrics
  Verdict verdict = Verdict::no_change;
  std::string verdict_text;  // "slower", "faster", "more memory", "less memory", "no significant change", ...
  // True when the whole interval (the ratio, for one-number metrics) lies beyond 1 + pct% in the worse direction
  // (below 1 / (1 + pct%) for tokens_per_s): the verdict's rule with `pct` as the threshold.
  bool regressed_by(double pct) const;
};

struct ComparedRun {
  std::string key;  // "<scenario>/<run>" (or "A-run vs B-run" when single runs with other names were paired)
  std::string dir_a, dir_b;
  std::vector<ComparedMetric> metrics;
};

struct ResultsComparison {
  CompareOptions options;
  std::vector<ComparedRun> runs;
  std::vector<std::string> only_in_a, only_in_b;  // unmatched run keys
  // Matched runs with at least one metric regressed_by(pct).
  int regressions(double pct) const;
};

// Bootstrap 95% interval of median(b) / median(a). REQUIRES: a and b non-empty.
std::pair<double, double> bootstrap_median_ratio_ci(const std::vector<double>& a, const std::vector<double>& b,
                                                    int resamples, uint64_t seed);

// Loads both sides (analysis::discover) and compares every matched run. Throws AnalysisError naming the input when
// a side holds no run, and when no run matches.
ResultsComparison compare_results(const std::vector<std::string>& a, const std::vector<std::string>& b,
                                  const CompareOptions& options);

// Compares two metric samples (exposed for tests): the verdict rules above.
ComparedMetric compare_metric(const std::string& metric, bool higher_is_better, const std::vector<double>& a,
                              const std::vector<double>& b, const CompareOptions& options);

// The tables a user reads: per run, metric | median A | median B | B/A | 95% CI | verdict; then unmatched runs.
std::string format_comparison(const ResultsComparison& c, const std::string& label_a, const std::string& label_b);
nlohmann::json to_json(const ResultsComparison& c);

}  // namespace dtlab::analysis
