// report_crossover.cpp: the "Crossover" part of a scenario section — step time and exposed communication against
// the inter-node link rate, measured points next to the model's predictions, and the rate below which
// communication stops hiding: exposed communication above 10% of the step (torch-free).
//
// Shown for scenarios whose runs were swept over link rates (scenarios/studies/*.yaml `sweep`: runs named
// <series>@<rate> on an emulated cluster, result.json context.inter_link_bps). A series is the run name before '@'.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include "analysis/crossover.hpp"
#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

std::string rate_label(double mbps) {
  return mbps >= 1000 ? fmt_fixed(mbps / 1000, mbps >= 10000 ? 0 : 1) + " Gbit/s" : fmt_fixed(mbps, 0) + " Mbit/s";
}

// The chart of one quantity per series against the rate: measured, and predicted where the runs carry it.
LineChart rate_chart(const std::map<std::string, std::vector<CrossoverPoint>>& series, const std::string& title,
                     const std::string& y_label, double CrossoverPoint::*measured,
                     std::optional<double> CrossoverPoint::*predicted) {
  LineChart c;
  c.title = title;
  c.x_label = "inter-node link (Mbit/s, log scale)";
  c.y_label = y_label;
  c.y_from_zero = true;
  c.log_x = true;
  for (const auto& [name, points] : series) {
    Series m{name, {}, {}}, p{name + " (predicted)", {}, {}};
    for (const CrossoverPoint& pt : points) {
      m.x.push_back(pt.rate_mbps);
      m.y.push_back(pt.*measured);
      if (pt.*predicted) {
        p.x.push_back(pt.rate_mbps);
        p.y.push_back(*(pt.*predicted));
      }
    }
    c.series.push_back(std::move(m));
    if (!p.x.empty()) c.series.push_back(std::move(p));
  }
  return c;
}

}  // namespace

std::map<std::string, std::vector<CrossoverPoint>> crossover_series(const Scenario& sc) {
  std::map<std::string, std::vector<CrossoverPoint>> series;
  for (const RunResult& r : sc.runs) {
    if (!r.inter_link_bps || *r.inter_link_bps <= 0 || r.step_ms_median <= 0) continue;
    CrossoverPoint p;
    p.rate_mbps = *r.inter_link_bps / 1e6;
    p.step_ms = r.step_ms_median;
    p.rank0_wait_ms = r.comm_wait_ms_median.value_or(0);
    p.least_wait = r.comm_wait_least_ms_median.has_value();
    p.exposed_ms = r.comm_wait_least_ms_median.value_or(p.rank0_wait_ms);
    p.exposed_pct = 100.0 * p.exposed_ms / p.step_ms;
    p.predicted_step_ms = json_number_at(r.raw, {"prediction", "step_ms"});
    p.predicted_exposed_ms = json_number_at(r.raw, {"prediction", "comm", "exposed_ms"});
    const std::optional<double> lost_in_node = json_number_at(r.raw, {"prediction", "comm", "overlap_lost_in_node_ms"});
    if (p.predicted_exposed_ms && lost_in_node) *p.predicted_exposed_ms -= *lost_in_node;  // no rank waits for it
    p.predicted_comm_ms = json_number_at(r.raw, {"prediction", "comm", "time_ms"});
    if (p.predicted_step_ms && p.predicted_exposed_ms && *p.predicted_step_ms > 0)
      p.predicted_exposed_pct = 100.0 * *p.predicted_exposed_ms / *p.predicted_step_ms;
    std::vector<double> step_pcts;
    for (const StepRecord& step : r.steps)
      if (std::isfinite(step.comm_wait_least_ms) && step.step_ms > 0)
        step_pcts.push_back(100.0 * step.comm_wait_least_ms / step.step_ms);
    if (p.least_wait && !step_pcts.empty()) {
      p.exposed_pct_low = *std::min_element(step_pcts.begin(), step_pcts.end());
      p.exposed_pct_high = *std::max_element(step_pcts.begin(), step_pcts.end());
    }
    series[r.name.substr(0, r.name.find('@'))].push_back(p);
  }
  for (auto it = series.begin(); it != series.end();) {  // a series needs two rates to be a curve
    std::sort(it->second.begin(), it->second.end(),
              [](const CrossoverPoint& a, const CrossoverPoint& b) { return a.rate_mbps < b.rate_mbps; });
    it = it->second.size() < 2 ? series.erase(it) : std::next(it);
  }
  return series;
}

