// strategy.hpp: the data-parallel wrapper seam — how the trainer drives any data-parallel strategy (ddp, zero1, the
// FSDP family, single) over the mesh's data-parallel group.
//
// It is the third of three seams (docs/architecture.md, "Three seams"): the model-parallel plan
// (lab/train/model_plan.hpp) has split the model before wrap(); the step schedule (lab/train/step_schedule.hpp)
// owns the micro-batches and calls forward_backward for each; the strategy runs the model through
// lab/train/model_runner.hpp and owns what is around it. The trainer does, per optimizer step:
//   wrap(model, config, comms); layout();    // once: which ranks share data (the sampler, the loss sum)
//   zero_grad();
//   schedule: for each micro-step m: loss += forward_backward(batch_m, loss_weight, m == last);
//             (a pipeline schedule runs the model's chunks itself through pipeline_access() instead)
//   finish_gradients();                       // all communication done, gradients final (maybe sharded)
//   norm = sqrt(grad_sum_of_squares());       // global over ranks and shards
//   if clipping: scale_gradients(clip / (norm + 1e-6));
//   optimizer_step(lr);
// Implementations live in strategies/ (one file each, plus a torch-free <id>_cost.cpp) and are created
// by name through strategies/registry.hpp. A strategy that cannot honour part of the config fails in
// wrap() with a message naming both parts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "lab/checkpoint/chunk.hpp"

#include "lab/config.hpp"
#include "lab/data.hpp"
#include "lab/dist/mesh_comms.hpp"
#include "lab/model.hpp"
#include "lab/pipeline_schedule.hpp"
#include "lab/state_bytes.hpp"
#include "lab/train/model_runner.hpp"
#include "lab/world.hpp"

namespace dtlab {

// Which ranks see different data for a strategy (data parallel: the loss and gradients are averaged over them):
// this rank's place in the mesh's data-parallel group. dp_size * (pp * cp * tp, the mesh's model-parallel ranks) ==
// world size. dp_comm: the communicator over this rank's data-parallel peers (MeshComms::data_parallel), for the
// trainer's loss sum; nullptr = the world's sum (`single`, alone in a single-process world).
struct ParallelLayout {
  int dp_rank = 0, dp_size = 1;
  Comm* dp_comm = nullptr;
};

// One piece of a tensor of the training state this rank holds, for checkpoints (lab/train/train_checkpoint.hpp):
// elements [begin, begin + data.numel()) of the flattened tensor `name` whose whole shape is `shape`, or of one chunk
// of it (lab/checkpoint/chunk.hpp). `data` is a live, contiguous 1-D view: saving reads it, loading writes into it.
// Names: "param.<parameter>" (the parameters as the optimizer updates them: the masters), "optim.<kind>.<parameter>"
// (lab/train/optimizer.hpp state_kinds). A strategy describes the tensors it holds (a tensor-parallel slice is whole
// to it); place_in_whole_tensors (lab/train/state_pieces.hpp) turns a slice into its chunk of the whole tensor.
struct StatePiece {
  std::string name;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  at::Tensor data;
  bool written_here = true;  // ranks that hold the same piece (replicas): only one of them writes it
  checkpoint::Chunk chunk;   // empty: the whole tensor
};

// What a strategy hands a pipeline schedule (lab/train/pipeline_step.hpp), which runs this rank's model chunks
// itself, one forward or backward at a time: the model as wrapped, and the factor its backward multiplies the last
// stage's loss by (the data-parallel size, which finish_gradients divides out again).
// A strategy that acts around every micro-batch (FSDP re-gathering per micro-batch,
// parallel.pp_reshard_after_forward) also hands in, per chunk of this rank (in model order, as the schedule numbers
// them), the chunk's model units in groups with hooks around each group's forward (run as
// ModelRunner::forward_loss runs its groups), and what runs before and after each action (F, B or W) on a chunk.
// Without them the schedule runs each chunk's units with no hooks.
struct PipelineAccess {
  std::shared_ptr<GPT> model;
  double loss_factor = 1.0;
  std::vector<UnitGroups> chunk_groups;                                   // empty, or one per chunk
  std::function<void(PipeOp op, int chunk)> before_action, after_action;  // may be empty
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string id() const = 0;

  // Takes over how `model` is trained (and shares its ownership, so full_state() works after train()
  // returns). The model was built from the same seed on every rank and the model-parallel plan applied to it. The
  // strategy communicates over comms.data_parallel() (and, for fsdp_hybrid, the dp_shard and dp_replicate groups).
  virtual void wrap(std::shared_ptr<GPT> model, const Config& config, MeshComms& comms) = 0;

  // REQUIRES: wrap() was called. The trainer's sampler, accumulation and loss sum follow it; dp_size equals the
  // config's data_parallel_size(config) (lab/config.hpp: the world over pp * cp * tp).
  virtual ParallelLayout layout() const = 0;

  // Forward + backward of one micro-batch. The loss minimised is loss_sum(batch) * loss_weight
  // (loss_weight = 1 / non-ignored targets of the global batch), so gradients summed over micro-steps
  // and data-parallel ranks are the gradient of the global mean loss. Returns this micro-batch's weighted loss.
  // `is_last_micro`: the last micro-step of the step (strategies communicate only then).
  virtual double forward_backward(const Batch& batch, double loss_weight, bool is_last_micro) = 0;

  // Under a pipeline schedule instead of forward_backward: the strategy accumulates the gradients of the schedule's
  // separate backwards and communicates them all in finish_gradients. nullopt: it cannot run under a pipeline yet
  // (config validation refuses that first). REQUIRES: wrap() was called.
  virtual std::optional<PipelineAccess> pipeline_access() { return std::nullopt; }

  // Completes gradient communication; afterwards every gradient this rank owns is final.
  virtual void finish_gradients() = 0;
  // Sum of squared gradient elements over the whole model (all ranks' shards counted once).
  virtual double grad_sum_of_squares() = 0;
  virtual void scale_gradients(double factor) = 0;
  virtual void optimizer_step(double lr) = 0;
  virtual void zero_grad() = 0;

  virtual StateBytes state_bytes() const = 0;
  // Dynamic loss scaling (fp16): the scale used for the step just taken, and whether that step was
  // skipped because some rank found a non-finite gradient. Strategies without scaling: 1 / false.
  virtual double loss_scale() const { return 1.0; }
  virtual bool step_skipped() const { return false; }
  // Dtypes of what the strategy holds: {"params": compute dtype, "master": ..., "grads": ...,
  // "reduce": ..., "optimizer_state": ...} (names as c10 prints them: float32, bfloat16, float16).
  virtual std::map<std::string, std::string> dtype_audit() const { return {}; }
  // Full parameters by name, in model order, gathered over the data-parallel group: parity checks and checkpoints.
  // Under a model-parallel plan they are this rank's slices (ModelParallelPlan::splits says which). Collective.
  virtual std::vector<std::pair<std::string, at::Tensor>> full_state() = 0;

  // Checkpoints (docs/checkpointing.md). The training state this rank holds, as pieces of named tensors, and the
  // scalars beside them ("optimizer.steps", "loss_scaler.scale", ...). A checkpoint saves both; loading writes the
  // pieces in place, then restore_state(scalars) sets the scalars and makes every derived copy (compute copies,
  // gathered parameters) follow the loaded state. restore_state may be collective.
  virtual std::vector<StatePiece> state_pieces() = 0;
  virtual std::map<std::string, double> state_scalars() const = 0;
  virtual void restore_state(const std::map<std::string, double>& scalars) = 0;
};

}  // namespace dtlab
