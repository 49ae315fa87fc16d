// run_record.hpp: what a run writes about itself — one JSON line per step (rank<r>/steps.jsonl and result.json
// "steps") and the rest of result.json assembled once the loop has finished (summary, memory, dtypes, collectives,
// comm). The loop that produces the StepRecords is in trainer.cpp; key names come from lab/results_schema.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/instrument/step_profiler.hpp"
#include "lab/instrument/tensorboard.hpp"

namespace dtlab {

class Comm;
class Strategy;
class World;

struct StepRecord {
  int64_t step = 0;  // 1-based
  double loss = 0, lr = 0, grad_norm = 0, step_ms = 0, tokens_per_s = 0;
  PhaseTimes phases_ms{};      // exclusive time per phase (lab/instrument/step_profiler.hpp); they sum to step_ms
  double comm_wait_ms = 0;     // = phases_ms[comm_wait]: the main thread blocked on communication
  double comm_ms = 0;          // union of the step's collective intervals
  double exposed_comm_ms = 0;  // of which not hidden behind compute
  double overlap_pct = 0;      // hidden share of comm_ms
  double tflops = 0;           // model FLOPs rate of the step, all ranks
  double mfu_pct = 0;          // tflops / the peak of all ranks (summary.gemm_tflops); 0 when unknown
  int64_t memory_bytes = 0;    // tensor memory peak so far (this rank)
  double trace_ms = 0;         // instrument.trace: time spent writing this step's trace events (in and after it)
  double loss_scale = 1.0;     // dynamic loss scaling only
  bool skipped = false;        // dynamic loss scaling: non-finite gradients somewhere, no update
};

// One step as JSON; loss_scale and skipped only `with_loss_scale` (dynamic loss scaling).
nlohmann::json step_json(const StepRecord& r, bool with_loss_scale);

// The step's numbers (step_json's) as TensorBoard scalars (instrument.tensorboard): train/loss, train/lr,
// train/grad_norm, train/loss_scale, perf/step_ms, perf/tokens_per_s, perf/mfu_pct, memory/tensor_peak_bytes,
// comm/comm_ms, comm/exposed_comm_ms, comm/overlap_pct (each when the step has it), then a flush.
void write_tensorboard_step(TensorBoardWriter& tensorboard, const nlohmann::json& step);

// rank 0's collective records, serialized as they come (one growing buffer, not thousands of small heap objects
// among the training's large buffers: see lab/instrument/trace.hpp) and parsed once for result.json. At most
// kMaxRecords are kept, so result.json stays readable for long runs.
class CommRecordLog {
 public:
  static constexpr size_t kMaxRecords = 20000;
  void add(const nlohmann::json& record);
  nlohmann::json records() const { return nlohmann::json::parse("[" + text_ + "]"); }
  bool truncated() const { return truncated_; }

 private:
  std::string text_;
  size_t count_ = 0;
  bool truncated_ = false;
};

// What the loop measured besides the steps themselves.
struct RunTotals {
  int64_t planned_steps = 0;
  int64_t warmup_steps = 0;  // steps 1..warmup_steps are left out of the summary (none when the run is shorter)
  double tokens_per_step = 0;
  double flops_per_token = 0;
  double peak_tflops = 0;  // the MFU denominator and where it comes from (lab/instrument/peak_flops.hpp)
  std::string peak_source;
  std::string phase_clock;
  double cpu_util_pct = 0;  // process CPU time over wall time, measured steps
  double wall_s = 0;        // the whole loop
  bool traced = false;      // instrument.trace was on: the summary gives the tracing overhead
  bool dynamic_scaling = false;
};

// Adds result.json's "steps", "summary", "memory", "dtypes", "collectives" and "comm" to `result`.
// `first_training_seq`: each communicator's first record of training (setup before it is left out of the
// collective summary). Collective: every rank calls it (every rank's memory and comm figures are gathered).
void add_run_results(nlohmann::json& result, const std::vector<StepRecord>& steps, const RunTotals& totals,
                     const CommRecordLog& comm_log, const std::map<Comm*, size_t>& first_training_seq,
                     const Strategy& strategy, World& world);

}  // namespace dtlab
