// fsdp_shard_grad_op_cost.cpp: the spec of `fsdp_shard_grad_op` — SHARD_GRAD_OP (ZeRO-2): gradients and optimizer state
// sharded; units gathered once per micro-step and kept through backward. Its plan is the sharded plan of
// ShardingMode::shard_grad_op (strategies/sharded_plan.cpp explains every term).
#include "strategies/schedule_kit.hpp"
#include "strategies/sharded_plan.hpp"
#include "strategies/spec.hpp"

namespace dtlab {
namespace {

void check(const Config& config) { check_sharded(ShardingMode::shard_grad_op, "fsdp_shard_grad_op", config); }

CostPlan plan(const Config& config, int rank) {
  return sharded_cost_plan(ShardingMode::shard_grad_op, "fsdp_shard_grad_op", config, rank);
}

// Schedule: the FSDP unit pipeline without backward re-gathers (every unit stays gathered from its forward).
double exposed(const ScheduleInput& in) { return fsdp_unit_pipeline(in, /*regather=*/false); }

}  // namespace

extern const StrategySpec fsdp_shard_grad_op_spec;
const StrategySpec fsdp_shard_grad_op_spec{
    .id = "fsdp_shard_grad_op",
    .doc = "gradients and optimizer state sharded; units gathered once per micro-step and kept through backward",
    .choose_when =
        "optimizer state and gradients are the problem but one full copy of the parameters fits: it gathers once per "
        "micro-step, not twice",
    .keys = {"parallel.collectives", "parallel.prefetch", "parallel.wrap", "parallel.reduce_scatter",
             "parallel.offload", "parallel.activation_checkpointing", "parallel.checkpoint_every"},
    .check = &check,
    .plan = &plan,
    .exposed_comm_ms = &exposed,
    .dp_shard_size = &sharded_dp_shard_size<ShardingMode::shard_grad_op>,
    .hooks_unit_outputs = true,
    .peak_depends_on_thread_timing = true,
    .runs_under_pipeline = true,  // each stage's units gathered once per step, kept through the flush
};

}  // namespace dtlab
