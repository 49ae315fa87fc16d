// report_prediction.cpp: the "Predicted vs measured" part of a scenario section (torch-free).
//
// For the runs whose result.json carries "prediction" (analysis/cost/predict.hpp): twin bars of predicted and
// measured step time, predicted and measured memory side by side stacked by category, scatters of predicted
// against measured step time and peak memory around y = x with the error in each legend entry, and a table of
// errors per run and category. Runs without a prediction are left out; a scenario with none gets no part.
// The pairing of predicted and measured values is analysis/accuracy.hpp's, so the report and
// `dtlab-report --accuracy` never disagree.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include "analysis/accuracy.hpp"
#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// The y = x reference gets more points than LineChart's linespoints limit (30), so it is drawn as a plain line.
constexpr int kDiagonalPoints = 31;

std::string display_name(const RunComparison& c) { return c.label == "projection" ? c.run + " (projection)" : c.run; }

std::string signed_pct(double pct) {
  if (!std::isfinite(pct)) return "n/a";
  if (std::abs(pct) < 0.05) pct = 0.0;  // no "-0.0%"
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", pct);
  return buf;
}

// compare_scenario, with a malformed prediction turned into no data (prediction_part reports the problem).
std::vector<RunComparison> comparisons(const Scenario& sc) {
  try {
    return compare_scenario(sc);
  } catch (const AnalysisError&) {
    return {};
  }
}

std::optional<Chart> step_time_twin_chart(const Scenario& sc) {
  BarChart c;
  c.title = sc.title + ": step time, predicted vs measured";
  c.y_label = "step time (ms, median over timed steps)";
  c.series_names = {"predicted", "measured"};
  c.values.resize(2);
  for (const RunComparison& r : comparisons(sc)) {
    if (!r.step_ms) continue;
    c.categories.push_back(display_name(r));
    c.values[0].push_back(r.step_ms->predicted);
    c.values[1].push_back(r.step_ms->measured);
  }
  if (c.categories.empty()) return std::nullopt;
  return c;
}

// Two stacks per run (predicted, then measured), one colour per category; the stack total is labelled.
std::optional<Chart> memory_pairs_chart(const Scenario& sc) {
  const std::vector<const char*> stacked = {"params", "grads", "optimizer", "buffers", "activations"};
  BarChart c;
  c.title = sc.title + ": memory per rank by category, predicted vs measured";
  c.y_label = "MiB (rank predicted)";
  c.series_names = {"parameters", "gradients", "optimizer state", "buffers", "activations (with logits)"};
  c.stacked = true;
  c.values.resize(stacked.size());
  for (const RunComparison& r : comparisons(sc)) {
    if (r.memory_bytes.empty()) continue;
    for (const bool predicted : {true, false}) {
      c.categories.push_back(display_name(r) + (predicted ? " · predicted" : " · measured"));
      for (std::size_t i = 0; i < stacked.size(); ++i) {
        auto it = r.memory_bytes.find(stacked[i]);
        const double bytes =
            it == r.memory_bytes.end() ? 0.0 : (predicted ? it->second.predicted : it->second.measured);
        c.values[i].push_back(bytes / kMiB);
      }
    }
  }
  if (c.categories.empty()) return std::nullopt;
  return c;
}

// Predicted (x) against measured (y): one single-point series per run, labelled with its error, and y = x.
std::optional<Chart> scatter_chart(const Scenario& sc, const std::string& what, const std::string& unit, double scale,
                                   const std::function<std::optional<PredictedMeasured>(const RunComparison&)>& pick) {
  LineChart c;
  c.title = sc.title + ": " + what + ", measured against predicted";
  c.x_label = "predicted " + what + " (" + unit + ")";
  c.y_label = "measured " + what + " (" + unit + ")";
  // Axes fit the points (not zero-based): the distance from y = x is what matters, and it needs the room.
  c.y_from_zero = false;
  c.one_panel = true;  // every run's point against the one y = x line
  double low = std::numeric_limits<double>::infinity(), high = 0;
  for (const RunComparison& r : comparisons(sc)) {
    const std::optional<PredictedMeasured> pm = pick(r);
    if (!pm) continue;
    Series s;
    s.name = display_name(r) + " (" + signed_pct(pm->error_pct()) + ")";
    s.x = {pm->predicted / scale};
    s.y = {pm->measured / scale};
    low = std::min({low, s.x[0], s.y[0]});
    high = std::max({high, s.x[0], s.y[0]});
    c.series.push_back(std::move(s));
  }
  if (c.series.empty()) return std::nullopt;
  Series diagonal;
  diagonal.name = "y = x (exact)";
  diagonal.in_every_panel = true;  // a reference: grey dotted, as every chart draws one
  for (int i = 0; i < kDiagonalPoints; ++i) {
    const double v = 0.9 * low + (1.1 * high - 0.9 * low) * i / (kDiagonalPoints - 1);
    diagonal.x.push_back(v);
    diagonal.y.push_back(v);
  }
  c.series.insert(c.series.begin(), std::move(diagonal));  // first, so the line never hides an exact point
  return c;
}

std::optional<Chart> step_time_scatter(const Scenario& sc) {
  return scatter_chart(sc, "step time", "ms", 1.0, [](const RunComparison& r) { return r.step_ms; });
}

