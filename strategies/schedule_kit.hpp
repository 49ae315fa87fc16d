// schedule_kit.hpp: pieces the strategies' schedules share (torch-free): one collective stream, the tail of
// asynchronous collectives past the end of backward, the plan's calls sorted by role, and the FSDP unit pipeline.
//
// A strategy's StrategySpec::exposed_comm_ms (strategies/spec.hpp) replays its own ordering with these; the
// step-time model (analysis/cost/step_model.hpp) adds compute, the synchronous after-backward calls, the
// optimizer and offload copies around it.
#pragma once

#include <vector>

#include "strategies/spec.hpp"

namespace dtlab {

// One collective stream: calls run one after another in issue order (lab/comm keeps one per communicator).
struct Stream {
  double free_at = 0;
  double run(double issued_at, double duration);
};

// Asynchronous collectives issued at `ready` (ms from the start of a backward of `backward_ms`), in order;
// returns how long after the end of backward the last one finishes (0 when all finish in time).
double overlapped_tail(const std::vector<double>& ready, const std::vector<double>& duration, double backward_ms);

// Calls the step model counts for every strategy as synchronous after backward: 8-byte all-reduces (grad-norm,
// found-inf) and anything planned in phase after-backward (hybrid's replica all-reduces).
bool runs_after_backward(const PlannedCollective& c);

// One call's time of the plan's remaining collectives (setup and after-backward ones left out), by role, in plan
// order (for the sharded plans that is unit order).
struct CallsByRole {
  std::vector<double> gather_forward, gather_backward, gather_after_optimizer, reduce_scatter, all_reduce;
};
CallsByRole calls_by_role(const ScheduleInput& in);

// FULL_SHARD / HYBRID (regather = true) and SHARD_GRAD_OP (false): every micro-step, forward gathers unit by
// unit (the next one prefetched with parallel.prefetch), backward in reverse with re-gathers (unit u-1's issued
// before unit u computes) and each unit's reduce-scatter issued in its gradient hook after the pending gathers and
// the previous reduce-scatter, in flight through the next unit's backward; the end of backward waits for the last
// one. Returns accumulation x (micro-step time - compute). Throws std::logic_error when the plan's calls do
// not match the units.
double fsdp_unit_pipeline(const ScheduleInput& in, bool regather);

}  // namespace dtlab
