// report_checkpointing.cpp: the "Activation checkpointing" part of a scenario section — runs named <series>@<label>
// whose resolved configs differ in parallel.activation_checkpointing (and checkpoint_every): activation memory
// against step time per series (a Pareto chart, measured points labelled by setting beside the cost model's), a
// table, and takeaways computed from the runs, among them which settings another setting of the same series beats
// on both memory and time, beyond the step-time noise (torch-free).
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// The recompute is said to cost nothing only when the step is within this share of the run without checkpointing.
constexpr double kTimeMargin = 0.05;

// `q` is faster than `p` beyond the noise: every timed step of q was shorter than every timed step of p (their
// step ranges do not overlap). Step times of runs this short move by several percent; memory does not.
bool clearly_faster(const RunResult& q, const RunResult& p) {
  return q.step_ms_max > 0 && p.step_ms_min > 0 && q.step_ms_max < p.step_ms_min;
}

struct CheckpointingPoint {
  const RunResult* run = nullptr;
  std::string setting;                 // none | selective | full | every k
  int recomputed_share_rank = 0;       // orders settings from none (0) to full (most recomputed)
  double activations = 0;              // measured, rank 0 (bytes)
  std::optional<double> predicted;     // prediction.memory_bytes.activations
  std::optional<double> model_ms;      // prediction.step_ms
  double peak = 0;                     // largest_rank_peak
  std::vector<std::string> beaten_by;  // settings of the series with fewer activations that are clearly_faster
};

struct CheckpointingSeries {
  std::string name;
  std::optional<int> seq_len;
  std::vector<CheckpointingPoint> points;  // from no checkpointing to the most
};

// The setting's label and its place between none and full; nullopt when the config does not say.
std::optional<std::pair<std::string, int>> setting_of(const RunResult& r) {
  const nlohmann::json parallel = r.config.value("parallel", nlohmann::json::object());
  const std::string mode = parallel.value("activation_checkpointing", std::string());
  if (mode == "none") return std::pair<std::string, int>{"none", 0};
  if (mode == "selective") return std::pair<std::string, int>{"selective", 1};
  if (mode != "full") return std::nullopt;
  const int every = std::max(1, parallel.value("checkpoint_every", 1));
  if (every == 1) return std::pair<std::string, int>{"full", 1000};
  return std::pair<std::string, int>{"every " + std::to_string(every), 1000 / every};
}

// Series with two or more checkpointing settings; empty when the scenario has none.
std::vector<CheckpointingSeries> checkpointing_series(const Scenario& sc) {
  std::vector<CheckpointingSeries> out;
  std::map<std::string, size_t> index;
  for (const RunResult& r : sc.runs) {
    const size_t at = r.name.find('@');
    const auto setting = setting_of(r);
    if (at == std::string::npos || !setting || !r.memory || !r.memory->activations || !(r.step_ms_median > 0)) continue;
    const std::string name = r.name.substr(0, at);
    if (!index.count(name)) {
      index[name] = out.size();
      CheckpointingSeries s{name, {}, {}};
      if (const auto seq = json_number_at(r.config, {"model", "seq_len"})) s.seq_len = static_cast<int>(*seq);
      out.push_back(std::move(s));
    }
    CheckpointingPoint p;
    p.run = &r;
    p.setting = setting->first;
    p.recomputed_share_rank = setting->second;
    p.activations = *r.memory->activations;
    p.predicted = json_number_at(r.raw, {"prediction", "memory_bytes", "activations"});
    p.model_ms = json_number_at(r.raw, {"prediction", "step_ms"});
    p.peak = largest_rank_peak(r);
    out[index[name]].points.push_back(p);
  }
  std::vector<CheckpointingSeries> swept;
  for (CheckpointingSeries& s : out) {
    std::sort(s.points.begin(), s.points.end(), [](const CheckpointingPoint& a, const CheckpointingPoint& b) {
      return a.recomputed_share_rank < b.recomputed_share_rank;
    });
    for (CheckpointingPoint& p : s.points)
      for (const CheckpointingPoint& q : s.points)
        if (q.activations < p.activations && clearly_faster(*q.run, *p.run)) p.beaten_by.push_back(q.setting);
    if (s.points.size() >= 2 && s.points.front().setting != s.points.back().setting) swept.push_back(std::move(s));
  }
  return swept;
}

