// report_pipeline.cpp: the "Pipeline parallelism" part of a scenario section, for runs that set parallel.pp > 1
// (scenario_pipeline): each stage's measured idle fraction (its median comm_wait over its median forward + backward,
// result.json summary.phases_by_rank) beside the schedule's bubble formula (lab/pipeline_schedule.hpp), against the
// micro-batches per step; each stage's activation memory beside the cost model's; and the section's answer in
// numbers: which schedule idled least and ran fastest at each m, and what GPipe keeps against 1F1B (torch-free).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <utility>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "lab/pipeline_schedule.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct StagePoint {
  const RunResult* run = nullptr;
  PipeSchedule schedule = PipeSchedule::one_f_one_b;
  PipeShape shape;
  std::vector<double> idle;                     // per stage (rank): comm_wait / (forward + backward)
  std::vector<double> busy_ms;                  // per stage: median forward + backward
  std::vector<double> activations;              // per stage: measured activation bytes
  std::optional<double> predicted_activations;  // rank 0's (prediction.memory_bytes.activations)
  std::optional<double> predicted_step_ms;      // the pipeline step model's (prediction.step_ms; null: no profile)
  double measured_bubble = 0;                   // Σ idle time / Σ busy time over the stages (the replay's definition)
  double formula = 0;  // the schedule's formula (equal stages, free transfers; zero bubble at F = B = W)
};

std::optional<StagePoint> point_of(const RunResult& r) {
  const auto number = [&](const char* section, const char* key) { return json_number_at(r.config, {section, key}); };
  const int pp = static_cast<int>(number("parallel", "pp").value_or(1));
  // The bubble is read per stage from one rank each: runs with more ranks per stage (a pipeline beside data
  // parallelism, as in the tensor-parallel study's layouts) are left to their own study's part.
  if (pp <= 1 || r.step_ms_median <= 0 || r.world_size != pp) return std::nullopt;
  const auto by_rank = r.raw.value("summary", nlohmann::json::object()).value("phases_by_rank", nlohmann::json());
  if (!by_rank.is_array() || by_rank.empty()) return std::nullopt;
  StagePoint p;
  p.run = &r;
  p.schedule = parse_pipe_schedule(r.config.value("parallel", nlohmann::json::object()).value("pp_schedule", "1f1b"))
                   .value_or(PipeSchedule::one_f_one_b);
  p.shape = {.stages = pp,
             .micro_batches = static_cast<int>(number("train", "accumulation").value_or(1)),
             .virtual_stages = static_cast<int>(number("parallel", "pp_virtual_stages").value_or(1))};
  // The pp groups' ranks are world / P apart: rank r is stage r / (world / P); one data-parallel rank per stage here.
  double idle_ms = 0, busy_ms = 0;
  for (const auto& row : by_rank) {
    const double busy = row.value("forward_ms", 0.0) + row.value("backward_ms", 0.0),
                 wait = row.value("comm_wait_ms", 0.0);
    p.idle.push_back(busy > 0 ? wait / busy : 0);
    p.busy_ms.push_back(busy);
    idle_ms += wait;
    busy_ms += busy;
  }
  p.measured_bubble = busy_ms > 0 ? idle_ms / busy_ms : 0;
  for (const auto& row : r.raw.value("memory", nlohmann::json::object()).value("ranks", nlohmann::json::array()))
    p.activations.push_back(row.value("activations_bytes", 0.0));
  p.predicted_activations = json_number_at(r.raw, {"prediction", "memory_bytes", "activations"});
  p.predicted_step_ms = json_number_at(r.raw, {"prediction", "step_ms"});
  const PipeTimes equal =
      p.schedule == PipeSchedule::zero_bubble ? PipeTimes{.forward = 1, .backward = 1, .weight = 1} : PipeTimes{};
  try {
    p.formula = predicted_bubble_fraction(p.schedule, p.shape, equal);
  } catch (const std::exception&) {
    return std::nullopt;  // a shape the schedule refuses never trained
  }
  return p;
}

std::string schedule_label(const StagePoint& p) {
  std::string s = pipe_schedule_name(p.schedule);
  if (p.shape.virtual_stages > 1) s += " (v " + std::to_string(p.shape.virtual_stages) + ")";
  return s;
}

// The label with its depth, for a chart's series: "1f1b, P 4".
std::string schedule_and_stages(const StagePoint& p) {
  return schedule_label(p) + ", P " + std::to_string(p.shape.stages);
}

std::string list(const std::vector<double>& values, double scale, int digits) {
  std::string s;
  for (double v : values) s += (s.empty() ? "" : " / ") + fmt_fixed(v * scale, digits);
  return s;
}

