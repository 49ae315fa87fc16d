// runner.hpp: the shared driver of scenario executables (scenario_<name>).
//
// A study is one spec, scenarios/studies/<name>.yaml (format: study.hpp): a title, a description, notes, runs (each a
// `dtlab train` invocation: config file + overrides, a world size, a note) and comparisons. The runner executes each
// run as its own process through build/bin/dtlab, streams its output, stops at the first failure, writes
// <out>/<study>/scenario.json for the report, then makes the spec's comparisons (compare.hpp). Every run's exact
// command lands in its result.json (context.command), so any chart can be reproduced.
//
// Flags: --out DIR (default results), --quick (few steps: tests), --only RUN (one run by name); hidden:
// --print-runs (print the study and every run's command, run and write nothing), --compare-only (skip the runs).
// When <out>/calibration/profile.json exists (`dtlab calibrate`, run first by `make benchmark`), every run gets
// instrument.profile=<it>, so its result.json carries a prediction with times.
#pragma once

#include <filesystem>
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

// Loads the study spec (an error names the file, the key and the rule: exit status 1), then runs it as argv says.
int run_study(const std::filesystem::path& spec_file, int argc, char** argv);

}  // namespace dtlab