std::string series_title(const CheckpointingSeries& s) {
  return s.seq_len ? s.name + " (" + std::to_string(*s.seq_len) + " tokens)" : s.name;
}

LineChart pareto_chart(const std::vector<CheckpointingSeries>& all) {
  LineChart c;
  c.title = "Activation memory vs step time";
  c.x_label = "activation memory at the peak, rank 0 (MiB)";
  c.y_label = "median step time (ms)";
  c.y_from_zero = true;
  int colour = 0;
  for (const CheckpointingSeries& s : all) {
    Series measured{series_title(s), {}, {}}, predicted{s.name + " (model)", {}, {}};
    measured.colour = predicted.colour = ++colour;
    predicted.dashed = true;
    std::vector<const CheckpointingPoint*> by_memory;  // the line runs from the least memory to the most
    for (const CheckpointingPoint& p : s.points) by_memory.push_back(&p);
    std::sort(by_memory.begin(), by_memory.end(),
              [](const CheckpointingPoint* a, const CheckpointingPoint* b) { return a->activations < b->activations; });
    for (const CheckpointingPoint* point : by_memory) {
      const CheckpointingPoint& p = *point;
      measured.x.push_back(p.activations / kMiB);
      measured.y.push_back(p.run->step_ms_median);
      measured.point_labels.push_back(p.setting);
      if (p.predicted && p.model_ms) {
        predicted.x.push_back(*p.predicted / kMiB);
        predicted.y.push_back(*p.model_ms);
      }
    }
    c.series.push_back(std::move(measured));
    if (!predicted.x.empty()) c.series.push_back(std::move(predicted));
  }
  return c;
}

std::string table(const std::vector<CheckpointingSeries>& all) {
  std::ostringstream h;
  h << "<table class=\"num\">\n<thead><tr><th>series</th><th>setting</th><th>activations (MiB)</th>"
       "<th>model (MiB)</th><th>peak per rank (MiB)</th><th>step (ms)</th><th>model (ms)</th>"
       "<th>vs none: memory, time</th></tr></thead>\n<tbody>\n";
  for (const CheckpointingSeries& s : all) {
    const CheckpointingPoint& none = s.points.front();
    for (const CheckpointingPoint& p : s.points) {
      h << "<tr><td>" << html_escape(series_title(s)) << "</td><td>" << html_escape(p.setting)
        << (p.beaten_by.empty() ? "" : " <span class=\"range\">(beaten on both)</span>") << "</td><td>"
        << fmt_fixed(p.activations / kMiB, 1) << "</td><td>" << (p.predicted ? fmt_fixed(*p.predicted / kMiB, 1) : "–")
        << "</td><td>" << fmt_fixed(p.peak / kMiB, 1) << "</td><td>" << fmt_fixed(p.run->step_ms_median, 0)
        << "</td><td>" << (p.model_ms ? fmt_fixed(*p.model_ms, 0) : "–") << "</td><td>"
        << (&p == &none ? std::string("–")
                        : percent_change(none.activations, p.activations) + ", " +
                              percent_change(none.run->step_ms_median, p.run->step_ms_median))
        << "</td></tr>\n";
    }
  }
  h << "</tbody>\n</table>\n";
  return h.str();
}

