// report_precision.cpp: the "Precision" part of a scenario section — every bf16/fp16 run next to its fp32 twin (the
// run whose config differs only in `precision`): how far its losses stray from fp32's, step by step; what it saves
// in memory and bytes; what it costs or saves in time on this CPU; and, under dynamic loss scaling, the scale and
// the skipped steps over time. The takeaways are computed from these runs (torch-free).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// A reduced-precision run, its fp32 twin and the per-step loss difference where both recorded the step.
struct PrecisionPair {
  const RunResult* run = nullptr;
  const RunResult* fp32 = nullptr;
  std::vector<double> steps, loss_delta;  // loss(run) - loss(fp32) at the same step
  double largest_delta() const {
    double largest = 0;
    for (double d : loss_delta) largest = std::max(largest, std::fabs(d));
    return largest;
  }
};

std::string precision_text(const RunResult& r) {
  const nlohmann::json& p = r.config.value("precision", nlohmann::json::object());
  const auto text = [&](const char* key, const char* fallback) {
    return p.contains(key) && p[key].is_string() ? p[key].get<std::string>() : std::string(fallback);
  };
  std::string out = "params " + text("param_dtype", "fp32") + ", reduce " + text("reduce_dtype", "fp32") + ", master " +
                    text("master_dtype", "fp32");
  if (p.value("stochastic_rounding", false)) out += " (stochastic rounding)";
  if (text("loss_scale", "none") == "dynamic") out += ", dynamic loss scale";
  return out;
}

std::vector<PrecisionPair> pairs_of(const Scenario& sc) {
  std::vector<PrecisionPair> out;
  for (const RunResult& r : sc.runs) {
    if (r.param_dtype() == "fp32") continue;
    const RunResult* twin = fp32_twin(sc, r);
    if (!twin) continue;
    PrecisionPair pair{&r, twin, {}, {}};
    for (const StepRecord& s : r.chart_steps())
      for (const StepRecord& t : twin->chart_steps())
        if (t.step == s.step && std::isfinite(s.loss) && std::isfinite(t.loss)) {
          pair.steps.push_back(static_cast<double>(s.step));
          pair.loss_delta.push_back(s.loss - t.loss);
        }
    out.push_back(std::move(pair));
  }
  return out;
}

std::optional<LineChart> delta_chart(const std::vector<PrecisionPair>& pairs) {
  LineChart c;
  c.title = "Loss minus the fp32 run's loss, step by step";
  c.x_label = "step";
  c.y_label = "loss difference from fp32 (nats)";
  for (const PrecisionPair& p : pairs)
    if (!p.steps.empty()) c.series.push_back({p.run->name, p.steps, p.loss_delta});
  if (c.series.empty()) return std::nullopt;
  return c;
}

// The loss scale of every run that recorded one, and its skipped steps as points of their own.
std::optional<LineChart> loss_scale_chart(const std::vector<PrecisionPair>& pairs) {
  LineChart c;
  c.title = "Dynamic loss scale over the run";
  c.x_label = "step";
  c.y_label = "loss scale (log2 axis)";
  c.log_y = true;
  for (const PrecisionPair& p : pairs) {
    Series scale{p.run->name, {}, {}}, skipped{p.run->name + ": skipped steps", {}, {}};
    skipped.points_only = true;
    for (const StepRecord& s : p.run->chart_steps()) {
      if (!std::isfinite(s.loss_scale) || s.loss_scale <= 0) continue;
      scale.x.push_back(static_cast<double>(s.step));
      scale.y.push_back(s.loss_scale);
      if (s.skipped) {
        skipped.x.push_back(static_cast<double>(s.step));
        skipped.y.push_back(s.loss_scale);
      }
    }
    if (scale.x.empty()) continue;
    c.series.push_back(std::move(scale));
    if (!skipped.x.empty()) c.series.push_back(std::move(skipped));
  }
  if (c.series.empty()) return std::nullopt;
  return c;
}

// "−37%" / "+4%": the change from `base` to `value`.
std::string change(double value, double base) {
  if (base <= 0) return "–";
  const double pct = 100.0 * (value - base) / base;
  return (pct >= 0 ? "+" : "−") + fmt_fixed(std::fabs(pct), 0) + "%";
}

