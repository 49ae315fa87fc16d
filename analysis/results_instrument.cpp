// results_instrument.cpp: loading of the instrumentation files (timelines, phase means, comm-bench JSON); see
// results_instrument.hpp.
#include "analysis/results_instrument.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "analysis/html.hpp"

namespace dtlab::analysis {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

double number_at(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) throw AnalysisError(where + ": missing number \"" + key + "\"");
  return it->get<double>();
}

}  // namespace

json read_instrument_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw AnalysisError(p.string() + ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw AnalysisError(p.string() + ": not valid JSON: " + e.what());
  }
}

std::optional<double> optional_number(const json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Mean milliseconds per phase: see results_instrument.hpp.
std::optional<std::map<std::string, double>> phase_means_ms(const RunResult& r) {
  const json& summary = r.raw.contains("summary") ? r.raw["summary"] : json();
  if (summary.is_object() && summary.contains("phases_ms") && summary["phases_ms"].is_object()) {
    std::map<std::string, double> out;
    for (const char* key : kPhaseKeys) {
      const json& stats = summary["phases_ms"].contains(key) ? summary["phases_ms"][key] : json();
      out[key] = optional_number(stats, "mean").value_or(0.0);
    }
    return out;
  }
  if (!r.raw.contains("steps") || !r.raw["steps"].is_array()) return std::nullopt;
  std::map<std::string, double> sum;
  int n = 0;
  for (const json& step : r.raw["steps"]) {
    if (!step.contains("phases_ms") || !step["phases_ms"].is_object()) continue;
    if (step.value("step", 0) <= r.warmup_steps()) continue;
    for (const char* key : kPhaseKeys) sum[key] += optional_number(step["phases_ms"], key).value_or(0.0);
    ++n;
  }
  if (n == 0) return std::nullopt;
  for (auto& [key, v] : sum) v /= n;
  return sum;
}

RankTimeline parse_timeline(const json& doc, int rank, const std::string& source) {
  if (!doc.is_object()) throw AnalysisError(source + ": expected a JSON object");
  RankTimeline t;
  t.rank = doc.value("rank", rank);
  t.step = static_cast<std::int64_t>(number_at(doc, "step", source));
  t.step_ms = number_at(doc, "step_ms", source);
  if (!doc.contains("spans") || !doc["spans"].is_array()) throw AnalysisError(source + ": missing array \"spans\"");
  for (std::size_t i = 0; i < doc["spans"].size(); ++i) {
    const json& s = doc["spans"][i];
    const std::string where = source + ": spans[" + std::to_string(i) + "]";
    if (!s.is_object()) throw AnalysisError(where + ": expected an object");
    TimelineSpan span;
    span.lane = s.value("lane", "compute");
    span.name = s.value("name", span.lane);
    span.start_us = number_at(s, "start_us", where);
    span.end_us = number_at(s, "end_us", where);
    if (span.end_us < span.start_us) {
      throw AnalysisError(where + ": end_us " + fmt_fixed(span.end_us, 1) + " < start_us " +
                          fmt_fixed(span.start_us, 1));
    }
    t.spans.push_back(std::move(span));
  }
  return t;
}

std::vector<RunTimeline> load_timelines(const Scenario& sc, std::ostream& log, std::vector<std::string>& problems) {
  std::vector<RunTimeline> out;
  for (const RunResult& r : sc.runs) {
    RunTimeline rt;
    rt.run = &r;
    rt.ranks_total = std::max(1, r.world_size);
    for (int rank = 0; rank < std::min(rt.ranks_total, kMaxTimelineRanks); ++rank) {
      const fs::path file = fs::path(r.dir) / ("rank" + std::to_string(rank)) / "timeline.json";
      if (!fs::is_regular_file(file)) continue;
      try {
        rt.ranks.push_back(parse_timeline(read_instrument_json(file), rank, file.string()));
      } catch (const AnalysisError& e) {
        log << "error: " << e.what() << "\n";
        problems.push_back(e.what());
      }
    }
    if (!rt.ranks.empty()) out.push_back(std::move(rt));
  }
  return out;
}

CommBench parse_comm_bench(const json& doc, const std::string& path) {
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array()) {
    throw AnalysisError(path + ": missing array \"results\" (expected `dtlab comm-bench` JSON)");
  }
  CommBench b;
  b.path = path;
  b.backend = doc.value("backend", "");
  b.world_size = doc.value("world_size", 0);
  b.avg_busbw_gbps = optional_number(doc, "avg_busbw_GBps");
  if (doc.contains("p2p")) {
    b.p2p_gbps = optional_number(doc["p2p"], "GBps");
    b.p2p_bytes = optional_number(doc["p2p"], "bytes");
  }
  for (std::size_t i = 0; i < doc["results"].size(); ++i) {
    const json& r = doc["results"][i];
    const std::string where = path + ": results[" + std::to_string(i) + "]";
    if (!r.is_object() || !r.contains("out_of_place") || !r["out_of_place"].is_object()) {
      throw AnalysisError(where + ": missing object \"out_of_place\"");
    }
    BenchPoint p;
    p.bytes = number_at(r, "bytes", where);
    p.busbw_gbps = number_at(r["out_of_place"], "busbw_GBps", where + ".out_of_place");
    p.time_us = optional_number(r["out_of_place"], "time_us").value_or(NAN);
    for (const char* placement : {"out_of_place", "in_place"}) {
      if (r.contains(placement))
        p.wrong += static_cast<std::int64_t>(optional_number(r[placement], "wrong").value_or(0));
    }
    const std::string name = r.value("op", "?") + " (" + r.value("algorithm", "?") + ")";
    b.series[name].push_back(p);
  }
  for (auto& [name, points] : b.series) {
    std::sort(points.begin(), points.end(), [](const BenchPoint& a, const BenchPoint& c) { return a.bytes < c.bytes; });
  }
  return b;
}

std::vector<fs::path> find_files_named(const std::vector<std::string>& inputs, const std::string& file_name) {
  std::map<fs::path, fs::path> found;  // canonical -> as found
  auto add = [&found](const fs::path& p) {
    std::error_code ec;
    const fs::path canonical = fs::weakly_canonical(p, ec);
    found.emplace(ec ? p : canonical, p);
  };
  for (const std::string& input : inputs) {
    std::error_code ec;
    const fs::path p(input);
    if (fs::is_regular_file(p, ec)) {
      if (p.filename() == file_name) add(p);
      continue;
    }
    if (!fs::is_directory(p, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->path().filename() == file_name && it->is_regular_file(ec)) add(it->path());
    }
  }
  std::vector<fs::path> out;
  for (const auto& [canonical, as_found] : found) out.push_back(as_found);
  return out;
}

std::vector<CommBench> load_comm_benches(const std::vector<std::string>& inputs, std::ostream& log,
                                         std::vector<std::string>& problems) {
  std::vector<CommBench> benches;
  for (const fs::path& file : find_files_named(inputs, "comm_bench.json")) {
    try {
      benches.push_back(parse_comm_bench(read_instrument_json(file), file.string()));
    } catch (const AnalysisError& e) {
      log << "error: " << e.what() << "\n";
      problems.push_back(e.what());
    }
  }
  return benches;
}

}  // namespace dtlab::analysis
