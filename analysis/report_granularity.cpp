// report_granularity.cpp: the "Granularity" part of a scenario section — runs of one strategy that differ only in
// how finely it cuts its communication: DDP's bucket size (parallel.bucket_cap_mb) or FSDP's unit size
// (parallel.wrap). Per run: collective calls per step, the share of communication hidden behind compute (overlap %),
// the exposed wait, the gathered buffers and the step time; a stacked bar of exposed communication and the rest of the
// step; takeaways computed from the runs (torch-free).
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
const std::vector<std::string> kGranularityKeys = {"bucket_cap_mb", "wrap"};

struct GranularityRun {
  const RunResult* run = nullptr;
  std::string setting;        // the value of the swept key, as the config holds it
  double calls_per_step = 0;  // collectives[].count over train.steps
  std::optional<double> overlap_pct, exposed_ms;
  double buffers = 0, peak = 0;
};

struct GranularitySeries {
  std::string name, key;  // key: parallel.bucket_cap_mb | parallel.wrap
  std::vector<GranularityRun> runs;
};

std::string setting_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number()) return fmt_fixed(value.get<double>(), value.get<double>() < 1 ? 2 : 0);
  return value.dump();
}

// Series whose runs' configs differ only in one granularity key of `parallel`; in scenario order.
std::vector<GranularitySeries> granularity_series(const Scenario& sc) {
  std::map<std::string, std::vector<const RunResult*>> by_series;
  std::vector<std::string> order;
  for (const RunResult& r : sc.runs) {
    const size_t at = r.name.find('@');
    if (at == std::string::npos) continue;
    const std::string name = r.name.substr(0, at);
    if (!by_series.count(name)) order.push_back(name);
    by_series[name].push_back(&r);
  }
  std::vector<GranularitySeries> out;
  for (const std::string& name : order) {
    const std::vector<const RunResult*>& runs = by_series[name];
    if (runs.size() < 2) continue;
    for (const std::string& key : kGranularityKeys) {
      // Every run's config with the key removed must be the first run's; the key itself must differ somewhere.
      const auto without = [&](const RunResult& r) {
        nlohmann::json c = r.config;
        if (c.contains("parallel") && c["parallel"].is_object()) c["parallel"].erase(key);
        return c;
      };
      const nlohmann::json base = without(*runs.front());
      bool same_rest = true, differs = false;
      for (const RunResult* r : runs) {
        same_rest = same_rest && without(*r) == base;
        differs = differs || r->config["parallel"].value(key, nlohmann::json()) !=
                                 runs.front()->config["parallel"].value(key, nlohmann::json());
      }
      if (!same_rest || !differs) continue;
      GranularitySeries s{name, "parallel." + key, {}};
      for (const RunResult* r : runs) {
        GranularityRun g;
        g.run = r;
        g.setting = setting_text(r->config["parallel"].value(key, nlohmann::json()));
        const double steps = json_number_at(r->config, {"train", "steps"}).value_or(0);
        if (r->raw.contains("collectives") && r->raw["collectives"].is_array() && steps > 0)
          for (const nlohmann::json& c : r->raw["collectives"])
            if (c.is_object() && c.contains("count") && c["count"].is_number())
              g.calls_per_step += c["count"].get<double>() / steps;
        g.overlap_pct = json_number_at(r->raw, {"summary", "overlap_pct_median"});
        g.exposed_ms = r->comm_wait_ms_median;
        g.buffers = r->memory ? r->memory->buffers : 0;
        g.peak = largest_rank_peak(*r);
        s.runs.push_back(g);
      }
      out.push_back(std::move(s));
      break;
    }
  }
  return out;
}

BarChart time_chart(const std::vector<GranularitySeries>& all) {
  BarChart c;
  c.title = "Step time by granularity: exposed communication and the rest";
  c.y_label = "median step time (ms)";
  c.stacked = true;
  c.series_names = {"exposed communication", "the rest of the step"};
  c.values.assign(2, {});
  for (const GranularitySeries& s : all)
    for (const GranularityRun& g : s.runs) {
      const double exposed = std::min(g.exposed_ms.value_or(0), g.run->step_ms_median);
      c.categories.push_back(s.name + " " + g.setting);
      c.values[0].push_back(exposed);
      c.values[1].push_back(g.run->step_ms_median - exposed);
    }
  return c;
}

