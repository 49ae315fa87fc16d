// trainer.hpp: the training loop — the same for every strategy (no strategy special cases).
//
//   Config c = load_config(...);  auto s = make_strategy(c.parallel.strategy);  SingleProcessWorld w;
//   TrainOutcome out = train(c, *s, w, device_mesh(c), {.out_dir = "results/x", .command = "dtlab train ..."});
//
// Setup: the mesh's communicators (lab/dist/mesh_comms.hpp), the model-parallel plan applied to the model
// (lab/train/model_plan.hpp), the data-parallel strategy wrapped around it, the step schedule
// (lab/train/step_schedule.hpp). Per step: the schedule runs the sampler's micro-batches forward/backward through
// the strategy, then gradient completion, global-norm clipping, the optimizer at the scheduled learning rate; a step
// line on rank 0; one JSON line per step per rank; result.json on rank 0 at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/config.hpp"
#include "lab/instrument/step_profiler.hpp"
#include "lab/mesh.hpp"
#include "lab/train/run_record.hpp"
#include "lab/train/strategy.hpp"
#include "lab/world.hpp"

namespace dtlab {

struct TrainingError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct TrainOptions {
  std::string out_dir;       // results directory; empty = write nothing (tests)
  std::string command;       // recorded in result.json context.command
  bool print_steps = true;   // step lines on rank 0
  bool print_config = true;  // the config table on rank 0
  // Called after every optimizer step (tests: parity checks, fault injection). May be empty.
  std::function<void(int64_t step, Strategy&)> after_step;
  // The cost models' prediction for this run, recorded as result.json "prediction" (the command layer passes
  // analysis::run_prediction; the runtime does not include the cost models). Empty: no "prediction" key.
  std::function<nlohmann::json(const Config&, int rank)> predict;
  // Stop after this optimizer step (0 = run all train.steps), as a preempted job would: the learning-rate schedule
  // still spans train.steps, and a checkpoint is saved there when checkpoint.dir is set.
  int64_t stop_after_step = 0;
};

struct TrainOutcome {
  std::vector<StepRecord> steps;
  nlohmann::json result;  // what result.json holds (also on ranks other than 0)
};

// Sets the intra-op thread count from train.threads (0 = cores / World::host_ranks(), the ranks on this machine:
// an emulated cluster's nodes share its cores). Returns it.
int configure_threads(const Config& config, const World& world);

// `mesh`: the job's device mesh (strategies/catalog.hpp device_mesh(config): the command layer builds it from the
// catalogue). Throws TrainingError on a non-finite loss (naming the step), ConfigError / std::invalid_argument
// for configurations the model or strategy cannot run.
TrainOutcome train(const Config& config, Strategy& strategy, World& world, const DeviceMesh& mesh,
                   const TrainOptions& options);

// "step 12/100 | loss 3.2104 | lr 3.0e-04 | 412.3 ms | 9920 tok/s | 0.0123 TFLOPS | mfu 41.2% | mem 0.02 GiB
//  | comm 30.1 ms, 12.0 exposed (overlap 60%)" — the parts after tok/s only when known (non-zero).
std::string format_step_line(const StepRecord& r, int64_t total_steps);

}  // namespace dtlab
