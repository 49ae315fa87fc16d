// scaling.cpp: memory per rank across world sizes (see scaling.hpp).
#include "analysis/scaling.hpp"

#include <algorithm>
#include <cmath>

namespace dtlab::analysis {
namespace {

// "w8" -> 8; 0 when the label is not a world size.
int world_of_label(const std::string& label) {
  if (label.size() < 2 || label[0] != 'w' || label.find_first_not_of("0123456789", 1) != std::string::npos) return 0;
  return std::stoi(label.substr(1));
}

std::map<std::string, double> predicted_memory(const RunResult& r) {
  std::map<std::string, double> out;
  for (const char* name : {"params", "grads", "optimizer", "buffers", "activations", "logits", "peak"})
    if (const auto v = json_number_at(r.raw, {"prediction", "memory_bytes", name})) out[name] = *v;
  return out;
}

std::vector<ProjectedPoint> projection(const RunResult& r) {
  std::vector<ProjectedPoint> out;
  if (!r.raw.contains("prediction") || !r.raw["prediction"].is_object()) return out;
  const nlohmann::json& list = r.raw["prediction"].value("memory_by_world", nlohmann::json::array());
  if (!list.is_array()) return out;
  for (const nlohmann::json& entry : list) {
    if (!entry.is_object() || !entry.contains("world_size") || !entry["world_size"].is_number_integer()) continue;
    ProjectedPoint p;
    p.world = entry["world_size"].get<int>();
    for (const auto& [key, value] : entry.items())
      if (key != "world_size" && value.is_number()) p.bytes[key] = value.get<double>();
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace

double ScalingSeries::state(const std::map<std::string, double>& bytes) {
  double total = 0;
  for (const std::string& name : scaling_state_categories()) {
    const auto it = bytes.find(name);
    if (it != bytes.end()) total += it->second;
  }
  return total;
}

std::optional<ScalingStudy> scaling_study(const Scenario& sc) {
  ScalingStudy study;
  std::map<std::string, size_t> index;        // series name -> position, in the order runs appear
  std::map<std::string, int> projected_from;  // series -> the world of the run its projection came from
  for (const RunResult& r : sc.runs) {
    const size_t at = r.name.find('@');
    if (at == std::string::npos || !r.memory) continue;
    const int world = world_of_label(r.name.substr(at + 1));
    if (world != r.world_size || world < 1) continue;
    const std::string name = r.name.substr(0, at);
    if (!index.count(name)) {
      index[name] = study.series.size();
      study.series.push_back({name, r.strategy, {}, {}});
    }
    ScalingSeries& series = study.series[index[name]];
    ScalingPoint p;
    p.world = world;
    const RunResult::Memory& m = *r.memory;
    p.measured = {{"params", m.params}, {"grads", m.grads}, {"optimizer", m.optimizer}, {"buffers", m.buffers}};
    if (m.activations) p.measured["activations"] = *m.activations;
    p.measured["peak"] = largest_rank_peak(r);
    p.predicted = predicted_memory(r);
    p.step_ms = r.step_ms_median;
    p.tokens_per_s = r.tokens_per_s;
    if (r.cpu && r.cpu->cores > 0) {
      p.cores = r.cpu->cores;
      p.oversubscribed = r.world_size * std::max(1, r.threads) > r.cpu->cores;
    }
    for (const std::string& category : scaling_state_categories()) {
      const auto predicted = p.predicted.find(category);
      if (predicted == p.predicted.end()) continue;
      ++study.state_compared;
      study.state_exact += std::fabs(predicted->second - p.measured[category]) < 0.5 ? 1 : 0;
    }
    std::vector<ProjectedPoint> projected = projection(r);
    if (!projected.empty() && world >= projected_from[name]) {  // the largest run's: the most measured context
      series.projected = std::move(projected);
      projected_from[name] = world;
    }
    series.points.push_back(std::move(p));
  }
  bool any = false;
  for (ScalingSeries& s : study.series) {
    std::sort(s.points.begin(), s.points.end(),
              [](const ScalingPoint& a, const ScalingPoint& b) { return a.world < b.world; });
    any = any || s.points.size() >= 2;
  }
  if (!any) return std::nullopt;
  return study;
}

}  // namespace dtlab::analysis
