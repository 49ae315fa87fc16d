// report_tensor_parallel.cpp: the "Tensor parallelism" part of a scenario section, for studies with runs that set
// parallel.tp > 1 (scenario_tensor_parallel, whose pipeline run joins the table): every layout's step time, exposed
// communication and memory per rank, measured beside predicted, at each link rate; what placing the tp groups across
// nodes costs (a run against its twin of the same config whose tp groups stay inside a node), measured beside
// predicted; and the section's answer in numbers: the fastest layout at each rate and the memory per rank of each
// (torch-free).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report.hpp"
#include "lab/link_rate.hpp"

namespace dtlab::analysis {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct LayoutPoint {
  const RunResult* run = nullptr;
  double rate_mbps = 0;  // the inter-node rate; 0 = one node or unshaped
  int tp = 1, pp = 1;
  bool sp = false;
  bool pp_crosses_nodes = false;  // the stages (world / pp ranks apart) sit on different nodes
  // A tp group holds ranks of two nodes: placed across them (parallel.tp_placement=inter_node), or consecutive ranks
  // that a node boundary cuts (ranks_per_node % tp != 0).
  bool tp_crosses_nodes = false;
  double step_ms = 0, exposed_ms = 0, peak = 0;
  std::optional<double> model_step_ms, model_exposed_ms, model_peak;
};

int degree_of(const RunResult& r, const char* key) {
  const std::optional<double> degree = json_number_at(r.config, {"parallel", key});
  return degree ? std::max(1, static_cast<int>(*degree)) : 1;
}

LayoutPoint point_of(const RunResult& r) {
  LayoutPoint p;
  p.run = &r;
  p.rate_mbps = r.inter_link_bps.value_or(0) / 1e6;
  p.tp = degree_of(r, "tp");
  p.pp = degree_of(r, "pp");
  p.sp = r.config.value("parallel", nlohmann::json::object()).value("sequence_parallel", false);
  const bool placed_across =
      r.config.value("parallel", nlohmann::json::object()).value("tp_placement", "") == "inter_node";
  p.tp_crosses_nodes =
      p.tp > 1 && r.nodes > 1 && r.ranks_per_node > 0 && (placed_across || r.ranks_per_node % p.tp != 0);
  p.pp_crosses_nodes = p.pp > 1 && r.nodes > 1 && r.ranks_per_node > 0 && (r.world_size / p.pp) % r.ranks_per_node == 0;
  p.step_ms = r.step_ms_median;
  p.exposed_ms = r.comm_wait_least_ms_median.value_or(r.comm_wait_ms_median.value_or(0));  // what every rank waited
  p.peak = largest_rank_device_side_peak(r);
  p.model_step_ms = json_number_at(r.raw, {"prediction", "step_ms"});
  p.model_exposed_ms = json_number_at(r.raw, {"prediction", "comm", "exposed_ms"});
  p.model_peak = json_number_at(r.raw, {"prediction", "memory_bytes", "device_peak"});
  return p;
}

std::string layout_of(const LayoutPoint& p) {
  const RunResult& r = *p.run;
  const int dp = std::max(1, r.world_size / (p.tp * p.pp));
  std::string s = r.strategy;
  if (p.tp == 1 && p.pp == 1) return s + " over " + std::to_string(dp);
  s += ",";
  if (p.pp > 1) s += " pp " + std::to_string(p.pp) + " ×";
  if (p.tp > 1) s += " tp " + std::to_string(p.tp) + " ×";
  s += " dp " + std::to_string(dp);
  if (p.sp) s += " + SP";
  if (p.tp > 1 && r.nodes > 1) s += p.tp_crosses_nodes ? ", tp across nodes" : ", tp inside nodes";
  if (p.pp > 1 && r.nodes > 1) s += p.pp_crosses_nodes ? ", stages across nodes" : ", stages inside nodes";
  return s;
}

// The lab's way of writing a rate (lab/link_rate.hpp); a run on one node has none.
std::string rate_label(double mbps) { return mbps <= 0 ? "one node" : describe_rate(mbps * 1e6); }

std::string ms_pair(double measured, const std::optional<double>& model) {
  std::string s = fmt_fixed(measured, 0);
  if (model) s += " / " + fmt_fixed(*model, 0);
  return s;
}

// A run's config without its tp placement: what two placements of one layout share.
nlohmann::json config_but_placement(const RunResult& r) {
  nlohmann::json c = r.config;
  if (c.contains("parallel") && c["parallel"].is_object()) c["parallel"].erase("tp_placement");
  return c;
}

// The run whose config equals `p`'s but for the tp placement and whose tp groups stay inside a node, at the same rate:
// p's placement twin.
const LayoutPoint* inside_twin(const std::vector<LayoutPoint>& points, const LayoutPoint& p) {
  for (const LayoutPoint& q : points)
    if (!q.tp_crosses_nodes && q.rate_mbps == p.rate_mbps &&
        config_but_placement(*q.run) == config_but_placement(*p.run))
      return &q;
  return nullptr;
}

std::string table(const std::vector<LayoutPoint>& points) {
  std::ostringstream h;
  h << "<table class=\"runs\">\n<tr><th>link</th><th>layout</th><th>step ms (measured / model)</th>"
       "<th>exposed comm ms (measured / model)</th><th>peak MiB per rank (measured / model)</th></tr>\n";
  for (const LayoutPoint& p : points) {
    h << "<tr><td>" << rate_label(p.rate_mbps) << "</td><td>" << html_escape(layout_of(p)) << "</td><td>"
      << ms_pair(p.step_ms, p.model_step_ms) << "</td><td>" << ms_pair(p.exposed_ms, p.model_exposed_ms) << "</td><td>"
      << fmt_fixed(p.peak / kMiB, 1) << (p.model_peak ? " / " + fmt_fixed(*p.model_peak / kMiB, 1) : "")
      << "</td></tr>\n";
  }
  h << "</table>\n";
  return h.str();
}

// Why a measured placement penalty can disagree with the model: where ranks outnumber cores, every blocking tp
// all-reduce waits for its peer to be scheduled, a floor under the wait that the model lacks (it gives each rank a
// core); the twin's exposed wait against its prediction shows the floor's size.
std::string why_the_penalty_is_hidden(const LayoutPoint& inside, double predicted_penalty) {
  const RunResult& r = *inside.run;
  std::ostringstream h;
  if (r.cpu && r.cpu->cores > 0 && r.cpu->cores < r.world_size)
    h << "These runs put " << r.world_size << " ranks on " << r.cpu->cores << " cores. ";
  h << "With tp inside the nodes every rank waited " << fmt_fixed(inside.exposed_ms, 0)
    << " ms per step for communication";
  if (!inside.model_exposed_ms) return h.str();
  const double floor = inside.exposed_ms - *inside.model_exposed_ms;
  h << " against " << fmt_fixed(*inside.model_exposed_ms, 0) << " ms predicted: a wait of " << fmt_fixed(floor, 0)
    << " ms the model lacks (a blocking all-reduce waits for its peer to be scheduled)";
  if (floor >= std::fabs(predicted_penalty))
    h << ", at least the " << fmt_fixed(std::fabs(predicted_penalty), 0)
      << " ms the model predicts between the two placements, so this pair cannot resolve the difference at this rate";
  else
    h << ", less than the " << fmt_fixed(std::fabs(predicted_penalty), 0)
      << " ms the model predicts between the two placements: the model misses more than that wait here";
  return h.str();
}

// What placing tp across nodes cost at each rate, measured and predicted, and the model's ratio to the measurement.
std::string placement_findings(const std::vector<LayoutPoint>& points) {
  std::ostringstream h;
  for (const LayoutPoint& p : points) {
    if (!p.tp_crosses_nodes) continue;
    const LayoutPoint* twin = inside_twin(points, p);
    if (twin == nullptr) continue;
    const double measured = p.step_ms - twin->step_ms;
    h << "<li>At " << rate_label(p.rate_mbps) << ", tp across nodes (" << html_escape(p.run->name) << ") took "
      << fmt_fixed(p.step_ms, 0) << " ms per step against " << fmt_fixed(twin->step_ms, 0)
      << " ms with tp inside the nodes (" << html_escape(twin->run->name) << "): " << (measured >= 0 ? "+" : "")
      << fmt_fixed(measured, 0) << " ms";
    if (p.model_step_ms && twin->model_step_ms) {
      const double predicted = *p.model_step_ms - *twin->model_step_ms;
      h << "; the model predicted " << (predicted >= 0 ? "+" : "") << fmt_fixed(predicted, 0) << " ms";
      const double ratio = measured > 0 && predicted > 0 ? predicted / measured : 0;
      if (ratio > 0)
        h << " (×" << fmt_fixed(ratio, 2) << " of the measured penalty, "
          << (ratio <= 1.5 && ratio >= 1 / 1.5 ? "within" : "outside") << " the ×1.5 target)";
      if (ratio == 0 || ratio > 1.5 || ratio < 1 / 1.5) h << ". " << why_the_penalty_is_hidden(*twin, predicted);
    }
    h << ".</li>\n";
  }
  return h.str();
}

// The fastest layout at each rate, and each layout's memory per rank against the largest.
std::string answer(const std::vector<LayoutPoint>& points) {
  std::map<double, std::vector<const LayoutPoint*>> by_rate;
  for (const LayoutPoint& p : points) by_rate[p.rate_mbps].push_back(&p);
  std::ostringstream h;
  for (const auto& [rate, at_rate] : by_rate) {
    if (at_rate.size() < 2) continue;
    const auto fastest = *std::min_element(at_rate.begin(), at_rate.end(),
                                           [](const auto* a, const auto* b) { return a->step_ms < b->step_ms; });
    const auto slowest = *std::max_element(at_rate.begin(), at_rate.end(),
                                           [](const auto* a, const auto* b) { return a->step_ms < b->step_ms; });
    h << "<li>At " << rate_label(rate) << " the fastest layout was " << html_escape(layout_of(*fastest)) << " ("
      << fmt_fixed(fastest->step_ms, 0) << " ms), the slowest " << html_escape(layout_of(*slowest)) << " ("
      << fmt_fixed(slowest->step_ms, 0) << " ms, ×" << fmt_fixed(slowest->step_ms / fastest->step_ms, 2) << ").</li>\n";
  }
  const auto largest = std::max_element(points.begin(), points.end(),
                                        [](const LayoutPoint& a, const LayoutPoint& b) { return a.peak < b.peak; });
  if (largest != points.end() && largest->peak > 0) {
    h << "<li>Memory per rank (the largest rank's peak, " << rate_label(points.front().rate_mbps) << "): ";
    bool first = true;
    for (const LayoutPoint& p : points) {
      if (p.rate_mbps != points.front().rate_mbps) continue;
      h << (first ? "" : "; ") << html_escape(layout_of(p)) << " " << fmt_fixed(p.peak / kMiB, 1) << " MiB";
      first = false;
    }
    h << ".</li>\n";
  }
  return h.str();
}

}  // namespace

