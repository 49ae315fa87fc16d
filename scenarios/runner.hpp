// runner.hpp: the shared driver of scenario executables (scenario_<name>).
//
// A scenario is a small file declaring a sweep: a title, a description, notes, and runs, each a
// `dtlab train` invocation (config file + overrides, later a launcher and world size). The runner
// executes each run as its own process through build/bin/dtlab, streams its output, stops at the
// first failure, and writes <out>/<scenario>/scenario.json for the report. Every run's exact command
// lands in its result.json (context.command), so any chart can be reproduced.
//
//   int main(int argc, char** argv) {
//     dtlab::Scenario s{"baseline", "Single process", "...", {...notes}, {{"single", "baseline.yaml", {...}}}};
//     return dtlab::run_scenario(s, argc, argv);
//   }
// Flags: --out DIR (default results), --quick (few steps: tests), --only RUN (one run by name).
// When <out>/calibration/profile.json exists (`dtlab calibrate`, run first by `make benchmark`), every run gets
// instrument.profile=<it>, so its result.json carries a prediction with times.
#pragma once

#include <string>
#include <vector>

namespace dtlab {

struct ScenarioRun {
  std::string name;                          // directory name under <out>/<scenario>/, e.g. "single"
  std::string config;                        // file under scenarios/configs/
  std::vector<std::string> overrides;        // section.key=value
  std::vector<std::string> quick_overrides;  // added with --quick
  int world_size = 1;                        // > 1: started through `dtlab launch -n N`
  std::string note;                          // shown with the run (e.g. "oversubscribed: 4 ranks on 2 cores")
};

struct Scenario {
  std::string name;  // results/<name>/
  std::string title;
  std::string description;
  std::vector<std::string> notes;
  std::vector<ScenarioRun> runs;
  bool needs_corpus = false;  // build data/corpus.bin first (`dtlab data build`) if missing
};

int run_scenario(const Scenario& scenario, int argc, char** argv);

// The --out value of a scenario command line ("results" when absent), for code that reads the runs afterwards.
std::string scenario_out_root(int argc, char** argv);

}  // namespace dtlab
