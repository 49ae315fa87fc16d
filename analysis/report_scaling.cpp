// report_scaling.cpp: the "Memory per rank as the job grows" part of a scenario section — per strategy, memory per
// rank by category at each world size the study ran, measured next to the memory model, the model's projection to
// 1024 ranks, and step times only where each rank had a core of its own; the takeaways are computed from these runs
// (torch-free).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "analysis/scaling.hpp"

namespace dtlab::analysis {
namespace {

double to_mib(double bytes) { return bytes / (1024.0 * 1024.0); }
std::string mib(double bytes) { return fmt_fixed(to_mib(bytes), to_mib(bytes) < 10 ? 1 : 0) + " MiB"; }

double at(const std::map<std::string, double>& bytes, const std::string& key) {
  const auto it = bytes.find(key);
  return it == bytes.end() ? std::nan("") : it->second;
}

// Peak (or state) memory per rank against world size on a log axis: measured points where the study ran, the
// model's line out to 1024 ranks.
LineChart memory_chart(const ScalingStudy& study, bool state_only) {
  LineChart c;
  c.title = state_only ? "Training state per rank vs world size" : "Peak memory per rank vs world size";
  c.x_label = "ranks (world size)";
  c.y_label = state_only ? "params + grads + optimizer + buffers per rank (MiB)" : "peak tensor memory per rank (MiB)";
  c.y_from_zero = true;
  c.log_x = true;
  int colour = 0;
  for (const ScalingSeries& s : study.series) {
    Series measured{s.name, {}, {}}, projected{s.name + " (model)", {}, {}};
    measured.colour = projected.colour = ++colour;  // a strategy's points and its model line share a colour
    projected.dashed = true;
    for (const ScalingPoint& p : s.points) {
      measured.x.push_back(p.world);
      measured.y.push_back(to_mib(state_only ? ScalingSeries::state(p.measured) : at(p.measured, "peak")));
    }
    for (const ProjectedPoint& p : s.projected) {
      projected.x.push_back(p.world);
      projected.y.push_back(to_mib(state_only ? ScalingSeries::state(p.bytes) : at(p.bytes, "peak")));
    }
    c.series.push_back(std::move(measured));
    if (!projected.x.empty()) c.series.push_back(std::move(projected));
  }
  return c;
}

// Step time against world size: a series per strategy through the points where each rank had a core, and one grey
// series for every point where ranks shared cores (labelled: those times say nothing about scaling).
std::optional<LineChart> time_chart(const ScalingStudy& study) {
  LineChart c;
  c.title = "Step time vs world size (the same per-rank batch)";
  c.x_label = "ranks (world size)";
  c.y_label = "median step time (ms)";
  c.y_from_zero = true;
  c.log_x = true;
  Series shared{"ranks sharing cores (not a scaling result)", {}, {}};
  shared.muted = true;
  shared.points_only = true;
  bool any = false;
  for (const ScalingSeries& s : study.series) {
    Series own{s.name, {}, {}};
    for (const ScalingPoint& p : s.points) {
      if (p.step_ms <= 0) continue;
      Series& into = p.oversubscribed.value_or(false) ? shared : own;
      into.x.push_back(p.world);
      into.y.push_back(p.step_ms);
    }
    any = any || !own.x.empty();
    c.series.push_back(std::move(own));
  }
  if (!any) return std::nullopt;
  if (!shared.x.empty()) c.series.push_back(std::move(shared));
  return c;
}

// The takeaways, from this study's numbers: how each series' state and peak changed from its smallest to its
// largest world, where the model says sharding stops paying, and how exact the state model was.
std::string takeaways(const ScalingStudy& study) {
  std::ostringstream h;
  h << "<ul class=\"takeaways\">\n";
  for (const ScalingSeries& s : study.series) {
    const ScalingPoint& first = s.points.front();
    const ScalingPoint& last = s.points.back();
    if (first.world == last.world) continue;
    const double state_first = ScalingSeries::state(first.measured), state_last = ScalingSeries::state(last.measured);
    const double ratio = state_last > 0 ? state_first / state_last : 0;
    h << "  <li><strong>" << html_escape(s.name) << "</strong>: state per rank " << mib(state_first) << " at "
      << first.world << " rank" << (first.world == 1 ? "" : "s") << ", " << mib(state_last) << " at " << last.world
      << " (";
    if (ratio < 1.05)
      h << "it does not fall as ranks are added";
    else
      h << "÷" << fmt_fixed(ratio, 1) << " for " << last.world / first.world << "× the ranks";
    h << "); peak " << mib(at(first.measured, "peak")) << " → " << mib(at(last.measured, "peak")) << ".";
    if (!s.projected.empty()) {
      const ProjectedPoint& far = s.projected.back();
      const double peak = at(far.bytes, "peak");
      const double activations = at(far.bytes, "activations") + at(far.bytes, "logits");
      h << " The model at " << far.world << " ranks: peak " << mib(peak) << ", of which "
        << fmt_fixed(100.0 * ScalingSeries::state(far.bytes) / peak, 0) << "% state and "
        << fmt_fixed(100.0 * activations / peak, 0) << "% activations.";
    }
    h << "</li>\n";
  }
  // Where the series part, by the model: the series with the largest and the smallest peak at the largest projected
  // world, and the world size from which the smaller needs half of the larger's peak or less.
  const ScalingSeries* most = nullptr;
  const ScalingSeries* least = nullptr;
  for (const ScalingSeries& s : study.series) {
    if (s.projected.empty()) continue;
    const double peak = at(s.projected.back().bytes, "peak");
    if (!most || peak > at(most->projected.back().bytes, "peak")) most = &s;
    if (!least || peak < at(least->projected.back().bytes, "peak")) least = &s;
  }
  if (most && least && most != least) {
    for (const ProjectedPoint& small : least->projected) {
      const auto big = std::find_if(most->projected.begin(), most->projected.end(),
                                    [&](const ProjectedPoint& p) { return p.world == small.world; });
      if (big == most->projected.end() || at(small.bytes, "peak") * 2 > at(big->bytes, "peak")) continue;
      h << "  <li>By the model, from " << small.world << " ranks on <strong>" << html_escape(least->name)
        << "</strong> needs half of <strong>" << html_escape(most->name) << "</strong>'s peak or less ("
        << mib(at(small.bytes, "peak")) << " vs " << mib(at(big->bytes, "peak")) << ")";
      const ProjectedPoint& far = least->projected.back();
      const double state_share = ScalingSeries::state(far.bytes) / at(far.bytes, "peak");
      h << "; at " << far.world << " ranks " << fmt_fixed(100.0 * (1 - state_share), 0) << "% of its peak ("
        << mib(at(far.bytes, "peak")) << ") is what sharding cannot divide"
        << (state_share < 0.5 ? " — one micro-batch's activations — so more ranks stop paying" : "") << ".</li>\n";
      break;
    }
  }
  if (study.state_compared > 0)
    h << "  <li>The memory model's state (parameters, gradients, optimizer state, buffers) matched the allocator's "
         "count exactly in "
      << study.state_exact << " of " << study.state_compared << " comparisons"
      << (study.state_exact == study.state_compared ? "." : "; the table shows where it did not.") << "</li>\n";
  h << "</ul>\n";
  return h.str();
}

// Per series and world: each category measured (and predicted, when it differs).
std::string category_table(const ScalingStudy& study) {
  static const std::vector<std::pair<std::string, std::string>> columns = {
      {"params", "parameters"}, {"grads", "gradients"},         {"optimizer", "optimizer"},
      {"buffers", "buffers"},   {"activations", "activations"}, {"peak", "peak (largest rank)"}};
  std::ostringstream h;
  h << "<div class=\"table-wrap\"><table class=\"runs scaling\">\n<thead><tr><th>series</th><th>ranks</th>";
  for (const auto& column : columns) h << "<th>" << column.second << " MiB</th>";
  h << "<th>step ms</th></tr></thead>\n<tbody>\n";
  for (const ScalingSeries& s : study.series)
    for (const ScalingPoint& p : s.points) {
      h << "<tr><td>" << html_escape(s.name) << "</td><td class=\"num\">" << p.world << "</td>";
      for (const auto& column : columns) {
        const double measured = at(p.measured, column.first), predicted = at(p.predicted, column.first);
        h << "<td class=\"num\">" << (std::isnan(measured) ? "–" : fmt_fixed(to_mib(measured), 2));
        if (!std::isnan(predicted) && !std::isnan(measured) && std::fabs(predicted - measured) >= 0.5)
          h << " <span class=\"range\">(model " << fmt_fixed(to_mib(predicted), 2) << ")</span>";
        h << "</td>";
      }
      const bool shared = p.oversubscribed.value_or(false);
      h << "<td class=\"num" << (shared ? " muted" : "") << "\">" << (p.step_ms > 0 ? fmt_fixed(p.step_ms, 0) : "–")
        << (shared ? " <span class=\"range\">(" + std::to_string(p.world) + " ranks on " + std::to_string(p.cores) +
                         " cores)</span>"
                   : "")
        << "</td></tr>\n";
    }
  h << "</tbody></table></div>\n";
  return h.str();
}

}  // namespace

std::string memory_scaling_part(SectionContext& ctx) {
  const std::optional<ScalingStudy> study = scaling_study(ctx.scenario);
  if (!study) return "";
  std::ostringstream h;
  h << "<h3>Memory per rank as the job grows</h3>\n"
    << "<p class=\"desc\">The same model and per-rank batch at every world size the study ran. Points are measured "
       "(the lab's allocator counts every tensor byte by category); dashed lines are the memory model "
       "(docs/cost-models.md), extended to 1024 ranks. What to look for: which strategies' lines fall with the "
       "ranks and which stay flat, and the floor every sharded line approaches — what one rank holds that "
       "sharding does not divide.</p>\n"
    << takeaways(*study);
  h << chart_part("scaling_state",
                  "Training state per rank (parameters, gradients, optimizer state, buffers) against world size: "
                  "measured points and the model's line.",
                  [chart = memory_chart(*study, true)](const Scenario&) { return std::optional<Chart>(chart); })(ctx);
  h << chart_part("scaling_peak",
                  "Peak tensor memory per rank (the largest over the ranks) against world size: measured points and "
                  "the model's line to 1024 ranks.",
                  [chart = memory_chart(*study, false)](const Scenario&) { return std::optional<Chart>(chart); })(ctx);
  if (const std::optional<LineChart> times = time_chart(*study))
    h << chart_part("scaling_time",
                    "Median step time against world size. Only worlds whose ranks each had a core are a scaling "
                    "result; the grey points are worlds whose ranks took turns on the machine's cores.",
                    [chart = *times](const Scenario&) { return std::optional<Chart>(chart); })(ctx);
  h << category_table(*study);
  return h.str();
}

}  // namespace dtlab::analysis
