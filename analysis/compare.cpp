// compare.cpp: two result sets compared run by run (see compare.hpp).
#include "analysis/compare.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/results.hpp"
#include "lab/stats.hpp"

namespace dtlab::analysis {
namespace {

// One run by the key it is matched on.
std::map<std::string, const RunResult*> runs_by_key(const std::vector<Scenario>& scenarios) {
  std::map<std::string, const RunResult*> runs;
  for (const Scenario& s : scenarios)
    for (const RunResult& r : s.runs) runs.emplace(s.name + "/" + r.name, &r);
  return runs;
}

// The steps a comparison reads: every rank's steps.jsonl pooled (rank 0's result.json steps without them), the
// config's warm-up steps left out when the run had more steps than that (as the run's own summary does).
std::vector<StepRecord> measured_steps(const RunResult& r) {
  std::vector<StepRecord> all;
  if (r.rank_steps.empty()) {
    all = r.steps;
  } else {
    for (const auto& [rank, steps] : r.rank_steps) all.insert(all.end(), steps.begin(), steps.end());
  }
  const int warmup = r.warmup_steps();
  std::vector<StepRecord> measured;
  for (const StepRecord& s : all)
    if (s.step > warmup) measured.push_back(s);
  return measured.empty() ? all : measured;
}

template <typename Field>
std::vector<double> column(const std::vector<StepRecord>& steps, Field field) {
  std::vector<double> values;
  for (const StepRecord& s : steps)
    if (std::isfinite(s.*field)) values.push_back(s.*field);
  return values;
}

std::string fmt_value(double v) {
  const double a = std::fabs(v);
  if (a >= 1e6) {
    std::ostringstream s;
    s.precision(4);
    s << v;
    return s.str();
  }
  return fmt_fixed(v, a >= 100 ? 1 : 3);
}

const char* verdict_word(Verdict v) {
  switch (v) {
    case Verdict::better:
      return "better";
    case Verdict::worse:
      return "worse";
    case Verdict::not_measured:
      return "not_measured";
    case Verdict::no_change:
      break;
  }
  return "no_change";
}

}  // namespace

bool ComparedMetric::regressed_by(double pct) const {
  if (verdict == Verdict::not_measured || median_a == 0) return false;
  const double t = pct / 100.0;
  const double low = ci_low.value_or(ratio), high = ci_high.value_or(ratio);
  return higher_is_better ? high < 1.0 / (1.0 + t) : low > 1.0 + t;
}

int ResultsComparison::regressions(double pct) const {
  int n = 0;
  for (const ComparedRun& r : runs)
    n += std::any_of(r.metrics.begin(), r.metrics.end(), [pct](const ComparedMetric& m) { return m.regressed_by(pct); })
             ? 1
             : 0;
  return n;
}

std::pair<double, double> bootstrap_median_ratio_ci(const std::vector<double>& a, const std::vector<double>& b,
                                                    int resamples, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> ratios, ra(a.size()), rb(b.size());
  ratios.reserve(static_cast<size_t>(resamples));
  std::uniform_int_distribution<size_t> pick_a(0, a.size() - 1), pick_b(0, b.size() - 1);
  for (int i = 0; i < resamples; ++i) {
    for (double& x : ra) x = a[pick_a(rng)];
    for (double& x : rb) x = b[pick_b(rng)];
    const double ma = median(ra);
    if (ma != 0) ratios.push_back(median(rb) / ma);
  }
  if (ratios.empty()) return {0.0, 0.0};
  std::sort(ratios.begin(), ratios.end());
  auto at = [&](double q) { return ratios[static_cast<size_t>(q * static_cast<double>(ratios.size() - 1) + 0.5)]; };
  return {at(0.025), at(0.975)};
}

ComparedMetric compare_metric(const std::string& metric, bool higher_is_better, const std::vector<double>& a,
                              const std::vector<double>& b, const CompareOptions& options) {
  ComparedMetric m;
  m.metric = metric;
  m.higher_is_better = higher_is_better;
  m.n_a = a.size();
  m.n_b = b.size();
  if (a.empty() || b.empty()) {
    m.verdict = Verdict::not_measured;
    m.verdict_text = "not measured";
    return m;
  }
  m.median_a = median(a);
  m.median_b = median(b);
  if (m.median_a == 0 && m.median_b == 0) {
    m.verdict = Verdict::not_measured;
    m.verdict_text = "not measured (0 on both sides)";
    return m;
  }
  m.ratio = m.median_a != 0 ? m.median_b / m.median_a : 0.0;
  double low = m.ratio, high = m.ratio;  // one number per side: the ratio itself decides
  if (a.size() > 1 && b.size() > 1) {
    std::tie(low, high) = bootstrap_median_ratio_ci(a, b, options.resamples, options.seed);
    m.ci_low = low;
    m.ci_high = high;
  }
  const double t = options.threshold_pct / 100.0;
  // The same factor both ways: 2x slower and 2x faster are both a 100% change.
  const bool up = m.median_a != 0 && low > 1.0 + t, down = m.median_a != 0 && high < 1.0 / (1.0 + t);
  const bool memory = metric.find("memory") != std::string::npos;
  if (up || down) {
    m.verdict = up == higher_is_better ? Verdict::better : Verdict::worse;
    if (memory)
      m.verdict_text = up ? "more memory" : "less memory";
    else if (metric == "tokens_per_s")
      m.verdict_text = up ? "faster" : "slower";
    else
      m.verdict_text = up ? "slower" : "faster";
  } else {
    m.verdict = Verdict::no_change;
    m.verdict_text = "no significant change";
  }
  return m;
}

ResultsComparison compare_results(const std::vector<std::string>& a, const std::vector<std::string>& b,
                                  const CompareOptions& options) {
  const std::vector<Scenario> sa = discover(a), sb = discover(b);
  std::map<std::string, const RunResult*> ra = runs_by_key(sa), rb = runs_by_key(sb);
  if (ra.empty()) throw AnalysisError("compare: no completed run in " + a.front());
  if (rb.empty()) throw AnalysisError("compare: no completed run in " + b.front());
  ResultsComparison c;
  c.options = options;
  std::vector<std::tuple<std::string, const RunResult*, const RunResult*>> pairs;
  if (ra.size() == 1 && rb.size() == 1) {
    const auto& [ka, run_a] = *ra.begin();
    const auto& [kb, run_b] = *rb.begin();
    pairs.emplace_back(ka == kb ? ka : ka + " vs " + kb, run_a, run_b);
  } else {
    for (const auto& [key, run_a] : ra) {
      const auto it = rb.find(key);
      if (it == rb.end())
        c.only_in_a.push_back(key);
      else
        pairs.emplace_back(key, run_a, it->second);
    }
    for (const auto& [key, run_b] : rb)
      if (!ra.count(key)) c.only_in_b.push_back(key);
  }
  if (pairs.empty())
    throw AnalysisError("compare: no run of " + a.front() + " matches one of " + b.front() +
                        " by <scenario>/<run> name (A has " + ra.begin()->first + ", B has " + rb.begin()->first + ")");
  for (const auto& [key, run_a, run_b] : pairs) {
    ComparedRun rc{key, run_a->dir, run_b->dir, {}};
    const std::vector<StepRecord> steps_a = measured_steps(*run_a), steps_b = measured_steps(*run_b);
    rc.metrics.push_back(compare_metric("step_ms", false, column(steps_a, &StepRecord::step_ms),
                                        column(steps_b, &StepRecord::step_ms), options));
    rc.metrics.push_back(compare_metric("tokens_per_s", true, column(steps_a, &StepRecord::tokens_per_s),
                                        column(steps_b, &StepRecord::tokens_per_s), options));
    rc.metrics.push_back(compare_metric("comm_wait_ms", false, column(steps_a, &StepRecord::comm_wait_ms),
                                        column(steps_b, &StepRecord::comm_wait_ms), options));
    const double peak_a = largest_rank_peak(*run_a), peak_b = largest_rank_peak(*run_b);
    rc.metrics.push_back(compare_metric("peak_memory_bytes", false,
                                        peak_a > 0 ? std::vector<double>{peak_a} : std::vector<double>{},
                                        peak_b > 0 ? std::vector<double>{peak_b} : std::vector<double>{}, options));
    c.runs.push_back(std::move(rc));
  }
  return c;
}

std::string format_comparison(const ResultsComparison& c, const std::string& label_a, const std::string& label_b) {
  std::ostringstream out;
  out << "A = " << label_a << "\nB = " << label_b << "\n"
      << "ratio = median(B) / median(A); 95% CI by bootstrap over steps (" << c.options.resamples
      << " resamples); a change counts when the whole interval is beyond " << fmt_fixed(c.options.threshold_pct, 1)
      << "%\n";
  for (const ComparedRun& r : c.runs) {
    out << "\n" << r.key << "\n";
    char line[256];
    std::snprintf(line, sizeof line, "  %-18s %14s %14s %8s %19s  %s\n", "metric", "median A", "median B", "B/A",
                  "95% CI", "verdict");
    out << line;
    for (const ComparedMetric& m : r.metrics) {
      const std::string ci = m.ci_low ? "[" + fmt_fixed(*m.ci_low, 3) + ", " + fmt_fixed(*m.ci_high, 3) + "]"
                                      : (m.verdict == Verdict::not_measured ? "" : "(one value)");
      std::snprintf(line, sizeof line, "  %-18s %14s %14s %8s %19s  %s\n", m.metric.c_str(),
                    m.n_a ? fmt_value(m.median_a).c_str() : "-", m.n_b ? fmt_value(m.median_b).c_str() : "-",
                    m.median_a != 0 ? fmt_fixed(m.ratio, 3).c_str() : "-", ci.c_str(), m.verdict_text.c_str());
      out << line;
    }
  }
  for (const std::string& k : c.only_in_a) out << "\nonly in A (not compared): " << k;
  for (const std::string& k : c.only_in_b) out << "\nonly in B (not compared): " << k;
  if (!c.only_in_a.empty() || !c.only_in_b.empty()) out << "\n";
  return out.str();
}

nlohmann::json to_json(const ResultsComparison& c) {
  nlohmann::json runs = nlohmann::json::array();
  for (const ComparedRun& r : c.runs) {
    nlohmann::json metrics = nlohmann::json::array();
    for (const ComparedMetric& m : r.metrics) {
      nlohmann::json j = {{"metric", m.metric},
                          {"higher_is_better", m.higher_is_better},
                          {"n_a", m.n_a},
                          {"n_b", m.n_b},
                          {"median_a", m.median_a},
                          {"median_b", m.median_b},
                          {"ratio", m.ratio},
                          {"verdict", verdict_word(m.verdict)},
                          {"verdict_text", m.verdict_text}};
      if (m.ci_low) j["ci95"] = {*m.ci_low, *m.ci_high};
      metrics.push_back(std::move(j));
    }
    runs.push_back({{"run", r.key}, {"dir_a", r.dir_a}, {"dir_b", r.dir_b}, {"metrics", std::move(metrics)}});
  }
  return {{"threshold_pct", c.options.threshold_pct},
          {"resamples", c.options.resamples},
          {"seed", c.options.seed},
          {"runs", std::move(runs)},
          {"only_in_a", c.only_in_a},
          {"only_in_b", c.only_in_b}};
}

}  // namespace dtlab::analysis
