// study_test.cpp: the study spec loader (scenarios/study.hpp): every shipped spec loads, and a bad spec is refused
// naming the file, the line, the key and the rule.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "scenarios/study.hpp"

namespace fs = std::filesystem;

namespace dtlab {
namespace {

const fs::path kStudies = fs::path(DTLAB_SOURCE_DIR) / "scenarios" / "studies";

// <tmp>/<this test's name>/<name>.yaml: a directory per test, so tests run side by side (ctest -j) never read a
// spec another one is writing (the stem must stay the spec's name).
fs::path spec_path(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::create_directories(dir);
  return dir / (name + ".yaml");
}

// `text` written as spec_path(name) and loaded.
Study load_text(const std::string& name, const std::string& text) {
  const fs::path file = spec_path(name);
  std::ofstream(file) << text;
  return load_study(file);
}

// The error text of loading `text` as spec_path(name) ("" when it loads).
std::string load_error(const std::string& text, const std::string& name = "bad") {
  try {
    load_text(name, text);
    return "";
  } catch (const StudyError& e) {
    return e.what();
  }
}

const std::string kMinimal = "name: bad\ntitle: t\ndescription: d\nconfig: ddp.yaml\n";

// Every shipped study also states its question and what to look for: the report's section opens with them.
TEST(ScenarioStudy, EveryShippedSpecLoadsAndNamesAConfigThatExists) {
  int specs = 0;
  for (const auto& entry : fs::directory_iterator(kStudies)) {
    if (entry.path().extension() != ".yaml") continue;
    ++specs;
    const Study study = load_study(entry.path());
    EXPECT_EQ(study.scenario.name, entry.path().stem().string());
    EXPECT_FALSE(study.scenario.question.empty()) << entry.path() << ": no question";
    EXPECT_FALSE(study.scenario.look_for.empty()) << entry.path() << ": no look_for";
    for (const auto& run : study.scenario.runs)
      EXPECT_TRUE(fs::exists(fs::path(DTLAB_SOURCE_DIR) / "scenarios" / "configs" / run.config)) << run.config;
  }
  EXPECT_GE(specs, 4);
}

TEST(ScenarioStudy, DefaultsAndPerWorldOverridesExpandInOrder) {
  const Study study =
      load_text("expand",
                "name: expand\ntitle: t\ndescription: d\nconfig: ddp.yaml\nquick: [train.steps=2]\n"
                "defaults: {world: 2}\nper_world: {2: [train.micro_batch=4], 4: [train.micro_batch=2]}\n"
                "runs:\n  - {name: a, overrides: [parallel.strategy=x]}\n"
                "  - {name: b, world: 4, config: other.yaml, note: n}\n  - {name: c, world: 1}\n");
  const auto& runs = study.scenario.runs;
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].overrides, (std::vector<std::string>{"parallel.strategy=x", "train.micro_batch=4"}));
  EXPECT_EQ(runs[0].world_size, 2);
  EXPECT_EQ(runs[0].quick_overrides, std::vector<std::string>{"train.steps=2"});
  EXPECT_EQ(runs[1].overrides, std::vector<std::string>{"train.micro_batch=2"});
  EXPECT_EQ(runs[1].config, "other.yaml");
  EXPECT_EQ(runs[1].note, "n");
  EXPECT_TRUE(runs[2].overrides.empty());
  EXPECT_FALSE(study.scenario.needs_corpus);
}

// A sweep over link rates: every run once per rate on its nodes, named <run>@<rate>; only the quick rates with --quick.
TEST(ScenarioStudy, ASweepRunsEveryRunAtEveryRateOnTheCluster) {
  const Study study =
      load_text("sweep",
                "name: sweep\ntitle: t\ndescription: d\nconfig: ddp.yaml\ndefaults: {world: 4, nodes: 2}\n"
                "sweep: {inter_link: [200mbit, 1gbit], quick: [1gbit]}\n"
                "runs:\n  - {name: a}\n  - {name: b, intra_link: 8gbit}\n");
  const auto& runs = study.scenario.runs;
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].name, "a@200mbit");
  EXPECT_EQ(runs[0].inter_link, "200mbit");
  EXPECT_FALSE(runs[0].in_quick);
  EXPECT_EQ(runs[1].name, "a@1gbit");
  EXPECT_TRUE(runs[1].in_quick);
  EXPECT_EQ(runs[3].name, "b@1gbit");
  EXPECT_EQ(runs[3].intra_link, "8gbit");
  for (const auto& run : runs) {
    EXPECT_EQ(run.nodes, 2);
    EXPECT_EQ(run.world_size, 4);
  }
  EXPECT_TRUE(study.scenario.needs_cluster());

  const std::string bad = spec_path("bad").string();
  EXPECT_EQ(load_error(kMinimal + "sweep: {inter_link: [fast]}\nruns: [{name: a, world: 2, nodes: 2}]\n"),
            bad +
                ":5: study: sweep.inter_link[0]: sweep.inter_link fast: not a link rate; write it as tc does, "
                "e.g. 200mbit, 1gbit, 4gbit (also 1Gbps, 500Mbit/s), between 1 Mbit/s and 1000 Gbit/s");
  EXPECT_EQ(
      load_error(kMinimal + "sweep: {inter_link: [1gbit], quick: [2gbit]}\nruns: [{name: a, world: 2, nodes: 2}]\n"),
      bad + ":5: study: sweep.quick[0]: '2gbit' is not one of the sweep's points");
  EXPECT_EQ(
      load_error(kMinimal + "sweep: {inter_link: [1gbit]}\nruns: [{name: a, world: 2}]\n"),
      bad + ":6: study: runs[0].inter_link: a link rate needs nodes >= 2 (set `nodes` for the run or in defaults)");
  EXPECT_EQ(load_error(kMinimal + "runs: [{name: a, world: 3, nodes: 2}]\n"),
            bad + ":5: study: runs[0].nodes: 2 nodes must divide the world size 3");
}

