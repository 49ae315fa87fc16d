// pipeline_model.hpp: the memory of a pipeline stage and the time of one optimizer step of a pipeline-parallel run
// (parallel.pp > 1), each from a replay of its schedule (lab/pipeline_schedule.hpp; torch-free).
//
//   MemoryPrediction m = pipeline_stage_memory(config, cost_plan(config, rank), "gloo", rank);
//   StepPrediction s = predict_pipeline_step(config, cost_plan(config, rank), profile, rank);
//
// Memory: the plan's state (this rank's stage parameters), its blocks' activations for one micro-batch times the
// most micro-batches the schedule keeps in flight on this rank (the replay on unit times), and the logits only where
// the head is. Zero bubble frees a micro-batch's activations at the end of its B and keeps its linears' output
// gradients from B to W (peak_kept_bytes).
//
// Each virtual stage's forward and backward of one micro-batch are the compute model's (compute_model.hpp) for the
// whole model, split by the FLOPs of the units the stage holds (pipeline_split.hpp: the embedding with the first,
// the head with the last, so the stages are unequal even when the blocks are balanced). Zero bubble splits the
// backward: W is the linears' weight-gradient GEMMs (2 FLOPs per weight per token, lab/weight_grad_store.hpp), B the
// rest (the activations' gradients, attention's, the norms' and the embedding's). A transfer between ranks is
// one send_recv of the activation (micro_batch · seq · d_model in the parameters' dtype) on the link the two ranks
// share. The schedule's replay (replay_pipe_program_on_stages) gives the step's span: every F, B and W, the bubble,
// and the transfers on the critical path. To it the step adds what runs after the flush, unoverlapped: the
// data-parallel strategy's collectives of this stage's gradients, the two float64 all-reduces over the stages (loss and
// gradient norm), and the optimizer over this stage's parameters. compute_ms is this rank's busy time; exposed_comm_ms
// holds its bubble and waits (span - busy) plus the after-flush collectives, so step_ms = compute + exposed + optimizer
// as for the other strategies.
#pragma once

#include <string>

#include "analysis/cost/memory_model.hpp"
#include "analysis/cost/profile.hpp"
#include "analysis/cost/step_model.hpp"
#include "lab/config.hpp"
#include "strategies/cost_plan.hpp"

namespace dtlab::analysis {

// REQUIRES: config.parallel.pp > 1; `plan` is cost_plan(config, rank).
MemoryPrediction pipeline_stage_memory(const Config& config, const CostPlan& plan, const std::string& backend,
                                       int rank);

// REQUIRES: config.parallel.pp > 1; `plan` is cost_plan(config, rank); profile rates > 0 and a send_recv/backend
// model (every calibrated profile has one).
StepPrediction predict_pipeline_step(const Config& config, const CostPlan& plan, const MachineProfile& profile,
                                     int rank);

}  // namespace dtlab::analysis
