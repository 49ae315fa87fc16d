// study.hpp: a study spec (scenarios/studies/<name>.yaml) loaded into the runs the runner starts and the
// comparisons it makes afterwards. Adding a study = one YAML file; scenarios/CMakeLists.txt builds scenario_<name>.
//
// Spec keys (any other key is an error):
//   name          = the file's stem; results go to <out>/<name>/
//   title, description, notes[]    shown in scenario.json and the report
//   question, look_for             the one question the study answers and what to look for in its charts: the
//                                  report's section opens with them (optional; every shipped study has both)
//   needs_corpus  build data/corpus.bin first when missing (default false)
//   config        file under scenarios/configs/ for every run (a run may name its own: runs[i].config)
//   quick[]       overrides added to every run with --quick
//   defaults      {world, nodes, intra_link}: for runs that name none (world 1, nodes 1, unshaped)
//   sweep         every run once per point, named <name>@<point>; with --quick only at the `quick` points
//                 (default: all). One axis: {inter_link: [rates], quick: [rates]} (runs need nodes >= 2), a
//                 ladder {model: {<label>: [overrides]}, quick: [labels]} whose overrides follow the run's own (or
//                 the same over any setting: {setting: {<label>: [overrides]}}, e.g. accumulation), or
//                 world sizes {world: [sizes], quick: [sizes]} (points named w<N>; runs then name no world)
//   per_world     {<world>: [overrides]}: added after the overrides of every run of that world size
//   runs[]        {name, overrides[], world, note, config, nodes, inter_link, intra_link, points[]}, started in
//                 this order; an override's {run_dir} / {study_dir} become the run's / the study's results directory;
//                 points: the sweep points the run takes (default: every one), as quick names them; nodes > 1 runs on
//                 an emulated cluster (dtlab launch --nodes), nodes must divide world
//   compare[]     {kind, why, ...}: what the finished runs are compared for (kinds in scenarios/compare.hpp)
//
// Errors name the file, the line, the key and the rule: "<file>:<line>: study: runs[2].world: must be an integer >= 1".
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "scenarios/runner.hpp"

namespace dtlab {

// One group of a tracing_overhead comparison: runs with tracing on vs the same runs with it off.
struct OnOffGroup {
  std::string label;             // printed and written as "strategy"
  std::vector<std::string> on;   // run names
  std::vector<std::string> off;  // run names
};

struct Comparison {
  std::string kind;  // tracing_overhead
  std::string why;   // what is compared and why (documentation, kept with the spec)
  double target_pct = 0;
  std::string output;  // file under <out>/<study>/
  std::vector<OnOffGroup> groups;
};

struct Study {
  Scenario scenario;
  std::vector<Comparison> comparisons;
};

struct StudyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws StudyError for a file that cannot be read or parsed, or that breaks a rule above.
Study load_study(const std::filesystem::path& file);

}  // namespace dtlab