// A ladder: every run once per step, named <run>@<label>, the step's overrides after the run's own (and after
// per_world's); only the quick steps with --quick.
TEST(ScenarioStudy, ALadderRunsEveryRunAtEveryStepWithItsOverrides) {
  const Study study =
      load_text("ladder",
                "name: ladder\ntitle: t\ndescription: d\nconfig: ddp.yaml\ndefaults: {world: 2}\n"
                "per_world: {2: [train.micro_batch=4]}\n"
                "sweep:\n  model: {d256: [model.d_model=256], d128: [model.d_model=128, model.n_layers=2]}\n"
                "  quick: [d128]\nruns:\n  - {name: a, overrides: [memory.limit=64MiB]}\n");
  const auto& runs = study.scenario.runs;
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].name, "a@d256") << "in the ladder's order";
  EXPECT_EQ(runs[0].overrides,
            (std::vector<std::string>{"memory.limit=64MiB", "train.micro_batch=4", "model.d_model=256"}));
  EXPECT_FALSE(runs[0].in_quick);
  EXPECT_EQ(runs[1].name, "a@d128");
  EXPECT_EQ(runs[1].overrides, (std::vector<std::string>{"memory.limit=64MiB", "train.micro_batch=4",
                                                         "model.d_model=128", "model.n_layers=2"}));
  EXPECT_TRUE(runs[1].in_quick);
  EXPECT_TRUE(runs[1].inter_link.empty());
  EXPECT_FALSE(study.scenario.needs_cluster());

  const std::string bad = spec_path("bad").string();
  EXPECT_EQ(load_error(kMinimal + "sweep: {model: [d128]}\nruns: [{name: a}]\n"),
            bad + ":5: study: sweep.model: must be a map {<label>: [overrides]}, in ladder order");
  EXPECT_EQ(load_error(kMinimal + "sweep: {model: {a/b: [model.d_model=64]}}\nruns: [{name: a}]\n"),
            bad + ":5: study: sweep.model.a/b: a label is part of a directory name: no '/', '@' or space");
  EXPECT_EQ(load_error(kMinimal + "sweep: {model: {s: [x]}, inter_link: [1gbit]}\nruns: [{name: a}]\n"),
            bad + ":5: study: sweep: sweeps one axis: inter_link, model, setting or world");
  const Study setting = load_text("setting",
                                  "name: setting\ntitle: t\ndescription: d\nconfig: ddp.yaml\n"
                                  "sweep: {setting: {a1: [train.micro_batch=8], a2: [train.micro_batch=4]}}\n"
                                  "runs: [{name: ddp, world: 2}]\n");
  ASSERT_EQ(setting.scenario.runs.size(), 2u);
  EXPECT_EQ(setting.scenario.runs[1].name, "ddp@a2");
  EXPECT_EQ(setting.scenario.runs[1].overrides, std::vector<std::string>{"train.micro_batch=4"});
}

