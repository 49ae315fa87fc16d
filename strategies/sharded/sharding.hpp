// sharding.hpp: the sharded strategies' modes and what each one does, as one torch-free table that the runtime
// engine (strategies/sharded/engine.cpp) and the cost plan (strategies/sharded_plan.cpp) both consult.
//
//   full_shard     shard group: world. Parameters gathered before a unit's forward, freed after it, gathered again
//                  for its backward. Gradients reduce-scattered every micro-step into fp32 shards.
//   shard_grad_op  shard group: world. Parameters gathered in forward and kept through the unit's backward.
//                  Gradients reduce-scattered every micro-step.
//   no_shard       no shard group (F = 1). Full parameters on every rank; gradients all-reduced on the last
//                  micro-step.
//   hybrid         shard group: parallel.shard_size ranks, as full_shard inside it; gradient shards then
//                  all-reduced across the replicas.
//   zero1          shard group: world. Full parameters on every rank; gradients accumulate unsharded and are
//                  reduce-scattered on the last micro-step; the updated shards all-gathered after the optimizer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "lab/config.hpp"
#include "lab/node_layout.hpp"

namespace dtlab {

enum class ShardingMode { full_shard, shard_grad_op, no_shard, hybrid, zero1 };

// Which ranks share one unit's shards (the shard group; its size is F).
enum class ShardGroup {
  world,       // every rank
  none,        // F = 1: every rank holds everything; the world is the replica group
  shard_size,  // groups of parallel.shard_size consecutive ranks (0 = world); replicas across groups
};

// Where the gathered (compute) parameters live between uses.
enum class ParamResidency {
  persistent,                 // full flat parameters on every rank, all the time (counted as params)
  gathered_per_unit,          // gathered before a unit's forward, freed after it, gathered again for its backward
  gathered_through_backward,  // gathered in forward and kept until the unit's backward has run
};

// How a unit's gradients are reduced once its backward has accumulated them.
enum class GradReduction {
  reduce_scatter_every_micro_step,  // into the fp32 gradient shard, accumulating over micro-steps
  all_reduce_last_micro_step,       // full gradients, in place, on the last micro-step only
  reduce_scatter_last_micro_step,   // full gradients accumulate unsharded; reduce-scattered on the last micro-step
};

struct ShardingTraits {
  ShardGroup shard_group;
  ParamResidency params;
  GradReduction grads;
  bool replica_all_reduce;       // gradient shards all-reduced across replica groups after backward (hybrid)
  bool gathers_after_optimizer;  // the updated shards all-gathered into the persistent parameters (zero1)