std::string takeaways(const std::vector<CheckpointingSeries>& all) {
  std::ostringstream h;
  h << "<ul class=\"takeaways\">\n";
  for (const CheckpointingSeries& s : all) {
    const CheckpointingPoint& none = s.points.front();
    const CheckpointingPoint& most = s.points.back();
    h << "  <li><strong>" << html_escape(series_title(s)) << "</strong>: " << html_escape(most.setting)
      << " checkpointing holds " << fmt_fixed(most.activations / kMiB, 1) << " MiB of activations against "
      << fmt_fixed(none.activations / kMiB, 1) << " MiB without (" << percent_change(none.activations, most.activations)
      << ") for a step of " << fmt_fixed(most.run->step_ms_median, 0) << " ms against "
      << fmt_fixed(none.run->step_ms_median, 0) << " ms ("
      << percent_change(none.run->step_ms_median, most.run->step_ms_median) << ")";
    if (most.run->step_ms_median <= (1 + kTimeMargin) * none.run->step_ms_median)
      h << ": here the recompute cost no time beyond the run-to-run noise (" << fmt_fixed(100 * kTimeMargin, 0) << "%)";
    h << ".";
    bool any_beaten = false;
    for (const CheckpointingPoint& p : s.points) {
      if (p.beaten_by.empty()) continue;
      h << (any_beaten ? "; " : " Beaten on both memory and time (fewer activations, every step faster): ")
        << html_escape(p.setting) << " (by ";
      for (size_t i = 0; i < p.beaten_by.size(); ++i) h << (i ? ", " : "") << html_escape(p.beaten_by[i]);
      h << ")";
      any_beaten = true;
    }
    if (any_beaten) {
      h << ".";
    } else {
      h << " No setting is beaten on both: none holds more and has every step slower than another.";
    }
    h << "</li>\n";
  }
  if (all.size() >= 2) {
    const CheckpointingSeries& shorter = all.front();
    const CheckpointingSeries& longer = all.back();
    const double saved_short = shorter.points.front().activations - shorter.points.back().activations;
    const double saved_long = longer.points.front().activations - longer.points.back().activations;
    if (saved_short > 0)
      h << "  <li>Checkpointing saves " << fmt_fixed(saved_long / kMiB, 1) << " MiB at " << html_escape(longer.name)
        << " against " << fmt_fixed(saved_short / kMiB, 1) << " MiB at " << html_escape(shorter.name) << " (×"
        << fmt_fixed(saved_long / saved_short, 1)
        << "): activations grow with the tokens of a micro-batch (and attention's with their square), the state "
           "does not.</li>\n";
  }
  int within = 0, predicted = 0;
  for (const CheckpointingSeries& s : all)
    for (const CheckpointingPoint& p : s.points)
      if (p.predicted && p.activations > 0) {
        ++predicted;
        within += std::fabs(*p.predicted - p.activations) <= 0.1 * p.activations ? 1 : 0;
      }
  if (predicted > 0)
    h << "  <li>The memory model's activations (docs/cost-models.md) were within 10% of the measured for " << within
      << " of " << predicted << " runs.</li>\n";
  h << "</ul>\n";
  return h.str();
}

}  // namespace

std::string checkpointing_part(SectionContext& ctx) {
  const std::vector<CheckpointingSeries> all = checkpointing_series(ctx.scenario);
  if (all.empty()) return "";
  std::ostringstream h;
  h << "<h3>Activation checkpointing: memory against time</h3>\n"
    << "<p class=\"desc\">Each series is one sequence length with checkpointing from none to every block. What to "
       "look for: how far each setting moves left (activation memory) and how far up (step time); a setting to the "
       "right of and above another is never worth choosing; the longer sequence gains more from the same "
       "setting.</p>\n"
    << takeaways(all);
  h << chart_part("ac_pareto",
                  "Activation memory (rank 0, at the peak) against median step time, one line per sequence length, "
                  "each point labelled by its setting: measured (solid) and the cost model's (dashed).",
                  [c = pareto_chart(all)](const Scenario&) { return std::optional<Chart>(c); })(ctx);
  h << table(all);
  return h.str();
}

}  // namespace dtlab::analysis
