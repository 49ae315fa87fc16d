// pipeline_cost.hpp: the cost piece of pipeline parallelism — what its stages send each other in one optimizer step
// (torch-free; the runtime piece is lab/train/pipeline_step.hpp, the schedules lab/pipeline_schedule.hpp).
//
// Per micro-batch of b sequences of s tokens and width h, A = b·s·h activation bytes (the compute dtype; b·s·h/t
// under sequence parallelism over t ranks, each sending its part of the sequence to its peer of the next stage).
// Virtual stage k sends its output forward (k < K - 1) and its input's gradient backward (k > 0): per rank and step m·A
// per direction per chunk that has a neighbour there (v chunks per rank under interleaving), as point-to-point sends on
// the pp group. Then two fp64 all-reduces over the pp group: the loss (the last stage's) and the gradient norm's sum of
// squares (and, with dynamic loss scaling, the overflow vote). The parameters each rank holds are its stages'
// (strategies/cost_plan.hpp param_shapes). The data-parallel strategy's gradient reductions move from its backward to
// after the flush ("after-backward"), where Strategy::pipeline_access puts them.
#pragma once

#include "lab/config.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab {

// Appends pipeline parallelism's sends and sums (mesh_dim "pp") on `rank` to `plan`; nothing when parallel.pp == 1.
void add_pipeline_collectives(CostPlan& plan, const Config& config, int rank);

}  // namespace dtlab