std::string table(const std::vector<StagePoint>& points) {
  std::ostringstream h;
  h << "<table class=\"runs\">\n<tr><th>schedule</th><th>P</th><th>m</th><th>step ms</th><th>predicted</th>"
       "<th>idle fraction per stage</th>"
       "<th>busy ms per stage</th><th>bubble measured / formula</th><th>activations MiB per stage</th>"
       "<th>model, stage 0</th></tr>\n";
  for (const StagePoint& p : points) {
    h << "<tr><td>" << html_escape(schedule_label(p)) << "</td><td>" << p.shape.stages << "</td><td>"
      << p.shape.micro_batches << "</td><td>" << fmt_fixed(p.run->step_ms_median, 0) << "</td><td>"
      << (p.predicted_step_ms ? fmt_fixed(*p.predicted_step_ms, 0) : std::string("-")) << "</td><td>"
      << list(p.idle, 1, 3) << "</td><td>" << list(p.busy_ms, 1, 0) << "</td><td>" << fmt_fixed(p.measured_bubble, 3)
      << " / " << fmt_fixed(p.formula, 3) << "</td><td>" << list(p.activations, 1 / kMiB, 1) << "</td><td>"
      << (p.predicted_activations ? fmt_fixed(*p.predicted_activations / kMiB, 1) : std::string("-")) << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

LineChart bubble_chart(const std::map<std::string, std::vector<const StagePoint*>>& by_schedule) {
  LineChart c;
  c.title = "Pipeline bubble vs micro-batches per step";
  c.x_label = "micro-batches per step (m)";
  c.y_label = "idle / busy time, summed over the stages";
  c.y_from_zero = true;
  c.log_x = true;
  int colour = 0;
  for (const auto& [name, points] : by_schedule) {
    Series measured{name, {}, {}}, formula{name + " (formula)", {}, {}};
    measured.colour = formula.colour = ++colour;
    formula.dashed = true;
    for (const StagePoint* p : points) {
      measured.x.push_back(p->shape.micro_batches);
      measured.y.push_back(p->measured_bubble);
      formula.x.push_back(p->shape.micro_batches);
      formula.y.push_back(p->formula);
    }
    c.series.push_back(std::move(measured));
    c.series.push_back(std::move(formula));
  }
  return c;
}

// Per m: the schedule that idled least and the fastest one; the relative error of each measured bubble against its
// formula at m >= 2P (the target is 15%); GPipe's activations against 1F1B's at the largest m.
std::string answer(const std::vector<StagePoint>& points) {
  std::map<std::pair<int, int>, std::vector<const StagePoint*>> by_m;  // by (P, m)
  for (const StagePoint& p : points) by_m[{p.shape.stages, p.shape.micro_batches}].push_back(&p);
  std::ostringstream h;
  for (const auto& [shape, at_m] : by_m) {
    const auto [stages, m] = shape;
    if (at_m.size() < 2) continue;
    const auto least = *std::min_element(
        at_m.begin(), at_m.end(), [](const auto* a, const auto* b) { return a->measured_bubble < b->measured_bubble; });
    const auto fastest = *std::min_element(at_m.begin(), at_m.end(), [](const auto* a, const auto* b) {
      return a->run->step_ms_median < b->run->step_ms_median;
    });
    h << "<li>At P = " << stages << ", m = " << m << " " << html_escape(schedule_label(*least)) << " idled least ("
      << fmt_fixed(least->measured_bubble, 3) << " of its busy time; formula " << fmt_fixed(least->formula, 3)
      << ") and " << html_escape(schedule_label(*fastest)) << " ran fastest ("
      << fmt_fixed(fastest->run->step_ms_median, 0) << " ms per step).</li>\n";
  }
  int within = 0, judged = 0;
  std::string misses;
  double imbalance = 1;  // the largest ratio of the slowest stage's busy time to the fastest's
  for (const StagePoint& p : points) {
    const auto [lo, hi] = std::minmax_element(p.busy_ms.begin(), p.busy_ms.end());
    if (lo != p.busy_ms.end() && *lo > 0) imbalance = std::max(imbalance, *hi / *lo);
  }
  for (const StagePoint& p : points) {
    if (p.shape.micro_batches < 2 * p.shape.stages || p.formula <= 0) continue;
    ++judged;
    const double error = (p.measured_bubble - p.formula) / p.formula;
    if (std::fabs(error) <= 0.15)
      ++within;
    else
      misses += (misses.empty() ? "" : "; ") + schedule_label(p) + " at P = " + std::to_string(p.shape.stages) +
                ", m = " + std::to_string(p.shape.micro_batches) + " (" + (error >= 0 ? "+" : "") +
                fmt_fixed(100 * error, 0) + "%)";
  }
  if (judged > 0) {
    h << "<li>At m ≥ 2P the measured bubble was within 15% of its formula for " << within << " of " << judged
      << " runs";
    if (!misses.empty())
      h << "; outside it: " << html_escape(misses)
        << ". The formulas assume stages of equal time and free transfers. Here the stages' busy times differ by up "
           "to ×"
        << fmt_fixed(imbalance, 2)
        << " (the first stage holds the embedding, the last the head and the loss): the faster stage waits for the "
           "slower one at every micro-batch, idle the formula does not count, and each of the 2m transfers per "
           "step adds its latency; zero bubble's formula is taken at F = B = W, where here W (the linears' weight "
           "GEMMs) is shorter than B";
    h << ".</li>\n";
  }
  std::vector<double> errors;  // the step model's relative error per run that has a prediction
  for (const StagePoint& p : points)
    if (p.predicted_step_ms && p.run->step_ms_median > 0)
      errors.push_back((*p.predicted_step_ms - p.run->step_ms_median) / p.run->step_ms_median);
  if (!errors.empty()) {
    std::vector<double> magnitudes;
    for (double e : errors) magnitudes.push_back(std::fabs(e));
    std::sort(magnitudes.begin(), magnitudes.end());
    const auto [lo, hi] = std::minmax_element(errors.begin(), errors.end());
    h << "<li>The step model (the schedule replayed on each stage's calibrated F, B, W and transfer times) came within "
      << fmt_fixed(100 * magnitudes[magnitudes.size() / 2], 0) << "% of the measured step at the median, from "
      << (*lo >= 0 ? "+" : "") << fmt_fixed(100 * *lo, 0) << "% to " << (*hi >= 0 ? "+" : "") << fmt_fixed(100 * *hi, 0)
      << "% over " << errors.size() << " runs (negative: the model is faster than the run).</li>\n";
  }
  const StagePoint *gpipe = nullptr, *one_f_one_b = nullptr;  // at the fewest stages, the most micro-batches
  const auto later = [](const StagePoint* best, const StagePoint& p) {
    return !best || std::make_pair(-p.shape.stages, p.shape.micro_batches) >
                        std::make_pair(-best->shape.stages, best->shape.micro_batches);
  };
  for (const StagePoint& p : points) {
    if (p.schedule == PipeSchedule::gpipe && later(gpipe, p)) gpipe = &p;
    if (p.schedule == PipeSchedule::one_f_one_b && later(one_f_one_b, p)) one_f_one_b = &p;
  }
  if (gpipe && one_f_one_b && gpipe->shape.micro_batches == one_f_one_b->shape.micro_batches &&
      gpipe->shape.stages == one_f_one_b->shape.stages && !gpipe->activations.empty() &&
      !one_f_one_b->activations.empty() && one_f_one_b->activations.front() > 0)
    h << "<li>At m = " << gpipe->shape.micro_batches << " GPipe's first stage kept "
      << fmt_fixed(gpipe->activations.front() / kMiB, 1) << " MiB of activations, 1F1B's "
      << fmt_fixed(one_f_one_b->activations.front() / kMiB, 1) << " MiB (×"
      << fmt_fixed(gpipe->activations.front() / one_f_one_b->activations.front(), 1)
      << "): GPipe holds every micro-batch until its backward, 1F1B at most P.</li>\n";
  return h.str();
}

}  // namespace

std::string pipeline_part(SectionContext& ctx) {
  std::vector<StagePoint> points;
  for (const RunResult& r : ctx.scenario.runs)
    if (const std::optional<StagePoint> p = point_of(r)) points.push_back(*p);
  if (points.empty()) return "";
  std::stable_sort(points.begin(), points.end(), [](const StagePoint& a, const StagePoint& b) {
    return std::make_tuple(a.shape.stages, static_cast<int>(a.schedule), a.shape.micro_batches) <
           std::make_tuple(b.shape.stages, static_cast<int>(b.schedule), b.shape.micro_batches);
  });
  std::map<std::string, std::vector<const StagePoint*>> by_schedule;
  for (const StagePoint& p : points) by_schedule[schedule_and_stages(p)].push_back(&p);
  std::ostringstream h;
  h << "<h3>Pipeline parallelism: the bubble and what each schedule keeps</h3>\n"
    << "<p>Per run: each stage's idle fraction (its median time blocked in receives and the step's two small sums, "
       "over its median forward plus backward), their sum over the stages beside the schedule's formula, and each "
       "stage's activation memory beside the cost model's for stage 0 (its blocks' activations times the "
       "micro-batches the schedule keeps in flight there).</p>\n"
    << table(points);
  h << chart_part("pp_bubble",
                  "Idle over busy time summed over the stages against micro-batches per step: measured (solid) and the "
                  "schedule's formula (dashed; equal stages, free transfers).",
                  [c = bubble_chart(by_schedule)](const Scenario&) { return std::optional<Chart>(c); })(ctx);
  h << pipeline_grid_figure(ctx);
  const std::string answers = answer(points);
  if (!answers.empty())
    h << "<p><strong>The answer, in this run's numbers.</strong></p>\n<ul>\n" << answers << "</ul>\n";
  return h.str();
}

}  // namespace dtlab::analysis
