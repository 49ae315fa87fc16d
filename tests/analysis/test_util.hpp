// test_util.hpp: helpers shared by the analysis tests -- a temp dir that cleans up, file writing, a minimal valid
// result.json document to mutate, and access to the real-run fixtures (copies to modify, a crafted study).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/results.hpp"

namespace dtlab::analysis::testing {

// A fresh directory under $TMPDIR, removed (recursively) when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dtlab_analysis_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Occurrences of `needle` in `haystack`, overlapping ones included.
inline std::size_t count(const std::string& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = haystack.find(needle); p != std::string::npos; p = haystack.find(needle, p + 1)) ++n;
  return n;
}

// The message of the std::invalid_argument `f` throws, or "(no exception)".
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no exception)";
}

inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary);
  out << text;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A result.json with every required key and three steps.
inline nlohmann::json minimal_result(const std::string& strategy = "single", int world_size = 1) {
  nlohmann::json steps = nlohmann::json::array();
  for (int i = 1; i <= 3; ++i) {
    steps.push_back({{"step", i},
                     {"loss", 5.0 - i},
                     {"lr", 3e-4},
                     {"grad_norm", 1.0},
                     {"step_ms", 400.0 + i},
                     {"tokens_per_s", 9900.0 + i}});
  }
  return {
      {"schema_version", 1},
      {"context",
       {{"dtlab_version", "0.1.0"},
        {"git_sha", "abc123"},
        {"torch_version", "2.11.0"},
        {"host", "box"},
        {"world_size", world_size},
        {"launcher", "none"},
        {"started_at", "2026-11-21T20:00:00Z"},
        {"threads", 2},
        {"strategy", strategy},
        {"command", "build/bin/dtlab train --config scenarios/configs/baseline.yaml --out results/x/" + strategy}}},
      {"config",
       {{"model", {{"preset", "small"}, {"d_model", 256}}},
        {"train", {{"steps", 3}, {"global_batch", 8}}},
        {"parallel", {{"strategy", strategy}}}}},
      {"model", {{"params", 4849920}, {"flops_per_token", 3.1e7}, {"preset", "small"}}},
      {"steps", steps},
      {"summary",
       {{"tokens_per_s", 9950.0},
        {"step_ms_median", 410.0},
        {"step_ms_min", 400.0},
        {"step_ms_max", 430.0},
        {"final_loss", 2.1},
        {"tflops", 0.31},
        {"wall_s", 30.2},
        {"measured_steps", 2}}},
  };
}

inline void write_run(const std::filesystem::path& run_dir, const nlohmann::json& result) {
  write_text(run_dir / "result.json", result.dump(1));
}

inline void write_scenario(const std::filesystem::path& dir, const std::string& name,
                           const std::vector<std::string>& runs, const std::string& title = "A title",
                           const std::vector<std::string>& notes = {}) {
  nlohmann::json doc = {{"scenario", name}, {"title", title}, {"description", "what it shows"}, {"notes", notes}};
  doc["runs"] = nlohmann::json::array();
  for (const std::string& r : runs) doc["runs"].push_back({{"name", r}, {"dir", r}});
  write_text(dir / "scenario.json", doc.dump(1));
}

// printf's "%.*f": the text a report shows for a number, computed here independently of the report's formatting.
inline std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

#ifdef DTLAB_ANALYSIS_FIXTURES  // analysis_tests defines it; other test executables use only the helpers above
// tests/analysis/fixtures: real runs written by fixtures/make_fixtures.py (`make fixtures`). Their timings, dates
// and host change with every regeneration, so a test reads what it expects from these files, or builds the
// situation it needs from a copy with an explicit modification (copy_fixture, edit_result).
inline std::string fixtures_dir() { return DTLAB_ANALYSIS_FIXTURES; }

// The run of `sc` named `name` (a fixture's run); throws naming it when the scenario has none.
inline const RunResult& run_named(const Scenario& sc, const std::string& name) {
  for (const RunResult& r : sc.runs)
    if (r.name == name) return r;
  throw std::runtime_error(sc.name + ": no run named " + name);
}

