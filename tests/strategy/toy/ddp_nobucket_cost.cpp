// ddp_nobucket_cost.cpp: the spec of the toy strategy `ddp_nobucket` (tests only; it shows that a strategy is two
// files and one catalogue line). Its plan: a broadcast per parameter tensor at setup, then one synchronous fp32
// all-reduce per parameter tensor after the last micro-step's backward; every rank holds full params, grads and
// optimizer state and no buffers. Nothing overlaps: every call runs after backward, which the step model counts
// as exposed for every strategy, so the schedule adds nothing.
#include <stdexcept>
#include <string>

#include "strategies/spec.hpp"

namespace dtlab {
namespace {

CostPlan plan(const Config& config, int /*rank*/) {
  CostPlan plan;
  plan.strategy = "ddp_nobucket";
  const int world = static_cast<int>(config.world_size);
  int64_t numel = 0;
  for (const ParamShape& p : param_shapes(config.model)) {
    plan.collectives.push_back({"broadcast", "backend", "float32", p.numel * 4, world, "setup", 1, p.name});
    numel += p.numel;
  }
  for (const ParamShape& p : param_shapes(config.model))
    plan.collectives.push_back(
        {"all_reduce", "backend", "float32", p.numel * 4, world, "after-backward", 1, p.name + " gradient"});
  plan.state.params = numel * 4;
  plan.state.grads = numel * 4;
  plan.state.optimizer = numel * optimizer_state_bytes_per_element(config.train, 4);
  return plan;
}

void check(const Config& config) {
  if (config.parallel.offload || config.precision.param_dtype != "fp32" || config.precision.reduce_dtype != "fp32")
    throw std::invalid_argument(
        "parallel.strategy=ddp_nobucket is a toy: fp32 only, no offload (precision.param_dtype=" +
        config.precision.param_dtype + ", precision.reduce_dtype=" + config.precision.reduce_dtype +
        ", parallel.offload=" + (config.parallel.offload ? "true" : "false") + ")");
}

double nothing_overlaps(const ScheduleInput& /*in*/) { return 0; }

}  // namespace

extern const StrategySpec ddp_nobucket_spec;
const StrategySpec ddp_nobucket_spec{
    .id = "ddp_nobucket",
    .doc = "toy DDP: full replicas, one synchronous all-reduce per gradient tensor after backward (tests only)",
    .choose_when = "never: it exists to show that adding a strategy is two files and one catalogue line",
    .keys = {"parallel.activation_checkpointing", "parallel.checkpoint_every"},
    .check = &check,
    .plan = &plan,
    .exposed_comm_ms = &nothing_overlaps,
};

}  // namespace dtlab