std::optional<Chart> peak_memory_scatter(const Scenario& sc) {
  return scatter_chart(sc, "peak memory", "MiB", kMiB, [](const RunComparison& r) -> std::optional<PredictedMeasured> {
    auto it = r.memory_bytes.find("peak");
    if (it == r.memory_bytes.end()) return std::nullopt;
    return it->second;
  });
}

// "<predicted> / <measured> (error)", or "exact" in place of the error when the bytes agree to the byte.
std::string cell(const std::optional<PredictedMeasured>& pm, double scale, int decimals) {
  if (!pm) return "<td class=\"num\">–</td>";
  const std::string error = pm->exact() ? "exact" : signed_pct(pm->error_pct());
  return "<td class=\"num\">" + html_escape(fmt_fixed(pm->predicted / scale, decimals)) + " / " +
         html_escape(fmt_fixed(pm->measured / scale, decimals)) + " <span class=\"range\">(" + html_escape(error) +
         ")</span></td>";
}

std::string errors_table(const std::vector<RunComparison>& runs) {
  std::ostringstream h;
  h << "<div class=\"table-wrap\"><table class=\"runs\">\n<thead><tr><th>run</th><th>kind</th>"
    << "<th class=\"num\">step ms</th>";
  for (const char* category : kMemoryCategories) h << "<th class=\"num\">" << category << " MiB</th>";
  h << "</tr></thead>\n<tbody>\n";
  for (const RunComparison& r : runs) {
    h << "<tr><td>" << html_escape(r.run) << "</td><td>" << html_escape(r.label) << "</td>" << cell(r.step_ms, 1.0, 1);
    for (const char* category : kMemoryCategories) {
      auto it = r.memory_bytes.find(category);
      h << cell(it == r.memory_bytes.end() ? std::nullopt : std::optional<PredictedMeasured>(it->second), kMiB, 2);
    }
    h << "</tr>\n";
  }
  h << "</tbody></table></div>\n"
    << "<p class=\"muted\" style=\"font-size:12.5px;margin:4px 0 0\">Each cell: predicted / measured (error = "
       "(predicted &minus; measured) / measured). Memory is the predicted rank's: parameters, gradients and "
       "optimizer state kept, transient buffers at the peak, activations as the counting allocator's peak minus "
       "the rest (the prediction's logits are added to its activations for the comparison), and the peak. Targets: "
       "kept state exact, peak within "
    << kPeakMemoryTargetPct << "%, step time within " << kStepTimeTargetPct
    << "% (median over the sharding study); <code>dtlab-report --accuracy</code> prints them.</p>\n";
  return h.str();
}

}  // namespace

std::string prediction_part(SectionContext& ctx) {
  std::vector<RunComparison> runs;
  try {
    runs = compare_scenario(ctx.scenario);
  } catch (const AnalysisError& e) {
    ctx.log << "error: " << e.what() << "\n";
    ctx.problems.push_back(e.what());
    return "<p class=\"problem\">Predicted vs measured not shown: " + html_escape(e.what()) + "</p>\n";
  }
  if (runs.empty()) return "";

  std::set<std::string> profiles;
  bool any_projection = false;
  std::set<std::string> notes;
  for (const RunComparison& r : runs) {
    profiles.insert(r.profile.empty() ? "none (memory and bytes only)"
                                      : r.profile + (r.profile_kind.empty() ? "" : ", " + r.profile_kind));
    any_projection = any_projection || r.label == "projection";
    notes.insert(r.notes.begin(), r.notes.end());
  }
  std::string profile_list;
  for (const std::string& p : profiles) profile_list += (profile_list.empty() ? "" : "; ") + p;

  std::ostringstream h;
  h << "<h3>Predicted vs measured</h3>\n<p>The cost models (analysis/cost: memory by category, communication with "
       "calibrated &alpha;/&beta;/&gamma;, compute at the calibrated FLOP rate) predicted each run before it ran; "
    << runs.size() << " of " << ctx.scenario.runs.size()
    << " runs carry a prediction. Machine profile: " << html_escape(profile_list) << ".</p>\n";
  if (any_projection) {
    h << "<p class=\"callout\"><strong>Projection.</strong> Runs marked <em>(projection)</em> were predicted from a "
         "spec-sheet profile or beyond what the profile measured (a larger world, a shape this machine cannot "
         "train): their error says how far the model extrapolates, not how well it was calibrated.</p>\n";
  }
  h << chart_part("pred_step_time", "Median step time per run: the model's prediction next to the measurement.",
                  step_time_twin_chart)(ctx);
  h << chart_part("pred_memory",
                  "Per run, the predicted stack next to the measured one, by category (the top label is the sum; "
                  "the measured sum is the counting allocator's peak).",
                  memory_pairs_chart)(ctx);
  h << chart_part("pred_scatter_step",
                  "Measured against predicted step time; points on the line y = x are exact, above it the model is "
                  "optimistic. The legend gives each run's error.",
                  step_time_scatter)(ctx);
  h << chart_part("pred_scatter_peak",
                  "Measured against predicted peak memory of the predicted rank; the legend gives each run's error.",
                  peak_memory_scatter)(ctx);
  h << errors_table(runs);
  if (!notes.empty()) {
    h << "<details><summary>Model notes (assumptions and known weak spots)</summary>\n<ul class=\"notes\">\n";
    for (const std::string& n : notes) h << "  <li>" << html_escape(n) << "</li>\n";
    h << "</ul></details>\n";
  }
  return h.str();
}

}  // namespace dtlab::analysis
