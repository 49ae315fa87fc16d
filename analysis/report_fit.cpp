// report_fit.cpp: the "What fits" part of a scenario section — a ladder of model sizes under a per-rank memory cap
// (memory.limit): per strategy, which sizes trained and which ran out of memory, the peak against the cap, and the
// memory model's prediction of both; the takeaways are computed from these runs (torch-free).
#include <algorithm>
#include <set>
#include <sstream>

#include "analysis/fit_ladder.hpp"
#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

std::string mib(double bytes) { return fmt_fixed(bytes / (1024.0 * 1024.0), 0) + " MiB"; }
std::string millions(double params) { return fmt_fixed(params / 1e6, params < 1e7 ? 1 : 0) + " M"; }

// Peak memory per rank against model size: measured where the run fit, marked where it ran out of memory, predicted
// for every run, and the cap.
LineChart peak_chart(const FitLadder& ladder) {
  LineChart c;
  c.title = "Peak memory per rank vs model size";
  c.x_label = "parameters (millions)";
  c.y_label = "peak device-side tensor memory per rank (MiB)";
  c.y_from_zero = true;
  double smallest = 1e300, largest = 0;
  for (const FitSeries& s : ladder.series) {
    Series measured{s.name, {}, {}}, predicted{s.name + " (predicted)", {}, {}};
    // Where a run stopped: what it held plus what it asked for, in its series' colour (plot.cpp pairs the names).
    Series stopped{s.name + " (out of memory)", {}, {}};
    stopped.points_only = true;
    stopped.point_type = 2;     // a cross
    stopped.in_legend = false;  // the caption says what a cross is
    for (const FitCell& cell : s.cells) {
      smallest = std::min(smallest, cell.params / 1e6);
      largest = std::max(largest, cell.params / 1e6);
      if (cell.fits) {
        measured.x.push_back(cell.params / 1e6);
        measured.y.push_back(cell.peak_bytes / (1024.0 * 1024.0));
      } else {
        stopped.x.push_back(cell.params / 1e6);
        stopped.y.push_back(cell.peak_bytes / (1024.0 * 1024.0));
      }
      if (cell.predicted_peak_bytes) {
        predicted.x.push_back(cell.params / 1e6);
        predicted.y.push_back(*cell.predicted_peak_bytes / (1024.0 * 1024.0));
      }
    }
    if (!measured.x.empty()) c.series.push_back(std::move(measured));
    if (!predicted.x.empty()) c.series.push_back(std::move(predicted));
    if (!stopped.x.empty()) c.series.push_back(std::move(stopped));
  }
  const double cap = ladder.limit_bytes / (1024.0 * 1024.0);
  Series cap_line{"cap (memory.limit)", {smallest, largest}, {cap, cap}};
  cap_line.in_every_panel = true;
  c.series.push_back(std::move(cap_line));
  return c;
}

std::string cell_text(const FitCell& c) {
  std::string text = c.fits
                         ? "fits, " + mib(c.peak_bytes)
                         : "out of memory " +
                               (c.oom_step == 0 ? std::string("in setup") : "at step " + std::to_string(c.oom_step)) +
                               " (" + c.oom_category + ")";
  if (c.predicted_peak_bytes)
    text += "; predicted " + mib(*c.predicted_peak_bytes) + (*c.predicted_fits() == c.fits ? "" : " — model wrong");
  return text;
}

