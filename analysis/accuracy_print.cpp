// accuracy_print.cpp: the accuracy report `dtlab report --accuracy` prints: each target with its runs, its verdict
// and, where one is missed, what the model lacks; see accuracy.hpp. The pairing and the figures are accuracy.cpp's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "analysis/accuracy.hpp"
#include "lab/stats.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// A signed percentage that never prints "-0.0".
std::string pct(double value) {
  if (std::abs(value) < 0.05) value = 0.0;
  return fmt("%+7.1f", value);
}

std::string verdict(bool met) { return met ? "met" : "MISSED"; }

std::string run_id(const RunComparison& c) {
  return c.scenario + "/" + c.run + (c.label == "projection" ? " [projection]" : "");
}

// The run-name column: the longest run id and two spaces.
std::size_t run_column_width(const AccuracySummary& s) {
  std::size_t width = 0;
  for (const RunComparison& c : s.runs) width = std::max(width, run_id(c).size());
  return width + 2;
}

// The first lines: how many runs, which profiles, which runs were left out. False when there is nothing to judge.
bool print_accuracy_header(const AccuracySummary& s, std::ostream& out) {
  std::set<std::string> profiles;
  for (const RunComparison& c : s.runs)
    profiles.insert(c.profile.empty() ? "none"
                                      : c.profile + " (" + (c.profile_kind.empty() ? "?" : c.profile_kind) + ")");
  std::string profile_list;
  for (const std::string& p : profiles) profile_list += (profile_list.empty() ? "" : ", ") + p;
  out << "dtlab accuracy: predicted vs measured over " << s.runs.size() << " run" << (s.runs.size() == 1 ? "" : "s")
      << " with a prediction; profile " << (profile_list.empty() ? "none" : profile_list) << "\n";
  if (!s.without_prediction.empty()) {
    out << "  (" << s.without_prediction.size() << " run" << (s.without_prediction.size() == 1 ? "" : "s")
        << " without a prediction left out: ";
    for (std::size_t i = 0; i < s.without_prediction.size(); ++i) {
      if (i == 4) {
        out << ", ...";
        break;
      }
      out << (i ? ", " : "") << s.without_prediction[i];
    }
    out << ")\n";
  }
  out << "  error = (predicted - measured) / measured; [projection]: predicted beyond what the profile measured\n";
  if (s.runs.empty()) {
    out << "nothing to judge: no result.json carries \"prediction\" (set instrument.profile, rerun the studies)\n";
    return false;
  }
  return true;
}

// Target 1: the kept state (params, grads, optimizer) exact. Nullopt when no run could be judged.
std::optional<bool> print_state_bytes(const AccuracySummary& s, std::size_t width, std::ostream& out) {
  out << "\nState bytes (target: params, grads, optimizer bytes exact)\n";
  std::optional<bool> state_ok;
  for (const RunComparison& c : s.runs) {
    out << "  " << pad(run_id(c), width);
    std::optional<bool> run_ok;
    for (const char* category : {"params", "grads", "optimizer"}) {
      auto it = c.memory_bytes.find(category);
      if (it == c.memory_bytes.end()) {
        out << category << " –     ";
        continue;
      }
      const bool exact = it->second.exact();
      run_ok = run_ok.value_or(true) && exact;
      out << category
          << (exact ? " yes   " : " NO (" + fmt("%+.0f", it->second.predicted - it->second.measured) + " B)   ");
    }
    out << (run_ok ? verdict(*run_ok) : "not judged") << "\n";
    if (run_ok) state_ok = state_ok.value_or(true) && *run_ok;
  }
  return state_ok;
}

