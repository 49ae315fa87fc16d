// report_answer.cpp: the close of a study's section -- its runs in a few numbers a learner can carry away: the fastest
// and the slowest, the least and the most memory per rank, how closely runs that train the same model agree in loss,
// and the runs that ran out of memory. A study whose own part ends with an answer (course.cpp: answers_itself) keeps
// that one instead.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>
#include <tuple>

#include "analysis/course.hpp"
#include "analysis/html.hpp"
#include "analysis/report.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string ms(double v) { return fmt_fixed(v, v < 10 ? 1 : 0) + " ms"; }
std::string run_name(const RunResult& r) { return "<strong>" + html_escape(r.name) + "</strong>"; }

// Fastest against slowest by median step time, with tokens per second (runs of one world and model compare fairly,
// the others are still what the study measured).
std::string speed_line(const std::vector<const RunResult*>& timed) {
  const auto [fast, slow] = std::minmax_element(timed.begin(), timed.end(), [](const RunResult* a, const RunResult* b) {
    return a->step_ms_median < b->step_ms_median;
  });
  std::ostringstream h;
  h << "  <li>Fastest: " << run_name(**fast) << " at " << ms((*fast)->step_ms_median) << " per step ("
    << fmt_grouped((*fast)->tokens_per_s) << " tokens/s)";
  if (*slow != *fast)
    h << "; slowest: " << run_name(**slow) << " at " << ms((*slow)->step_ms_median) << ", "
      << fmt_fixed((*slow)->step_ms_median / (*fast)->step_ms_median, 2) << "&times; as long";
  h << ".</li>\n";
  return h.str();
}

// The least and the most peak tensor memory on any rank.
std::string memory_line(const std::vector<const RunResult*>& measured) {
  const auto [least, most] = std::minmax_element(
      measured.begin(), measured.end(),
      [](const RunResult* a, const RunResult* b) { return largest_rank_peak(*a) < largest_rank_peak(*b); });
  std::ostringstream h;
  h << "  <li>Least memory: " << run_name(**least) << ", a peak of " << fmt_fixed(largest_rank_peak(**least) / kMiB, 1)
    << " MiB on its fullest rank";
  if (*most != *least)
    h << "; most: " << run_name(**most) << ", " << fmt_fixed(largest_rank_peak(**most) / kMiB, 1) << " MiB ("
      << fmt_fixed(largest_rank_peak(**most) / largest_rank_peak(**least), 2) << "&times;)";
  h << ".</li>\n";
  return h.str();
}

// Runs that train the same model (parameter count, dtype) on the same data (global batch, sequence length) for the
// same steps should end at the same loss: the widest spread of final losses within such a group, when some group has
// two runs or more.
std::string loss_line(const std::vector<RunResult>& runs) {
  using Key = std::tuple<std::int64_t, std::string, std::int64_t, double, double>;
  std::map<Key, std::vector<const RunResult*>> groups;
  for (const RunResult& r : runs)
    if (!r.steps.empty() && std::isfinite(r.final_loss))
      groups[{r.params, r.param_dtype(), r.steps.back().step,
              json_number_at(r.config, {"train", "global_batch"}).value_or(0),
              json_number_at(r.config, {"model", "seq_len"}).value_or(0)}]
          .push_back(&r);
  const std::vector<const RunResult*>* widest = nullptr;
  double widest_spread = -1;
  std::size_t compared = 0;
  for (const auto& [key, group] : groups) {
    if (group.size() < 2) continue;
    compared += group.size();
    const auto [lo, hi] = std::minmax_element(group.begin(), group.end(), [](const RunResult* a, const RunResult* b) {
      return a->final_loss < b->final_loss;
    });
    if ((*hi)->final_loss - (*lo)->final_loss > widest_spread) {
      widest_spread = (*hi)->final_loss - (*lo)->final_loss;
      widest = &group;
    }
  }
  if (!widest) return "";
  std::ostringstream h;
  h << "  <li>Runs that train the same model on the same batches for the same steps (" << compared << " runs) ";
  if (widest_spread == 0) {
    h << "end at the same loss, to the last digit.</li>\n";
  } else {
    std::ostringstream spread;  // small spreads in scientific notation, so they never print as 0.0000
    if (widest_spread < 1e-3)
      spread << std::scientific << std::setprecision(1) << widest_spread;
    else
      spread << std::fixed << std::setprecision(4) << widest_spread;
    h << "end within " << spread.str() << " nats of each other in loss (the widest spread: " << widest->size()
      << " runs of " << (*widest)[0]->param_dtype() << ").</li>\n";
  }
  return h.str();
}

}  // namespace

std::string answer_part(SectionContext& ctx) {
  const Scenario& sc = ctx.scenario;
  if (const std::optional<int> place = course_place(sc.name); place && course()[*place - 1].answers_itself) return "";
  std::vector<const RunResult*> timed, measured;
  for (const RunResult& r : sc.runs) {
    if (r.step_ms_median > 0) timed.push_back(&r);
    if (largest_rank_peak(r) > 0) measured.push_back(&r);
  }
  std::ostringstream h;
  if (!timed.empty()) h << speed_line(timed);
  if (!measured.empty()) h << memory_line(measured);
  h << loss_line(sc.runs);
  if (!sc.oom_runs.empty()) {
    h << "  <li>" << sc.oom_runs.size() << " run" << (sc.oom_runs.size() == 1 ? "" : "s")
      << " ran out of memory under their cap:";
    for (std::size_t i = 0; i < sc.oom_runs.size(); ++i) h << (i ? ", " : " ") << run_name(sc.oom_runs[i]);
    h << ".</li>\n";
  }
  if (h.str().empty()) return "";
  return "<div class=\"answer\"><p><strong>The answer, in this run's numbers.</strong></p>\n<ul>\n" + h.str() +
         "</ul></div>\n";
}

}  // namespace dtlab::analysis
