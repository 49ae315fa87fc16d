// single_cost.cpp: the spec of `single` — one process, the reference every strategy is compared with. Its plan:
// no communication; params, grads and optimizer state whole (fp32 masters, plus 16-bit compute copies and their
// gradients under mixed precision, as strategies/single.cpp holds).
#include <stdexcept>
#include <string>

#include "strategies/spec.hpp"

namespace dtlab {
namespace {

CostPlan single_plan(const Config& config, int /*rank*/) {
  CostPlan plan;
  plan.strategy = "single";
  int64_t numel = 0;
  for (const auto& p : param_shapes(config.model)) numel += p.numel;
  plan.state.params = numel * 4;
  plan.state.grads = numel * 4;
  if (config.precision.param_dtype != "fp32") {  // mixed precision: 16-bit compute copies and their gradients
    plan.state.params += numel * 2;
    plan.state.grads += numel * 2;
  }
  plan.state.optimizer = numel * optimizer_state_bytes_per_element(config.train, 4);
  return plan;
}

void check(const Config& config) {
  if (config.world_size != 1)
    throw std::invalid_argument("parallel.strategy=single runs one process, but world_size=" +
                                std::to_string(config.world_size) + "; use ddp or an fsdp strategy");
  if (config.parallel.offload)
    throw std::invalid_argument(
        "parallel.strategy=single does not combine with parallel.offload=true: offload "
        "moves sharded state to the host; use an fsdp strategy or zero1 with offload");
  if (config.precision.master_dtype != "fp32")
    throw std::invalid_argument(
        "parallel.strategy=single with precision.master_dtype=" + config.precision.master_dtype +
        ": the single-process reference keeps fp32 masters only; bf16 masters (with "
        "stochastic rounding) are implemented by the sharded strategies");
}

double nothing_exposed(const ScheduleInput& /*in*/) { return 0; }  // one process: no collectives

}  // namespace

extern const StrategySpec single_spec;
const StrategySpec single_spec{
    .id = "single",
    .doc = "one process holds everything: the reference every strategy's losses are compared with",
    .choose_when =
        "one device holds the model, its gradients and Adam's state with room for activations: no communication at all",
    .keys = {},
    .check = &check,
    .plan = &single_plan,
    .exposed_comm_ms = &nothing_exposed,
};

}  // namespace dtlab
