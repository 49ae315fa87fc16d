// zero1_cost.cpp: the spec of `zero1` — ZeRO-1: full parameters and gradients, optimizer state sharded; reduce-scatter
// after backward, all-gather after the step. Its plan is the sharded plan of ShardingMode::zero1
// (strategies/sharded_plan.cpp explains every term).
#include <algorithm>
#include <vector>

#include "strategies/schedule_kit.hpp"
#include "strategies/sharded_plan.hpp"
#include "strategies/spec.hpp"

namespace dtlab {
namespace {

void check(const Config& config) { check_sharded(ShardingMode::zero1, "zero1", config); }

CostPlan plan(const Config& config, int rank) { return sharded_cost_plan(ShardingMode::zero1, "zero1", config, rank); }

// Schedule: the reduce-scatters are issued in the last micro-step's gradient hooks, one in flight at a time (the
// next unit's hook waits for it), so each overlaps the backward of the unit before; the last one waits at the end
// of backward. The all-gathers after the optimizer step are exposed. Without per-unit backward times every
// reduce-scatter counts as exposed.
double exposed(const ScheduleInput& in) {
  const CallsByRole calls = calls_by_role(in);
  const std::vector<double>& reduce_scatter = calls.reduce_scatter;
  const std::vector<double>& backward = in.unit_backward_ms;
  double ms = 0;
  if (!reduce_scatter.empty() && reduce_scatter.size() == backward.size()) {
    Stream stream;  // as fsdp_unit_pipeline (schedule_kit.hpp), without gathers
    double t = 0, compute = 0;
    for (size_t k = backward.size(); k-- > 0;) {  // backward, last unit first
      t += backward[k];
      compute += backward[k];
      t = std::max(t, stream.free_at);  // the previous unit's reduce-scatter is waited for
      stream.run(t, reduce_scatter[k]);
    }
    ms += std::max(t, stream.free_at) - compute;
  } else {
    for (double call : reduce_scatter) ms += call;
  }
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
    .keys = {"parallel.collectives", "parallel.wrap", "parallel.reduce_scatter", "parallel.offload",
             "parallel.activation_checkpointing", "parallel.checkpoint_every"},
    .check = &check,
    .plan = &plan,
    .exposed_comm_ms = &exposed,
    .dp_shard_size = &sharded_dp_shard_size<ShardingMode::zero1>,
    .hooks_unit_outputs = true,
    .peak_depends_on_thread_timing = true,
    .runs_under_pipeline = true,
};

}  // namespace dtlab
