// cli_test.cpp: every `dtlab` subcommand and every scenario program, run as a user runs them (review C16): each
// scenario in --quick mode (tiny model, a few steps) into one results tree, which then feeds `dtlab report`,
// `dtlab report --accuracy` and `dtlab trace merge`; `dtlab predict` on every shipped config (so every
// scenarios/configs/*.yaml loads); `dtlab data build`, `export-reference` and `version`. The commands train, launch,
// comm-bench and calibrate have suites of their own (tests/strategy, tests/launch, tests/dist, tests/unit).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/input_stamp.hpp"
#include "tests/strategy/job.hpp"

namespace dtlab {
namespace {

namespace fs = std::filesystem;
const std::string kBin = std::string(DTLAB_BINARY_DIR) + "/bin/";
const std::string kSource = DTLAB_SOURCE_DIR;
// What the scenario programs read from the checkout at run time (scenarios/runner.cpp, data_root).
const std::vector<std::string> kScenarioInputs = {"scenarios/studies", "scenarios/configs"};

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return nlohmann::json::parse(in);
}

// One results tree for the whole suite: every scenario once, in --quick mode, from a scratch working directory (the
// scenarios build data/corpus.bin there).
class Scenarios : public ::testing::Test {
 protected:
  // ctest runs each case as its own process: the first one runs the scenarios, later ones reuse the tree when the
  // stamp says the same binaries made it from the same study specs and configs (by content: the programs read them
  // from the checkout at run time, so an edit needs no rebuild to change the runs).
  static void SetUpTestSuite() {
    work_ = fs::path(::testing::TempDir()) / "dtlab_cli";
    nlohmann::json stamp = nlohmann::json::object();
    std::vector<fs::path> programs;
    for (const auto& entry : fs::directory_iterator(kBin)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("scenario_", 0) != 0 && name != "dtlab") continue;
      stamp[name] = fs::last_write_time(entry.path()).time_since_epoch().count();
      if (name != "dtlab") programs.push_back(entry.path());
    }
    const nlohmann::json inputs = testing::content_stamp(kSource, kScenarioInputs);
    if (fs::exists(work_ / "stamp.json")) {
      const nlohmann::json recorded = read_json(work_ / "stamp.json");  // named: a loop must not walk a temporary
      const std::string changed = recorded["binaries"] != stamp ? "the scenario programs"
                                                                : testing::first_difference(recorded["inputs"], inputs);
      if (changed.empty()) {
        for (const auto& r : recorded["runs"]) runs_.push_back({r["program"], {r["exit_code"], false, 0, r["output"]}});
        return;
      }
      std::printf("Scenarios: the cached results are stale (%s changed): running every scenario again\n",
                  changed.c_str());
    }
    fs::remove_all(work_);
    fs::create_directories(work_);
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& program : programs) {
      const auto job = testing::run_job(
          {"/bin/sh", "-c", "cd '" + work_.string() + "' && '" + program.string() + "' --quick --out results"}, 600);
      runs_.push_back({program.filename().string(), job});
      runs.push_back({{"program", program.filename().string()}, {"exit_code", job.exit_code}, {"output", job.output}});
    }
    std::ofstream(work_ / "stamp.json") << nlohmann::json{
        {"binaries", stamp},
        {"inputs", inputs},
        {"runs", runs}}.dump();
  }
  struct Ran {
    std::string program;
    testing::JobResult job;
  };
  static inline fs::path work_;
  static inline std::vector<Ran> runs_;
};