  constexpr bool params_persist() const { return params == ParamResidency::persistent; }
  // Freed after a unit's forward (all but the last unit), so gathered again before its backward.
  constexpr bool frees_params_after_forward() const { return params == ParamResidency::gathered_per_unit; }
  constexpr bool regathers_in_backward() const { return params == ParamResidency::gathered_per_unit; }
  constexpr bool keeps_all_units_gathered() const { return params == ParamResidency::gathered_through_backward; }
  constexpr bool reduce_scatters_every_micro_step() const {
    return grads == GradReduction::reduce_scatter_every_micro_step;
  }
  constexpr bool all_reduces_grads() const { return grads == GradReduction::all_reduce_last_micro_step; }
  constexpr bool reduce_scatters_grads() const { return !all_reduces_grads(); }
  // Every rank holds every (all-reduced) gradient: the gradient norm needs no collective.
  constexpr bool grads_replicated() const { return all_reduces_grads(); }
};

constexpr ShardingTraits traits(ShardingMode mode) {
  switch (mode) {
    case ShardingMode::full_shard:
      return {ShardGroup::world, ParamResidency::gathered_per_unit, GradReduction::reduce_scatter_every_micro_step,
              false, false};
    case ShardingMode::shard_grad_op:
      return {ShardGroup::world, ParamResidency::gathered_through_backward,
              GradReduction::reduce_scatter_every_micro_step, false, false};
    case ShardingMode::no_shard:
      return {ShardGroup::none, ParamResidency::persistent, GradReduction::all_reduce_last_micro_step, false, false};
    case ShardingMode::hybrid:
      return {ShardGroup::shard_size, ParamResidency::gathered_per_unit, GradReduction::reduce_scatter_every_micro_step,
              true, false};
    case ShardingMode::zero1:
      return {ShardGroup::world, ParamResidency::persistent, GradReduction::reduce_scatter_last_micro_step, false,
              true};
  }
  throw std::invalid_argument("unknown ShardingMode");
}

// One flat unit's transient buffers, in bytes: gathered (its padded parameters in the compute dtype; its full
// gradient is the same size), wire (its gradient's copy in the reduce dtype when that differs from the compute dtype,
// else 0) and gather_source (zero1 without a separate compute copy: its shard's copy that the all-gather after the
// optimizer step sends, as its shard is a view of the buffer that all-gather writes; else 0).
struct UnitBuffers {
  int64_t gathered = 0, wire = 0, gather_source = 0;
  int chunk = 0;  // its pipeline chunk on this rank (0 without stages)
};

// How a sharded mode's parameters are gathered under pipeline stages (parallel.pp > 1).
enum class PipelineGathers {
  none,             // no stages: per micro-step, as the mode's traits say
  once_per_step,    // gathered at the step's start, kept through the flush (parallel.pp_reshard_after_forward=false)
  per_micro_batch,  // each unit gathered for every F and B, reduce-scattered after its backward (true)
  per_micro_batch_after_w,  // the same under zero bubble: a chunk's parameters freed after B, gradients reduced after W
};

// The most bytes of gathered parameters, full unit gradients, wire copies and gather sources alive at once in a
// step, for `units` in model order (the engine runs forward in that order, backward in reverse).
// Modes that reduce-scatter keep the previous unit's gradient (u+1, its backward ran just before) and its wire copy
// until its reduce-scatter, in flight through the backward of unit u, is finished in u's gradient hook
// (sharded/schedule.hpp); the hook then copies u's gradient into u's wire copy. Two moments per unit u, with s_u its
// gathered bytes, w_u its wire copy and P_u the parameters gathered in u's backward:
//   in u's backward:  P_u + s_u + s_(u+1) + w_(u+1)     (u+1's gradient and wire copy: reduce-scatter in flight)
//   in u's hook:      P_u + s_u + w_u                   (u+1's finished and freed, u's wire copy made)
//   gathered_per_unit (full_shard, hybrid): P_u = s_u, plus s_(u-1) when prefetching (gathered ahead of its
//     backward). The forward holds less (s_u + s_(u+1)). A single unit has no neighbour.
//   gathered_through_backward (shard_grad_op): units are gathered in forward and released after their backward:
//     P_u = s_0 + ... + s_u.
//   persistent (no_shard, zero1): the full parameters and gradients are params and grads; only copies are
//     transient: zero1's wire copies one at a time in backward, its gather sources one at a time after the
//     optimizer step (max over both); no_shard's wire copies all at once (its all-reduces are all in flight until
//     after backward: Σ w_u).
// Under pipeline stages, for the modes that free parameters:
//   once_per_step: every unit gathered at the step's start with a zeroed full gradient beside it, both kept through
//     the flush; after it each unit, last first, gets its wire copy and its reduce-scatter, then its parameters are
//     freed and, once the next unit's reduce-scatter begins, its gradient and wire copy: at unit u's wire copy units
//     0..u are alive, max over u of 2·(s_0 + ... + s_u) + w_u.
//   per_micro_batch: each B is one micro-batch's backward of one chunk, run as above without stages, within the
//     chunk: the neighbours u-1 (prefetched) and u+1 (its reduce-scatter in flight) count only inside u's chunk
//     (every B finishes its last reduce-scatter; every unit is freed after its forward). F holds less.
//   per_micro_batch_after_w (zero bubble): B gathers the chunk's units and their full gradients unit by unit and frees
//     none until it ends (2·S_c, S_c the chunk's Σ s_u), then the parameters go and the gradients wait for W, beside
//     the next F (S_c + two units) or B (2·S_c); after W each unit, last first, is reduce-scattered (its wire copy
//     made once the later unit's reduce-scatter is finished): s_(first of c) + ... + s_u + w_u. Per chunk c,
//     max(2·S_c, max over u in c of that); prefetch changes none of it.
// tests/strategy/memory_rank.cpp checks this against the counting allocator's measured buffers peak.
inline int64_t unit_buffers_peak_bytes(const ShardingTraits& t, const std::vector<UnitBuffers>& units, bool prefetch,
                                       PipelineGathers gathers = PipelineGathers::none) {
  const size_t n = units.size();
  int64_t peak = 0, through_u = 0;
  if (gathers == PipelineGathers::per_micro_batch_after_w && !t.params_persist()) {
    int64_t chunk_through_u = 0;  // Σ s_v over the chunk's units up to u
    for (size_t u = 0; u < n; ++u) {
      if (u == 0 || units[u].chunk != units[u - 1].chunk) chunk_through_u = 0;
      chunk_through_u += units[u].gathered;
      const bool chunk_ends = u + 1 == n || units[u + 1].chunk != units[u].chunk;
      peak = std::max({peak, chunk_through_u + units[u].wire, chunk_ends ? 2 * chunk_through_u : int64_t{0}});
    }
    return peak;
  }
  for (size_t u = 0; u < n; ++u) {
    const int64_t s = units[u].gathered, w = units[u].wire;
    through_u += s;
    if (gathers == PipelineGathers::once_per_step && !t.params_persist()) {
      peak = std::max(peak, 2 * through_u + w);
      continue;
    }
    if (t.params_persist()) {
      peak = t.all_reduces_grads() ? peak + w : std::max({peak, w, units[u].gather_source});
      continue;
    }
    // Neighbours in the same chunk (every unit is in chunk 0 without stages).
    const bool before_in_chunk = u > 0 && units[u - 1].chunk == units[u].chunk;
    const bool after_in_chunk = u + 1 < n && units[u + 1].chunk == units[u].chunk;
    const int64_t gathered = t.keeps_all_units_gathered()
                                 ? through_u
                                 : s + (prefetch && before_in_chunk ? units[u - 1].gathered : int64_t{0});
    const int64_t in_flight = after_in_chunk ? units[u + 1].gathered + units[u + 1].wire : 0;
    peak = std::max({peak, gathered + s + in_flight, gathered + s + w});
  }
  return peak;
}

// The gathers of a config's pipeline stages (PipelineGathers::none without stages).
inline PipelineGathers pipeline_gathers(const ParallelConfig& p) {
  if (p.pp <= 1) return PipelineGathers::none;
  if (!p.pp_reshard_after_forward) return PipelineGathers::once_per_step;
  return p.pp_schedule == "zero_bubble" ? PipelineGathers::per_micro_batch_after_w : PipelineGathers::per_micro_batch;
}

// parallel.collectives for a sharded mode on a job of `world` ranks, `ranks_per_node` per node (0 = unknown: one
// node): true = the shard group's reduce-scatters and all-gathers in two levels (lab/comm/hierarchical.hpp), for the
// modes whose shard group is the world, when asked for on a job across nodes. auto stays flat here: with a machine
// profile `dtlab train` resolves it by the cost model before the strategy sees it (analysis/cost/predict.hpp).
inline bool uses_hierarchical_shard_collectives(ShardingMode mode, const std::string& collectives, int64_t world,
                                                int64_t ranks_per_node) {
  return traits(mode).shard_group == ShardGroup::world && collectives == "hierarchical" &&
         job_spans_nodes(world, ranks_per_node);
}

// F, the shard group size of `mode` in a world of `world_size` ranks (`shard_size`: parallel.shard_size; 0 = the
// node's ranks when the job spans nodes of `ranks_per_node` ranks, else the world).
// Throws std::invalid_argument when shard groups of that size cannot tile the world.
inline int64_t shard_group_size(ShardingMode mode, int64_t world_size, int64_t shard_size, int64_t ranks_per_node = 0) {
  switch (traits(mode).shard_group) {
    case ShardGroup::none:
      return 1;
    case ShardGroup::shard_size: {
      const int64_t f = shard_size > 0                                ? shard_size
                        : job_spans_nodes(world_size, ranks_per_node) ? ranks_per_node
                                                                      : world_size;
      if (world_size % f != 0)
        throw std::invalid_argument("parallel.shard_size=" + std::to_string(f) +
                                    " does not divide world_size=" + std::to_string(world_size));
      return f;
    }
    case ShardGroup::world:
      break;
  }
  return world_size;
}

}  // namespace dtlab