// Target 2: peak memory within kPeakMemoryTargetPct per run whose peak does not depend on thread timing; the others
// are printed with their error and "timing-dependent" instead of a verdict.
std::optional<bool> print_peak_memory(const AccuracySummary& s, std::size_t width, std::ostream& out) {
  out << "\nPeak memory (target: within " << fmt("%.0f", kPeakMemoryTargetPct)
      << "% per run; the device side, which memory.limit caps, where the run recorded it; a strategy whose comm "
         "thread allocates has a timing-dependent peak, printed and not judged)\n";
  std::optional<bool> peak_ok;
  bool any_peak = false;
  for (const RunComparison& c : s.runs) {
    auto it = c.memory_bytes.find(kPeak);
    if (it == c.memory_bytes.end()) continue;
    any_peak = true;
    const double err = it->second.error_pct();
    const bool ok = std::abs(err) <= kPeakMemoryTargetPct;
    if (!c.peak_timing_dependent) peak_ok = peak_ok.value_or(true) && ok;
    out << "  " << pad(run_id(c), width) << "predicted " << fmt("%9.1f", it->second.predicted / kMiB)
        << " MiB   measured " << fmt("%9.1f", it->second.measured / kMiB) << " MiB   error " << pct(err) << "%   "
        << (c.peak_timing_dependent ? "timing-dependent" : verdict(ok)) << "\n";
  }
  if (!any_peak)
    out << "  no run has both a predicted and a measured peak (memory.tensor_peak_bytes)\n";
  else if (!peak_ok)
    out << "  every peak here is timing-dependent: none judged\n";
  return peak_ok;
}

// After a missed step-time target: where prediction and measurement part, over the counted runs that recorded
// phases — the median difference (predicted − measured, ms) of each part of the step, and the part with the largest.
void print_what_the_model_lacks(const AccuracySummary& s, std::ostream& out) {
  const char* names[] = {"compute (forward + backward)", "exposed communication", "optimizer",
                         "the rest (data, hooks, what no phase covers)"};
  std::vector<double> diffs[4], steps;
  for (const RunComparison& c : s.runs) {
    if (!c.step_ms || c.oversubscribed || !c.predicted_parts || !c.measured_parts) continue;
    if (s.study != "all" && c.scenario != s.study) continue;
    const StepParts& pp = *c.predicted_parts;
    const StepParts& mp = *c.measured_parts;
    const double predicted[] = {pp.forward_backward_ms(), pp.exposed_comm_ms, pp.optimizer_ms};
    const double measured[] = {mp.compute_ms, mp.exposed_comm_ms, mp.optimizer_ms};
    bool complete = true;
    for (int i = 0; i < 3; ++i) complete = complete && !std::isnan(predicted[i]) && !std::isnan(measured[i]);
    if (!complete) continue;
    for (int i = 0; i < 3; ++i) diffs[i].push_back(predicted[i] - measured[i]);
    const double measured_rest = c.step_ms->measured - measured[0] - measured[1] - measured[2];
    const double predicted_rest = c.step_ms->predicted - predicted[0] - predicted[1] - predicted[2];
    diffs[3].push_back(predicted_rest - measured_rest);
    steps.push_back(c.step_ms->measured);
  }
  if (steps.empty()) {
    out << "  what the model lacks: no counted run recorded its phases (summary.phases_ms), so the error cannot be "
           "split\n";
    return;
  }
  const double step = median(steps);
  int largest = 0;
  out << "  where the model and the runs part (median predicted − measured over " << steps.size()
      << " runs with phases):";
  for (int i = 0; i < 4; ++i) {
    const double d = median(diffs[i]);
    if (std::abs(d) > std::abs(median(diffs[largest]))) largest = i;
    out << (i ? "," : "") << " " << names[i] << " " << fmt("%+.1f", d) << " ms";
  }
  const double d = median(diffs[largest]);
  out << "\n  what the model lacks: most of the error is in " << names[largest] << ", which it "
      << (d < 0 ? "under" : "over") << "-estimates by " << fmt("%.1f", std::abs(d)) << " ms per step ("
      << fmt("%.0f", 100.0 * std::abs(d) / step) << "% of the median step)";
  if (largest == 0 && d < 0)
    out << ": the calibrated FLOP rate is faster than training ran here (the ranks' compute shares the cores with "
           "Gloo's threads and with each other, and sequence-dependent work such as attention is not in the rate)";
  else if (largest == 1 && d < 0)
    out << ": communication the schedule model expects to hide behind compute was waited for";
  else if (largest == 3 && d < 0)
    out << ": work outside the timed phases that the step model has no term for";
  out << "\n";
}

