// step_schedule.hpp: the step-schedule seam — what owns the micro-batches of one optimizer step.
//
// The trainer asks the schedule to run a step; the schedule decides which micro-batch runs when and hands each to
// the data-parallel strategy (lab/train/strategy.hpp), which runs the model through lab/train/model_runner.hpp.
// Without pipeline stages it is gradient accumulation: micro-batches 0..m-1 in order, forward then backward each,
// the strategy told which one is the last (it communicates then). A pipeline schedule (GPipe, 1F1B, ...;
// lab/train/pipeline_step.hpp) is another StepSchedule: it interleaves the forwards and backwards of its stage's
// micro-batches with sends and receives on the pp group, and the trainer around it does not change.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "lab/config.hpp"
#include "lab/data.hpp"

namespace dtlab {

class MeshComms;
class Strategy;

// The micro-batch `micro` of step `step`, on the training device (the trainer's sampler and data phase).
using MicroBatchSource = std::function<Batch(int64_t step, int64_t micro)>;

class StepSchedule {
 public:
  virtual ~StepSchedule() = default;
  virtual std::string id() const = 0;
  int64_t micro_batches() const { return micro_batches_; }
  // Runs every micro-batch of step `step` (0-based) forward and backward through `strategy`, each loss weighted by
  // `loss_weight`; returns the sum of this rank's weighted micro-batch losses.
  virtual double run(int64_t step, double loss_weight, const MicroBatchSource& batches, Strategy& strategy) = 0;

 protected:
  explicit StepSchedule(int64_t micro_batches) : micro_batches_(micro_batches) {}
  int64_t micro_batches_;
};

// Gradient accumulation: micro-batches in order, each forward then backward; the last tells the strategy to
// communicate.
class AccumulationSchedule final : public StepSchedule {
 public:
  explicit AccumulationSchedule(int64_t micro_batches);
  std::string id() const override { return "accumulation"; }
  double run(int64_t step, double loss_weight, const MicroBatchSource& batches, Strategy& strategy) override;
};

// The schedule the config asks for, over `micro_batches` micro-batches per data-parallel rank and step: with
// parallel.pp > 1 the pipeline's (lab/train/pipeline_step.hpp, over comms' pp group), else accumulation.
std::unique_ptr<StepSchedule> make_step_schedule(const Config& config, int64_t micro_batches, MeshComms& comms);

}  // namespace dtlab
