// report_summary.cpp: the report's opening "Every strategy against the baseline" section. Every completed run is
// paired with its baseline twin in the same study — the run of the baseline strategy (result.json context.baseline,
// the catalogue's kComparisonBaseline) at the same world, nodes and link, the same sweep label (after '@') and the
// same config but for the strategy's own parallel.* keys — and the section gives, per strategy, the median and range
// of step time, peak memory and bytes as multiples of the twin's, with the catalogue's "choose it when" line. Step
// times count only where each rank had a core (context.cpu.cores), as the scaling study's chart does; runs of one
// rank are not paired (torch-free).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "lab/stats.hpp"

namespace dtlab::analysis {
namespace {

// Modifiers every strategy honours alike: a twin must agree on them. The strategy's own keys (buckets, wrap,
// prefetch, shard size, collectives) are how strategies differ, so they are not compared.
constexpr const char* kSharedParallelKeys[] = {"activation_checkpointing", "checkpoint_every", "offload"};

nlohmann::json comparable_config(const RunResult& r) {
  nlohmann::json c = r.config;
  nlohmann::json kept = nlohmann::json::object();
  if (c.contains("parallel") && c["parallel"].is_object())
    for (const char* key : kSharedParallelKeys)
      if (c["parallel"].contains(key)) kept[key] = c["parallel"][key];
  c["parallel"] = kept;
  return c;
}

std::string sweep_label(const std::string& name) {
  const size_t at = name.find('@');
  return at == std::string::npos ? "" : name.substr(at);
}

bool each_rank_had_a_core(const RunResult& r) { return !r.cpu || r.cpu->cores <= 0 || r.world_size <= r.cpu->cores; }

struct Ratios {
  std::vector<double> time, peak, bytes;
  std::set<std::string> studies;
  std::string doc, choose_when;
};

// The baseline twin of `r` in `sc`, or nullptr.
const RunResult* baseline_twin(const Scenario& sc, const RunResult& r) {
  if (r.baseline.empty() || r.strategy == r.baseline || r.world_size < 2) return nullptr;  // one rank shares nothing
  const nlohmann::json config = comparable_config(r);
  for (const RunResult& t : sc.runs)
    if (t.strategy == r.baseline && t.world_size == r.world_size && t.nodes == r.nodes &&
        t.inter_link_bps == r.inter_link_bps && sweep_label(t.name) == sweep_label(r.name) &&
        comparable_config(t) == config)
      return &t;
  return nullptr;
}

std::string ratio_cell(std::vector<double> v) {
  if (v.empty()) return "<td>–</td>";
  std::sort(v.begin(), v.end());
  std::ostringstream h;
  h << "<td>×" << fmt_fixed(median(v), 2);
  if (v.size() > 1)
    h << " <span class=\"range\">(" << fmt_fixed(v.front(), 2) << "–" << fmt_fixed(v.back(), 2) << ")</span>";
  h << "</td>";
  return h.str();
}

}  // namespace

std::string strategy_summary_section(const std::vector<Scenario>& scenarios, const std::filesystem::path& out_dir,
                                     const std::string& out_dir_display, std::ostream& log,
                                     std::vector<std::string>& problems) {
  std::vector<std::string> order;  // strategies in order of first appearance
  std::map<std::string, Ratios> by_strategy;
  std::string baseline, baseline_doc, baseline_choose_when;
  int pairs = 0;
  for (const Scenario& sc : scenarios)
    for (const RunResult& r : sc.runs) {
      if (r.strategy == r.baseline && baseline_doc.empty()) {
        baseline_doc = r.strategy_doc;
        baseline_choose_when = r.choose_when;
      }
      const RunResult* twin = baseline_twin(sc, r);
      if (!twin) continue;
      baseline = r.baseline;
      ++pairs;
      if (!by_strategy.count(r.strategy)) order.push_back(r.strategy);
      Ratios& ratios = by_strategy[r.strategy];
      ratios.studies.insert(sc.name);
      ratios.doc = r.strategy_doc;
      ratios.choose_when = r.choose_when;
      if (r.step_ms_median > 0 && twin->step_ms_median > 0 && each_rank_had_a_core(r))
        ratios.time.push_back(r.step_ms_median / twin->step_ms_median);
      const double peak = largest_rank_peak(r), twin_peak = largest_rank_peak(*twin);
      if (peak > 0 && twin_peak > 0) ratios.peak.push_back(peak / twin_peak);
      if (r.comm_bytes_per_step && twin->comm_bytes_per_step && *twin->comm_bytes_per_step > 0)
        ratios.bytes.push_back(*r.comm_bytes_per_step / *twin->comm_bytes_per_step);
    }
  if (order.empty()) return "";
  log << "summary: " << pairs << " runs paired with their " << baseline << " twin\n";

  std::ostringstream h;
  h << "<section class=\"summary\" id=\"summary\">\n<h2>Every strategy against " << html_escape(baseline) << "</h2>\n"
    << "<p class=\"desc\">Each run of these studies is paired with the run of <code>" << html_escape(baseline)
    << "</code> in the same study that differs only in the strategy (same model, batch, precision, checkpointing, "
       "world, nodes and link): "
    << pairs << " pairs. The cells give the median ratio over the pairs and their range: below ×1 is less than "
    << html_escape(baseline)
    << " needs. Step time counts only pairs where each rank had a core of its own; runs of one rank are left out. "
       "Bytes are what a rank hands to collectives (nccl-tests' convention: an all-reduce counts its buffer, an "
       "all-gather or reduce-scatter the gathered size); on the wire an all-reduce moves about twice its buffer, so "
       "×3 here is ×1.5 in bytes sent. These are this machine's "
       "figures at the studies' sizes; the sections below show where each ratio moves with the world size, the "
       "link and the model.</p>\n"
    << "<table class=\"num\">\n<thead><tr><th>strategy</th><th>what it does</th><th>step time</th><th>peak memory per "
       "rank</th><th>bytes per step</th><th>pairs (studies)</th><th>choose it when</th></tr></thead>\n<tbody>\n";
  if (!baseline_doc.empty())
    h << "<tr><td><code>" << html_escape(baseline) << "</code></td><td>" << html_escape(baseline_doc)
      << "</td><td>×1</td><td>×1</td><td>×1</td><td>the baseline</td><td>" << html_escape(baseline_choose_when)
      << "</td></tr>\n";
  BarChart chart;
  chart.title = "Median step time, peak memory and bytes as multiples of " + baseline + "'s";
  chart.y_label = "× " + baseline;
  chart.series_names = {"step time", "peak memory per rank", "bytes per step"};
  chart.values.assign(3, {});
  for (const std::string& s : order) {
    const Ratios& r = by_strategy[s];
    std::ostringstream studies;
    size_t i = 0;
    for (const std::string& study : r.studies) studies << (i++ ? ", " : "") << html_escape(study);
    h << "<tr><td><code>" << html_escape(s) << "</code></td><td>" << html_escape(r.doc) << "</td>" << ratio_cell(r.time)
      << ratio_cell(r.peak) << ratio_cell(r.bytes) << "<td>" << std::max({r.time.size(), r.peak.size(), r.bytes.size()})
      << " (" << studies.str() << ")</td><td>" << html_escape(r.choose_when) << "</td></tr>\n";
    chart.categories.push_back(s);
    const auto median_or_nan = [](std::vector<double> v) { return v.empty() ? std::nan("") : median(v); };
    chart.values[0].push_back(median_or_nan(r.time));
    chart.values[1].push_back(median_or_nan(r.peak));
    chart.values[2].push_back(median_or_nan(r.bytes));
  }
  h << "</tbody>\n</table>\n";
  for (size_t i = chart.values.size(); i-- > 0;) {  // a series with no value at all (gnuplot cannot draw it)
    if (std::none_of(chart.values[i].begin(), chart.values[i].end(), [](double v) { return std::isfinite(v); })) {
      chart.values.erase(chart.values.begin() + static_cast<std::ptrdiff_t>(i));
      chart.series_names.erase(chart.series_names.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  Scenario summary;
  summary.name = "summary";
  SectionContext ctx{summary, "summary", out_dir, out_dir_display, log, problems};
  h << chart_part(
      "vs_baseline",
      "Median ratio to the " + baseline + " twin per strategy (the table's middle columns); 1 is " + baseline + ".",
      [chart](const Scenario&) { return std::optional<Chart>(chart); })(ctx);
  h << "</section>\n";
  return h.str();
}

}  // namespace dtlab::analysis