// Target 3: the median step-time error over the study, with each run's error and, outside the bound, why.
std::optional<bool> print_step_time(const AccuracySummary& s, std::size_t width, std::ostream& out) {
  out << "\nStep time (target: median |error| within " << fmt("%.0f", kStepTimeTargetPct) << "% over the "
      << (s.study == "all" ? "runs found" : s.study + " study") << "; per run shown against the same bound)\n";
  bool any_time = false;
  for (const RunComparison& c : s.runs) {
    if (!c.step_ms) continue;
    any_time = true;
    const double err = c.step_ms->error_pct();
    out << "  " << pad(run_id(c), width) << "predicted " << fmt("%9.1f", c.step_ms->predicted) << " ms    measured "
        << fmt("%9.1f", c.step_ms->measured) << " ms    error " << pct(err) << "%   "
        << (std::abs(err) <= kStepTimeTargetPct ? "within" : "outside")
        << (c.oversubscribed ? "   (more ranks than cores: not counted)" : "") << "\n";
    if (std::abs(err) > kStepTimeTargetPct && c.predicted_parts) {  // where the difference comes from
      const auto part = [](double ms) { return std::isnan(ms) ? std::string("?") : fmt("%.1f", ms); };
      const StepParts& pp = *c.predicted_parts;
      out << "    " << pad("", width) << "why: predicted compute " << part(pp.compute_ms);
      if (pp.compute_slowed_ms > 0)
        out << " + " << part(pp.compute_slowed_ms) << " slowed by the node's overlapped calls";
      out << " + comm wait " << part(pp.exposed_comm_ms) << " + optimizer " << part(pp.optimizer_ms) << " ms";
      if (c.measured_parts) {
        const StepParts& mp = *c.measured_parts;
        out << "; measured forward+backward " << part(mp.compute_ms) << " + comm wait " << part(mp.exposed_comm_ms)
            << " + optimizer " << part(mp.optimizer_ms) << " ms (phase medians)";
      }
      out << "\n";
    }
  }
  std::optional<bool> step_ok;
  if (!any_time) {
    out << "  no run has a predicted step time (predictions made without a machine profile: run `dtlab calibrate`\n"
           "  and set instrument.profile; or of layouts the step model does not cover yet: pipeline stages)\n";
  } else if (s.median_abs_step_error_pct) {
    step_ok = *s.median_abs_step_error_pct <= kStepTimeTargetPct;
    out << "  median |error| over " << (s.study == "all" ? "all runs" : s.study) << " ("
        << s.study_step_errors_pct.size() << " runs): " << fmt("%.1f", *s.median_abs_step_error_pct) << "%   "
        << verdict(*step_ok) << "\n";
    if (!*step_ok) print_what_the_model_lacks(s, out);
  }
  return step_ok;
}

// Target 4: pairs of runs ranked in the measured order.
std::optional<bool> print_ranking(const AccuracySummary& s, std::ostream& out) {
  out << "\nRanking by step time (target: >= " << fmt("%.0f", kRankingTargetPct) << "% of the pairs measured more than "
      << fmt("%.0f", kRankingNoisePct) << "% apart in the same order)\n";
  std::optional<bool> rank_ok;
  if (s.pairs.empty()) {
    out << "  fewer than two runs with a predicted step time in one scenario: no pair to rank\n";
  } else {
    const auto scored =
        std::count_if(s.pairs.begin(), s.pairs.end(), [](const RankedPair& p) { return !p.within_noise; });
    const auto right =
        std::count_if(s.pairs.begin(), s.pairs.end(), [](const RankedPair& p) { return p.right && !p.within_noise; });
    if (scored == 0) {
      out << "  every pair's measured times are within " << fmt("%.0f", kRankingNoisePct)
          << "% of each other: nothing to rank beyond the noise\n";
    } else {
      const double pct = 100.0 * static_cast<double>(right) / static_cast<double>(scored);
      rank_ok = pct >= kRankingTargetPct;
      out << "  " << right << " of " << scored << " pairs ranked right (" << fmt("%.1f", pct) << "%)   "
          << verdict(*rank_ok) << "; " << (s.pairs.size() - static_cast<std::size_t>(scored))
          << " pair(s) measured within " << fmt("%.0f", kRankingNoisePct) << "% of each other not scored\n";
    }
    for (const RankedPair& p : s.pairs) {
      if (p.right) continue;
      out << "    wrong: " << p.a << " vs " << p.b << ": predicted " << fmt("%.1f", p.predicted_a_ms) << " vs "
          << fmt("%.1f", p.predicted_b_ms) << " ms, measured " << fmt("%.1f", p.measured_a_ms) << " vs "
          << fmt("%.1f", p.measured_b_ms) << " ms"
          << (p.within_noise ? " (measured within " + fmt("%.0f", kRankingNoisePct) + "%: noise, not scored)" : "")
          << "\n";
    }
  }
  return rank_ok;
}

