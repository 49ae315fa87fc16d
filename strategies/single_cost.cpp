// single_cost.cpp: cost plan of `single` — no communication; params, grads and optimizer state whole (fp32
// masters, plus 16-bit compute copies and their gradients under mixed precision, as strategies/single.cpp holds).
#include "strategies/cost_plan.hpp"

namespace dtlab {

CostPlan single_cost_plan(const Config& config) {
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

}  // namespace dtlab