TEST_F(Scenarios, EveryScenarioProgramRunsInQuickModeAndWritesItsRuns) {
  ASSERT_GE(runs_.size(), 4u) << "expected scenario_baseline, _ddp, _sharding, _instrument at least";
  for (const auto& r : runs_) {
    EXPECT_EQ(r.job.exit_code, 0) << r.program << "\n" << r.job.output;
    const std::string study = r.program.substr(std::string("scenario_").size());
    const fs::path dir = work_ / "results" / study;
    const auto manifest = read_json(dir / "scenario.json");
    EXPECT_TRUE(manifest["quick"].get<bool>());
    if (manifest["runs"].empty() && manifest["notes"].dump().find("Skipped on this machine") != std::string::npos)
      continue;  // a cluster study where clusters cannot be built (no CAP_NET_ADMIN): skipped, saying why
    ASSERT_FALSE(manifest["runs"].empty()) << r.program;
    for (const auto& run : manifest["runs"]) {
      const auto result = read_json(dir / run["dir"].get<std::string>() / "result.json");
      EXPECT_EQ(result["config"]["model"]["preset"], "tiny") << run["name"];
      // A run that stopped out of memory under its cap (the fit study's larger sizes) is a data point: status oom.
      if (result.value("status", "") != "oom") {
        EXPECT_FALSE(result["steps"].empty()) << run["name"];
      }
      // The command that reruns it: the dtlab binary (by the path the study used), then its arguments.
      const std::string command = result["context"]["command"];
      EXPECT_EQ(fs::path(command.substr(0, command.find(' '))).filename(), "dtlab") << run["name"] << ": " << command;
      EXPECT_NE(command.find(" train --config "), std::string::npos) << run["name"] << ": " << command;
    }
  }
}

TEST_F(Scenarios, ReportRendersEveryStudyFromRealResults) {
  const fs::path out = work_ / "report";
  const auto job = testing::run_job({kBin + "dtlab", "report", (work_ / "results").string(), "-o", out.string()}, 300);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  std::ifstream in(out / "index.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const auto& r : runs_) {
    const std::string study = r.program.substr(std::string("scenario_").size());
    const nlohmann::json scenario = read_json(work_ / "results" / study / "scenario.json");  // named, as above
    for (const auto& run : scenario["runs"]) {
      // The report shows the command that reruns the run (the launch command for a job of several ranks); the
      // binary's path may be written relative to where the study ran, so compare from the subcommand on.
      const std::string command = run["command"];
      EXPECT_NE(html.find(command.substr(command.find(' '), 80)), std::string::npos)
          << "the report lacks the command of " << study << "/" << run["name"] << ": " << command;
    }
  }
  int pngs = 0;
  for (const auto& f : fs::directory_iterator(out)) pngs += f.path().extension() == ".png";
  EXPECT_GT(pngs, 3) << job.output;
  // The link-rate sweep (scenario_crossover, two rates in --quick) gets its crossover part: curves and the table.
  if (!read_json(work_ / "results" / "crossover" / "scenario.json")["runs"].empty()) {
    EXPECT_NE(html.find("Crossover: where communication stops hiding"), std::string::npos);
    EXPECT_TRUE(fs::exists(out / "crossover_step_crossover.png"));
    EXPECT_TRUE(fs::exists(out / "crossover_exposed_crossover.png"));
    for (const char* series : {"ddp_flat", "ddp_hierarchical", "zero1", "fsdp_full_shard", "fsdp_hybrid"})
      EXPECT_NE(html.find(std::string("<tr><td>") + series + "</td><td>200 Mbit/s – 4.0 Gbit/s</td>"),
                std::string::npos)
          << series;
  }
}

TEST_F(Scenarios, AccuracyPrintsAVerdictPerTargetAndEnforceReflectsIt) {
  const auto job = testing::run_job({kBin + "dtlab", "report", "--accuracy", (work_ / "results").string()}, 120);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("targets:"), std::string::npos) << job.output;
  // --enforce exits 3 exactly when some target was missed or could not be judged.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(job.output, m, std::regex(R"(targets: (\d+) met, (\d+) missed.*?, (\d+) not judged)")))
      << job.output;
  const bool all_met = m[2] == "0" && m[3] == "0";
  const auto enforced =
      testing::run_job({kBin + "dtlab", "report", "--accuracy", "--enforce", (work_ / "results").string()}, 120);
  EXPECT_EQ(enforced.exit_code, all_met ? 0 : 3) << enforced.output;
  // The deterministic target (kept-state bytes, exact) holds on every quick run; CI enforces it on `make benchmark
  // QUICK=1` the same way. The peaks are not enforced: an offloaded run's activation peak moves by ~4% between runs.
  const auto memory = testing::run_job(
      {kBin + "dtlab", "report", "--accuracy", "--enforce-only", "state-bytes", (work_ / "results").string()}, 120);
  EXPECT_EQ(memory.exit_code, 0) << memory.output;
  EXPECT_NE(memory.output.find("accuracy: --enforce-only state-bytes: met"), std::string::npos) << memory.output;
}

