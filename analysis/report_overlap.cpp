// report_overlap.cpp: the report's communication overlap table: per run the time per step with a collective in
// flight, the part of it the training thread waited on, and the share hidden behind compute (per rank too).
#include <algorithm>
#include <sstream>

#include "analysis/html.hpp"
#include "analysis/report_instrument.hpp"
#include "analysis/results_instrument.hpp"
#include "lab/stats.hpp"

namespace dtlab::analysis {
using json = nlohmann::json;

std::string overlap_table(const Scenario& sc) {
  struct Row {
    const RunResult* run = nullptr;
    std::optional<double> comm_ms, exposed_ms, overlap_pct;
    std::string per_rank;
    std::size_t records = 0;
    bool truncated = false;
  };
  std::vector<Row> rows;
  for (const RunResult& r : sc.runs) {
    Row row;
    row.run = &r;
    const json& comm = r.raw.contains("comm") ? r.raw["comm"] : json();
    const json& summary = r.raw.contains("summary") ? r.raw["summary"] : json();
    row.overlap_pct = optional_number(summary, "overlap_pct_median");
    if (comm.is_object()) {
      if (comm.contains("records") && comm["records"].is_array()) row.records = comm["records"].size();
      row.truncated = comm.value("records_truncated", false);
      if (comm.contains("ranks") && comm["ranks"].is_array()) {
        for (const json& rk : comm["ranks"]) {
          const int rank = rk.value("rank", -1);
          if (rank == 0) {
            row.comm_ms = optional_number(rk, "comm_ms_per_step");
            row.exposed_ms = optional_number(rk, "exposed_ms_per_step");
            if (!row.overlap_pct) row.overlap_pct = optional_number(rk, "overlap_pct");
          }
          if (const auto pct = optional_number(rk, "overlap_pct")) {
            row.per_rank += (row.per_rank.empty() ? "" : " · ") + std::string("r") + std::to_string(rank) + " " +
                            fmt_fixed(*pct, 0) + "%";
          }
        }
      }
    }
    if (!row.comm_ms || !row.exposed_ms) {  // older layout: medians of the per-step figures
      std::vector<double> comm_ms, exposed_ms;
      if (r.raw.contains("steps") && r.raw["steps"].is_array()) {
        for (const json& s : r.raw["steps"]) {
          if (s.value("step", 0) <= r.warmup_steps()) continue;
          if (auto v = optional_number(s, "comm_ms")) comm_ms.push_back(*v);
          if (auto v = optional_number(s, "exposed_comm_ms")) exposed_ms.push_back(*v);
        }
      }
      if (!row.comm_ms && !comm_ms.empty()) row.comm_ms = median(comm_ms);
      if (!row.exposed_ms && !exposed_ms.empty()) row.exposed_ms = median(exposed_ms);
    }
    if (row.comm_ms || row.overlap_pct || row.records > 0) rows.push_back(std::move(row));
  }
  const bool any_comm = std::any_of(rows.begin(), rows.end(), [](const Row& row) {
    return row.run->world_size > 1 || row.comm_ms.value_or(0.0) > 0;
  });
  if (rows.empty() || !any_comm) return "";

  auto cell = [](const std::optional<double>& v, int decimals, const char* unit = "") {
    return v ? html_escape(fmt_fixed(*v, decimals)) + unit : std::string("–");
  };
  std::ostringstream h;
  h << "<h3>Communication overlap</h3>\n<div class=\"table-wrap\"><table class=\"runs\">\n<thead><tr><th>run</th>"
    << "<th>strategy</th><th class=\"num\">comm ms / step</th><th class=\"num\">exposed ms / step</th>"
    << "<th class=\"num\">overlap % <span class=\"range\">(median)</span></th><th>overlap % per rank</th>"
    << "<th class=\"num\">collectives recorded</th></tr></thead>\n<tbody>\n";
  for (const Row& row : rows) {
    h << "<tr><td>" << html_escape(row.run->name) << "</td><td><code>" << html_escape(row.run->strategy)
      << "</code></td><td class=\"num\">" << cell(row.comm_ms, 2) << "</td><td class=\"num\">"
      << cell(row.exposed_ms, 2) << "</td><td class=\"num\">" << cell(row.overlap_pct, 1, "%") << "</td><td>"
      << (row.per_rank.empty() ? "–" : html_escape(row.per_rank)) << "</td><td class=\"num\">" << row.records
      << (row.truncated ? " (truncated)" : "") << "</td></tr>\n";
  }
  h << "</tbody></table></div>\n<p class=\"muted\" style=\"font-size:12.5px;margin:4px 0 0\">comm ms: time per step "
       "with at least one collective in flight (union of their intervals, rank 0); exposed: the part of it the "
       "training thread spent waiting; overlap % = (comm − exposed) / comm, the share hidden behind compute. "
       "Per rank from result.json <code>comm.ranks</code>.</p>\n";
  return h.str();
}

}  // namespace dtlab::analysis