Crossing crossing_rate(const std::vector<std::pair<double, double>>& rate_and_pct, double threshold_pct) {
  Crossing c;
  if (rate_and_pct.empty()) return c;
  if (rate_and_pct.front().second <= threshold_pct) {
    c.kind = Crossing::below_range;  // hidden already at the slowest rate
    c.rate_mbps = rate_and_pct.front().first;
    return c;
  }
  for (size_t i = 1; i < rate_and_pct.size(); ++i) {
    const auto [r0, p0] = rate_and_pct[i - 1];
    const auto [r1, p1] = rate_and_pct[i];
    if (p0 > threshold_pct && p1 <= threshold_pct) {
      // Linear in log(rate) between the two measured rates.
      const double t = (p0 - threshold_pct) / (p0 - p1);
      c.kind = Crossing::within;
      c.rate_mbps = std::exp(std::log(r0) + t * (std::log(r1) - std::log(r0)));
      return c;
    }
  }
  c.kind = Crossing::above_range;  // still exposed at the fastest rate
  c.rate_mbps = rate_and_pct.back().first;
  return c;
}

SeriesCrossings series_crossings(const std::vector<CrossoverPoint>& points) {
  std::vector<std::pair<double, double>> measured, predicted, lowest, highest;
  for (const CrossoverPoint& p : points) {
    measured.emplace_back(p.rate_mbps, p.exposed_pct);
    if (p.predicted_exposed_pct) predicted.emplace_back(p.rate_mbps, *p.predicted_exposed_pct);
    if (p.exposed_pct_low && p.exposed_pct_high) {
      lowest.emplace_back(p.rate_mbps, *p.exposed_pct_low);
      highest.emplace_back(p.rate_mbps, *p.exposed_pct_high);
    }
  }
  SeriesCrossings c;
  c.measured = crossing_rate(measured, kCrossoverThresholdPct);
  if (predicted.size() == points.size()) c.predicted = crossing_rate(predicted, kCrossoverThresholdPct);
  if (lowest.size() == points.size())
    c.measured_range = {crossing_rate(lowest, kCrossoverThresholdPct), crossing_rate(highest, kCrossoverThresholdPct)};
  return c;
}

std::string describe_crossing_range(const std::pair<Crossing, Crossing>& range) {
  const auto end = [](const Crossing& c) {
    switch (c.kind) {
      case Crossing::below_range:
        return "under " + rate_label(c.rate_mbps);
      case Crossing::above_range:
        return "over " + rate_label(c.rate_mbps);
      case Crossing::within:
        return rate_label(c.rate_mbps);
      case Crossing::none:
        break;
    }
    return std::string("–");
  };
  return end(range.first) + " – " + end(range.second);
}

