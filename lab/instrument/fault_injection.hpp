// fault_injection.hpp: test-only faults, delays and deliberate bugs, read from the environment once.
//
//   DTLAB_INJECT_DELAY="POINT[@RANK]=MS,..."     sleep MS milliseconds at POINT (on RANK only, with @RANK).
//       Results must be bit-identical with and without delays: timing must never change the math.
//       Each sleep is counted and the first one per point is announced on stderr ("fault injection: ...").
//   DTLAB_INJECT_FAULT="RANK:STEP:KIND[@POINT]"  RANK dies (or stalls) at POINT, the first time POINT is reached at
//       or after STEP. KIND = exit (exit code 1) | sigkill | sigterm | abort | stop (SIGSTOP: a stalled rank).
//       POINT = step_end (default: after the optimizer step) | a collective point below | mid_ring (inside a ring
//       reduce-scatter/all-gather, after its first exchange: the other ranks are in the middle of it) | a checkpoint
//       point below (STEP is then the step being saved).
//       Transient: it fires in a job's first attempt only (not when DTLAB_RESTART_COUNT >= 1, dtlab launch
//       --max-restarts), so a restarted job runs clean.
//   DTLAB_INJECT_INF="RANK:STEP[:nan]"           RANK writes an inf (or nan) into a gradient at STEP.
//   DTLAB_INJECT_MEMORY_LIMIT="RANK:SIZE"        RANK's memory.limit is SIZE (e.g. 1:4MiB) instead: that rank alone
//       runs out of memory, while the others go on into their next collective (lab/train/oom_stop.hpp).
//   DTLAB_INJECT_MUTATION="NAME"                 a deliberate bug, to prove the parity suite can fail:
//       drop_world_factor    gradients are not divided by the data-parallel size (a sum, not a mean)
//       sum_hybrid_replicas  fsdp_hybrid sums its replicas instead of averaging them
//       skip_bucket          ddp never all-reduces its first bucket (its gradients stay local)
//       drop_micro_batch_grad  a pipeline stage's backward of micro-batch 1 gets a zero output gradient
//       skip_weight_pass     zero_bubble's W (the weight gradients) never runs
//   DTLAB_INJECT_DESYNC="RANK:CALL:KIND[@GROUP]" RANK's backend collective CALL on GROUP (default world) — CALL is
//       a call number (from 0, as the desync check's messages count) or a tag (its first call with that tag, e.g.
//       ddp.bucket.0) — is skipped (KIND=skip: not issued, its handle done at once) or issued on a scratch tensor
//       one element (one per rank for all_gather / reduce_scatter) longer (KIND=shape). A desync for
//       instrument.check_collectives to catch (lab/comm/desync_check.hpp).
// Points: before_all_reduce, before_all_gather, before_reduce_scatter, before_broadcast, before_barrier,
// before_send_recv (lab/comm), after_forward (strategies), before_optimizer (trainer).
// Checkpoint points, inside a save (lab/train/train_checkpoint.cpp; faults only): ckpt_shards_written (a blocking
// save: this rank's file is in step_N.partial/, before the ranks agree and rank 0 commits), ckpt_async_written (an
// async save's background thread: this rank's file is written, rank 0 has not committed), ckpt_before_commit (rank 0:
// every file is there, metadata.json is not), ckpt_metadata_written (rank 0: metadata.json is in step_N.partial/, the
// directory is not renamed), ckpt_after_commit (rank 0: renamed to step_N, before keep prunes).
// A malformed variable throws FaultSpecError naming the variable, the item and the rule.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace dtlab {

struct FaultSpecError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// Parses every DTLAB_INJECT_* variable now (the trainer calls it at start, so a typo fails before training).
void validate_fault_injection();

// Sleeps if DTLAB_INJECT_DELAY asks for a delay at `point` on `rank`. Cheap when unset.
void inject_delay(const char* point, int rank);
// Sleeps done so far by inject_delay in this process.
int64_t injected_delay_count();

// The step now running (1-based), for faults that fire inside a step. The trainer sets it.
void set_fault_step(int64_t step);
// Dies or stalls if DTLAB_INJECT_FAULT names this rank and `point` (at or after its step). Cheap when unset.
void inject_fault(const char* point, int rank);
// The same at a point whose step is not the one running (a checkpoint save of `step`, perhaps on a background thread).
void inject_fault(const char* point, int rank, int64_t step);

// True on DTLAB_INJECT_INF's rank at its step; the strategy then writes nonfinite_injection_value() into a
// gradient.
bool inject_nonfinite(int64_t step, int rank);
double nonfinite_injection_value();  // +inf, or nan with the ":nan" suffix

// DTLAB_INJECT_MEMORY_LIMIT's bytes when it names `rank`.
std::optional<int64_t> injected_memory_limit(int rank);

// True when DTLAB_INJECT_MUTATION names `name` (one of the names above).
bool mutation(const char* name);

// DTLAB_INJECT_DESYNC: whether it is set, and what it does to `rank`'s backend call number `call`, tagged `tag`, on
// `group`.
enum class DesyncInjection { none, skip, shape };
bool desync_injection_set();
DesyncInjection injected_desync(int rank, const std::string& group, int64_t call, const std::string& tag);

}  // namespace dtlab