// Target 5: the crossover link rate within kCrossoverFactorTarget. Not applicable (nullopt, not counted) when no
// study swept link rates; not judged when no series crossed inside its range on both sides.
std::optional<bool> print_crossover(const AccuracySummary& s, std::ostream& out, bool& applicable) {
  applicable = !s.crossovers.empty();
  if (!applicable) return std::nullopt;
  out << "\nCrossover link rate (target: the rate where exposed communication falls to "
      << fmt("%.0f", kCrossoverThresholdPct) << "% of the step, predicted within x"
      << fmt("%.1f", kCrossoverFactorTarget) << " of the measured)\n";
  const auto where = [](const Crossing& c) {
    switch (c.kind) {
      case Crossing::within:
        return fmt("%.0f Mbit/s", c.rate_mbps);
      case Crossing::below_range:
        return "below the slowest rate (" + fmt("%.0f Mbit/s", c.rate_mbps) + ")";
      case Crossing::above_range:
        return "above the fastest rate (" + fmt("%.0f Mbit/s", c.rate_mbps) + ")";
      case Crossing::none:
        break;
    }
    return std::string("not predicted");
  };
  // Whether a crossing lies between the crossings of the lowest and of the highest step shares (an end outside the
  // swept rates is open).
  const auto inside = [](const Crossing& x, const std::pair<Crossing, Crossing>& range) {
    if (x.kind != Crossing::within) return false;
    const bool above_low = range.first.kind == Crossing::below_range ||
                           (range.first.kind == Crossing::within && x.rate_mbps >= range.first.rate_mbps);
    const bool below_high = range.second.kind == Crossing::above_range ||
                            (range.second.kind == Crossing::within && x.rate_mbps <= range.second.rate_mbps);
    return above_low && below_high;
  };
  std::optional<bool> ok;
  for (const CrossoverCheck& c : s.crossovers) {
    out << "  " << c.scenario << "/" << c.series << ": measured " << where(c.measured);
    if (c.measured_range) out << " (steps: " << describe_crossing_range(*c.measured_range) << ")";
    out << ", predicted " << where(c.predicted);
    bool explain = c.measured.kind == Crossing::above_range;
    if (const auto f = c.factor()) {
      const bool within = *f <= kCrossoverFactorTarget && *f >= 1.0 / kCrossoverFactorTarget;
      ok = ok.value_or(true) && within;
      explain = explain || !within;
      out << "   x" << fmt("%.2f", *f) << "   " << verdict(within);
      if (!within && c.measured_range && inside(c.predicted, *c.measured_range))
        out << "\n    the prediction lies inside the range the measured steps' spread gives the crossing: the "
               "steps do not pin the crossing down to within x"
            << fmt("%.1f", kCrossoverFactorTarget);
    } else {
      out << "   not judged (not both inside the swept range)";
    }
    out << "\n";
    // What the model lacks where the measured exposure stays high: the share left at the fastest rate.
    const CrossoverPoint& p = c.fastest;
    if (explain && p.predicted_exposed_pct && p.predicted_exposed_ms) {
      out << "    at " << fmt("%.0f Mbit/s", p.rate_mbps) << " exposed communication is " << fmt("%.0f", p.exposed_pct)
          << "% of the measured step (" << fmt("%.0f", p.exposed_ms) << " ms), predicted "
          << fmt("%.0f", *p.predicted_exposed_pct) << "% (" << fmt("%.0f", *p.predicted_exposed_ms) << " ms)";
      if (p.least_wait) {
        out << "; the least wait of any rank, rank 0 waited " << fmt("%.0f", p.rank0_wait_ms) << " ms";
        if (c.oversubscribed)
          out << ". The ranks outnumber the cores: even the rank that reaches a collective last waits while peers "
                 "that are not running take their turns in it, a floor under the wait that the model lacks (it gives "
                 "each rank a core)";
      } else if (c.oversubscribed)
        out << ": the ranks outnumber the cores, so a rank's wait also holds a peer that is not running, and the "
               "model gives each rank a core (these results lack the least wait of any rank, which leaves that out)";
      // Measured over predicted by no more than what the model counts as hidden behind compute: the collectives
      // beside compute hide less than the profile's overlap_hidden says.
      const double over = p.exposed_ms - *p.predicted_exposed_ms;
      const double hidden = p.predicted_comm_ms.value_or(0) - *p.predicted_exposed_ms;
      if (over > 0 && over <= hidden)
        out << "\n    the " << fmt("%.0f", over) << " ms measured over the prediction are within the "
            << fmt("%.0f", hidden)
            << " ms it counts as hidden behind compute: the overlapped collectives hide less here than the "
               "profile's overlap_hidden says";
      out << "\n";
    }
  }
  return ok;
}

}  // namespace

