// fsdp_hybrid_cost.cpp: the spec of `fsdp_hybrid` — HYBRID_SHARD: FULL_SHARD inside groups of parallel.shard_size
// ranks, gradient shards all-reduced across the groups. Its plan is the sharded plan of ShardingMode::hybrid
// (strategies/sharded_plan.cpp explains every term).
#include "strategies/schedule_kit.hpp"
#include "strategies/sharded_plan.hpp"
#include "strategies/spec.hpp"

namespace dtlab {
namespace {

void check(const Config& config) { check_sharded(ShardingMode::hybrid, "fsdp_hybrid", config); }

CostPlan plan(const Config& config, int rank) {
  return sharded_cost_plan(ShardingMode::hybrid, "fsdp_hybrid", config, rank);
}

// Schedule: FULL_SHARD's unit pipeline inside the shard group; the replica all-reduces run after backward, which
// the step model counts for every strategy.
double exposed(const ScheduleInput& in) { return fsdp_unit_pipeline(in, /*regather=*/true); }

}  // namespace

extern const StrategySpec fsdp_hybrid_spec;
const StrategySpec fsdp_hybrid_spec{
    .id = "fsdp_hybrid",
    .doc = "FULL_SHARD inside groups of parallel.shard_size ranks, gradient shards all-reduced across the groups",
    .choose_when =
        "links between nodes are much slower than inside one: shard within a node, and only gradient shards cross the "
        "slow link",
    .keys = {"parallel.shard_size", "parallel.prefetch", "parallel.wrap", "parallel.reduce_scatter", "parallel.offload",
             "parallel.activation_checkpointing", "parallel.checkpoint_every", "parallel.pp_reshard_after_forward"},
    .check = &check,
    .plan = &plan,
    .exposed_comm_ms = &exposed,
    .dp_shard_size = &sharded_dp_shard_size<ShardingMode::hybrid>,
    .hooks_unit_outputs = true,
    .peak_depends_on_thread_timing = true,
    .runs_under_pipeline = true,  // each stage's units gathered once per step, kept through the flush
};

}  // namespace dtlab