TEST_F(Scenarios, TraceMergeJoinsEveryRankOfATracedRun) {
  // scenario_instrument traces its "on" runs.
  fs::path traced;
  for (const auto& f : fs::recursive_directory_iterator(work_ / "results"))
    if (f.path().filename() == "trace.json.gz" && f.path().parent_path().filename() == "rank1")
      traced = f.path().parent_path().parent_path();
  ASSERT_FALSE(traced.empty()) << "no traced 2-rank run in the quick results";
  const fs::path merged = work_ / "merged.json.gz";
  const auto job = testing::run_job({kBin + "dtlab", "trace", "merge", traced.string(), "-o", merged.string()}, 60);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_GT(fs::file_size(merged), 100u);
  EXPECT_NE(job.output.find("2 ranks"), std::string::npos) << job.output;
}

// The Scenarios cache (above) is stale when a study spec or config the programs read changes, by content: an edited
// YAML changes the stamp and is named; a file rewritten with the same bytes (a checkout, a touch) does not.
TEST(CacheStamp, AnEditedStudyYamlMakesTheScenarioCacheStale) {
  const fs::path root = fs::path(::testing::TempDir()) / "dtlab_cli_stamp";
  fs::remove_all(root);
  for (const std::string& dir : kScenarioInputs) {
    fs::create_directories(root / dir);
    fs::copy(fs::path(kSource) / dir, root / dir, fs::copy_options::recursive);
  }
  const nlohmann::json before = testing::content_stamp(root, kScenarioInputs);
  EXPECT_TRUE(before.contains("scenarios/studies/ddp.yaml")) << before.dump();
  EXPECT_TRUE(before.contains("scenarios/configs/ddp.yaml")) << before.dump();

  fs::last_write_time(root / "scenarios/studies/ddp.yaml", fs::file_time_type::clock::now());
  EXPECT_EQ(testing::first_difference(before, testing::content_stamp(root, kScenarioInputs)), "");

  std::ofstream(root / "scenarios/studies/ddp.yaml", std::ios::app) << "# one more comment\n";
  const nlohmann::json edited = testing::content_stamp(root, kScenarioInputs);
  EXPECT_EQ(testing::first_difference(before, edited), "scenarios/studies/ddp.yaml");
  std::ofstream(root / "scenarios/configs/new.yaml") << "model: {preset: tiny}\n";  // a config added
  EXPECT_EQ(testing::first_difference(edited, testing::content_stamp(root, kScenarioInputs)),
            "scenarios/configs/new.yaml");
  fs::remove_all(root);
}

// `dtlab predict` loads every shipped config and prints a prediction for it.
TEST(Cli, PredictLoadsEveryShippedConfig) {
  int configs = 0;
  for (const auto& f : fs::directory_iterator(kSource + "/scenarios/configs")) {
    if (f.path().extension() != ".yaml") continue;
    ++configs;
    // Each config at the world size its study runs it with: baseline is the single-process reference.
    const std::string world = f.path().filename() == "baseline.yaml" ? "1" : "2";
    const auto job =
        testing::run_job({kBin + "dtlab", "predict", "--config", f.path().string(), "--world-size", world}, 60);
    ASSERT_EQ(job.exit_code, 0) << f.path() << "\n" << job.output;
    const auto prediction = nlohmann::json::parse(job.output);
    EXPECT_GT(prediction["memory_bytes"]["peak"].get<double>(), 0) << f.path();
  }
  EXPECT_GE(configs, 3);
}