bool print_accuracy(const AccuracySummary& s, std::ostream& out, AccuracyVerdicts* verdicts) {
  if (!print_accuracy_header(s, out)) return false;
  const std::size_t width = run_column_width(s);
  int met = 0, missed = 0, not_judged = 0;
  std::vector<std::string> missed_names;
  std::size_t target = 0;  // the kAccuracyTargets index of the next tally
  auto tally = [&](std::optional<bool> ok, const std::string& name) {
    if (verdicts) (*verdicts)[kAccuracyTargets[target]] = ok;
    ++target;
    if (!ok)
      ++not_judged;
    else if (*ok)
      ++met;
    else {
      ++missed;
      missed_names.push_back(name);
    }
  };
  tally(print_state_bytes(s, width, out), "state bytes exact");
  tally(print_peak_memory(s, width, out), "peak memory");
  tally(print_step_time(s, width, out), "step time median");
  tally(print_ranking(s, out), "ranking");
  bool crossover_applies = false;
  const std::optional<bool> crossover = print_crossover(s, out, crossover_applies);
  if (crossover_applies) tally(crossover, "crossover rate");

  out << "\ntargets: " << met << " met, " << missed << " missed";
  if (!missed_names.empty()) {
    out << " (";
    for (std::size_t i = 0; i < missed_names.size(); ++i) out << (i ? ", " : "") << missed_names[i];
    out << ")";
  }
  out << ", " << not_judged << " not judged; per-collective time: `dtlab comm-bench --model`\n";
  return missed == 0 && not_judged == 0;
}

namespace {

// `--enforce-only`: 0 when each named target was judged and met, else kAccuracyTargetsNotMet with a line on `log`
// naming each that was missed or not judged.
int enforce_targets(const AccuracyVerdicts& verdicts, const std::vector<std::string>& names, std::ostream& log) {
  std::string failed, listed;
  for (const std::string& name : names) {
    listed += (listed.empty() ? "" : ",") + name;
    const auto it = verdicts.find(name);
    if (it == verdicts.end() || !it->second)
      failed += (failed.empty() ? "" : ", ") + name + (it == verdicts.end() ? " (does not apply)" : " (not judged)");
    else if (!*it->second)
      failed += (failed.empty() ? "" : ", ") + name + " (missed)";
  }
  if (failed.empty()) {
    log << "accuracy: --enforce-only " << listed << ": met\n";
    return 0;
  }
  log << "accuracy: --enforce-only " << listed << ": " << failed << "; exit " << kAccuracyTargetsNotMet << "\n";
  return kAccuracyTargetsNotMet;
}

}  // namespace

int run_accuracy(const std::vector<std::string>& inputs, std::ostream& out, std::ostream& log, bool enforce,
                 const std::vector<std::string>& enforce_only) {
  for (const std::string& name : enforce_only) {
    if (std::find(kAccuracyTargets.begin(), kAccuracyTargets.end(), name) != kAccuracyTargets.end()) continue;
    log << "error: --enforce-only: unknown target '" << name << "' (known:";
    for (const char* known : kAccuracyTargets) log << " " << known;
    log << ")\n";
    return 2;
  }
  try {
    const AccuracySummary s = evaluate_accuracy(discover(inputs));
    AccuracyVerdicts verdicts;
    const bool all_met = print_accuracy(s, out, &verdicts);
    if (s.runs.empty()) return 1;
    if (!enforce_only.empty()) return enforce_targets(verdicts, enforce_only, log);
    if (enforce && !all_met) {
      log << "accuracy: --enforce: not every target was met (missed or not judged, see the tally above); exit "
          << kAccuracyTargetsNotMet << "\n";
      return kAccuracyTargetsNotMet;
    }
    return 0;
  } catch (const AnalysisError& e) {
    log << "error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace dtlab::analysis