// "+0.0126" / "−0.0004" / "0.0000": a loss difference in nats, signed unless it rounds to zero.
std::string signed_nats(double delta) {
  const std::string digits = fmt_fixed(std::fabs(delta), 4);
  if (digits == "0.0000") return digits;
  return (delta > 0 ? "+" : "−") + digits;
}

std::string takeaways(const std::vector<PrecisionPair>& pairs) {
  std::ostringstream h;
  h << "<ul class=\"takeaways\">\n";
  for (const PrecisionPair& p : pairs) {
    const RunResult& r = *p.run;
    const RunResult& f = *p.fp32;
    h << "  <li><strong>" << html_escape(r.name) << "</strong> (" << html_escape(precision_text(r)) << ") against "
      << html_escape(f.name) << ": ";
    if (!p.loss_delta.empty())
      h << "losses within " << fmt_fixed(p.largest_delta(), 4) << " nats of fp32's over " << p.loss_delta.size()
        << " steps (last step " << signed_nats(p.loss_delta.back()) << ")";
    const double peak = largest_rank_peak(r), fp32_peak = largest_rank_peak(f);
    if (peak > 0 && fp32_peak > 0) h << "; peak memory " << change(peak, fp32_peak);
    if (r.comm_bytes_per_step && f.comm_bytes_per_step && *f.comm_bytes_per_step > 0)
      h << "; bytes per step " << change(*r.comm_bytes_per_step, *f.comm_bytes_per_step);
    if (r.step_ms_median > 0 && f.step_ms_median > 0) {
      const double ratio = r.step_ms_median / f.step_ms_median;
      h << "; step time "
        << (ratio >= 1.5 ? fmt_fixed(ratio, 1) + "× fp32's" : change(r.step_ms_median, f.step_ms_median));
    }
    int skipped = 0, scaled = 0;
    double first_scale = 0, last_scale = 0;
    for (const StepRecord& s : r.chart_steps()) {
      if (!std::isfinite(s.loss_scale)) continue;
      if (scaled++ == 0) first_scale = s.loss_scale;
      last_scale = s.loss_scale;
      skipped += s.skipped ? 1 : 0;
    }
    if (scaled > 0)
      h << "; loss scale " << fmt_fixed(first_scale, 0) << " → " << fmt_fixed(last_scale, 0) << ", " << skipped
        << " of " << scaled << " steps skipped for non-finite gradients";
    h << ".";
    // A skipped step is an update not taken: how far the run was from fp32 before its first skip and after it.
    const auto first_skip =
        std::find_if(r.chart_steps().begin(), r.chart_steps().end(), [](const StepRecord& s) { return s.skipped; });
    if (first_skip != r.chart_steps().end() && !p.loss_delta.empty()) {
      double before = 0, after = 0;
      for (size_t i = 0; i < p.steps.size(); ++i) {
        double& side = p.steps[i] <= static_cast<double>(first_skip->step) ? before : after;
        side = std::max(side, std::fabs(p.loss_delta[i]));
      }
      h << " Its first skipped step was step " << first_skip->step << ": up to it the losses were within "
        << fmt_fixed(before, 4) << " nats of fp32's, after it within " << fmt_fixed(after, 4)
        << " — a skipped step is an update the run never takes.";
    }
    h << "</li>\n";
  }
  // bf16 masters with and without stochastic rounding, when the study has both: which one stayed nearer fp32.
  const auto master_bf16 = [](const RunResult& r, bool rounding) {
    const nlohmann::json& p = r.config.value("precision", nlohmann::json::object());
    return p.value("master_dtype", std::string("fp32")) == "bf16" && p.value("stochastic_rounding", false) == rounding;
  };
  const auto plain =
      std::find_if(pairs.begin(), pairs.end(), [&](const PrecisionPair& p) { return master_bf16(*p.run, false); });
  const auto rounded =
      std::find_if(pairs.begin(), pairs.end(), [&](const PrecisionPair& p) { return master_bf16(*p.run, true); });
  if (plain != pairs.end() && rounded != pairs.end() && !plain->loss_delta.empty() && !rounded->loss_delta.empty()) {
    const double a = std::fabs(plain->loss_delta.back()), b = std::fabs(rounded->loss_delta.back());
    h << "  <li>bf16 master weights: at the last step the run with stochastic rounding is " << fmt_fixed(b, 4)
      << " nats from fp32 and the one without " << fmt_fixed(a, 4) << ": "
      << (b < a ? "rounding stochastically kept updates smaller than half a bf16 step from being lost"
                : "here stochastic rounding did not bring the run nearer fp32 (too few steps for lost updates to "
                  "add up, or the learning rate keeps updates above half a bf16 step)")
      << ".</li>\n";
  }
  h << "</ul>\n";
  return h.str();
}