// A world sweep: every run once per world size, named <run>@w<N>, with that size's per_world overrides; a run's
// points[] keeps it to some sizes; only the quick sizes with --quick.
TEST(ScenarioStudy, AWorldSweepRunsEveryRunAtEverySizeWithItsPerWorldOverrides) {
  const Study study = load_text("worlds",
                                "name: worlds\ntitle: t\ndescription: d\nconfig: ddp.yaml\n"
                                "per_world: {1: [train.global_batch=1], 4: [train.global_batch=4]}\n"
                                "sweep: {world: [1, 2, 4], quick: [1, 2]}\n"
                                "runs:\n  - {name: a, overrides: [parallel.strategy=ddp]}\n"
                                "  - {name: h, overrides: [parallel.shard_size=2], points: [2, 4]}\n");
  const auto& runs = study.scenario.runs;
  ASSERT_EQ(runs.size(), 5u);
  EXPECT_EQ(runs[0].name, "a@w1");
  EXPECT_EQ(runs[0].world_size, 1);
  EXPECT_EQ(runs[0].overrides, (std::vector<std::string>{"parallel.strategy=ddp", "train.global_batch=1"}));
  EXPECT_TRUE(runs[0].in_quick);
  EXPECT_TRUE(runs[0].launched) << "the 1-rank point runs the strategy under the launcher";
  EXPECT_EQ(runs[1].name, "a@w2");
  EXPECT_EQ(runs[1].world_size, 2);
  EXPECT_EQ(runs[1].overrides, std::vector<std::string>{"parallel.strategy=ddp"}) << "no per_world entry for 2";
  EXPECT_EQ(runs[2].name, "a@w4");
  EXPECT_EQ(runs[2].world_size, 4);
  EXPECT_EQ(runs[2].overrides, (std::vector<std::string>{"parallel.strategy=ddp", "train.global_batch=4"}));
  EXPECT_FALSE(runs[2].in_quick);
  EXPECT_EQ(runs[3].name, "h@w2") << "points: [2, 4] leaves out h@w1";
  EXPECT_EQ(runs[4].name, "h@w4");

  const std::string bad = spec_path("bad").string();
  EXPECT_EQ(load_error(kMinimal + "sweep: {world: [1, 0]}\nruns: [{name: a}]\n"),
            bad + ":5: study: sweep.world[1]: must be an integer >= 1");
  EXPECT_EQ(load_error(kMinimal + "sweep: {world: [1, 2]}\nruns: [{name: a, world: 2}]\n"),
            bad + ":6: study: runs[0].world: the sweep sets the world size of every run (sweep.world)");
  EXPECT_EQ(load_error(kMinimal + "sweep: {world: [1, 2]}\nruns: [{name: a, points: [3]}]\n"),
            bad + ":6: study: runs[0].points[0]: '3' is not one of the sweep's points");
  EXPECT_EQ(load_error(kMinimal + "runs: [{name: a, points: [1]}]\n"),
            bad + ":5: study: runs[0].points: the study has no sweep");
  EXPECT_EQ(load_error(kMinimal + "sweep: {world: [1, 2]}\nruns: [{name: a, nodes: 2}]\n"),
            bad + ":6: study: runs[0].nodes: 2 nodes must divide the swept world size 1");
}

TEST(ScenarioStudy, BadSpecsAreRefusedNamingFileLineKeyAndRule) {
  const std::string file = spec_path("bad").string();
  EXPECT_EQ(load_error(kMinimal + "runs:\n  - name: a\n  - {name: b, world: 0}\n"),
            file + ":7: study: runs[1].world: must be an integer >= 1");
  EXPECT_EQ(load_error(kMinimal + "runs:\n  - {name: a, overides: []}\n"),
            file +
                ":6: study: runs[0].overides: unknown key (known: config, inter_link, intra_link, name, nodes, note, "
                "overrides, points, world)");
  EXPECT_EQ(load_error(kMinimal + "runs:\n  - {name: a, overrides: [train.steps]}\n"),
            file + ":6: study: runs[0].overrides[0]: 'train.steps' is not section.key=value");
  EXPECT_EQ(load_error(kMinimal + "runs:\n  - name: a\n  - name: a\n"), file + ":7: study: runs[1].name: 'a' is taken");
  EXPECT_EQ(load_error("name: other\n"), file + ":1: study: name: 'other' must be the file's stem 'bad'");
  EXPECT_EQ(load_error(kMinimal), file + ": study: runs: must be a non-empty list of runs");
  EXPECT_NE(load_error("name: [\n").find(file + ":"), std::string::npos);
  EXPECT_EQ(load_error(kMinimal + "runs: [{name: a}]\ncompare:\n  - {kind: speedup}\n"),
            file + ":7: study: compare[0].kind: unknown kind (known: tracing_overhead)");
  EXPECT_EQ(
      load_error(kMinimal + "runs: [{name: a}]\ncompare:\n  - kind: tracing_overhead\n    why: w\n    target_pct: 2\n"
                            "    output: o.json\n    groups: [{label: l, on: [a], off: [b]}]\n"),
      file + ":11: study: compare[0].groups[0].off[0]: 'b' is not a run of the study");
}

}  // namespace
}  // namespace dtlab
