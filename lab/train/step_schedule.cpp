// step_schedule.cpp: the accumulation schedule and the choice of schedule (see step_schedule.hpp).
#include "lab/train/step_schedule.hpp"

#include <stdexcept>

#include "lab/memory.hpp"
#include "lab/train/pipeline_step.hpp"
#include "lab/train/strategy.hpp"

namespace dtlab {

AccumulationSchedule::AccumulationSchedule(int64_t micro_batches) : StepSchedule(micro_batches) {
  if (micro_batches < 1)
    throw std::invalid_argument("accumulation schedule: " + std::to_string(micro_batches) +
                                " micro-batches per step; needs at least 1");
}

double AccumulationSchedule::run(int64_t step, double loss_weight, const MicroBatchSource& batches,
                                 Strategy& strategy) {
  double local_loss = 0.0;
  for (int64_t micro = 0; micro < micro_batches_; ++micro) {
    const Batch batch = batches(step, micro);
    MemoryScope activations(MemoryCategory::activations);  // strategies tag their own buffers inside
    local_loss += strategy.forward_backward(batch, loss_weight, micro == micro_batches_ - 1);
  }
  return local_loss;
}

std::unique_ptr<StepSchedule> make_step_schedule(const Config& config, int64_t micro_batches, MeshComms& comms) {
  if (config.parallel.pp > 1) return std::make_unique<PipelineStepSchedule>(config, micro_batches, comms);
  return std::make_unique<AccumulationSchedule>(micro_batches);
}

}  // namespace dtlab
