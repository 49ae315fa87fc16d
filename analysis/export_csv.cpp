// export_csv.cpp: result sets as CSV tables (see export_csv.hpp).
#include "analysis/export_csv.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "analysis/results.hpp"
#include "lab/results_schema.hpp"

namespace dtlab::analysis {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// {"a": {"b": 1}, "c": [1, 2]} -> {"a.b": 1, "c": "[1,2]"}: one level of columns for a spreadsheet.
void flatten_into(const json& value, const std::string& prefix, json& out) {
  if (value.is_object()) {
    for (const auto& [k, v] : value.items()) flatten_into(v, prefix.empty() ? k : prefix + "." + k, out);
  } else if (value.is_array()) {
    out[prefix] = value.dump();
  } else {
    out[prefix] = value;
  }
}

json flattened(const json& value) {
  json out = json::object();
  flatten_into(value, "", out);
  return out;
}

std::string cell(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return csv_field(v.get<std::string>());
  return csv_field(v.dump());
}

// Every rank's step lines, as written (all keys): rank<r>/steps.jsonl in rank order, else result.json "steps".
std::vector<std::pair<int, json>> step_lines(const RunResult& r) {
  std::vector<std::pair<int, json>> lines;
  std::vector<std::pair<int, fs::path>> files;
  const std::regex rank_dir("rank([0-9]+)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(r.dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && std::regex_match(name, m, rank_dir) && fs::exists(entry.path() / "steps.jsonl"))
      files.emplace_back(std::stoi(m[1].str()), entry.path() / "steps.jsonl");
  }
  std::sort(files.begin(), files.end());
  for (const auto& [rank, file] : files) {
    std::ifstream in(file);
    std::string line;
    for (size_t n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object())
        throw AnalysisError(file.string() + ":" + std::to_string(n) + ": not a JSON object (a steps.jsonl line)");
      lines.emplace_back(rank, std::move(j));
    }
  }
  if (files.empty() && r.raw.contains(schema::kSteps))
    for (const json& s : r.raw[schema::kSteps]) lines.emplace_back(0, s);
  return lines;
}

json summary_row(const Scenario& s, const RunResult& r) {
  json row = {{"scenario", s.name},     {"run", r.name},
              {"dir", r.dir},           {"status", r.oom ? schema::kStatusOom : "completed"},
              {"strategy", r.strategy}, {"world_size", r.world_size},
              {"nodes", r.nodes}};
  const json& raw = r.raw;
  if (raw.contains(schema::kSummary)) {
    const json summary = flattened(raw[schema::kSummary]);  // named: items() must not outlive a temporary
    for (const auto& [k, v] : summary.items()) row["summary." + k] = v;
  }
  if (raw.contains(schema::kMemory)) {
    json memory = raw[schema::kMemory];
    memory.erase(schema::kRanks);  // every rank's numbers: one column each would make the table ragged
    const json flat = flattened(memory);
    for (const auto& [k, v] : flat.items()) row["memory." + k] = v;
  }
  if (r.oom) {
    row["oom.rank"] = r.oom->rank;
    row["oom.step"] = r.oom->step;
    row["oom.category"] = r.oom->category;
    row["oom.requested_bytes"] = r.oom->requested_bytes;
    row["oom.limit_bytes"] = r.oom->limit_bytes;
  }
  if (const auto v = json_number_at(raw, {schema::kPrediction, "step_ms"})) row["prediction.step_ms"] = *v;
  if (const auto v = json_number_at(raw, {schema::kPrediction, "memory_bytes", "peak"}))
    row["prediction.memory_bytes.peak"] = *v;
  return row;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw AnalysisError("export csv: cannot write " + path.string());
}

}  // namespace

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string csv_table(const std::vector<json>& rows, const std::vector<std::string>& fixed) {
  std::vector<std::string> columns = fixed;
  std::set<std::string> seen(fixed.begin(), fixed.end());
  std::vector<json> flat;
  flat.reserve(rows.size());
  for (const json& row : rows) {
    flat.push_back(flattened(row));
    for (const auto& [k, v] : flat.back().items())
      if (seen.insert(k).second) columns.push_back(k);
  }
  std::string text;
  for (size_t i = 0; i < columns.size(); ++i) text += (i ? "," : "") + csv_field(columns[i]);
  text += "\n";
  for (const json& row : flat) {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (i) text += ",";
      const auto it = row.find(columns[i]);
      if (it != row.end()) text += cell(*it);
    }
    text += "\n";
  }
  return text;
}

CsvExport export_csv(const std::vector<std::string>& inputs, const std::string& out_dir) {
  const std::vector<Scenario> scenarios = discover(inputs);
  std::vector<json> steps, summary, collectives;
  for (const Scenario& s : scenarios) {
    for (const auto* runs : {&s.runs, &s.oom_runs}) {
      for (const RunResult& r : *runs) {
        summary.push_back(summary_row(s, r));
        for (auto& [rank, line] : step_lines(r)) {
          json row = {{"scenario", s.name}, {"run", r.name}, {"rank", rank}};
          row.update(line);
          steps.push_back(std::move(row));
        }
        if (r.raw.contains(schema::kComm) && r.raw[schema::kComm].contains("records")) {
          for (const json& rec : r.raw[schema::kComm]["records"]) {
            json row = {{"scenario", s.name}, {"run", r.name}};
            row.update(rec);
            collectives.push_back(std::move(row));
          }
        }
      }
    }
  }
  if (summary.empty()) throw AnalysisError("export csv: no run found in " + inputs.front());
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw AnalysisError("export csv: cannot create " + out_dir + ": " + ec.message());
  CsvExport result;
  const std::vector<std::tuple<const char*, const std::vector<json>*, std::vector<std::string>>> tables = {
      {"steps.csv", &steps, {"scenario", "run", "rank", "step"}},
      {"summary.csv", &summary, {"scenario", "run", "dir", "status", "strategy", "world_size", "nodes"}},
      {"collectives.csv", &collectives, {"scenario", "run", "step", "seq", "op", "tag", "group"}}};
  for (const auto& [name, rows, fixed] : tables) {
    const fs::path file = fs::path(out_dir) / name;
    write_text(file, csv_table(*rows, fixed));
    result.files.push_back(file.string());
    result.rows.push_back(rows->size());
  }
  return result;
}

}  // namespace dtlab::analysis
