// test_util.hpp: helpers shared by the analysis tests -- a temp dir that cleans up, file writing, and a
// minimal valid result.json document to mutate.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

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

#ifdef DTLAB_ANALYSIS_FIXTURES  // analysis_tests defines it; other test executables use only the helpers above
inline std::string fixtures_dir() { return DTLAB_ANALYSIS_FIXTURES; }
#endif

}  // namespace dtlab::analysis::testing
