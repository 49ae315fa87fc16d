// results_instrument.hpp: load the instrumentation files a run directory or a benchmark leaves behind -- one-step
// timelines (rank<r>/timeline.json), mean phase times from result.json, and `dtlab comm-bench` JSON
// (comm_bench.json) -- for the report's instrumentation views (torch-free).
//
// Usage:
//   std::vector<RunTimeline> t = load_timelines(scenario, log, problems);  // runs without timelines left out
//   CommBench b = parse_comm_bench(read_instrument_json(file), file.string());
//
// Errors: a malformed file throws AnalysisError naming the file and key; the load_* functions catch them per file,
// log "error: ..." and append the message to `problems`, so one bad file never fails a report.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "analysis/results.hpp"

namespace dtlab::analysis {

inline constexpr int kMaxTimelineRanks = 8;  // a 64-rank job would make a wall of rows; the first 8 show the pattern

// The phases of summary.phases_ms / steps[i].phases_ms, in the order the lab writes them.
inline constexpr const char* kPhaseKeys[] = {"data", "forward", "backward", "comm_wait", "optimizer", "other"};

// Reads and parses one JSON file; AnalysisError "<file>: cannot open" or "<file>: not valid JSON: ...".
nlohmann::json read_instrument_json(const std::filesystem::path& file);

// obj[key] when obj is an object holding a number there, else nullopt.
std::optional<double> optional_number(const nlohmann::json& obj, const char* key);

// Mean milliseconds per phase over the timed steps: summary.phases_ms.<phase>.mean, else the mean of
// steps[i].phases_ms over steps after warm-up. Means (not medians) so the phases add up to the mean step.
// nullopt when the run recorded no phases.
std::optional<std::map<std::string, double>> phase_means_ms(const RunResult& r);

// ---- one-step timelines (rank<r>/timeline.json) ----------------------------------------------------------

struct TimelineSpan {
  std::string lane;  // compute | comm | wait | optimizer | data (others drawn grey on the main row)
  std::string name;
  double start_us = 0, end_us = 0;
};

struct RankTimeline {
  int rank = 0;
  std::int64_t step = 0;
  double step_ms = 0;
  std::vector<TimelineSpan> spans;
};

struct RunTimeline {
  const RunResult* run = nullptr;
  std::vector<RankTimeline> ranks;
  int ranks_total = 0;  // world size; ranks may hold fewer (missing files, or capped at kMaxTimelineRanks)
};

// One rank<r>/timeline.json document; `source` names it in errors.
RankTimeline parse_timeline(const nlohmann::json& doc, int rank, const std::string& source);

// The timelines of the scenario's runs (the first kMaxTimelineRanks ranks each); runs with none are left out.
std::vector<RunTimeline> load_timelines(const Scenario& sc, std::ostream& log, std::vector<std::string>& problems);

// ---- collective benchmark (comm_bench.json) -----------------------------------------------------------------

struct BenchPoint {
  double bytes = 0, busbw_gbps = 0, time_us = 0;
  std::int64_t wrong = 0;
};

struct CommBench {
  std::string path;
  std::string backend;
  int world_size = 0;
  std::map<std::string, std::vector<BenchPoint>> series;  // "op (algorithm)" -> points by size
  std::optional<double> avg_busbw_gbps, p2p_gbps, p2p_bytes;
};

// One `dtlab comm-bench` JSON document; `path` names it in errors.
CommBench parse_comm_bench(const nlohmann::json& doc, const std::string& path);

// Every file called `file_name` (comm_bench.json, comparison.json) at or below the inputs, each once (by canonical
// path), named as found, in path order.
std::vector<std::filesystem::path> find_files_named(const std::vector<std::string>& inputs,
                                                    const std::string& file_name);

// Every comm_bench.json below the inputs, parsed; unreadable ones are logged and appended to `problems`.
std::vector<CommBench> load_comm_benches(const std::vector<std::string>& inputs, std::ostream& log,
                                         std::vector<std::string>& problems);

}  // namespace dtlab::analysis
