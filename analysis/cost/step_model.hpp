// step_model.hpp: the time of one optimizer step per strategy — compute + the communication the schedule
// leaves exposed + optimizer and elementwise passes + offload copies (torch-free).
//
//   StepPrediction s = predict_step(config, cost_plan(config, rank), profile);
//
// The schedule is replayed on two timelines, the rank's compute and one collective stream (lab/comm keeps one
// stream: pending gathers finish before a ring reduce-scatter starts), with the strategy's real ordering. Each
// strategy's schedule is its StrategySpec::exposed_comm_ms (its strategies/<id>_cost.cpp, built from
// strategies/schedule_kit.hpp); today's:
//   ddp, fsdp_no_shard  gradient all-reduces start when their bucket / unit is complete in the last
//                       micro-step's backward (reverse order) and overlap the rest of it; what is left at
//                       the end of backward is exposed
//   fsdp_full_shard,    forward: unit u+1's all-gather is issued before unit u computes (parallel.prefetch),
//   fsdp_hybrid         else when it is needed; backward: unit u-1's re-gather issued before unit u's backward;
//                       each unit's reduce-scatter runs synchronously in its gradient hook (exposed), after the
//                       pending gathers; every micro-step. hybrid: replica all-reduces after backward (exposed)
//   fsdp_shard_grad_op  forward gathers as full_shard, no backward gathers, reduce-scatters as full_shard
//   zero1               reduce-scatters in the last micro-step's hooks (exposed); all-gathers after the
//                       optimizer step (exposed)
//   every strategy      the grad-norm / found-inf all-reduces and the trainer's loss all-reduce (8 bytes each,
//                       exposed, not in comm.bytes_per_step: result.json's collectives leave the loss out too)
// Overlap is not free everywhere: the schedules assume a collective overlapped with compute costs nothing, and the
// profile's comm models say how much of it compute really hides (CommModel::overlap_hidden, measured by comm-bench's
// overlap line; absent = all of it). Of the time the schedule overlapped, the unhidden share (the time-weighted mean
// of 1 - overlap_hidden over the scheduled calls) is added to the exposed communication as overlap_lost_ms. On CPU
// ranks that hold every core, Gloo's threads reduce and copy on the compute's cores, and nothing is hidden: there
// overlap_hidden can be negative (the two at once measured slower than in turn), and overlap_lost_ms then exceeds
// the overlapped time.
// Compute per unit is split from the compute model in proportion to the unit's FLOPs. A collective's time is
// collective_time_us() of the profile's intra_node model, or inter_node when its group spans nodes (ranks
// r, r+s, ..., r+(g-1)s with the plan's stride s: 1, F for hybrid's replica groups, K for the cross-node level of
// a hierarchical all-reduce; nodes of ranks_per_node ranks). Groups that span nodes with stride s > 1 run side by
// side, one per rank of a node, and min(s, ranks_per_node, ranks_per_link) of them cross the same link at once:
// the β term is multiplied by that sharing (a flat ring over consecutive ranks crosses each link with one stream).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/cost/profile.hpp"
#include "lab/config.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab::analysis {

// One row of comm.by_op: the plan's collectives of one step grouped by (op, algorithm, dtype, group_size), the
// grouping result.json's "collectives" uses, and by the mesh dimension that runs them and the network level they
// were priced on (with a profile: spans_nodes on its topology; without: the plan's tag).
struct OpTime {
  std::string op, algorithm, dtype;
  int group_size = 1;
  std::string mesh_dim, level;
  int64_t count = 0;           // calls per step
  int64_t bytes_per_step = 0;  // Σ bytes × count (nccl-tests convention, as lab/comm records)
  double time_ms = 0;          // Σ per-call time × count (whether overlapped or not)
};

// comm.by_op's rows while they are summed, keyed by (op, algorithm, dtype, group_size, mesh_dim, level).
using OpRows = std::map<std::tuple<std::string, std::string, std::string, int, std::string, std::string>, OpTime>;
// Adds the calls of `c` in one step (c.count of them, `ms` each) to its row; `level` is the network level they were
// priced on.
void add_to_row(OpRows& rows, const PlannedCollective& c, double ms, const std::string& level);
// The rows in key order.
std::vector<OpTime> row_list(const OpRows& rows);

struct StepPrediction {
  double compute_ms = 0;       // accumulation × (forward + backward incl. recompute)
  double comm_ms = 0;          // all collectives of the step back to back
  double exposed_comm_ms = 0;  // the part of the step spent waiting for communication (overlap_lost_ms included)
  double overlap_lost_ms = 0;  // overlapped by the schedule but not hidden: (1 - overlap_hidden) of it
  // Of overlap_lost_ms, the part charged to calls inside a node (the intra_node level). On a CPU host that is compute
  // slowed by the backend's threads on the ranks' cores: it lengthens forward and backward, and no rank waits for it.
  double overlap_lost_in_node_ms = 0;
  double optimizer_ms = 0;  // optimizer update and the other elementwise passes over parameters and gradients
  double offload_ms = 0;    // host <-> device copies of parallel.offload (synchronous)
  double step_ms = 0;       // compute + exposed + optimizer + offload
  double tokens_per_s = 0;  // global_batch × seq_len / step
  std::vector<OpTime> by_op;
  std::vector<std::string> notes;
};

// REQUIRES: `plan` is cost_plan(config, rank) of the same config; profile rates > 0.
StepPrediction predict_step(const Config& config, const CostPlan& plan, const MachineProfile& profile);

// Bytes the optimizer step and the other elementwise passes over parameters and gradients move per step on one
// rank (optimizer update, gradient norm, clipping scale, averaging, zeroing, master/compute casts): the
// memory-bound part of the step, timed at compute.memory_GBps. `dtlab calibrate` divides the same count of a
// single-process step by its measured time, so the two agree by construction.
double elementwise_bytes(const Config& config, const CostPlan& plan);

// Whether the group of `c` spans nodes on `profile`, and how many such groups share one node's link (1 when not).
bool spans_nodes(const PlannedCollective& c, const MachineProfile& profile);
int link_sharing(const PlannedCollective& c, const MachineProfile& profile);

// Time of one call of a planned collective on `profile` (µs); `inter_node` tells which model was used.
// Throws std::invalid_argument (from the comm model) naming op/algorithm when the profile lacks it.
double planned_collective_us(const PlannedCollective& c, const Config& config, const MachineProfile& profile,
                             bool* inter_node = nullptr);

// One hierarchical all-reduce of `bytes` on nodes x k ranks (lab/comm/hierarchical.hpp), as a two-resource pipeline
// of n pieces of at most piece_bytes: the node's CPU runs each piece's ring reduce-scatter and all-gather inside the
// node (rs, ag per piece), the link the pieces' all-reduces across nodes (ar per piece, k side by side on the link).
// Time = max(n·(rs + ag), rs + n·ar + ag): whichever resource is busier, plus the ends it cannot overlap.
double hierarchical_all_reduce_us(const MachineProfile& profile, int64_t bytes, int nodes, int k, int64_t piece_bytes);

// Bytes read + written per element by one optimizer update of lab/train/optimizer.cpp (AdamW: weight decay,
// lerp, mul+addcmul, sqrt, divide, add, addcdiv = 80; SGD with momentum 40, without 20).
int64_t optimizer_bytes_per_element(const TrainConfig& train);

}  // namespace dtlab::analysis
