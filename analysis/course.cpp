// course.cpp: the report's learning order (see course.hpp). To add a study: one line, where its question comes.
#include "analysis/course.hpp"

#include <algorithm>
#include <climits>

namespace dtlab::analysis {

const std::vector<CourseStop>& course() {
  static const std::vector<CourseStop> stops = {
      {"baseline", "One process"},
      {"instrument", "Where a step's time goes"},
      {"ddp", "Data parallelism"},
      {"sharding", "Sharding the state"},
      {"scaling", "Memory per rank as the world grows"},
      {"fit", "What fits"},
      {"precision", "Precision"},
      {"checkpointing", "Activation checkpointing"},
      {"offload", "Offload"},
      {"accumulation", "Gradient accumulation"},
      {"granularity", "Granularity"},
      {"crossover", "Which layout, as the link changes"},
      {"tensor_parallel", "Tensor and sequence parallelism", true},
      {"pipeline", "Pipeline parallelism and its bubble", true},
      {"saving", "Saving and resuming the run"},
  };
  return stops;
}

std::optional<int> course_place(const std::string& study) {
  const std::vector<CourseStop>& stops = course();
  for (std::size_t i = 0; i < stops.size(); ++i)
    if (stops[i].study == study) return static_cast<int>(i) + 1;
  return std::nullopt;
}

std::vector<Scenario> in_course_order(std::vector<Scenario> scenarios) {
  std::stable_sort(scenarios.begin(), scenarios.end(), [](const Scenario& a, const Scenario& b) {
    const int pa = course_place(a.name).value_or(INT_MAX), pb = course_place(b.name).value_or(INT_MAX);
    if (pa != pb) return pa < pb;
    return pa == INT_MAX && a.name < b.name;  // both outside the course: by name; both inside: as found
  });
  return scenarios;
}

}  // namespace dtlab::analysis
