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
// Runs with nodes > 1 start on an emulated cluster (docs/launch.md); a study with such runs on a machine that cannot
// build one (no CAP_NET_ADMIN) prints the reason and writes a scenario.json without runs, exit status 0.
// When <out>/calibration/profile.json exists (`dtlab calibrate`, run first by `make benchmark`), every run gets
// instrument.profile=<it>, so its result.json carries a prediction with times; runs on an emulated cluster take
// <out>/calibration/cluster/profile.json instead when it exists (`dtlab calibrate --nodes 2`, also run by make
// benchmark where clusters can be built), whose inter-node model was measured on the cluster's links.
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
  bool launched = false;                     // started through `dtlab launch` even at world 1 (a world sweep's
                                             // 1-rank point runs the strategy on a communicator of one rank)
  std::string note;                          // shown with the run (e.g. "oversubscribed: 4 ranks on 2 cores")
  // > 1: on an emulated cluster, `dtlab launch --nodes N -n world/N --inter-link R [--intra-link I]` (needs root).
  int nodes = 1;
  std::string inter_link, intra_link;  // tc rates ("1gbit"); "" = unshaped
  bool in_quick = true;                // false: left out with --quick (a swept rate outside sweep.quick)
};

struct Scenario {
  std::string name;  // results/<name>/
  std::string title;
  std::string question;  // the one question the study answers (the report's section opens with it)
  std::string description;
  std::string look_for;  // what to look for in its charts
  std::vector<std::string> notes;
  std::vector<ScenarioRun> runs;
  bool needs_corpus = false;  // build data/corpus.bin first (`dtlab data build`) if missing
  // Some runs need an emulated cluster: without the capabilities to build one the study is skipped, saying why.
  bool needs_cluster() const;
};

// Loads the study spec (an error names the file, the key and the rule: exit status 1), then runs it as argv says.
int run_study(const std::filesystem::path& spec_file, int argc, char** argv);

}  // namespace dtlab