std::string crossover_part(SectionContext& ctx) {
  const auto series = crossover_series(ctx.scenario);
  if (series.empty()) return "";
  std::ostringstream h;
  h << "<h3>Crossover: where communication stops hiding</h3>\n"
    << "<p class=\"desc\">The same runs at every inter-node link rate of an emulated cluster (2 nodes joined by a "
       "shaped link; docs/launch.md). On a slow link every strategy waits for its collectives; as the link gets "
       "faster the wait shrinks until compute hides it. The table gives, per strategy, the link rate above which "
       "exposed communication stays under 10% of the step, measured and as the two-level cost model predicts it (a "
       "line through the measured rates, linear in log rate). Measured exposed communication is, per step, the "
       "least blocking wait of any rank: the rank that reaches the collectives last waits for the communication "
       "alone, while the others also wait for it to get there.</p>\n";
  const auto chart = [&](const std::string& kind, const std::string& caption, Chart c) {
    return chart_part(kind, caption, [c](const Scenario&) { return std::optional<Chart>(c); })(ctx);
  };
  h << chart("crossover_step",
             "Median step time against the inter-node link rate; solid: measured, '(predicted)': the cost model's "
             "prediction for the same run.",
             rate_chart(series, "Step time vs link rate", "step time (ms)", &CrossoverPoint::step_ms,
                        &CrossoverPoint::predicted_step_ms));
  LineChart exposed = rate_chart(series, "Exposed communication vs link rate", "exposed communication (% of step)",
                                 &CrossoverPoint::exposed_pct, &CrossoverPoint::predicted_exposed_pct);
  double slowest = series.begin()->second.front().rate_mbps, fastest = series.begin()->second.back().rate_mbps;
  for (const auto& [name, points] : series) {
    slowest = std::min(slowest, points.front().rate_mbps);
    fastest = std::max(fastest, points.back().rate_mbps);
  }
  Series threshold{"10% of the step", {slowest, fastest}, {kCrossoverThresholdPct, kCrossoverThresholdPct}};
  threshold.in_every_panel = true;
  exposed.series.push_back(std::move(threshold));
  h << chart("crossover_exposed",
             "Exposed communication as a share of the step, measured and predicted; a strategy crosses where its "
             "curve meets the 10% line.",
             exposed);
  const auto describe = [](const Crossing& c) {
    switch (c.kind) {
      case Crossing::within:
        return "at " + rate_label(c.rate_mbps);
      case Crossing::below_range:
        return "below " + rate_label(c.rate_mbps) + " (hidden at every rate)";
      case Crossing::above_range:
        return "above " + rate_label(c.rate_mbps) + " (exposed at every rate)";
      case Crossing::none:
        break;
    }
    return std::string("–");
  };
  h << "<div class=\"table-wrap\"><table class=\"runs\">\n<thead><tr><th>strategy</th><th>rates</th>"
       "<th class=\"num\">exposed at the slowest</th><th class=\"num\">exposed at the fastest</th>"
       "<th>under 10% from (measured)</th><th>under 10% from (predicted)</th></tr></thead>\n<tbody>\n";
  bool any_range = false;
  for (const auto& [name, points] : series) {
    const SeriesCrossings crossings = series_crossings(points);
    std::string measured = describe(crossings.measured);
    if (crossings.measured_range) {
      measured += " (steps: " + describe_crossing_range(*crossings.measured_range) + ")";
      any_range = true;
    }
    h << "<tr><td>" << html_escape(name) << "</td><td>" << html_escape(rate_label(points.front().rate_mbps)) << " – "
      << html_escape(rate_label(points.back().rate_mbps)) << "</td><td class=\"num\">"
      << html_escape(fmt_fixed(points.front().exposed_pct, 0)) << "%</td><td class=\"num\">"
      << html_escape(fmt_fixed(points.back().exposed_pct, 0)) << "%</td><td>" << html_escape(measured) << "</td><td>"
      << html_escape(crossings.predicted.kind != Crossing::none
                         ? describe(crossings.predicted)
                         : std::string("– (no prediction: run without a profile)"))
      << "</td></tr>\n";
  }
  h << "</tbody></table></div>\n";
  if (any_range)
    h << "<p>\"steps\": where the measured crossing lies if each rate's share is taken from its least exposed "
         "measured step, and from its most exposed one. At each rate the median step's share lies between those two "
         "with probability 1 − 2<sup>1−n</sup> for n measured steps (94% at 5), whatever the steps' distribution: "
         "a predicted rate inside the range is as close as these runs can tell.</p>\n";
  // What the other ranks waited for on top: at the fastest rate, rank 0's wait over the least wait of any rank.
  double least_gap = 0, most_gap = 0;
  bool any = false;
  for (const auto& [name, points] : series)
    if (points.back().least_wait) {
      const double gap = points.back().rank0_wait_ms - points.back().exposed_ms;
      least_gap = any ? std::min(least_gap, gap) : gap;
      most_gap = any ? std::max(most_gap, gap) : gap;
      any = true;
    }
  if (any)
    h << "<p>At the fastest rate rank 0 waited " << html_escape(fmt_fixed(least_gap, 0)) << "–"
      << html_escape(fmt_fixed(most_gap, 0))
      << " ms per step longer than the rank that waited least: time spent waiting for a peer to reach the "
         "collective, not for the link. Where the emulated nodes' ranks share this machine's cores, that peer is "
         "often not running; on a cluster with a core (or a GPU) per rank, only a straggler causes it.</p>\n";
  return h.str();
}

}  // namespace dtlab::analysis