std::string tensor_parallel_part(SectionContext& ctx) {
  std::vector<LayoutPoint> points;
  bool any_tp = false;
  for (const RunResult& r : ctx.scenario.runs) {
    if (r.step_ms_median <= 0) continue;
    points.push_back(point_of(r));
    any_tp = any_tp || points.back().tp > 1;
  }
  if (!any_tp) return "";
  std::stable_sort(points.begin(), points.end(),
                   [](const LayoutPoint& a, const LayoutPoint& b) { return a.rate_mbps < b.rate_mbps; });
  std::ostringstream h;
  const bool any_pp = std::any_of(points.begin(), points.end(), [](const LayoutPoint& p) { return p.pp > 1; });
  h << "<h3>" << (any_pp ? "Tensor and pipeline parallelism" : "Tensor parallelism") << ": which layout, where</h3>\n"
    << "<p>Each layout at each link rate: the median step, the communication every rank waited for (tensor "
       "parallelism's all-reduces block the layer after them, so all of their time is exposed unless another rank "
       "was slower), and the largest rank's peak, each beside the cost model's figure.</p>\n"
    << table(points);
  const std::string placement = placement_findings(points), answers = answer(points);
  if (!placement.empty() || !answers.empty())
    h << "<p><strong>The answer, in this run's numbers.</strong></p>\n<ul>\n" << answers << placement << "</ul>\n";
  return h.str();
}

}  // namespace dtlab::analysis