TEST(Cli, PredictProjectsAShapeTooLargeToTrainOnASpecProfile) {
  const auto job = testing::run_job(
      {kBin + "dtlab", "predict", "--config", kSource + "/scenarios/configs/sharding.yaml", "model.preset=7b",
       "precision.param_dtype=bf16", "parallel.strategy=fsdp_full_shard", "train.global_batch=1024",
       "train.micro_batch=1", "--world-size", "256", "--profile", kSource + "/analysis/profiles/h100_sxm.json"},
      60);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("projection"), std::string::npos) << job.output;
}

// --host-ranks: an emulated cluster's 4 ranks share this machine's 2 cores, so each rank computes on half a core
// where the node's 2 ranks (the default) would each have one.
TEST(Cli, PredictSharesTheCoresAmongTheHostRanks) {
  const std::string profile = kSource + "/tests/analysis/fixtures/prediction/calibration/profile.json";
  const auto compute_ms = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {kBin + "dtlab",
                                     "predict",
                                     "--config",
                                     kSource + "/scenarios/configs/sharding.yaml",
                                     "train.global_batch=16",
                                     "--nodes",
                                     "2",
                                     "--ranks-per-node",
                                     "2",
                                     "--profile",
                                     profile};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto job = testing::run_job(args, 60);
    EXPECT_EQ(job.exit_code, 0) << job.output;
    return nlohmann::json::parse(job.output)["compute_ms"].get<double>();
  };
  const double node = compute_ms({});
  EXPECT_DOUBLE_EQ(compute_ms({"--host-ranks", "2"}), node);
  EXPECT_NEAR(compute_ms({"--host-ranks", "4"}), 2 * node, 1e-9 * node);
}

// dtlab advise --verify on tiny: the top 2 run as real jobs under memory.limit = the budget; advice.json holds the
// advice and the verification, every run its result.json with the prediction beside the measurement, scenario.json
// makes the directory a report input.
TEST(Cli, AdviseVerifiesItsTopPicksByRunningThem) {
  const fs::path out = fs::path(::testing::TempDir()) / "dtlab_advise";
  fs::remove_all(out);
  const std::string profile = kSource + "/tests/analysis/fixtures/prediction/calibration/profile.json";
  const auto job = testing::run_job(
      {kBin + "dtlab", "advise", "--config", kSource + "/tests/strategy/tiny_ddp.yaml", "--world-size", "2",
       "--memory-budget", "2500KiB", "--profile", profile, "--verify", "2", "--steps", "5", "--out", out.string()},
      300);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("why:"), std::string::npos) << job.output;
  EXPECT_NE(job.output.find("measured best of the top 2: #"), std::string::npos) << job.output;
  const auto advice = read_json(out / "advice.json");
  const auto& runs = advice["verification"]["runs"];
  // The top 2 (predicted to fit: they complete) and the nearest rejected (predicted over: they stop out of memory).
  ASSERT_EQ(runs.size(), 2u + std::min<size_t>(2, advice["rejected"].size()));
  ASSERT_GE(runs.size(), 3u);
  for (size_t i = 0; i < runs.size(); ++i) {
    const bool top = i < 2;
    EXPECT_EQ(runs[i]["predicted_fits"], top);
    EXPECT_EQ(runs[i]["status"], top ? "completed" : "oom") << runs[i].dump();
    const auto& candidate = top ? advice["ranked"][i] : advice["rejected"][i - 2];
    EXPECT_EQ(runs[i]["description"], candidate["description"]);
    const auto result = read_json(fs::path(runs[i]["dir"].get<std::string>()) / "result.json");
    EXPECT_EQ(result["memory"]["limit_bytes"].get<int64_t>(), 2500 * 1024);
    if (top) {
      EXPECT_GT(result["prediction"]["step_ms"].get<double>(), 0);
    }
    EXPECT_EQ(result["config"]["parallel"]["strategy"], candidate["settings"]["strategy"]);
    if (!top) continue;
    // Each of the top K ran --repeats (default 2) times; its figure is the median of them, not the fastest.
    const auto repeats = runs[i]["repeats_step_ms"].get<std::vector<double>>();
    ASSERT_EQ(repeats.size(), 2u) << runs[i].dump();
    const auto earlier = read_json(out / (runs[i]["name"].get<std::string>() + "-r1") / "result.json");
    EXPECT_DOUBLE_EQ(repeats[0], earlier["summary"]["step_ms_median"].get<double>());
    EXPECT_DOUBLE_EQ(repeats[1], result["summary"]["step_ms_median"].get<double>());
    EXPECT_DOUBLE_EQ(runs[i]["measured_step_ms"].get<double>(), 0.5 * (repeats[0] + repeats[1]));
  }
  EXPECT_TRUE(advice["verification"]["held"].is_boolean());
  EXPECT_EQ(advice["verification"]["feasibility_right"], runs.size());
  EXPECT_EQ(read_json(out / "scenario.json")["runs"].size(), runs.size());
  const auto report = testing::run_job({kBin + "dtlab", "report", out.string(), "-o", (out / "report").string()}, 120);
  ASSERT_EQ(report.exit_code, 0) << report.output;
  std::ifstream html(out / "report" / "index.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("Advice, verified"), std::string::npos);
  EXPECT_NE(page.find(advice["verification"]["held"].get<bool>() ? "The advice held." : "The advice did not hold."),
            std::string::npos);
}

