// fsdp_no_shard_cost.cpp: the spec of `fsdp_no_shard` — NO_SHARD (DDP-like): the sharded engine with one shard per
// rank: every unit's gradient all-reduced in the last micro-step. Its plan is the sharded plan of
// ShardingMode::no_shard (strategies/sharded_plan.cpp explains every term).
#include <stdexcept>
#include <string>
#include <vector>

#include "strategies/schedule_kit.hpp"
#include "strategies/sharded_plan.hpp"
#include "strategies/spec.hpp"

namespace dtlab {
namespace {

void check(const Config& config) { check_sharded(ShardingMode::no_shard, "fsdp_no_shard", config); }

CostPlan plan(const Config& config, int rank) {
  return sharded_cost_plan(ShardingMode::no_shard, "fsdp_no_shard", config, rank);
}

// Schedule: a unit's all-reduce starts when its backward is done (last unit first) in the last micro-step and
// overlaps the rest of backward.
double exposed(const ScheduleInput& in) {
  const std::vector<double> all_reduce = calls_by_role(in).all_reduce;
  const size_t n = in.unit_backward_ms.size();
  if (all_reduce.size() != n)
    throw std::logic_error("step model: " + in.plan.strategy + " plan has " + std::to_string(all_reduce.size()) +
                           " gradient all-reduces for " + std::to_string(n) + " units");
  std::vector<double> issue_at, durations;
  double done = 0;
  for (size_t k = n; k-- > 0;) {
    done += in.unit_backward_ms[k];
    issue_at.push_back(done);
    durations.push_back(all_reduce[k]);
  }
  return overlapped_tail(issue_at, durations, in.backward_ms);
}

}  // namespace

extern const StrategySpec fsdp_no_shard_spec;
const StrategySpec fsdp_no_shard_spec{
    .id = "fsdp_no_shard",
    .doc = "the sharded engine with one shard per rank: every unit's gradient all-reduced in the last micro-step",
    .choose_when =
        "you want the sharded engine's units and hooks with DDP's memory: the reference that separates the engine's "
        "cost from sharding's",
    .keys = {"parallel.wrap", "parallel.reduce_scatter", "parallel.offload", "parallel.activation_checkpointing",
             "parallel.checkpoint_every"},
    .check = &check,
    .plan = &plan,
    .exposed_comm_ms = &exposed,
    .dp_shard_size = &sharded_dp_shard_size<ShardingMode::no_shard>,
    .hooks_unit_outputs = true,
    .peak_depends_on_thread_timing = true,
    .runs_under_pipeline = true,
};

}  // namespace dtlab
