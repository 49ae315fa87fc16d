// export_csv.hpp: `dtlab export csv RUN_OR_STUDY_DIR` — a result set as CSV tables for spreadsheets and pandas
// (torch-free).
//
// Usage:
//   CsvExport e = export_csv({"results/sharding"}, "results/sharding/csv");   // writes the three files
//   // e.files: {"results/sharding/csv/steps.csv", ".../summary.csv", ".../collectives.csv"}
//
// Tables (RFC 4180: a header row, comma-separated, fields with a comma, quote or line break quoted, quotes doubled;
// numbers as JSON writes them, so they read back exactly; an empty field where a row has no value):
//   steps.csv        one row per step per rank: scenario, run, rank, then every key of the step lines
//                    (rank<r>/steps.jsonl; rank 0's result.json steps when there are none), nested objects
//                    flattened with dots (phases_ms.forward)
//   summary.csv      one row per run: scenario, run, dir, status, strategy, world_size, nodes, then summary.*,
//                    memory.* (rank 0's numbers) and prediction.step_ms / prediction.memory_bytes.peak when present
//   collectives.csv  one row per collective record of rank 0 (result.json comm.records): scenario, run, then the
//                    record's keys (seq, step, op, tag, group, bytes, start_us, time_us, exposed_us, ...)
// Columns after the fixed ones are the union of the keys met, in the order first met, so a key added to the
// results schema later becomes a column without a change here. Runs that stopped out of memory have a summary row
// (status oom) and their steps, and no collectives.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtlab::analysis {

struct CsvExport {
  std::vector<std::string> files;  // written, in the order above
  std::vector<size_t> rows;        // data rows per file
};

// Discovers the runs under `inputs` (analysis::discover) and writes the three tables into `out_dir` (created).
// Throws AnalysisError naming the input when it holds no run, or the file when it cannot be written.
CsvExport export_csv(const std::vector<std::string>& inputs, const std::string& out_dir);

// One CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string csv_field(const std::string& text);

// A table of JSON objects as CSV: `fixed` columns first, then every other (flattened) key in the order first met.
// Strings are written bare, numbers and booleans as JSON writes them, null and missing keys as empty fields.
std::string csv_table(const std::vector<nlohmann::json>& rows, const std::vector<std::string>& fixed);

}  // namespace dtlab::analysis