// dtlab max-batch --verify: the predicted largest micro-batch completes under the cap, the next one stops out of
// memory.
TEST(Cli, MaxBatchIsConfirmedOnBothSidesOfTheBoundary) {
  const fs::path out = fs::path(::testing::TempDir()) / "dtlab_max_batch";
  const auto job = testing::run_job(
      {kBin + "dtlab", "max-batch", "--config", kSource + "/tests/strategy/tiny_ddp.yaml", "--world-size", "2",
       "--memory-budget", "8MiB", "--steps", "3", "--verify", "--out", out.string()},
      300);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("confirmed: fits at the answer, out of memory at the next size"), std::string::npos)
      << job.output;
}

TEST(Cli, AdviseRefusesAModelItDoesNotKnow) {
  const auto job = testing::run_job(
      {kBin + "dtlab", "advise", "--config", kSource + "/tests/strategy/tiny_ddp.yaml", "model.preset=gpt9",
       "--world-size", "2", "--memory-budget", "1GiB", "--profile", kSource + "/analysis/profiles/h100_sxm.json"},
      60);
  EXPECT_EQ(job.exit_code, 2) << job.output;
  EXPECT_NE(job.output.find("model.preset"), std::string::npos) << job.output;
  const auto bad_budget =
      testing::run_job({kBin + "dtlab", "advise", "--config", kSource + "/tests/strategy/tiny_ddp.yaml",
                        "--memory-budget", "lots", "--profile", kSource + "/analysis/profiles/h100_sxm.json"},
                       60);
  EXPECT_EQ(bad_budget.exit_code, 1) << bad_budget.output;
  EXPECT_NE(bad_budget.output.find("--memory-budget lots"), std::string::npos) << bad_budget.output;
}

TEST(Cli, DataBuildWritesATokenFileOfTheGivenText) {
  const fs::path dir = fs::path(::testing::TempDir()) / "dtlab_cli_data";
  fs::create_directories(dir);
  std::ofstream(dir / "a.txt") << "hello tokens";
  const auto job = testing::run_job(
      {kBin + "dtlab", "data", "build", "--out", (dir / "a.bin").string(), (dir / "a.txt").string()}, 60);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_NE(job.output.find("12 tokens from 1 files"), std::string::npos) << job.output;
  EXPECT_EQ(fs::file_size(dir / "a.bin"), 32u + 12u);  // header + one byte per token
}

