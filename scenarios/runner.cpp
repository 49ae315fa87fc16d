// runner.cpp: runs a scenario's trainings as processes of build/bin/dtlab (see runner.hpp).
#include "scenarios/runner.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "lab/process.hpp"

namespace fs = std::filesystem;

namespace dtlab {
namespace {

// Runs argv as a child process (stdout/stderr inherited); returns its exit status (128+signal if killed, 127 if it
// could not be started). A program that cannot be executed says why as perror() would: "<program>: <reason>".
int run_command(const std::vector<std::string>& args) {
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

}  // namespace

int run_scenario(const Scenario& scenario, int argc, char** argv) {
  CLI::App app{"scenario_" + scenario.name + ": " + scenario.title};
  std::string out_root = "results";
  bool quick = false;
  std::string only;
  app.add_option("--out", out_root, "results root; this study writes <out>/" + scenario.name);
  app.add_flag("--quick", quick, "a few steps per run (tests, smoke checks)");
  app.add_option("--only", only, "run only the run with this name");
  CLI11_PARSE(app, argc, argv);

  const fs::path bin_dir = fs::canonical("/proc/self/exe").parent_path();
  const fs::path dtlab = bin_dir / "dtlab";
  const fs::path source_dir = DTLAB_SOURCE_DIR;
  if (!fs::exists(dtlab)) {
    std::cerr << "scenario_" << scenario.name << ": " << dtlab << " not found; build it with `make build`\n";
    return 1;
  }
  const fs::path scenario_dir = fs::path(out_root) / scenario.name;
  fs::create_directories(scenario_dir);

  const fs::path corpus = fs::path("data") / "corpus.bin";
  if (scenario.needs_corpus && !fs::exists(corpus)) {
    fs::create_directories(corpus.parent_path());
    const std::vector<std::string> build = {display_path(dtlab), "data", "build", "--out", corpus.string()};
    std::cout << "$ " << join(build) << std::endl;
    if (run_command(build) != 0) return 1;
  }

  const fs::path profile = fs::path(out_root) / "calibration" / "profile.json";
  nlohmann::json manifest = {
      {"scenario", scenario.name}, {"title", scenario.title}, {"description", scenario.description},
      {"notes", scenario.notes},   {"quick", quick},          {"runs", nlohmann::json::array()}};
  for (const auto& run : scenario.runs) {
    if (!only.empty() && run.name != only) continue;
    const fs::path run_dir = scenario_dir / run.name;
    std::vector<std::string> args;
    if (run.world_size > 1) {  // ranks are processes started by the lab's launcher
      args = {display_path(dtlab), "launch", "-n", std::to_string(run.world_size)};
    }
    for (const std::string& a : {display_path(dtlab), std::string("train"), std::string("--config"),
                                 display_path(source_dir / "scenarios" / "configs" / run.config)})
      args.push_back(a);
    for (const auto& o : run.overrides) args.push_back(o);
    if (fs::exists(profile)) args.push_back("instrument.profile=" + display_path(fs::absolute(profile)));
    if (quick)
      for (const auto& o : run.quick_overrides) args.push_back(o);
    args.push_back("--out");
    args.push_back(run_dir.string());
    std::cout << "\n== " << scenario.name << "/" << run.name << "\n$ " << join(args) << std::endl;
    const auto start = std::chrono::steady_clock::now();
    const int status = run_command(args);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status != 0) {
      std::cerr << "scenario_" << scenario.name << ": run '" << run.name << "' failed with status " << status
                << "; command: " << join(args) << "\n";
      return 1;
    }
    manifest["runs"].push_back({{"name", run.name},
                                {"dir", run.name},
                                {"command", join(args)},
                                {"world_size", run.world_size},
                                {"wall_s", seconds},
                                {"note", run.note}});
  }
  std::ofstream(scenario_dir / "scenario.json") << manifest.dump(2) << "\n";
  std::cout << "\nscenario " << scenario.name << ": results in " << scenario_dir.string() << "\n";
  return 0;
}

std::string scenario_out_root(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--out") return argv[i + 1];
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--out=", 0) == 0) return std::string(argv[i]).substr(6);
  return "results";
}

}  // namespace dtlab
