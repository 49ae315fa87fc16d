// pipeline_step.hpp: the pipeline step schedule — runs this rank's actions of a pipeline schedule (gpipe, 1f1b,
// interleaved_1f1b, zero_bubble; lab/pipeline_schedule.hpp generates them) over its model chunks, with the
// activations and their gradients crossing stages as point-to-point sends and receives on the pp group.
//
// Per action of this rank, in the schedule's order:
//   F  chunk c, micro-batch i: its input is the micro-batch's tokens (virtual stage 0) or the activation received
//      from the previous stage; the chunk's units run forward; the output goes to the next stage, or (last stage)
//      the loss is taken. Input and output stay for B.
//   B  the output's gradient is received from the next stage (last stage: the loss, times the strategy's factor);
//      autograd runs back through the chunk and the input's gradient goes to the previous stage. Under zero_bubble B
//      computes only that input gradient and keeps the graph for
//   W  the chunk's weight gradients (autograd restricted to the chunk's parameters).
// Each op is a phase span ("forward-compute F c0.3", "backward-compute B c0.3" / "W c0.3"); each blocking receive a
// comm_wait span, so a stage's idle time is its receives' waits. The strategy accumulates the gradients and
// communicates them in finish_gradients; one that acts per micro-batch (FSDP re-gathering, PipelineAccess in
// lab/train/strategy.hpp) gets its hooks around each chunk's units and around each action. run() returns the step's
// weighted loss summed over the pp group (the last stage's), so the trainer's data-parallel sum sees it on every rank.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lab/pipeline_schedule.hpp"
#include "lab/train/step_schedule.hpp"

namespace dtlab {

class Comm;
class MeshComms;

class PipelineStepSchedule final : public StepSchedule {
 public:
  // REQUIRES: config validated (parallel.pp > 1, the schedule's rules hold for micro_batches).
  PipelineStepSchedule(const Config& config, int64_t micro_batches, MeshComms& comms);
  std::string id() const override { return pipe_schedule_name(schedule_); }
  double run(int64_t step, double loss_weight, const MicroBatchSource& batches, Strategy& strategy) override;

 private:
  Config config_;
  PipeSchedule schedule_;
  PipeShape shape_;
  Comm* pp_;
  int pp_rank_;
  std::vector<PipeAction> actions_;            // this rank's, in execution order
  std::vector<std::vector<int>> chunk_units_;  // model units of each of this rank's chunks
};

}  // namespace dtlab