std::string takeaways(const std::vector<GranularitySeries>& all) {
  std::ostringstream h;
  h << "<ul class=\"takeaways\">\n";
  for (const GranularitySeries& s : all) {
    const auto fastest = std::min_element(s.runs.begin(), s.runs.end(), [](const auto& a, const auto& b) {
      return a.run->step_ms_median < b.run->step_ms_median;
    });
    const auto slowest = std::max_element(s.runs.begin(), s.runs.end(), [](const auto& a, const auto& b) {
      return a.run->step_ms_median < b.run->step_ms_median;
    });
    const auto most_calls = std::max_element(
        s.runs.begin(), s.runs.end(), [](const auto& a, const auto& b) { return a.calls_per_step < b.calls_per_step; });
    const auto fewest_calls = std::min_element(
        s.runs.begin(), s.runs.end(), [](const auto& a, const auto& b) { return a.calls_per_step < b.calls_per_step; });
    h << "  <li><strong>" << html_escape(s.name) << "</strong> over <code>" << html_escape(s.key)
      << "</code>: " << fmt_fixed(most_calls->calls_per_step, 0) << " collective calls per step at "
      << html_escape(most_calls->setting) << ", " << fmt_fixed(fewest_calls->calls_per_step, 0) << " at "
      << html_escape(fewest_calls->setting) << "; fastest at " << html_escape(fastest->setting) << " ("
      << fmt_fixed(fastest->run->step_ms_median, 0) << " ms), slowest at " << html_escape(slowest->setting) << " ("
      << fmt_fixed(slowest->run->step_ms_median, 0) << " ms, "
      << fmt_fixed(100.0 * (slowest->run->step_ms_median / fastest->run->step_ms_median - 1), 0) << "% slower";
    if (slowest->run->step_ms_min <= fastest->run->step_ms_max)
      h << "; but their step ranges overlap, " << fmt_fixed(fastest->run->step_ms_min, 0) << "–"
        << fmt_fixed(fastest->run->step_ms_max, 0) << " and " << fmt_fixed(slowest->run->step_ms_min, 0) << "–"
        << fmt_fixed(slowest->run->step_ms_max, 0) << " ms, so the order may not hold on a rerun";
    h << ")";
    if (most_calls->overlap_pct && fewest_calls->overlap_pct)
      h << "; overlap " << fmt_fixed(*most_calls->overlap_pct, 0) << "% with the most calls, "
        << fmt_fixed(*fewest_calls->overlap_pct, 0) << "% with the fewest";
    const auto most_buffers = std::max_element(s.runs.begin(), s.runs.end(),
                                               [](const auto& a, const auto& b) { return a.buffers < b.buffers; });
    const auto least_buffers = std::min_element(s.runs.begin(), s.runs.end(),
                                                [](const auto& a, const auto& b) { return a.buffers < b.buffers; });
    if (most_buffers->buffers > 0)
      h << "; buffers (gathered units, buckets) " << fmt_fixed(least_buffers->buffers / kMiB, 1) << " MiB at "
        << html_escape(least_buffers->setting) << " to " << fmt_fixed(most_buffers->buffers / kMiB, 1) << " MiB at "
        << html_escape(most_buffers->setting);
    h << ".</li>\n";
  }
  h << "</ul>\n";
  return h.str();
}

std::string runs_table(const std::vector<GranularitySeries>& all) {
  std::ostringstream h;
  h << "<div class=\"table-wrap\"><table class=\"runs granularity\">\n<thead><tr><th>series</th><th>setting</th>"
       "<th class=\"num\">calls / step</th><th class=\"num\">overlap %</th><th class=\"num\">exposed ms</th>"
       "<th class=\"num\">buffers MiB</th><th class=\"num\">peak MiB</th><th class=\"num\">step ms</th></tr>"
       "</thead>\n<tbody>\n";
  for (const GranularitySeries& s : all)
    for (const GranularityRun& g : s.runs)
      h << "<tr><td>" << html_escape(s.name) << "</td><td><code>" << html_escape(s.key) << "=" << html_escape(g.setting)
        << "</code></td><td class=\"num\">" << fmt_fixed(g.calls_per_step, 1) << "</td><td class=\"num\">"
        << (g.overlap_pct ? fmt_fixed(*g.overlap_pct, 0) : "–") << "</td><td class=\"num\">"
        << (g.exposed_ms ? fmt_fixed(*g.exposed_ms, 1) : "–") << "</td><td class=\"num\">"
        << fmt_fixed(g.buffers / kMiB, 1) << "</td><td class=\"num\">" << fmt_fixed(g.peak / kMiB, 1)
        << "</td><td class=\"num\">" << fmt_fixed(g.run->step_ms_median, 0) << "</td></tr>\n";
  h << "</tbody></table></div>\n";
  return h.str();
}

}  // namespace

std::string granularity_part(SectionContext& ctx) {
  const std::vector<GranularitySeries> all = granularity_series(ctx.scenario);
  if (all.empty()) return "";
  std::ostringstream h;
  h << "<h3>Granularity: bucket and unit sizes</h3>\n"
    << "<p class=\"desc\">Each series changes only how finely its strategy cuts its communication: DDP's bucket size "
       "(smaller buckets start their all-reduce earlier in the backward but pay the per-call latency more often) or "
       "FSDP's unit size (smaller units gather less at a time and prefetch the next, larger ones make fewer, bigger "
       "calls and hold more gathered parameters). What to look for: calls per step, the share of communication "
       "hidden behind compute, and the gathered buffers.</p>\n"
    << takeaways(all);
  h << chart_part("granularity_time",
                  "Median step time per run, split into the exposed communication wait and the rest of the step.",
                  [c = time_chart(all)](const Scenario&) { return std::optional<Chart>(c); })(ctx);
  h << runs_table(all);
  return h.str();
}

}  // namespace dtlab::analysis
