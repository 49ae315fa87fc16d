// scaling.hpp: memory per rank as the job grows — a study's runs over world sizes (runs named <series>@w<N>,
// scenarios/studies/scaling.yaml) as one series per strategy: per world size, memory by category measured (rank 0;
// the peak is the largest over the ranks) next to the memory model's prediction, the step time and whether the ranks
// had a core each; and the model's projection of the same configuration to 1024 ranks (result.json
// prediction.memory_by_world). The report's scaling part (analysis/report_scaling.cpp) draws and tabulates it
// (torch-free).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/results.hpp"

namespace dtlab::analysis {

// The state categories the memory model counts exactly (strategies/cost_plan.hpp), then the rest of the peak.
inline const std::vector<std::string>& scaling_state_categories() {
  static const std::vector<std::string> names = {"params", "grads", "optimizer", "buffers"};
  return names;
}

struct ScalingPoint {
  int world = 0;
  std::map<std::string, double> measured;   // params, grads, optimizer, buffers, activations (rank 0), peak (max)
  std::map<std::string, double> predicted;  // prediction.memory_bytes: the same names (+ logits), rank 0
  double step_ms = 0, tokens_per_s = 0;
  // The ranks shared cores: world x threads per rank > the machine's cores (context.cpu.cores); nullopt when the
  // CPU was not recorded. Its times say nothing about scaling.
  std::optional<bool> oversubscribed;
  int cores = 0;  // context.cpu.cores, 0 when not recorded
};

// One point of the model's projection: bytes per rank by category at a world size, and the peak.
struct ProjectedPoint {
  int world = 0;
  std::map<std::string, double> bytes;  // params, grads, optimizer, buffers, activations, logits, peak
};

struct ScalingSeries {
  std::string name;                       // the run name before '@'
  std::string strategy;                   // context.strategy
  std::vector<ScalingPoint> points;       // measured, by world size
  std::vector<ProjectedPoint> projected;  // the model, 1 .. 1024 ranks (from the series' largest run)
  // The state bytes (params + grads + optimizer + buffers) of a point, measured or predicted.
  static double state(const std::map<std::string, double>& bytes);
};

struct ScalingStudy {
  std::vector<ScalingSeries> series;
  // State categories measured == predicted, over every point and category (the model's claim: exact).
  int state_exact = 0, state_compared = 0;
};

// The scenario's completed runs whose names are <series>@w<N>, grouped by series; nullopt when no series has two
// world sizes.
std::optional<ScalingStudy> scaling_study(const Scenario& scenario);

}  // namespace dtlab::analysis
