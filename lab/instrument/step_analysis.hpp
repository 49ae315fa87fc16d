// step_analysis.hpp: from a step's phase spans and collective records to the figures result.json carries —
// per-collective algbw/busbw and exposed vs overlapped time, the step's overlap %, a timeline for the
// report, and distribution statistics (min / max / mean / median / p95).
//
//   StepComm c = analyse_step_comm(prof.spans(), records_of_this_step, prof.step(), prof.step_end_us());
//   c.overlap_pct  // share of the step's communication time hidden behind compute on the main thread
//
// Compute = forward, backward and optimizer spans minus every comm_wait span inside them (the main thread
// waiting is not computing). Collectives whose end was not stamped count as ending at the step's end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/instrument/collective_record.hpp"
#include "lab/instrument/overlap.hpp"
#include "lab/instrument/step_profiler.hpp"

namespace dtlab {

// Main-thread compute intervals of a step (merged, sorted).
std::vector<Interval> compute_intervals(const std::vector<PhaseSpan>& spans);

struct StepComm {
  double comm_ms = 0;     // union of the step's collective intervals
  double exposed_ms = 0;  // of which not covered by compute
  double overlap_pct = 0;
  nlohmann::json records = nlohmann::json::array();  // one object per collective (keys in results_schema.hpp)
};
StepComm analyse_step_comm(const std::vector<PhaseSpan>& spans, const std::vector<CollectiveRecord>& records,
                           int64_t step, double step_end_us);

// {"rank","step","step_ms","spans":[{"lane","name","start_us","end_us"}]}, times relative to the step start;
// lanes: data | compute | optimizer | wait | comm.
nlohmann::json step_timeline(int rank, int64_t step, double step_start_us, double step_end_us,
                             const std::vector<PhaseSpan>& spans, const nlohmann::json& comm_records);

// {"min","max","mean","median","p95"} of the values (lab/stats.hpp: midpoint median, nearest-rank p95);
// zeros when empty.
nlohmann::json distribution(const std::vector<double>& values);

// CPU seconds this process has used (user + system, all threads), from /proc/self/stat; 0 if unreadable.
double process_cpu_seconds();

}  // namespace dtlab
