// report_accumulation.cpp: the "Gradient accumulation" part of a scenario section — runs of one strategy at one
// global batch split into 1, 2, 4 ... micro-steps per optimizer step (runs named <series>@<label>, whose resolved
// configs differ in train.accumulation): bytes each rank sends per step (measured, and the cost model's), peak memory
// and step time against the micro-steps. DDP syncs once per step whatever the accumulation; the sharded strategies
// gather parameters (and FULL_SHARD reduce-scatters) on every micro-step. The takeaways are computed from the runs
// (torch-free).
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct AccumulationPoint {
  const RunResult* run = nullptr;
  int micro_steps = 0;  // config.train.accumulation
  int micro_batch = 0;
  double bytes = 0;                 // comm_bytes_per_step (rank 0)
  std::optional<double> predicted;  // prediction.comm.bytes_per_step
  double peak = 0;                  // largest_rank_peak
};

struct AccumulationSeries {
  std::string name;
  std::vector<AccumulationPoint> points;  // by micro-steps
};

std::optional<int> train_int(const RunResult& r, const char* key) {
  const std::optional<double> v = json_number_at(r.config, {"train", key});
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

// Series with two or more accumulations at one global batch; empty when the scenario has none.
std::vector<AccumulationSeries> accumulation_series(const Scenario& sc) {
  std::vector<AccumulationSeries> out;
  std::map<std::string, size_t> index;
  std::map<std::string, int> global_batch;
  for (const RunResult& r : sc.runs) {
    const size_t at = r.name.find('@');
    const std::optional<int> accumulation = train_int(r, "accumulation"), micro = train_int(r, "micro_batch"),
                             global = train_int(r, "global_batch");
    if (at == std::string::npos || !accumulation || !micro || !global || !r.comm_bytes_per_step) continue;
    // Under pipeline stages the micro-batches are the pipeline's (analysis/report_pipeline.cpp), not accumulation.
    if (json_number_at(r.config, {"parallel", "pp"}).value_or(1) > 1) continue;
    const std::string name = r.name.substr(0, at);
    if (global_batch.count(name) && global_batch[name] != *global) continue;  // one global batch per series
    global_batch[name] = *global;
    if (!index.count(name)) {
      index[name] = out.size();
      out.push_back({name, {}});
    }
    AccumulationPoint p;
    p.run = &r;
    p.micro_steps = *accumulation;
    p.micro_batch = *micro;
    p.bytes = *r.comm_bytes_per_step;
    p.predicted = json_number_at(r.raw, {"prediction", "comm", "bytes_per_step"});
    p.peak = largest_rank_peak(r);
    out[index[name]].points.push_back(p);
  }
  std::vector<AccumulationSeries> swept;
  for (AccumulationSeries& s : out) {
    std::sort(s.points.begin(), s.points.end(),
              [](const AccumulationPoint& a, const AccumulationPoint& b) { return a.micro_steps < b.micro_steps; });
    if (s.points.size() >= 2 && s.points.front().micro_steps != s.points.back().micro_steps)
      swept.push_back(std::move(s));
  }
  return swept;
}

LineChart chart_of(const std::vector<AccumulationSeries>& all, const std::string& title, const std::string& y_label,
                   double (*value)(const AccumulationPoint&), bool with_prediction) {
  LineChart c;
  c.title = title;
  c.x_label = "micro-steps per optimizer step (same global batch)";
  c.y_label = y_label;
  c.y_from_zero = true;
  c.log_x = true;
  int colour = 0;
  for (const AccumulationSeries& s : all) {
    Series measured{s.name, {}, {}}, predicted{s.name + " (model)", {}, {}};
    measured.colour = predicted.colour = ++colour;
    predicted.dashed = true;
    for (const AccumulationPoint& p : s.points) {
      measured.x.push_back(p.micro_steps);
      measured.y.push_back(value(p));
      if (with_prediction && p.predicted) {
        predicted.x.push_back(p.micro_steps);
        predicted.y.push_back(*p.predicted / kMiB);
      }
    }
    c.series.push_back(std::move(measured));
    if (!predicted.x.empty()) c.series.push_back(std::move(predicted));
  }
  return c;
}

std::string takeaways(const std::vector<AccumulationSeries>& all) {
  std::ostringstream h;
  h << "<ul class=\"takeaways\">\n";
  for (const AccumulationSeries& s : all) {
    const AccumulationPoint& one = s.points.front();
    const AccumulationPoint& many = s.points.back();
    const double bytes_ratio = one.bytes > 0 ? many.bytes / one.bytes : 0;
    const int steps_ratio = many.micro_steps / std::max(1, one.micro_steps);
    h << "  <li><strong>" << html_escape(s.name) << "</strong>: " << fmt_fixed(one.bytes / kMiB, 2)
      << " MiB sent per optimizer step at " << one.micro_steps << " micro-step" << (one.micro_steps == 1 ? "" : "s")
      << ", " << fmt_fixed(many.bytes / kMiB, 2) << " MiB at " << many.micro_steps << " (×" << fmt_fixed(bytes_ratio, 2)
      << "): ";
    if (bytes_ratio < 1.1)
      h << "it communicates once per optimizer step, whatever the accumulation";
    else if (bytes_ratio > 0.8 * steps_ratio)
      h << "it communicates on every micro-step";
    else
      h << "part of its communication happens on every micro-step";
    h << ". Peak memory " << fmt_fixed(one.peak / kMiB, 1) << " → " << fmt_fixed(many.peak / kMiB, 1)
      << " MiB (micro-batch " << one.micro_batch << " → " << many.micro_batch << " sequences)";
    if (one.run->step_ms_median > 0 && many.run->step_ms_median > 0)
      h << "; step time " << fmt_fixed(one.run->step_ms_median, 0) << " → " << fmt_fixed(many.run->step_ms_median, 0)
        << " ms";
    h << ".</li>\n";
  }
  int right = 0, predicted = 0;
  for (const AccumulationSeries& s : all)
    for (const AccumulationPoint& p : s.points)
      if (p.predicted) {
        ++predicted;
        right += std::fabs(*p.predicted - p.bytes) <= 0.01 * std::max(1.0, p.bytes) ? 1 : 0;
      }
  if (predicted > 0)
    h << "  <li>The cost model's bytes per step (docs/cost-models.md) matched the measured within 1% for " << right
      << " of " << predicted << " runs.</li>\n";
  h << "</ul>\n";
  return h.str();
}

}  // namespace

