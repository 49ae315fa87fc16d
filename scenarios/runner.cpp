// runner.cpp: runs a study's trainings as processes of build/bin/dtlab, then its comparisons (see runner.hpp).
#include "scenarios/runner.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lab/launch/cluster.hpp"
#include "lab/process.hpp"
#include "lab/results_schema.hpp"
#include "scenarios/compare.hpp"
#include "scenarios/study.hpp"

namespace fs = std::filesystem;

namespace dtlab {
namespace {

// result.json in `run_dir` says the run stopped out of memory (lab/results_schema.hpp: status oom).
bool stopped_out_of_memory(const fs::path& run_dir) {
  std::ifstream in(run_dir / schema::kResultFile);
  const nlohmann::json result = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return result.is_object() && result.value(schema::kStatus, std::string()) == schema::kStatusOom;
}

// Runs argv as a child process (stdout/stderr inherited); returns its exit status (128+signal if killed, 127 if it
// could not be started). A program that cannot be executed says why as perror() would: "<program>: <reason>".
int run_child(const std::vector<std::string>& args) {
  try {
    return run_process(ProcessSpec{.argv = args, .exec_error_after = ": "}).exit_code;
  } catch (const ProcessError&) {
    return 127;
  }
}

std::string join(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

// A path as short as possible: relative to the working directory when below it.
std::string display_path(const fs::path& p) {
  std::error_code ec;
  fs::path rel = fs::relative(p, fs::current_path(), ec);
  if (!ec && !rel.empty() && rel.native().rfind("..", 0) != 0) return rel.string();
  return p.string();
}

// The command line of one run: `dtlab train` (through `dtlab launch -n N` when world > 1) with the run's overrides.
std::vector<std::string> run_command(const ScenarioRun& run, const fs::path& dtlab, const fs::path& source_dir,
                                     const fs::path& profile, bool quick, const fs::path& run_dir) {
  std::vector<std::string> args;
  if (run.nodes > 1) {  // an emulated cluster of run.nodes nodes, world / nodes ranks each
    args = {display_path(dtlab),       "launch", "--nodes",
            std::to_string(run.nodes), "-n",     std::to_string(run.world_size / run.nodes)};
    if (!run.inter_link.empty()) args.insert(args.end(), {"--inter-link", run.inter_link});
    if (!run.intra_link.empty()) args.insert(args.end(), {"--intra-link", run.intra_link});
  } else if (run.world_size > 1 || run.launched) {  // ranks are processes started by the lab's launcher
    args = {display_path(dtlab), "launch", "-n", std::to_string(run.world_size)};
  }
  for (const std::string& a : {display_path(dtlab), std::string("train"), std::string("--config"),
                               display_path(source_dir / "scenarios" / "configs" / run.config)})
    args.push_back(a);
  // {run_dir} and {study_dir} in an override name this run's results directory and the study's (checkpoints that
  // one run writes and a later one loads).
  for (std::string o : run.overrides) {
    for (const auto& [token, path] : {std::pair<std::string, std::string>{"{run_dir}", run_dir.string()},
                                      {"{study_dir}", run_dir.parent_path().string()}})
      for (size_t at = o.find(token); at != std::string::npos; at = o.find(token, at + path.size()))
        o.replace(at, token.size(), path);
    args.push_back(o);
  }
  // A run on an emulated cluster predicts from the profile calibrated on one (both levels), when there is one.
  const fs::path cluster_profile = profile.parent_path() / "cluster" / profile.filename();
  const fs::path& run_profile = run.nodes > 1 && fs::exists(cluster_profile) ? cluster_profile : profile;
  if (fs::exists(run_profile)) args.push_back("instrument.profile=" + display_path(fs::absolute(run_profile)));
  if (quick)
    for (const auto& o : run.quick_overrides) args.push_back(o);
  args.push_back("--out");
  args.push_back(run_dir.string());
  return args;
}

// --only NAME picks a run by its name, or every point of a swept run by the run's own name ("1f1b_p4" picks
// "1f1b_p4@m4" and "1f1b_p4@m8").
bool picked(const std::string& run_name, const std::string& only) {
  return only.empty() || run_name == only || run_name.rfind(only + "@", 0) == 0;
}

// --print-runs: the study as scenario.json would describe it, and each run's command, one block per run.
template <typename CommandOf>
void print_study(const Scenario& scenario, const std::string& only, const CommandOf& command_of) {
  std::cout << "scenario " << scenario.name << ": " << scenario.title << "\n";
  if (!scenario.question.empty()) std::cout << "question: " << scenario.question << "\n";
  std::cout << "description: " << scenario.description << "\n";
  if (!scenario.look_for.empty()) std::cout << "look_for: " << scenario.look_for << "\n";
  for (const auto& note : scenario.notes) std::cout << "note: " << note << "\n";
  std::cout << "needs_corpus: " << (scenario.needs_corpus ? "true" : "false") << "\n";
  for (const auto& run : scenario.runs) {
    if (!picked(run.name, only)) continue;
    std::cout << "== " << scenario.name << "/" << run.name << " (world " << run.world_size << ")\n";
    if (!run.note.empty()) std::cout << "note: " << run.note << "\n";
    std::cout << "$ " << join(command_of(run)) << "\n";
  }
}

// Where the study specs and run configs are: <prefix>/share/dtlab when this program runs from an installed prefix
// (`cmake --install` puts them there, beside bin/), else the checkout it was built from.
fs::path data_root() {
  const fs::path installed = fs::canonical("/proc/self/exe").parent_path().parent_path() / "share" / "dtlab";
  std::error_code ec;
  if (fs::is_directory(installed / "scenarios" / "configs", ec)) return installed;
  return DTLAB_SOURCE_DIR;
}

// Command-line options of a scenario program.
struct RunnerOptions {
  std::string out_root = "results";
  bool quick = false;
  std::string only;
  bool print_runs = false;
  bool compare_only = false;
};

// The runs an earlier invocation recorded in scenario.json, by name (none when there is no such file); nullopt, with
// the reason on stderr, when the file is there but not a study's manifest: --only would otherwise drop its entries.
std::optional<std::map<std::string, nlohmann::json>> recorded_runs(const fs::path& manifest_file) {
  std::map<std::string, nlohmann::json> out;
  std::ifstream in(manifest_file);
  if (!in) return out;
  const nlohmann::json old = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!old.is_object() || !old.contains("runs") || !old["runs"].is_array()) {
    std::cerr << manifest_file.string() << ": not a study's scenario.json (a JSON object with a \"runs\" array); "
              << "--only keeps the other runs' entries from it: move it away or rerun the whole study\n";
    return std::nullopt;
  }
  for (const auto& run : old["runs"])
    if (run.is_object() && run.contains("name") && run["name"].is_string()) out[run["name"].get<std::string>()] = run;
  return out;
}

// Runs the study's trainings in order and writes <out>/<study>/scenario.json (with --print-runs: prints them and
// touches nothing); 0 when every run succeeded. With --only, the runs it leaves out keep their entries from the last
// scenario.json, so the study's results stay whole.
int run_trainings(const Scenario& scenario, const RunnerOptions& options) {
  const bool quick = options.quick;
  const std::string& only = options.only;
  const fs::path bin_dir = fs::canonical("/proc/self/exe").parent_path();
  const fs::path dtlab = bin_dir / "dtlab";
  const fs::path source_dir = data_root();
  if (!fs::exists(dtlab)) {
    std::cerr << "scenario_" << scenario.name << ": " << dtlab << " not found; build it with `make build`\n";
    return 1;
  }
  const fs::path scenario_dir = fs::path(options.out_root) / scenario.name;
  const fs::path profile = fs::path(options.out_root) / "calibration" / "profile.json";
  if (options.print_runs) {
    print_study(scenario, only, [&](const ScenarioRun& run) {
      return run_command(run, dtlab, source_dir, profile, quick, scenario_dir / run.name);
    });
    return 0;
  }
  if (!only.empty() && std::none_of(scenario.runs.begin(), scenario.runs.end(),
                                    [&](const ScenarioRun& run) { return picked(run.name, only); })) {
    std::string names;
    for (const ScenarioRun& run : scenario.runs) names += (names.empty() ? "" : ", ") + run.name;
    std::cerr << "scenario_" << scenario.name << ": --only " << only
              << " names no run of the study; its runs: " << names << "\n";
    return 1;
  }
  fs::create_directories(scenario_dir);
  const std::optional<std::map<std::string, nlohmann::json>> recorded =
      only.empty() ? std::map<std::string, nlohmann::json>{} : recorded_runs(scenario_dir / "scenario.json");
  if (!recorded) return 1;
  const std::map<std::string, nlohmann::json>& earlier = *recorded;
  nlohmann::json manifest = {
      {"scenario", scenario.name}, {"title", scenario.title}, {"description", scenario.description},
      {"notes", scenario.notes},   {"quick", quick},          {"runs", nlohmann::json::array()}};
  if (!scenario.question.empty()) manifest["question"] = scenario.question;
  if (!scenario.look_for.empty()) manifest["look_for"] = scenario.look_for;
  std::string why_not;
  if (scenario.needs_cluster() && !can_build_clusters(&why_not)) {
    std::cout << "scenario_" << scenario.name << ": skipped: its runs need an emulated cluster: " << why_not << "\n";
    manifest["notes"].push_back("Skipped on this machine: its runs need an emulated cluster (" + why_not + ").");
    std::ofstream(scenario_dir / "scenario.json") << manifest.dump(2) << "\n";
    return 0;
  }

  const fs::path corpus = fs::path("data") / "corpus.bin";
  if (scenario.needs_corpus && !fs::exists(corpus)) {
    fs::create_directories(corpus.parent_path());
    const std::vector<std::string> build = {display_path(dtlab), "data", "build", "--out", corpus.string()};
    std::cout << "$ " << join(build) << std::endl;
    if (run_child(build) != 0) return 1;
  }

  for (const auto& run : scenario.runs) {
    if (quick && !run.in_quick) continue;
    if (!picked(run.name, only)) {
      if (const auto kept = earlier.find(run.name); kept != earlier.end()) manifest["runs"].push_back(kept->second);
      continue;
    }
    const fs::path run_dir = scenario_dir / run.name;
    // Each run starts from an empty directory: an earlier run's results, and its checkpoints, which the new run
    // would otherwise resume from (checkpoint.resume=auto), are replaced.
    fs::remove_all(run_dir);
    const std::vector<std::string> args = run_command(run, dtlab, source_dir, profile, quick, run_dir);
    std::cout << "\n== " << scenario.name << "/" << run.name << "\n$ " << join(args) << std::endl;
    const auto start = std::chrono::steady_clock::now();
    const int status = run_child(args);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // A run that stops out of memory under its cap is a data point (the fit study expects some), not a failure.
    const bool out_of_memory = status == schema::kOutOfMemoryExitCode && stopped_out_of_memory(run_dir);
    if (out_of_memory) std::cout << "(out of memory under memory.limit: recorded as a data point)" << std::endl;
    if (status != 0 && !out_of_memory) {
      std::cerr << "scenario_" << scenario.name << ": run '" << run.name << "' failed with status " << status
                << "; command: " << join(args) << "\n";
      return 1;
    }
    manifest["runs"].push_back({{"name", run.name},
                                {"dir", run.name},
                                {"command", join(args)},
                                {"world_size", run.world_size},
                                {"nodes", run.nodes},
                                {"inter_link", run.inter_link},
                                {"wall_s", seconds},
                                {"note", run.note}});
  }
  std::ofstream(scenario_dir / "scenario.json") << manifest.dump(2) << "\n";
  std::cout << "\nscenario " << scenario.name << ": results in " << scenario_dir.string() << "\n";
  return 0;
}

}  // namespace

bool Scenario::needs_cluster() const {
  return std::any_of(runs.begin(), runs.end(), [](const ScenarioRun& r) { return r.nodes > 1; });
}

int run_study(const fs::path& built_spec_file, int argc, char** argv) {
  // Installed: the spec installed beside the configs, so the program needs no checkout.
  const fs::path installed_spec = data_root() / "scenarios" / "studies" / built_spec_file.filename();
  std::error_code ec;
  const fs::path spec_file = fs::is_regular_file(installed_spec, ec) ? installed_spec : built_spec_file;
  Study study;
  try {
    study = load_study(spec_file);
  } catch (const StudyError& e) {
    std::cerr << "scenario_" << spec_file.stem().string() << ": " << e.what() << "\n";
    return 1;
  }
  const Scenario& scenario = study.scenario;
  CLI::App app{"scenario_" + scenario.name + ": " + scenario.title};
  RunnerOptions options;
  app.add_option("--out", options.out_root, "results root; this study writes <out>/" + scenario.name);
  app.add_flag("--quick", options.quick, "a few steps per run (tests, smoke checks)");
  app.add_option("--only", options.only, "run only the run with this name (a swept run: every point of it)");
  app.add_flag("--print-runs", options.print_runs, "print the study and each run's command instead of running them")
      ->group("");  // hidden: for tests and for reading what a study would do
  app.add_flag("--compare-only", options.compare_only, "skip the runs; compare the results already under --out")
      ->group("");  // hidden: for tests and for redoing a comparison without training again
  CLI11_PARSE(app, argc, argv);

  if (!options.compare_only) {
    const int status = run_trainings(scenario, options);
    if (status != 0 || options.print_runs) return status;
  }
  return run_comparisons(study, fs::path(options.out_root) / scenario.name);
}

}  // namespace dtlab