TEST(Cli, ExportReferenceWritesTheManifestAndItsFiles) {
  const fs::path dir = fs::path(::testing::TempDir()) / "dtlab_cli_export";
  const auto job =
      testing::run_job({kBin + "dtlab", "export-reference", "--config", kSource + "/tests/strategy/tiny_ddp.yaml",
                        "--world-size", "2", "--out", dir.string(), "train.steps=3"},
                       60);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const auto manifest = read_json(dir / "manifest.json");
  EXPECT_EQ(manifest["world_size"], 2);
  EXPECT_EQ(manifest["steps"], 3);
  EXPECT_EQ(fs::file_size(dir / "init.bin"), 123712u * 4u);  // tiny's parameters, float32
  EXPECT_EQ(fs::file_size(dir / "loss_weights.bin"), 3u * 8u);
  EXPECT_EQ(manifest["data_parallel"], 2);
  EXPECT_EQ(manifest["accumulation"], 1);
  EXPECT_EQ(fs::file_size(dir / "batches.bin"),
            3u * 2u * 1u * 2u * 4u * 64u * 8u);  // steps x D x m x (in, tgt) x B x S
}

// Under a pipeline the two ranks hold one model replica: one data-parallel rank reads the whole global batch as m
// micro-batches (what tests/reference/torch_pipeline.py replays).
TEST(Cli, ExportReferenceSplitsTheBatchOverDataParallelRanksOnly) {
  const fs::path dir = fs::path(::testing::TempDir()) / "dtlab_cli_export_pp";
  const auto job =
      testing::run_job({kBin + "dtlab", "export-reference", "--config", kSource + "/tests/strategy/tiny_ddp.yaml",
                        "--world-size", "2", "--out", dir.string(), "train.steps=3", "parallel.pp=2"},
                       60);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const auto manifest = read_json(dir / "manifest.json");
  EXPECT_EQ(manifest["world_size"], 2);
  EXPECT_EQ(manifest["data_parallel"], 1);
  EXPECT_EQ(manifest["accumulation"], 2);
  EXPECT_EQ(fs::file_size(dir / "batches.bin"), 3u * 1u * 2u * 2u * 4u * 64u * 8u);
}

// A backend this build lacks is a config error, refused before any rendezvous: every rank exits 2 with the same
// line, and no rank waits on a store that is gone (no LibTorch stack trace).
TEST(Cli, NcclInACpuBuildIsRefusedBeforeTheRendezvous) {
  if (DTLAB_CUDA_BUILD) GTEST_SKIP() << "the cuda configuration has NCCL: this refusal is the cpu build's";
  // Each rank alone, not under `dtlab launch`: the launcher stops the other ranks once one has failed, so under it a
  // slower rank may be stopped before it prints. Alone, a rank that reached the rendezvous would wait there for the
  // other until the timeout: a refusal within seconds shows it refused first.
  const std::string out = (fs::path(::testing::TempDir()) / "dtlab_cli_nccl").string();
  const std::string port = std::to_string(20000 + getpid() % 20000);
  for (const char* rank : {"0", "1"}) {
    const auto job = testing::run_job(
        {kBin + "dtlab", "train", "--config", kSource + "/tests/strategy/tiny_ddp.yaml", "parallel.backend=nccl",
         "--out", out, "--rank", rank, "--world-size", "2", "--master-port", port, "--timeout", "30"},
        60);
    EXPECT_EQ(job.exit_code, 2) << "rank " << rank << ":\n" << job.output;
    EXPECT_LT(job.seconds, 20.0) << "rank " << rank << ":\n" << job.output;
    EXPECT_NE(job.output.find("dtlab: parallel.backend=nccl needs the cuda configuration"), std::string::npos)
        << "rank " << rank << ":\n"
        << job.output;
    EXPECT_EQ(job.output.find("TCPStore"), std::string::npos) << job.output;
  }
}

TEST(Cli, VersionNamesDtlabAndTorch) {
  const auto job = testing::run_job({kBin + "dtlab", "version"}, 30);
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_TRUE(std::regex_search(job.output, std::regex(R"(dtlab \S+ \(git \S+\), torch 2\.11\.0)"))) << job.output;
}

}  // namespace
}  // namespace dtlab