// A fixture file, `rel` to fixtures_dir(), parsed.
inline nlohmann::json fixture_json(const std::string& rel) {
  return nlohmann::json::parse(read_text(std::filesystem::path(fixtures_dir()) / rel));
}

// Copies the fixture dir `rel` (a study, a scenario or a run) to `dest`, recursively; returns dest.
inline std::filesystem::path copy_fixture(const std::string& rel, const std::filesystem::path& dest) {
  std::filesystem::create_directories(dest.parent_path());
  std::filesystem::copy(std::filesystem::path(fixtures_dir()) / rel, dest, std::filesystem::copy_options::recursive);
  return dest;
}

// Rewrites run_dir/result.json after `edit` changed it.
inline void edit_result(const std::filesystem::path& run_dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json doc = nlohmann::json::parse(read_text(run_dir / "result.json"));
  edit(doc);
  write_text(run_dir / "result.json", doc.dump(1));
}

// Every run dir below `dir` (those holding a result.json).
inline std::vector<std::filesystem::path> run_dirs_below(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> runs;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() == "result.json") runs.push_back(e.path().parent_path());
  return runs;
}

// The measured step times (summary.step_ms_median) and predicted ones (prediction.step_ms) that
// crafted_prediction_study sets, in ms: the verdicts of the accuracy tests follow from them.
struct CraftedStepTimes {
  const char* run;
  double measured_ms, predicted_ms;
};
inline constexpr CraftedStepTimes kCraftedStepTimes[] = {{"ddp", 50.0, 48.0},               // -4.0%
                                                         {"zero1", 60.0, 62.0},             // +3.3%
                                                         {"fsdp_full_shard", 59.0, 66.0}};  // +11.9%
inline constexpr double kCraftedOptimizerExtraBytes = 1024;  // added to zero1's predicted optimizer bytes
inline constexpr double kCraftedPeakFactor = 1.25;           // zero1's predicted peak = 1.25 x measured

// The prediction fixture (fixtures/prediction: the real sharding study -- ddp, zero1 and fsdp_full_shard predicted
// with a machine profile -- plus single, predicted without one), copied to `dest` and modified so that the verdict
// of every accuracy target is known whatever the real runs measured:
//   - step times set to kCraftedStepTimes: errors -4.0%, +3.3%, +11.9%, so the median |error| is 4.0% (met); zero1
//     and fsdp_full_shard are ranked wrong while measured within 2% of each other, so 2 of 3 pairs are right (missed);
//   - zero1's predicted optimizer bytes off by kCraftedOptimizerExtraBytes (state bytes exact: missed);
//   - zero1's predicted peak kCraftedPeakFactor x its measured peak (+25%, peak memory: missed);
//   - single's "prediction" removed: a result from before predictions, which accuracy leaves out.
// Kept state, activations and peaks of ddp and fsdp_full_shard stay as the real runs predicted and measured them.
inline std::filesystem::path crafted_prediction_study(const std::filesystem::path& dest) {
  copy_fixture("prediction", dest);
  const std::filesystem::path sharding = dest / "sharding";
  for (const CraftedStepTimes& t : kCraftedStepTimes) {
    edit_result(sharding / t.run, [&](nlohmann::json& doc) {
      doc["summary"]["step_ms_median"] = t.measured_ms;
      doc["prediction"]["step_ms"] = t.predicted_ms;
    });
  }
  edit_result(sharding / "zero1", [](nlohmann::json& doc) {
    nlohmann::json& predicted = doc["prediction"]["memory_bytes"];
    predicted["optimizer"] = predicted["optimizer"].get<double>() + kCraftedOptimizerExtraBytes;
    const int rank = doc["prediction"]["rank"];
    for (const nlohmann::json& measured : doc["memory"]["ranks"])
      if (measured["rank"] == rank)
        predicted["peak"] = kCraftedPeakFactor * measured["tensor_peak_bytes"].get<double>();
  });
  edit_result(sharding / "single", [](nlohmann::json& doc) { doc.erase("prediction"); });
  return dest;
}
#endif

}  // namespace dtlab::analysis::testing