// The sentences a reader should take away, from this ladder: how much larger a model each series trains than the
// one that trains the smallest, and the steps where some series fit and others ran out.
std::string takeaways(const FitLadder& ladder) {
  std::ostringstream h;
  h << "<ul class=\"takeaways\">\n";
  const FitSeries* least = nullptr;
  const FitSeries* most = nullptr;
  for (const FitSeries& s : ladder.series) {
    const double largest = s.largest_fitting_params().value_or(0);
    if (!least || largest < least->largest_fitting_params().value_or(0)) least = &s;
    if (!most || largest > most->largest_fitting_params().value_or(0)) most = &s;
  }
  if (least && most && most->largest_fitting_params() && least != most) {
    const double small = least->largest_fitting_params().value_or(0), big = *most->largest_fitting_params();
    h << "  <li>Under " << mib(ladder.limit_bytes) << " per rank, <strong>" << html_escape(most->name)
      << "</strong> trained models up to " << millions(big) << " parameters; <strong>" << html_escape(least->name)
      << "</strong> "
      << (small > 0 ? "only up to " + millions(small) + " (" + fmt_fixed(big / small, 1) + "× smaller)"
                    : std::string("none of the ladder's sizes"))
      << ".</li>\n";
  } else {
    h << "  <li>Every series fit the same sizes under " << mib(ladder.limit_bytes)
      << ": the ladder does not reach the sizes where the strategies part (extend it, or lower the cap).</li>\n";
  }
  // Sizes where the series part: who fit, who did not.
  std::set<std::string> steps_seen;
  for (const FitSeries& s : ladder.series)
    for (const FitCell& c : s.cells) {
      if (!steps_seen.insert(c.step).second) continue;
      std::vector<std::string> fit, out;
      for (const FitSeries& other : ladder.series)
        for (const FitCell& o : other.cells)
          if (o.step == c.step) (o.fits ? fit : out).push_back(other.name);
      if (fit.empty() || out.empty()) continue;
      const auto join = [](const std::vector<std::string>& names) {
        std::string text;
        for (const std::string& n : names) text += (text.empty() ? "" : ", ") + n;
        return text;
      };
      h << "  <li>At " << html_escape(c.step) << " (" << millions(c.params) << " parameters): fit — "
        << html_escape(join(fit)) << "; out of memory — " << html_escape(join(out)) << ".</li>\n";
    }
  int right = 0, predicted = 0;
  for (const FitSeries& s : ladder.series)
    for (const FitCell& c : s.cells)
      if (const auto p = c.predicted_fits()) {
        ++predicted;
        right += *p == c.fits ? 1 : 0;
      }
  if (predicted > 0)
    h << "  <li>The memory model (docs/cost-models.md) called fit or out-of-memory right for " << right << " of "
      << predicted << " runs" << (right == predicted ? "." : "; the table marks where it was wrong.") << "</li>\n";
  h << "</ul>\n";
  return h.str();
}

}  // namespace

std::string fit_part(SectionContext& ctx) {
  const std::optional<FitLadder> ladder = fit_ladder(ctx.scenario);
  if (!ladder) return "";
  std::ostringstream h;
  h << "<h3>What fits under a memory cap</h3>\n"
    << "<p class=\"desc\">Every rank has " << mib(ladder->limit_bytes)
    << " (<code>memory.limit</code>): an allocation past it stops the run with out-of-memory, as a GPU's memory "
       "would (docs/instrumentation.md); offload's host buffers are outside it, as they are outside a GPU's. The same "
       "ladder of model sizes runs under each strategy; a strategy that shards more of its state per rank trains a "
       "larger model before it runs out.</p>\n"
    << takeaways(*ladder);
  h << chart_part("fit_peak",
                  "Peak device-side tensor memory per rank (offload's host buffers apart) against model size: measured "
                  "for the runs that fit (solid), a cross in the same colour where a run ran out of memory (what it "
                  "held plus what it asked for), the memory model's prediction for every run (dashed), and the cap.",
                  [chart = peak_chart(*ladder)](const Scenario&) { return std::optional<Chart>(chart); })(ctx);
  std::set<std::string> step_set;
  std::vector<std::pair<double, std::string>> steps;  // by size
  for (const FitSeries& s : ladder->series)
    for (const FitCell& c : s.cells)
      if (step_set.insert(c.step).second) steps.emplace_back(c.params, c.step);
  std::sort(steps.begin(), steps.end());
  h << "<div class=\"table-wrap\"><table class=\"runs fit\">\n<thead><tr><th>series</th>";
  for (const auto& [params, step] : steps) h << "<th>" << html_escape(step) << " (" << millions(params) << ")</th>";
  h << "<th>largest that fit</th><th>largest predicted to fit</th></tr></thead>\n<tbody>\n";
  for (const FitSeries& s : ladder->series) {
    h << "<tr><td>" << html_escape(s.name) << "</td>";
    for (const auto& size : steps) {
      const std::string& step = size.second;
      const auto cell = std::find_if(s.cells.begin(), s.cells.end(), [&](const FitCell& c) { return c.step == step; });
      h << "<td class=\""
        << (cell == s.cells.end() ? ""
            : cell->fits          ? "fits"
                                  : "oom")
        << "\">" << (cell == s.cells.end() ? "–" : html_escape(cell_text(*cell))) << "</td>";
    }
    const auto largest = s.largest_fitting_params(), predicted = s.largest_predicted_params();
    h << "<td>" << (largest ? millions(*largest) : "none") << "</td><td>" << (predicted ? millions(*predicted) : "none")
      << "</td></tr>\n";
  }
  h << "</tbody></table></div>\n";
  return h.str();
}

}  // namespace dtlab::analysis
