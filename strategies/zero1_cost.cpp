// zero1_cost.cpp: the spec of `zero1` — ZeRO-1: full parameters and gradients, optimizer state sharded; reduce-scatter
// after backward, all-gather after the step. Its plan is the sharded plan of ShardingMode::zero1
// (strategies/sharded_plan.cpp explains every term).
#include "strategies/schedule_kit.hpp"
#include "strategies/sharded_plan.hpp"
#include "strategies/spec.hpp"

namespace dtlab {
namespace {

void check(const Config& config) { check_sharded("zero1", config); }

CostPlan plan(const Config& config, int rank) { return sharded_cost_plan(ShardingMode::zero1, "zero1", config, rank); }

// Schedule: the reduce-scatters run synchronously in the last micro-step's hooks and the all-gathers after the
// optimizer step: all exposed.
double exposed(const ScheduleInput& in) {
  const CallsByRole calls = calls_by_role(in);
  double ms = 0;
  for (double call : calls.reduce_scatter) ms += call;
  for (double call : calls.gather_after_optimizer) ms += call;
  return ms;
}

}  // namespace

extern const StrategySpec zero1_spec;
const StrategySpec zero1_spec{
    .id = "zero1",
    .doc =
        "full parameters and gradients, optimizer state sharded; reduce-scatter after backward, all-gather after the "
        "step",
    .choose_when =
        "Adam's moments dominate and the links are fast: sharding only the optimizer state costs DDP's bytes plus one "
        "parameter gather",
    .keys = {"parallel.wrap", "parallel.reduce_scatter", "parallel.offload", "parallel.activation_checkpointing",
             "parallel.checkpoint_every"},
    .check = &check,
    .plan = &plan,
    .exposed_comm_ms = &exposed,
    .hooks_unit_outputs = true,
};

}  // namespace dtlab
