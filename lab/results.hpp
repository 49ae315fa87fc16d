// results.hpp: writing a run's results — result.json (rank 0) and rank<r>/steps.jsonl (every rank).
// Key names come from results_schema.hpp only.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace dtlab {

// Facts about the software, the machine and the job's topology, recorded in result.json "context". The link rates
// come from the environment `dtlab launch --nodes` gives its ranks (DTLAB_INTER_LINK, DTLAB_INTRA_LINK).
nlohmann::json run_context(int world_size, int ranks_per_node, const std::string& launcher, const std::string& strategy,
                           const std::string& command, int threads);
std::string utc_timestamp();  // 2026-11-21T20:41:20Z
std::string dtlab_version();
std::string git_sha();  // of the source tree dtlab was built from; "unknown" outside git

class ResultsWriter {
 public:
  // Creates out_dir/rank<r>/ and truncates its steps.jsonl.
  ResultsWriter(const std::string& out_dir, int rank);
  void append_step(const nlohmann::json& step);  // one line, flushed (survives a crash)
  // Writes out_dir/result.json atomically (tmp + rename). Rank 0 only, by convention of the caller.
  void write_result(const nlohmann::json& result) const;
  const std::string& out_dir() const { return out_dir_; }
  std::string rank_dir() const;

 private:
  std::string out_dir_;
  int rank_;
  std::ofstream steps_;
};

}  // namespace dtlab