std::string accumulation_part(SectionContext& ctx) {
  const std::vector<AccumulationSeries> all = accumulation_series(ctx.scenario);
  if (all.empty()) return "";
  std::ostringstream h;
  h << "<h3>Gradient accumulation: the same global batch in more micro-steps</h3>\n"
    << "<p class=\"desc\">Each series keeps its global batch and splits it into more, smaller micro-batches. What to "
       "look for: whose bytes per step stay flat (gradients synchronised once, after the last micro-step) and whose "
       "grow with the micro-steps (parameters gathered again for every micro-step's forward and backward), and what "
       "the smaller micro-batch saves in activation memory.</p>\n"
    << takeaways(all);
  h << chart_part("accum_bytes",
                  "Bytes rank 0 sends per optimizer step against micro-steps per step: measured (solid) and the "
                  "cost model's (dashed).",
                  [c = chart_of(
                       all, "Bytes sent per optimizer step vs micro-steps", "MiB per optimizer step (rank 0)",
                       [](const AccumulationPoint& p) { return p.bytes / kMiB; }, true)](const Scenario&) {
                    return std::optional<Chart>(c);
                  })(ctx);
  h << chart_part("accum_peak", "Peak tensor memory per rank (largest rank) against micro-steps per step.",
                  [c = chart_of(
                       all, "Peak memory per rank vs micro-steps", "peak tensor memory per rank (MiB)",
                       [](const AccumulationPoint& p) { return p.peak / kMiB; }, false)](const Scenario&) {
                    return std::optional<Chart>(c);
                  })(ctx);
  h << chart_part("accum_time", "Median step time against micro-steps per step.",
                  [c = chart_of(
                       all, "Step time vs micro-steps", "median step time (ms)",
                       [](const AccumulationPoint& p) { return p.run->step_ms_median; }, false)](const Scenario&) {
                    return std::optional<Chart>(c);
                  })(ctx);
  return h.str();
}

}  // namespace dtlab::analysis