std::string pair_table(const std::vector<PrecisionPair>& pairs) {
  std::ostringstream h;
  h << "<div class=\"table-wrap\"><table class=\"runs precision\">\n<thead><tr><th>run</th><th>precision</th>"
       "<th>compared with</th><th class=\"num\">peak MiB</th><th class=\"num\">bytes/step MiB</th>"
       "<th class=\"num\">step ms</th><th class=\"num\">largest |Δ loss|</th><th class=\"num\">skipped steps</th>"
       "</tr></thead>\n<tbody>\n";
  for (const PrecisionPair& p : pairs) {
    const RunResult& r = *p.run;
    int skipped = 0;
    for (const StepRecord& s : r.chart_steps()) skipped += s.skipped ? 1 : 0;
    const auto both = [](double value, double base, int decimals) {
      return fmt_fixed(value, decimals) + " <span class=\"range\">(fp32 " + fmt_fixed(base, decimals) + ")</span>";
    };
    h << "<tr><td>" << html_escape(r.name) << "</td><td>" << html_escape(precision_text(r)) << "</td><td>"
      << html_escape(p.fp32->name) << "</td><td class=\"num\">"
      << both(largest_rank_peak(r) / kMiB, largest_rank_peak(*p.fp32) / kMiB, 1) << "</td><td class=\"num\">"
      << (r.comm_bytes_per_step && p.fp32->comm_bytes_per_step
              ? both(*r.comm_bytes_per_step / kMiB, *p.fp32->comm_bytes_per_step / kMiB, 2)
              : std::string("–"))
      << "</td><td class=\"num\">" << both(r.step_ms_median, p.fp32->step_ms_median, 0) << "</td><td class=\"num\">"
      << (p.loss_delta.empty() ? "–" : fmt_fixed(p.largest_delta(), 4)) << "</td><td class=\"num\">" << skipped
      << "</td></tr>\n";
  }
  h << "</tbody></table></div>\n";
  return h.str();
}

}  // namespace

std::string precision_part(SectionContext& ctx) {
  const std::vector<PrecisionPair> pairs = pairs_of(ctx.scenario);
  if (pairs.empty()) return "";
  std::ostringstream h;
  h << "<h3>Precision: each bf16/fp16 run against its fp32 twin</h3>\n"
    << "<p class=\"desc\">Each reduced-precision run is compared with the fp32 run whose configuration differs only "
       "in <code>precision</code>. What to look for: how far the losses stray from fp32's and whether the gap grows; "
       "what the run saves in memory and bytes; and what it does to time on this CPU (the box above says whether "
       "bf16 is native here).</p>\n"
    << takeaways(pairs);
  if (const std::optional<LineChart> chart = delta_chart(pairs))
    h << chart_part("precision_delta",
                    "Loss of each reduced-precision run minus its fp32 twin's at the same step (0 = identical).",
                    [c = *chart](const Scenario&) { return std::optional<Chart>(c); })(ctx);
  if (const std::optional<LineChart> chart = loss_scale_chart(pairs))
    h << chart_part("precision_loss_scale",
                    "The dynamic loss scale per step: it halves on a step whose gradients overflow (that step is "
                    "skipped) and doubles after a run of good steps.",
                    [c = *chart](const Scenario&) { return std::optional<Chart>(c); })(ctx);
  h << pair_table(pairs);
  return h.str();
}

}  // namespace dtlab::analysis
