// fsdp_full_shard_cost.cpp: the spec of `fsdp_full_shard` — FULL_SHARD (ZeRO-3): parameters, gradients and optimizer
// state sharded; units gathered for forward and again for backward. Its plan is the sharded plan of
// ShardingMode::full_shard (strategies/sharded_plan.cpp explains every term).
#include "strategies/schedule_kit.hpp"
#include "strategies/sharded_plan.hpp"
#include "strategies/spec.hpp"

namespace dtlab {
namespace {

void check(const Config& config) { check_sharded(ShardingMode::full_shard, "fsdp_full_shard", config); }

CostPlan plan(const Config& config, int rank) {
  return sharded_cost_plan(ShardingMode::full_shard, "fsdp_full_shard", config, rank);
}

// Schedule: the FSDP unit pipeline with backward re-gathers (strategies/schedule_kit.hpp).
double exposed(const ScheduleInput& in) { return fsdp_unit_pipeline(in, /*regather=*/true); }

}  // namespace

extern const StrategySpec fsdp_full_shard_spec;
const StrategySpec fsdp_full_shard_spec{
    .id = "fsdp_full_shard",
    .doc = "parameters, gradients and optimizer state sharded; units gathered for forward and again for backward",
    .choose_when =
        "the state does not fit replicated: per-rank state falls as 1/N, for 1.5x DDP's bytes on the wire and a gather "
        "before "
        "every unit's forward and backward",
    .keys = {"parallel.collectives", "parallel.prefetch", "parallel.wrap", "parallel.reduce_scatter",
             "parallel.offload", "parallel.activation_checkpointing", "parallel.checkpoint_every",
             "parallel.pp_reshard_after_forward"},
    .check = &check,
    .plan = &plan,
    .exposed_comm_ms = &exposed,
    .dp_shard_size = &sharded_dp_shard_size<ShardingMode::full_shard>,
    .hooks_unit_outputs = true,
    .peak_depends_on_thread_timing = true,
    .runs_under_pipeline = true,  // each stage's units gathered once per step, kept through the flush
};

}  // namespace dtlab
